import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

private func tile(_ z: Int, _ x: Int, _ y: Int) -> TileCoordinate {
    TileCoordinate(validatingZoom: z, x: x, y: y)!
}

/// Imports `tree` into `destination` with default options (plus `configure`).
@discardableResult
private func importTree(_ tree: String, _ destination: String, _ configure: (inout ImportOptions) -> Void = { _ in }) throws -> ImportReport
{
    var options = ImportOptions()
    options.threads = 2
    configure(&options)
    return try TileImporter.run(source: tree, destination: destination, options: options)
}

/// The JSON objects of a JSON-lines file.
private func jsonLines(_ path: String) throws -> [[String: Any]] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    return try data.split(separator: 0x0A).map { line in
        try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
    }
}

@Suite struct HardeningOperationsTests {
    // MARK: 1. Export never writes through what is already there

    @Test func exportReplacesPlantedLinksAndRefusesAFullFolder() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        let written = try TreeFixtures.writeTree(tree, tiles: [tile(0, 0, 0)])
        let archivePath = dir.file("a.mbtiles")
        try importTree(tree, archivePath)
        let archive = try openTileArchive(path: archivePath)

        let outside = dir.file("precious.txt")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: outside))
        let target = dir.file("out")
        try FileManager.default.createDirectory(atPath: target + "/0/0", withIntermediateDirectories: true)
        #expect(link(outside, target + "/0/0/0.png") == 0)  // a hard link planted where a tile goes

        // Not empty: refused without --force.
        #expect(throws: OperationError.self) { try TileExporter.run(archive: archive, to: target, options: ExportOptions()) }
        var options = ExportOptions()
        options.overwrite = true
        // A stale temporary file of a killed export is cleaned up.
        try Data("partial".utf8).write(to: URL(fileURLWithPath: target + "/0/0/.0.png.tmp-killed"))
        let report = try TileExporter.run(archive: archive, to: target, options: options)
        #expect(report.exported == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: outside)) == Data("keep me".utf8))
        #expect(try Data(contentsOf: URL(fileURLWithPath: target + "/0/0/0.png")) == written[tile(0, 0, 0)])
        #expect(try FileManager.default.contentsOfDirectory(atPath: target + "/0/0") == ["0.png"])
    }

    // MARK: 2. Two names for one tile

    @Test func zeroPaddedNamesForOneTileAreReportedNotCounted() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        let t = tile(7, 65, 45)
        try TreeFixtures.writeTree(tree, tiles: [t])
        let png = try TreeFixtures.png(t)
        for other in ["007/65/45.png", "7/065/045.png", "7/65/0045.png"] {
            try FileManager.default.createDirectory(
                atPath: tree + "/" + (other as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try png.write(to: URL(fileURLWithPath: tree + "/" + other))
        }
        for ext in ["mbtiles", "tilepack"] {
            let report = try importTree(tree, dir.file("out.\(ext)"))
            #expect(report.imported == 1)
            #expect(report.skipped.count == 3)
            for skipped in report.skipped {
                #expect(skipped.reason.contains("names the same tile 7/65/45 as \(tree)/7/65/45.png"), "\(skipped)")
            }
            #expect(try openTileArchive(path: dir.file("out.\(ext)")).tileCount() == 1)
        }
    }

    // MARK: 3 and 20. Evidence that cannot be read, or declares entities

    @Test func unreadableEvidenceStopsTheImportNamingIt() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        try TreeFixtures.writeTree(tree, tiles: [tile(1, 0, 0)])
        // Exists but cannot be read: a folder, then a dangling link, then a FIFO.
        try FileManager.default.createDirectory(atPath: tree + "/metadata.json", withIntermediateDirectories: false)
        for attempt in 0..<3 {
            do {
                try importTree(tree, dir.file("out\(attempt).mbtiles"))
                Issue.record("imported with unreadable evidence (attempt \(attempt))")
            } catch {
                #expect((error as? OperationError)?.path.hasSuffix("metadata.json") == true, "\(error)")
                #expect("\(error)".contains("cannot be read"), "\(error)")
            }
            #expect(!FileManager.default.fileExists(atPath: dir.file("out\(attempt).mbtiles")))
            try FileManager.default.removeItem(atPath: tree + "/metadata.json")
            if attempt == 0 {
                try FileManager.default.createSymbolicLink(
                    atPath: tree + "/metadata.json", withDestinationPath: "/nonexistent/metadata.json")
            }
            if attempt == 1 { #expect(mkfifo(tree + "/metadata.json", 0o644) == 0) }
        }
    }

    @Test func xmlEntitiesAreRefusedNotResolved() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        try TreeFixtures.writeTree(tree, tiles: [tile(1, 0, 0)])
        try TreeFixtures.write(
            """
            <?xml version="1.0"?>
            <!DOCTYPE TileMap [<!ENTITY srs SYSTEM "file:///etc/hostname">]>
            <TileMap version="1.0.0"><SRS>&srs;</SRS><TileFormat width="256" height="256" extension="png"/></TileMap>
            """, to: tree + "/tilemapresource.xml")
        do {
            try importTree(tree, dir.file("out.mbtiles"))
            Issue.record("a document with external entities was accepted")
        } catch {
            #expect("\(error)".contains("declares a DTD or entities"), "\(error)")
            #expect(!"\(error)".contains("SRS"), "\(error)")
        }
    }

    // MARK: 11. Special files and links that leave the tree

    @Test func fifosAndLinksOutOfTheTreeAreNotImported() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        try TreeFixtures.writeTree(tree, tiles: [tile(1, 0, 0)])
        #expect(mkfifo(tree + "/1/0/1.png", 0o644) == 0)
        let outside = dir.file("secret.png")
        try TreeFixtures.png(tile(1, 1, 1)).write(to: URL(fileURLWithPath: outside))
        try FileManager.default.createDirectory(atPath: tree + "/1/1", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: tree + "/1/1/1.png", withDestinationPath: outside)
        // A link that stays inside the tree is followed.
        try FileManager.default.createSymbolicLink(atPath: tree + "/1/1/0.png", withDestinationPath: tree + "/1/0/0.png")
        let report = try importTree(tree, dir.file("out.mbtiles"))
        #expect(report.imported == 2)
        let reasons = Dictionary(uniqueKeysWithValues: report.skipped.map { ($0.path, $0.reason) })
        #expect(reasons[tree + "/1/0/1.png"] == "a FIFO (named pipe), not a tile file")
        #expect(reasons[tree + "/1/1/1.png"]?.contains("outside the tree: not followed") == true)
    }

    // MARK: 16, 17, 18. The report

    @Test func theReportIsJSONLinesThatKeepNamesAndBytes() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        try TreeFixtures.writeTree(tree, tiles: [tile(0, 0, 0)])
        let forged = "1.png\tforged\n{\"path\": \"etc\", \"reason\": \"forged\"}"
        try Data().write(to: URL(fileURLWithPath: tree + "/0/0/" + forged))
        // A name that is not UTF-8: a, 0xE9, .png
        let raw: [UInt8] = Array((tree + "/0/0/a").utf8) + [0xE9] + Array(".png".utf8) + [0]
        let fd = raw.withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_CREAT | O_WRONLY, 0o644) } }
        #expect(fd >= 0)
        close(fd)
        let reportPath = dir.file("report.jsonl")
        let report = try importTree(tree, dir.file("out.mbtiles")) { $0.reportPath = reportPath }
        #expect(report.skipped.count == 2)
        let lines = try jsonLines(reportPath)
        #expect(lines.count == 3)
        let paths = lines.compactMap { $0["path"] as? String }
        #expect(paths.contains(tree + "/0/0/" + forged))
        let encoded = lines.compactMap { $0["path_base64"] as? String }
        #expect(encoded.compactMap { Data(base64Encoded: $0) } == [Data(raw.dropLast())])
        let summary = try #require(lines.last?["summary"] as? [String: Any])
        #expect(summary["imported"] as? Int == 1 && summary["skipped"] as? Int == 2)
        #expect(summary["error"] is NSNull)
    }

    @Test func anUnwritableReportStopsTheImportBeforeAnythingIsWritten() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        try TreeFixtures.writeTree(tree, tiles: [tile(0, 0, 0)])
        let destination = dir.file("out.mbtiles")
        do {
            try importTree(tree, destination) { $0.reportPath = dir.file("no/such/folder/report.jsonl") }
            Issue.record("imported with an unwritable report")
        } catch {
            #expect((error as? OperationError)?.path.hasSuffix("report.jsonl") == true, "\(error)")
            #expect("\(error)".contains("nothing was imported"), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: destination))
    }

    @Test func aTreeWhoseFilesAreAllSkippedSaysWhy() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        try TreeFixtures.writeTree(tree, tiles: [tile(1, 0, 0), tile(1, 1, 0)]) { _ in Data() }
        let reportPath = dir.file("report.jsonl")
        do {
            try importTree(tree, dir.file("out.mbtiles")) { $0.reportPath = reportPath }
            Issue.record("an import of nothing succeeded")
        } catch {
            #expect("\(error)".contains("no file of the tree could be imported (2 skipped"), "\(error)")
            #expect(!"\(error)".contains("'format' is required"), "\(error)")
        }
        let lines = try jsonLines(reportPath)
        #expect(lines.count == 3)
        let summary = try #require(lines.last?["summary"] as? [String: Any])
        #expect((summary["error"] as? String)?.contains("no file of the tree could be imported") == true)
        #expect(!FileManager.default.fileExists(atPath: dir.file("out.mbtiles")))
    }

    // MARK: 9. Append widens the extent

    @Test func appendCoversOldAndNewTiles() throws {
        let dir = try TemporaryDirectory()
        let first = dir.file("first")
        try TreeFixtures.writeTree(first, tiles: [tile(3, 0, 0), tile(4, 1, 1)])
        let second = dir.file("second")
        try TreeFixtures.writeTree(second, tiles: [tile(6, 60, 60)])
        let path = dir.file("a.mbtiles")
        try importTree(first, path)
        let before = try #require(try MBTilesArchive(path: path).readMetadata().bounds)
        try importTree(second, path) { $0.append = true }
        let metadata = try MBTilesArchive(path: path).readMetadata()
        let after = try #require(try metadata.bounds)
        #expect(after.west <= before.west && after.north >= before.north)
        #expect(after.east >= WebMercator.boundingBox(of: tile(6, 60, 60)).east - 1e-6)
        #expect(try metadata.minZoom == 3 && metadata.maxZoom == 6)
    }

    // MARK: 15 and 6. What verify says

    @Test func verifyListsDuplicatesOrphansAndTriggers() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        try TreeFixtures.writeTree(tree, tiles: [tile(1, 0, 0), tile(1, 1, 0)])
        let path = dir.file("a.mbtiles")
        try importTree(tree, path) { $0.deduplicate = true }
        try runSQLite(
            path,
            "DELETE FROM images WHERE rowid = (SELECT MIN(rowid) FROM images); CREATE TRIGGER t AFTER INSERT ON map BEGIN SELECT 1; END;")
        let report = ArchiveVerifier.run(path: path)
        #expect(report.findings.contains { $0.message.contains("which no images row holds") })
        #expect(report.findings.contains { $0.message.contains("triggers (t)") })
        #expect(report.exitCode(strict: false) == 1)
        do {
            try importTree(tree, path) { $0.append = true }
            Issue.record("appended to a file with triggers")
        } catch {
            #expect("\(error)".contains("triggers (t)"), "\(error)")
        }
    }
}

/// Runs SQL on a file through the `sqlite3` shell (installed by .ci/run).
func runSQLite(_ path: String, _ sql: String) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["sqlite3", path, sql]
    try process.run()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
}
