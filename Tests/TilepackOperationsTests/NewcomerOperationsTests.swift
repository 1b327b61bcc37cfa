import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

/// Issue 29's newcomer and first-probe items that the operations decide: an output that is its
/// own input, messages that name the file and the fault, journals, duplicated images, triggers.
@Suite struct NewcomerOperationsTests {
    static func importSample(_ destination: String, deduplicate: Bool = false, maxZoom: Int = 2) throws {
        var options = ImportOptions()
        options.threads = 2
        options.maxZoom = maxZoom
        options.deduplicate = deduplicate
        _ = try TileImporter.run(source: ExtractMergeShardTests.sampleTree, destination: destination, options: options)
    }

    static func count(_ path: String) throws -> Int {
        try openTileArchive(path: path).zoomLevels().reduce(0) { $0 + $1.tileCount }
    }

    // MARK: 1. The output is the input, however it is spelled

    @Test func everyCommandRefusesToWriteOverItsInput() throws {
        let dir = try TemporaryDirectory()
        for name in ["a.mbtiles", "a.tilepack"] {
            let input = dir.file(name)
            try Self.importSample(input)
            let tiles = try Self.count(input)
            let link = dir.file("link-" + name), hard = dir.file("hard-" + name)
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: input)
            try FileManager.default.linkItem(atPath: input, toPath: hard)
            let spellings = [input, dir.path + "/./" + name, link, hard]
            for output in spellings {
                var extract = ExtractOptions()
                extract.minZoom = 1
                extract.writing.overwrite = true
                var convert = ConvertOptions()
                convert.writing.overwrite = true
                var merge = MergeOptions()
                merge.writing.overwrite = true
                var export = ExportOptions()
                export.overwrite = true
                let runs: [(String, () throws -> Void)] = [
                    ("extract", { _ = try TileExtractor.run(source: input, destination: output, options: extract) }),
                    ("convert", { _ = try ArchiveConverter.run(source: input, destination: output, options: convert) }),
                    ("merge", { _ = try ArchiveMerger.run(inputs: [input], destination: output, options: merge) }),
                    ("export", { _ = try TileExporter.run(archive: try openTileArchive(path: input), to: output, options: export) }),
                ]
                for (command, run) in runs {
                    do {
                        try run()
                        Issue.record("\(command) \(input) \(output) wrote over its input")
                    } catch let error as OperationError {
                        #expect(
                            "\(error)".contains("the output is the input") && "\(error)".contains(input) && "\(error)".contains(output),
                            "\(command): \(error)")
                    }
                    #expect(try Self.count(input) == tiles, "\(command) \(output)")
                }
            }
        }
    }

    // MARK: 24. Messages that name the file and the fault

    @Test func aNonEmptyExportFolderIsNamedQuoted() throws {
        let dir = try TemporaryDirectory()
        let archive = dir.file("a.mbtiles")
        try Self.importSample(archive, maxZoom: 0)
        let folder = dir.file("out")
        try FileManager.default.createDirectory(atPath: folder + "/12", withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: folder + "/notes.txt"))
        do {
            _ = try TileExporter.run(archive: try openTileArchive(path: archive), to: folder, options: ExportOptions())
            Issue.record("exported into a folder that holds files")
        } catch {
            #expect("\(error)".contains("it holds \"12\" and 1 more entry"), "\(error)")
        }
    }

    @Test func aTreePathTooLongIsTheTreesFault() throws {
        let dir = try TemporaryDirectory()
        // A root the system can name, whose files (root/tilemapresource.xml) it cannot.
        var root = dir.path
        while root.utf8.count < 4_080 { root += "/" + String(repeating: "d", count: min(200, 4_085 - root.utf8.count)) }
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        do {
            _ = try TileImporter.run(source: root, destination: dir.file("o.mbtiles"), options: ImportOptions())
            Issue.record("imported a tree whose files cannot be named")
        } catch {
            #expect(error.path == root && "\(error)".contains("too long") && !"\(error)".contains("cannot be read"), "\(error)")
        }
    }

    @Test func anOversizedMetadataJSONIsOverTheLimitNotCorrupt() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        try TreeFixtures.writeTree(tree, tiles: [TileCoordinate(uncheckedZoom: 0, x: 0, y: 0)])
        try Data(repeating: 0x20, count: (16 << 20) + 1).write(to: URL(fileURLWithPath: tree + "/metadata.json"))
        do {
            _ = try TileImporter.run(source: tree, destination: dir.file("o.mbtiles"), options: ImportOptions())
            Issue.record("imported with a 16 MiB + 1 metadata.json")
        } catch {
            #expect(
                error.path.hasSuffix("metadata.json") && "\(error)".contains("over the 16 MiB limit") && !"\(error)".contains("corrupt"),
                "\(error)")
        }
    }

    // MARK: 21. Triggers are not a version

    @Test func appendingIntoAFileWithTriggersIsRefusedForTheTriggers() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("a.mbtiles")
        try Self.importSample(path, maxZoom: 1)
        try runSQLite(path, "CREATE TRIGGER t AFTER INSERT ON tiles BEGIN SELECT 1; END;")
        var options = ImportOptions()
        options.append = true
        do {
            _ = try TileImporter.run(source: ExtractMergeShardTests.sampleTree, destination: path, options: options)
            Issue.record("appended to a file with triggers")
        } catch {
            guard case .archive(let archive) = error.fault, case .refusesWrites = archive.fault else {
                Issue.record("not refused for its triggers: \(error)")
                return
            }
            #expect("\(error)".contains("triggers (t)"), "\(error)")
        }
    }

    // MARK: 22. A journal that is not SQLite's

    @Test func aGarbageJournalDoesNotStopReading() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("a.mbtiles")
        try Self.importSample(path)
        let tiles = try Self.count(path)
        try Data("this is not a rollback journal\n".utf8).write(to: URL(fileURLWithPath: path + "-journal"))
        let report = ArchiveVerifier.run(path: path)
        #expect(report.exitCode(strict: false) == 0, "\(report.findings)")
        #expect(
            report.findings.contains { $0.message.contains("a.mbtiles-journal") && $0.message.contains("not a SQLite rollback journal") },
            "\(report.findings)")
        let info = try ArchiveInspector.run(path: path)
        #expect(info.tiles == tiles)
        // The file is not the journal's owner's to delete: it stays.
        #expect(FileManager.default.fileExists(atPath: path + "-journal"))
    }

    @Test func aGarbageJournalRefusesAnAppendAndLeavesBothFilesAlone() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("a.mbtiles")
        try Self.importSample(path, maxZoom: 1)
        let journal = Data("this is not a rollback journal\n".utf8)
        try journal.write(to: URL(fileURLWithPath: path + "-journal"))
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        var options = ImportOptions()
        options.append = true
        do {
            _ = try TileImporter.run(source: ExtractMergeShardTests.sampleTree, destination: path, options: options)
            Issue.record("appended beside a journal that is not SQLite's")
        } catch {
            guard case .archive(let archive) = error.fault, case .refusesWrites = archive.fault else {
                Issue.record("not refused for the journal: \(error)")
                return
            }
            #expect(
                "\(error)".contains("a.mbtiles-journal") && "\(error)".contains("not a SQLite rollback journal")
                    && "\(error)".contains("move a.mbtiles-journal away"), "\(error)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path + "-journal")) == journal)
    }

    // MARK: 2. A selection that holds no tile of the archive

    @Test func anExtractOfNoTileIsAnErrorNamingTheArchiveTheBoxAndItsBounds() throws {
        let dir = try TemporaryDirectory()
        let world = dir.file("world.mbtiles")
        try Self.importSample(world, maxZoom: 4)
        var berlinOnly = ExtractOptions()
        berlinOnly.bounds = GeoBoundingBox(west: 13.3, south: 52.45, east: 13.5, north: 52.56)
        berlinOnly.minZoom = 3
        let berlin = dir.file("berlin.mbtiles")
        #expect(try TileExtractor.run(source: world, destination: berlin, options: berlinOnly).tiles == 2)
        // Berlin as lat,lon.
        var swapped = ExtractOptions()
        swapped.bounds = GeoBoundingBox(west: 52.45, south: 13.3, east: 52.56, north: 13.5)
        let output = dir.file("out.mbtiles")
        do {
            let report = try TileExtractor.run(source: berlin, destination: output, options: swapped)
            Issue.record("extracted \(report.tiles) tiles with latitude and longitude swapped")
        } catch {
            let text = "\(error)"
            #expect(
                text.contains("berlin.mbtiles") && text.contains("52.45,13.3,52.56,13.5") && text.contains("bounds 13.3,52.45,13.5,52.56")
                    && text.contains("swapped") && text.contains("Nothing was written"), "\(text)")
        }
        #expect(!FileManager.default.fileExists(atPath: output))
        // Zooms the archive does not have.
        var deeper = ExtractOptions()
        deeper.minZoom = 5
        #expect(throws: OperationError.self) { try TileExtractor.run(source: world, destination: output, options: deeper) }
        #expect(!FileManager.default.fileExists(atPath: output))
    }

    // MARK: 23. An images row stored twice

    @Test func aDuplicatedImagesRowIsCountedOnceAndFlagged() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("a.mbtiles")
        try Self.importSample(path, deduplicate: true)
        let tiles = try Self.count(path)
        try runSQLite(
            path,
            """
            DROP INDEX images_id;
            INSERT INTO images (tile_data, tile_id) SELECT tile_data, tile_id FROM images
              WHERE tile_id = (SELECT tile_id FROM map WHERE zoom_level = 2 AND tile_column = 1 AND tile_row = 1);
            """)
        #expect(try ArchiveInspector.run(path: path).tiles == tiles)
        #expect(try Self.count(path) == tiles)
        var seen = 0
        try openTileArchive(path: path).forEachTile { _, _ in seen += 1 }
        #expect(seen == tiles)
        let report = ArchiveVerifier.run(path: path)
        #expect(report.exitCode(strict: false) == 1)
        #expect(
            report.findings.contains { $0.severity == .error && $0.tile?.z == 2 && $0.tile?.x == 1 && $0.tile?.tmsRow == 1 },
            "\(report.findings)")
        #expect(report.findings.contains { $0.message.contains("tile_id of 'images'") }, "\(report.findings)")
    }
}
