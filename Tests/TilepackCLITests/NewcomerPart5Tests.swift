import ArgumentParser
import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackTestSupport

@testable import tilepack

/// What the new user tripped on (issue 42, part 5): each test fails without its change.
@Suite struct NewcomerPart5Tests {
    /// The world sample tree (zooms 0-4) imported, then the part around 4-8 E, 44-47 N extracted:
    /// an archive whose metadata says bounds 4,44,8,47 and which holds the world tiles of the low zooms.
    static func alpsArchive(in dir: TemporaryDirectory, _ extension: String = "mbtiles") async throws -> String {
        let world = dir.file("world.mbtiles")
        let made = try await Binary.run(["import", TestSupport.packageRoot.appendingPathComponent("samples/tiles").path, world, "--quiet"])
        try #require(made.status == 0, "\(made)")
        let part = dir.file("alps.\(`extension`)")
        let cut = try await Binary.run(["extract", world, part, "--bbox", "4,44,8,47", "--quiet"])
        try #require(cut.status == 0, "\(cut)")
        return part
    }

    // MARK: 4. extract: a box that misses the archive's bounds is refused, naming them

    @Test func extractOfABoxBesideTheArchiveIsRefused() async throws {
        let dir = try TemporaryDirectory()
        let alps = try await Self.alpsArchive(in: dir)
        let out = dir.file("out.mbtiles")
        // Latitude first: 44 E to 50 E, 5 N to 15 N, which holds only the world tiles of zooms 0-2.
        let swapped = try await Binary.run(["extract", alps, out, "--bbox", "44,5,50,15", "--quiet"])
        #expect(swapped.status == 1, "\(swapped)")
        #expect(swapped.stderr.contains("4.0,44.0,8.0,47.0") || swapped.stderr.contains("4,44,8,47"), "\(swapped.stderr)")
        #expect(swapped.stderr.contains("5.0,44.0,15.0,50.0"), "\(swapped.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out))
        // A box that overlaps the bounds is extracted as before.
        let inside = try await Binary.run(["extract", alps, dir.file("inside.mbtiles"), "--bbox", "5,45,6,46", "--quiet"])
        #expect(inside.status == 0, "\(inside)")
    }

    // MARK: 5. import widens the metadata to the tiles it holds

    @Test func importWidensMetadataToTheTilesAndSaysSoOnce() async throws {
        let dir = try TemporaryDirectory()
        let alps = try await Self.alpsArchive(in: dir)
        let tree = dir.file("tree")
        let exported = try await Binary.run(["export", alps, tree, "--quiet"])
        try #require(exported.status == 0, "\(exported)")
        let declared = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: tree + "/metadata.json"))) as? [String: Any])
        try #require("\(declared["maxzoom"] ?? "")" == "4", "\(declared)")
        // Zoom 5: the tile over the bounds (16/11) and its neighbour to the east (17/11).
        let tile = try #require(FileManager.default.subpaths(atPath: tree + "/4")?.first { $0.hasSuffix(".png") })
        for column in [16, 17] {
            try FileManager.default.createDirectory(atPath: "\(tree)/5/\(column)", withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: "\(tree)/4/\(tile)", toPath: "\(tree)/5/\(column)/11.png")
        }
        let archive = dir.file("b.mbtiles")
        let imported = try await Binary.run(["import", tree, archive, "--quiet"])
        #expect(imported.status == 0, "\(imported)")
        let notes = imported.stderr.split(separator: "\n").filter { $0.contains("maxzoom") }
        #expect(notes.count == 1 && notes[0].contains("maxzoom 4") && notes[0].contains("bounds"), "\(imported.stderr)")
        let maxzoom = try await Binary.run(["meta", "get", archive, "maxzoom"])
        #expect(maxzoom.stdout == "5\n", "\(maxzoom)")
        let bounds = try await Binary.run(["meta", "get", archive, "bounds"])
        let east = bounds.stdout.split(separator: ",").dropFirst(2).first.flatMap { Double($0) } ?? 0
        #expect(abs(east - 22.5) < 1e-6, "\(bounds)")
        let verify = try await Binary.run(["verify", archive])
        #expect(verify.status == 0 && !verify.stdout.contains("maxzoom"), "\(verify)")
    }
}
