import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@testable import TilepackStorage

/// All tiles of an archive, in memory (small fixtures only).
func allTiles(_ archive: some TileArchive) throws -> [(TileCoordinate, Data)] {
    var tiles: [(TileCoordinate, Data)] = []
    try archive.forEachTile { tile, bytes in tiles.append((tile, Data(bytes))) }
    return tiles
}

func directoryEntries(_ dir: TemporaryDirectory) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).sorted()
}

@Suite struct MBTilesWriterTests {
    /// The worked example of Specs/mbtiles.md: three tiles, hash checked against Python's hashlib
    /// over the bytes "000abc" + "100hi" + "111xyz".
    @Test func workedAggregateHashExample() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("example.mbtiles")
        let writer = try MBTilesWriter(
            creating: path, metadata: TileMetadata(["name": "example", "format": "png"]),
            options: MBTilesWriterOptions(derivation: .none))
        try writer.write(Data("abc".utf8), at: TileCoordinate(zoom: 0, x: 0, y: 0))
        try writer.write(Data("xyz".utf8), at: TileCoordinate(zoom: 1, x: 1, y: 0))  // TMS row 1
        try writer.write(Data("hi".utf8), at: TileCoordinate(zoom: 1, x: 0, y: 1))  // TMS row 0
        let report = try writer.finish()
        #expect(report.aggregateTilesHash == "4680E34640468BC9D0954F23ACBC9CB1")
        let archive = try MBTilesArchive(path: path)
        #expect(try archive.aggregateTilesHash() == "4680E34640468BC9D0954F23ACBC9CB1")
        #expect(try archive.readMetadata()["agg_tiles_hash"] == "4680E34640468BC9D0954F23ACBC9CB1")
        // The rows are TMS: the raw scan sees tile_row 1 for XYZ 1/1/0.
        var rows: [String] = []
        try archive.forEachRawRow {
            rows.append("\($0.zoomLevel)/\($0.tileColumn)/\($0.tileRow)=\(String(decoding: $0.tileData!, as: UTF8.self))")
        }
        #expect(rows.sorted() == ["0/0/0=abc", "1/0/0=hi", "1/1/1=xyz"])
    }

    /// With `aggregateTilesHash` off, a new file carries no hash (a stale one handed in with the
    /// metadata is dropped) but the same derived metadata; an update adds none to a file without
    /// one, and recomputes the one a file carries.
    @Test func theHashIsWrittenOnlyWhenAskedOrCarried() throws {
        let dir = try TemporaryDirectory()
        let stale = TileMetadata(["name": "x", "format": "png", "agg_tiles_hash": "00000000000000000000000000000000"])
        func create(_ name: String, hash: Bool) throws -> MBTilesWriteReport {
            let writer = try MBTilesWriter(
                creating: dir.file(name), metadata: stale, options: MBTilesWriterOptions(aggregateTilesHash: hash))
            try writer.write(Data("abc".utf8), at: TileCoordinate(zoom: 0, x: 0, y: 0))
            try writer.write(Data("hi".utf8), at: TileCoordinate(zoom: 1, x: 0, y: 1))
            try writer.write(Data("xyz".utf8), at: TileCoordinate(zoom: 1, x: 1, y: 0))  // out of the hash's order
            return try writer.finish()
        }
        let plain = try create("plain.mbtiles", hash: false)
        let hashed = try create("hashed.mbtiles", hash: true)
        #expect(plain.aggregateTilesHash == nil)
        #expect(try MBTilesArchive(path: dir.file("plain.mbtiles")).readMetadata()["agg_tiles_hash"] == nil)
        #expect(hashed.aggregateTilesHash == "4680E34640468BC9D0954F23ACBC9CB1")
        // The hash and the algorithm that made it (martin's hash_algorithm), nothing else differs.
        #expect(hashed.metadata["hash_algorithm"] == "md5" && plain.metadata["hash_algorithm"] == nil)
        var withoutHash = hashed.metadata
        withoutHash["agg_tiles_hash"] = nil
        withoutHash["hash_algorithm"] = nil
        #expect(plain.metadata == withoutHash)

        for (name, carries) in [("plain.mbtiles", false), ("hashed.mbtiles", true)] {
            let update = try MBTilesWriter(updating: dir.file(name), options: MBTilesWriterOptions(aggregateTilesHash: false))
            try update.write(Data("new".utf8), at: TileCoordinate(zoom: 2, x: 0, y: 0))
            let report = try update.finish()
            let archive = try MBTilesArchive(path: dir.file(name))
            if !carries {
                #expect(report.aggregateTilesHash == nil)
                #expect(try archive.readMetadata()["agg_tiles_hash"] == nil)
            } else {
                #expect(report.aggregateTilesHash == (try archive.aggregateTilesHash()))
                #expect(try archive.readMetadata()["agg_tiles_hash"] == (try archive.aggregateTilesHash()))
                #expect(report.aggregateTilesHash != hashed.aggregateTilesHash)
            }
        }
    }

    @Test func emptyArchiveHashesToMD5OfNothing() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("empty.mbtiles")
        let report = try MBTilesWriter(creating: path, metadata: TileMetadata(["name": "empty", "format": "png"])).finish()
        #expect(report.aggregateTilesHash == MBTilesAggregateHash.empty)
        #expect(report.tileCount == 0)
        #expect(report.warnings.contains { $0.kind == .disagreesWithTiles })
        #expect(try MBTilesArchive(path: path).tileCount() == 0)
    }

    /// Re-writing a real archive row for row gives martin's hash of the original, in both schemas.
    @Test(arguments: MBTilesWriteSchema.allCases)
    func rewritesAFixtureWithTheSameHash(_ schema: MBTilesWriteSchema) throws {
        let source = try openFixture("node-mbtiles/plain_1.mbtiles")
        let tiles = try allTiles(source)
        let dir = try TemporaryDirectory()
        let path = dir.file("plain_1-\(schema).mbtiles")
        var metadata = try source.readMetadata()
        metadata["bounds"] = nil
        let writer = try MBTilesWriter(
            creating: path, metadata: metadata,
            options: MBTilesWriterOptions(schema: schema, tilesPerTransaction: 50))
        for (tile, data) in tiles { try writer.write(data, at: tile) }
        let report = try writer.finish()
        #expect(report.aggregateTilesHash == "B022AC7C8C41FEF958506C19E856038E")
        #expect(report.tileCount == 285)
        #expect(report.storedBlobCount == (schema == .flat ? 285 : 207))
        #expect(directoryEntries(dir) == ["plain_1-\(schema).mbtiles"])

        let archive = try MBTilesArchive(path: path, options: MBTilesOpenOptions(immutable: true))
        #expect(archive.schema.kind == (schema == .flat ? .flat : .normalized))
        #expect(archive.schema.hasUniqueIndex)
        #expect(archive.schema.applicationID == MBTilesSchema.mbtilesApplicationID)
        #expect(archive.schema.extraTables.isEmpty)
        #expect(archive.content == .encoded(.png))
        let back = try allTiles(archive)
        #expect(back.map(\.0) == tiles.map(\.0))
        #expect(back.map(\.1) == tiles.map(\.1))
        #expect(try archive.integrityCheck().isEmpty)
        // Left with the settings a reader wants: a rollback journal, not WAL, not OFF.
        let check = try SQLiteConnection(filename: path, archivePath: path, readOnly: true, uri: false)
        #expect(try check.scalarText("PRAGMA journal_mode") == "delete")
        #expect(try check.scalarInt("PRAGMA application_id") == 0x4d50_4258)
        // Derived metadata: format sniffed, zooms and bounds from the tiles, the caller's keys kept.
        let written = try archive.readMetadata()
        #expect(try written.format == .png)
        #expect(try written.minZoom == 0)
        #expect(try written.maxZoom == 4)
        let bounds = try #require(try written.bounds)
        // z4 holds XYZ rows 0...12: south edge of row 12 is about -74.02 degrees.
        #expect(bounds.west == -180 && bounds.east == 180 && abs(bounds.north - 85.0511288) < 1e-6 && abs(bounds.south - -74.0197) < 1e-3)
        let center = try #require(try written.center)
        #expect(center.zoom == 0)
        #expect(written.name == "plain_1" && written["version"] == "1.0.3")
        #expect(written["agg_tiles_hash"] == "B022AC7C8C41FEF958506C19E856038E")
        #expect(report.metadata == written)
    }

    /// The hash is computed while writing when tiles come in its own order (zoom, column, TMS
    /// row), and by reading the file again when they do not: both give martin's value.
    @Test(arguments: ["hash order", "XYZ order", "shuffled", "a tile written twice"])
    func aggregateHashIsTheSameWhateverTheWriteOrder(_ order: String) throws {
        var tiles = try allTiles(try openFixture("node-mbtiles/plain_1.mbtiles"))
        switch order {
        case "hash order": tiles.sort { ($0.0.zoom, $0.0.x, $0.0.row(in: .tms)) < ($1.0.zoom, $1.0.x, $1.0.row(in: .tms)) }
        case "shuffled":
            var rng = SystemRandomNumberGenerator()
            tiles.shuffle(using: &rng)
        case "a tile written twice": tiles.insert(tiles[3], at: 4)
        default: break
        }
        let dir = try TemporaryDirectory()
        let writer = try MBTilesWriter(creating: dir.file("a.mbtiles"), metadata: TileMetadata(["name": "a"]))
        for (tile, data) in tiles { try writer.write(data, at: tile) }
        let report = try writer.finish()
        #expect(report.aggregateTilesHash == "B022AC7C8C41FEF958506C19E856038E")
        let archive = try MBTilesArchive(path: dir.file("a.mbtiles"))
        #expect(try archive.aggregateTilesHash() == "B022AC7C8C41FEF958506C19E856038E")
        // The zooms and extents the writer tracked (in order) or queried (otherwise) are the table's.
        var derived = TileMetadata()
        try archive.contentSummary().derive(into: &derived, mode: .replace)
        for key in ["bounds", "center", "minzoom", "maxzoom"] {
            #expect(report.metadata[key] != nil && report.metadata[key] == derived[key], "\(key)")
        }
    }

    /// Tiles written many rows per statement read back as written, a tile given twice keeps its
    /// last bytes, and the hash is the one a row-by-row write gives.
    @Test func severalRowsPerStatement() throws {
        let dir = try TemporaryDirectory()
        var tiles: [(tile: TileCoordinate, bytes: [UInt8])] = []
        for x in 0..<10 {
            for y in 0..<10 {
                tiles.append(
                    (try TileCoordinate(zoom: 4, x: x, y: y), [0x89, 0x50, 0x4E, 0x47] + Array(repeating: UInt8(x * 10 + y), count: x * y)))
            }
        }
        tiles.insert((tiles[5].tile, [1, 2, 3]), at: 5)  // replaced by the next entry, in the same statement
        let many = try MBTilesWriter(creating: dir.file("many.mbtiles"), metadata: TileMetadata(["name": "m", "format": "png"]))
        try many.write(tiles)
        let manyReport = try many.finish()
        let one = try MBTilesWriter(creating: dir.file("one.mbtiles"), metadata: TileMetadata(["name": "m", "format": "png"]))
        for (tile, bytes) in tiles { try one.write(bytes, at: tile) }
        let oneReport = try one.finish()
        #expect(manyReport.tileCount == 100 && oneReport.tileCount == 100)
        #expect(manyReport.aggregateTilesHash == oneReport.aggregateTilesHash)
        let archive = try MBTilesArchive(path: dir.file("many.mbtiles"))
        #expect(try archive.aggregateTilesHash() == manyReport.aggregateTilesHash)
        for (tile, bytes) in tiles.dropFirst(6) { #expect(try archive.tileData(at: tile).map { [UInt8]($0) } == bytes) }
        #expect(try archive.tileData(at: tiles[5].tile).map { [UInt8]($0) } == tiles[6].bytes)
    }

    /// Large tiles: the load commits by bytes as well as by rows (issue 19), the blobs are bound
    /// where they lie and hashed without a copy; every tile reads back and the hash is the table's.
    @Test func largeTilesCommitByBytes() throws {
        let dir = try TemporaryDirectory()
        let count = MBTilesWriter.bytesPerTransaction / (1 << 20) + MBTilesWriter.rowsPerStatement + 3
        var tiles: [(tile: TileCoordinate, bytes: [UInt8])] = []
        for i in 0..<count {
            // In agg_tiles_hash's order: zoom, column, TMS row ascending.
            let tile = try TileCoordinate(zoom: 6, x: i / 8, row: i % 8, scheme: .tms)
            tiles.append(
                (tile, [0x89, 0x50, 0x4E, 0x47, UInt8(i)] + [UInt8](repeating: UInt8(truncatingIfNeeded: i * 37), count: (1 << 20) + i)))
        }
        let writer = try MBTilesWriter(creating: dir.file("large.mbtiles"), metadata: TileMetadata(["name": "l", "format": "png"]))
        try writer.write(Array(tiles[..<(MBTilesWriter.rowsPerStatement + 1)]))
        try writer.write(Array(tiles[(MBTilesWriter.rowsPerStatement + 1)...]))
        let report = try writer.finish()
        #expect(report.tileCount == count)
        let archive = try MBTilesArchive(path: dir.file("large.mbtiles"))
        #expect(try archive.aggregateTilesHash() == report.aggregateTilesHash)
        for (tile, bytes) in tiles { #expect(try archive.tileData(at: tile).map { [UInt8]($0) } == bytes) }
    }

    @Test func vectorTilesWithMetadata() throws {
        let source = try openFixture("martin/world_cities.mbtiles")
        let dir = try TemporaryDirectory()
        let path = dir.file("cities.mbtiles")
        var metadata = try source.readMetadata()
        metadata["agg_tiles_hash"] = nil
        let writer = try MBTilesWriter(creating: path, metadata: metadata)
        for (tile, data) in try allTiles(source) { try writer.write(data, at: tile) }
        let report = try writer.finish()
        // martin's own stored hash of the source.
        #expect(report.aggregateTilesHash == "84792BF4EE9AEDDC5B1A60E707011FEE")
        #expect(report.metadata["bounds"] == metadata["bounds"])  // kept, not derived
        #expect(report.warnings.allSatisfy { $0.severity == .warning })
    }

    @Test func deduplicationComparesBytesOnAHashHit() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("dedup.mbtiles")
        let writer = try MBTilesWriter(
            creating: path, metadata: TileMetadata(["name": "d", "format": "png"]),
            options: MBTilesWriterOptions(schema: .deduplicated))
        writer.blobID = { _ in "SAME" }  // every blob "collides"
        let blobs = [Data("one".utf8), Data("two".utf8), Data("three".utf8), Data("one".utf8), Data()]
        let tiles = try (0..<blobs.count).map { try TileCoordinate(zoom: 3, x: $0, y: 1) }
        for (tile, blob) in zip(tiles, blobs) { try writer.write(blob, at: tile) }
        let report = try writer.finish()
        #expect(report.storedBlobCount == 4)  // one, two, three, and the empty blob
        let archive = try MBTilesArchive(path: path)
        for (tile, blob) in zip(tiles, blobs) {
            #expect(try archive.tileData(at: tile) == blob)
        }
        #expect(try archive.tileCount() == 5)
    }

    @Test func metadataErrorsAreRefusedBeforeWriting() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("bad.mbtiles")
        let cases: [(TileMetadata, String)] = [
            (TileMetadata(["format": "png"]), "'name' is required"),
            (TileMetadata(["name": "v", "format": "pbf"]), "'json' with 'vector_layers' is required"),
            (
                TileMetadata(["name": "v", "format": "pbf", "json": #"{"vector_layers": [{"id": ["roads"], "fields": {}}]}"#]),
                "vector_layers[0].id is an array, expected a string"
            ),
            (
                TileMetadata(["name": "v", "format": "pbf", "json": #"{"vector_layers": {"id": "roads"}}"#]),
                "'vector_layers' is an object, expected an array"
            ),
            (TileMetadata(["name": "v", "format": "pbf", "json": #"["vector_layers"]"#]), "is an array, expected a JSON object"),
            (TileMetadata(["name": "v", "format": "png", "json": "{not json"]), "'json' is not valid JSON"),
            (TileMetadata(["name": "b", "format": "png", "bounds": "1,2,three,4"]), "metadata 'bounds' is '1,2,three,4'"),
            (TileMetadata(["name": "b", "format": "png", "bounds": "-10,50,10"]), "metadata 'bounds' is '-10,50,10'"),
            (TileMetadata(["name": "z", "format": "png", "minzoom": "5", "maxzoom": "2"]), "'minzoom' 5 is greater than 'maxzoom' 2"),
            (TileMetadata(["name": "z", "format": "png", "maxzoom": "31"]), "metadata 'maxzoom' is '31'"),
            (TileMetadata(["name": "c", "format": "png", "center": "0,0,x"]), "metadata 'center' is '0,0,x'"),
            (TileMetadata(["name": "t", "format": "png", "type": "layer"]), "metadata 'type' is 'layer'"),
        ]
        for (metadata, expected) in cases {
            do {
                _ = try MBTilesWriter(creating: path, metadata: metadata)
                Issue.record("accepted \(metadata.entries)")
            } catch {
                guard case .invalidMetadata(let message) = error.fault else {
                    Issue.record("expected invalidMetadata, got \(error)")
                    continue
                }
                #expect(error.path == path)
                #expect(message.contains(expected), "\(message)")
            }
            #expect(directoryEntries(dir).isEmpty)
        }
    }

    @Test func errorsFoundAtFinishLeaveNoFile() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("unknown.mbtiles")
        // No format given and the bytes are no known format: nothing to derive it from.
        let writer = try MBTilesWriter(creating: path, metadata: TileMetadata(["name": "u"]))
        try writer.write(Data([0xFF, 0xFF, 0xFF]), at: TileCoordinate(zoom: 0, x: 0, y: 0))
        guard case .invalidMetadata(let message) = archiveFault({ try writer.finish() }) else {
            Issue.record("expected invalidMetadata")
            return
        }
        #expect(message.contains("'format' is required"))
        #expect(directoryEntries(dir).isEmpty)
    }

    @Test func warningsAreReportedAndWritten() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("warn.mbtiles")
        let writer = try MBTilesWriter(
            creating: path, metadata: TileMetadata(["name": "w", "format": "jpg", "minzoom": "1", "version": "1.0.0"]))
        try writer.write(Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0]), at: TileCoordinate(zoom: 2, x: 1, y: 1))
        let report = try writer.finish()
        #expect(report.warnings.contains { $0.key == "minzoom" && $0.message.contains("lowest zoom with tiles is 2") })
        #expect(report.warnings.contains { $0.key == "format" && $0.message.contains("tiles are png") })
        #expect(report.warnings.contains { $0.key == "version" })
        #expect(report.metadata["maxzoom"] == "2")
        #expect(FileManager.default.fileExists(atPath: path))
    }

    @Test func atomicCreateCancelAndOverwrite() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("a.mbtiles")
        let metadata = TileMetadata(["name": "a", "format": "png"])
        // Cancelled or dropped: nothing at the destination, no temporary file.
        do {
            let writer = try MBTilesWriter(creating: path, metadata: metadata)
            try writer.write(Data("x".utf8), at: TileCoordinate(zoom: 0, x: 0, y: 0))
            #expect(directoryEntries(dir).count == 1 && directoryEntries(dir)[0].hasPrefix(".a.mbtiles.tmp-"))
            writer.cancel()
        }
        #expect(directoryEntries(dir).isEmpty)
        do {
            let writer = try MBTilesWriter(creating: path, metadata: metadata)
            try writer.write(Data("x".utf8), at: TileCoordinate(zoom: 0, x: 0, y: 0))
        }
        #expect(directoryEntries(dir).isEmpty)
        // A finished file; a second writer may not replace it unless asked.
        let first = try MBTilesWriter(creating: path, metadata: metadata)
        try first.write(Data("old".utf8), at: TileCoordinate(zoom: 0, x: 0, y: 0))
        try first.finish()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(archiveFault { try MBTilesWriter(creating: path, metadata: metadata) } == .alreadyExists)
        let replacing = try MBTilesWriter(creating: path, metadata: metadata, options: MBTilesWriterOptions(overwrite: true))
        try replacing.write(Data("new".utf8), at: TileCoordinate(zoom: 0, x: 0, y: 0))
        replacing.cancel()
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        let replacing2 = try MBTilesWriter(creating: path, metadata: metadata, options: MBTilesWriterOptions(overwrite: true))
        try replacing2.write(Data("new".utf8), at: TileCoordinate(zoom: 0, x: 0, y: 0))
        try replacing2.finish()
        #expect(try MBTilesArchive(path: path).tileData(at: TileCoordinate(zoom: 0, x: 0, y: 0)) == Data("new".utf8))
        #expect(directoryEntries(dir) == ["a.mbtiles"])
        // Finished writers refuse more work.
        #expect(archiveFault { try replacing2.write(Data("late".utf8), at: TileCoordinate(zoom: 0, x: 0, y: 0)) } != nil)
    }

    @Test func updateInOneTransaction() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("u.mbtiles")
        let t0 = try TileCoordinate(zoom: 0, x: 0, y: 0)
        let t1 = try TileCoordinate(zoom: 1, x: 0, y: 0)
        let t2 = try TileCoordinate(zoom: 1, x: 1, y: 1)
        let create = try MBTilesWriter(creating: path, metadata: TileMetadata(["name": "u", "format": "png"]))
        try create.write(Data("a".utf8), at: t0)
        try create.write(Data("b".utf8), at: t1)
        let created = try create.finish()

        // Cancelled update: nothing changes.
        let cancelled = try MBTilesWriter(updating: path)
        try cancelled.write(Data("zzz".utf8), at: t2)
        #expect(try cancelled.removeTile(at: t0))
        cancelled.cancel()
        let unchanged = try MBTilesArchive(path: path)
        #expect(try unchanged.tileCount() == 2)
        #expect(try unchanged.aggregateTilesHash() == created.aggregateTilesHash)

        // Committed update: add, replace, remove, and a metadata change.
        let update = try MBTilesWriter(updating: path, options: MBTilesWriterOptions(derivation: .replace))
        #expect(update.metadata.name == "u")
        #expect(update.schemaKind == .flat)
        update.metadata["attribution"] = "© test"
        try update.write(Data("c".utf8), at: t2)
        try update.write(Data("B".utf8), at: t1)
        #expect(try update.removeTile(at: t0))
        #expect(try update.removeTile(at: t0) == false)
        let report = try update.finish()
        let archive = try MBTilesArchive(path: path)
        #expect(try archive.tileCount() == 2)
        #expect(try archive.tileData(at: t1) == Data("B".utf8))
        #expect(try archive.tileData(at: t2) == Data("c".utf8))
        #expect(try archive.containsTile(at: t0) == false)
        let metadata = try archive.readMetadata()
        #expect(metadata["attribution"] == "© test")
        #expect(try metadata.minZoom == 1)
        #expect(metadata["agg_tiles_hash"] == report.aggregateTilesHash)
        #expect(try archive.aggregateTilesHash() == report.aggregateTilesHash)
        #expect(directoryEntries(dir) == ["u.mbtiles"])  // no journal left behind
    }

    @Test func updateFlatWithHashKeepsTileHashes() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("zoomed.mbtiles")
        try FileManager.default.copyItem(atPath: TestSupport.fixture("martin/zoomed_world_cities.mbtiles"), toPath: path)
        let update = try MBTilesWriter(updating: path)
        #expect(update.schemaKind == .flatWithHash)
        try update.write(Data("new tile".utf8), at: TileCoordinate(zoom: 6, x: 0, y: 0))
        let report = try update.finish()
        let archive = try MBTilesArchive(path: path)
        var mismatches = 0
        #expect(try archive.checkTileHashes { _ in mismatches += 1 } == 73)
        #expect(mismatches == 0)
        #expect(try archive.readMetadata()["agg_tiles_hash"] == report.aggregateTilesHash)
    }

    @Test func updateNormalizedDropsOrphanedImages() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("plain_1.mbtiles")
        try FileManager.default.copyItem(atPath: TestSupport.fixture("node-mbtiles/plain_1.mbtiles"), toPath: path)
        let archiveBefore = try MBTilesArchive(path: path)
        // Find a tile whose blob no other tile shares, then replace it.
        var counts: [Data: Int] = [:]
        let tiles = try allTiles(archiveBefore)
        for (_, data) in tiles { counts[data, default: 0] += 1 }
        let (unique, _) = try #require(tiles.first { counts[$0.1] == 1 })
        let update = try MBTilesWriter(updating: path)
        #expect(update.schemaKind == .normalized)
        try update.write(Data("replacement".utf8), at: unique)
        let report = try update.finish()
        #expect(report.storedBlobCount == 207)  // one blob orphaned and removed, one added
        #expect(report.tileCount == 285)
        #expect(try MBTilesArchive(path: path).tileData(at: unique) == Data("replacement".utf8))
    }
}
