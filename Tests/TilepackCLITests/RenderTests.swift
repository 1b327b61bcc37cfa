import ArgumentParser
import Foundation
import Testing
import TilepackCore
import TilepackImaging
import TilepackOperations
import TilepackTestSupport

@testable import tilepack

/// `tilepack render`'s output (the layer composition is TilepackRender's, tested there): a PNG
/// written only when the view shows a tile.
@Suite struct RenderTests {
    static func render(_ arguments: [String]) async throws {
        let command = try #require(try CommandLineArguments.parse(["render"] + arguments) as? RenderCommand)
        try await command.run()
    }

    @Test func aViewWithNoTileWritesNothing() async throws {
        let dir = try TemporaryDirectory()
        // An archive of Europe at zooms 5-6, looked at over America.
        let tiles = Array(try TileCover(boundingBox: GeoBoundingBox(west: 5, south: 45, east: 15, north: 55), zooms: 5...6))
        let png = try PNGEncoder.encode(Bitmap(width: 256, height: 256, pixelFormat: .rgba8888, fill: RGBA8(r: 200, g: 10, b: 10, a: 255)))
        for tile in tiles {
            let url = URL(fileURLWithPath: dir.file("t") + "/\(tile.zoom)/\(tile.x)/\(tile.y).png")
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try png.write(to: url)
        }
        _ = try TileImporter.run(source: dir.file("t"), destination: dir.file("e.mbtiles"), options: ImportOptions())
        do {
            try await Self.render([
                dir.file("e.mbtiles"), "--center", "-100,40", "--zoom", "5.5", "--size", "64x64", "-o", dir.file("a.png"),
            ])
            Issue.record("rendered a view with no tile")
        } catch {
            #expect(Tilepack.message(for: error).contains("shows no tile of any input (\(dir.file("e.mbtiles")) covers "), "\(error)")
            #expect(Tilepack.message(for: error).hasSuffix("; nothing was written"), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("a.png")))
        // Over Europe the same archive renders.
        try await Self.render([dir.file("e.mbtiles"), "--center", "10,50", "--zoom", "5.5", "--size", "64x64", "-o", dir.file("b.png")])
        #expect(FileManager.default.fileExists(atPath: dir.file("b.png")))
    }

    @Test func aTileSizeOutsideTheRuleIsAUsageError() async throws {
        for size in ["8", "300", "8192"] {
            // Refused by validate(), as the command line is parsed: ArgumentParser's usage error.
            let error = message {
                try CommandLineArguments.parse([
                    "render", "a.mbtiles", "--center", "0,0", "--zoom", "1", "--size", "8x8", "--tile-size", size, "-o",
                    "/nonexistent/a.png",
                ])
            }
            #expect(error?.contains("--tile-size must be") == true, "\(size): \(error ?? "parsed")")
        }
    }
}
