import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@testable import TilepackStorage

/// Makes an SQLite file from SQL (a test-only use of the library's internal SQLite wrapper).
func makeDatabase(_ path: String, _ sql: String) throws {
    let connection = try SQLiteConnection(filename: path, archivePath: path, readOnly: false, uri: false, create: true)
    try connection.execute(sql)
}

/// Runs every read the archive offers; returns the first TileArchiveError, records any other error.
func readEverything(_ path: String) -> TileArchiveError? {
    do {
        let archive = try MBTilesArchive(path: path)
        _ = try? archive.readMetadata()
        _ = try archive.zoomLevels()
        try archive.forEachTile { _, _ in }
        try archive.forEachRawRow { _ in }
        _ = try archive.aggregateTilesHash()
        _ = try archive.integrityCheck()
        _ = try archive.containsTile(at: TileCoordinate(zoom: 0, x: 0, y: 0))
        _ = try archive.tileData(at: TileCoordinate(zoom: 0, x: 0, y: 0))
        return nil
    } catch let error as TileArchiveError {
        return error
    } catch {
        Issue.record("not a TileArchiveError: \(error)")
        return nil
    }
}

@Suite struct MBTilesBadInputTests {
    @Test func truncatedCopiesOfARealFile() throws {
        let original = try Data(contentsOf: URL(fileURLWithPath: TestSupport.fixture("node-mbtiles/plain_1.mbtiles")))
        let dir = try TemporaryDirectory()
        for length in [0, 1, 15, 16, 99, 100, 1023, 1024, 4096 + 3, original.count / 2, original.count - 1024, original.count - 1] {
            let path = dir.file("cut-\(length).mbtiles")
            try original.prefix(length).write(to: URL(fileURLWithPath: path))
            do {
                _ = try MBTilesArchive(path: path)
                Issue.record("opened a file cut to \(length) bytes")
            } catch {
                #expect(error.path == path)
                switch (length, error.fault) {
                case (0, .notAnArchive(let detected)): #expect(detected.contains("empty"))
                case (1...99, .truncated(let what)): #expect(what.contains("shorter than an SQLite header"))
                case (_, .truncated(let what)):
                    #expect(what.contains("548 pages of 1024 bytes") || what.contains("whole number"), "\(what)")
                default: Issue.record("cut to \(length): unexpected \(error)")
                }
            }
        }
    }

    /// Flipped bytes all over a real file: every outcome is success or a TileArchiveError naming
    /// the file; never a crash, a hang or another error type.
    @Test func flippedBytesInARealFile() throws {
        let original = try Data(contentsOf: URL(fileURLWithPath: TestSupport.fixture("martin/world_cities.mbtiles")))
        let dir = try TemporaryDirectory()
        var generator = SplitMix64(seed: 42)
        var failures = 0
        var corruptFaults = 0
        let offsets = (0..<150).map { _ in Int(generator.next() % UInt64(original.count)) } + [16, 17, 28, 29, 30, 31, 100, 1024 + 8]
        for (i, offset) in offsets.enumerated() {
            var damaged = original
            damaged[offset] ^= UInt8(truncatingIfNeeded: generator.next() | 1)
            let path = dir.file("flip-\(i).mbtiles")
            try damaged.write(to: URL(fileURLWithPath: path))
            if let error = readEverything(path) {
                failures += 1
                #expect(error.path == path)
                if case .corrupt = error.fault { corruptFaults += 1 }
            }
            try FileManager.default.removeItem(atPath: path)
        }
        // Some flips land in unused bytes or blob payloads and go unnoticed; many must not.
        #expect(failures > 10)
        #expect(corruptFaults > 0)
    }

    @Test func garbagePagesAreReportedCorrupt() throws {
        var data = try Data(contentsOf: URL(fileURLWithPath: TestSupport.fixture("martin/world_cities.mbtiles")))
        // Pages 2 and up (1024 bytes each) become 0xFF: the schema on page 1 still reads.
        for i in 1024..<data.count { data[i] = 0xFF }
        let dir = try TemporaryDirectory()
        let path = dir.file("garbage.mbtiles")
        try data.write(to: URL(fileURLWithPath: path))
        let error = try #require(readEverything(path))
        guard case .corrupt(let what) = error.fault else {
            Issue.record("expected corrupt, got \(error)")
            return
        }
        #expect(what.contains("malformed"))
        #expect(error.path == path)
    }

    @Test func notSQLiteAtAll() throws {
        let dir = try TemporaryDirectory()
        let cases: [(String, Data, String)] = [
            ("text.mbtiles", Data("hello, I am not a database\n".utf8), "not an SQLite database (starts with text \"hello, I am not\")"),
            (
                "png.mbtiles", Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 0, count: 200)),
                "starts with bytes 89 50 4e 47"
            ),
            ("pm.mbtiles", Data("PMTiles".utf8) + Data([3]) + Data(count: 120), "a PMTiles archive (spec version 3)"),
        ]
        for (name, bytes, expected) in cases {
            let path = dir.file(name)
            try bytes.write(to: URL(fileURLWithPath: path))
            guard case .notAnArchive(let detected) = archiveFault({ try MBTilesArchive(path: path) }) else {
                Issue.record("\(name): expected notAnArchive")
                continue
            }
            #expect(detected.contains(expected), "\(detected)")
        }
        // A valid header with an impossible page size.
        var header = Data("SQLite format 3".utf8) + Data([0]) + Data(count: 84)
        header[16] = 0x03
        header[17] = 0x00  // 768
        let path = dir.file("pagesize.mbtiles")
        try (header + Data(count: 768 * 2 - 100)).write(to: URL(fileURLWithPath: path))
        guard case .corrupt(let what) = archiveFault({ try MBTilesArchive(path: path) }) else {
            Issue.record("expected corrupt")
            return
        }
        #expect(what.contains("page size of 768"))
    }

    @Test func missingTablesAndColumns() throws {
        let dir = try TemporaryDirectory()
        let noData = dir.file("nodata.mbtiles")
        try makeDatabase(noData, "CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER);")
        #expect(archiveFault { try MBTilesArchive(path: noData) } == .missingTable("column tile_data in 'tiles'"))

        let other = dir.file("other.mbtiles")
        try makeDatabase(other, "CREATE TABLE pictures (id INTEGER);")
        guard case .missingTable(let what) = archiveFault({ try MBTilesArchive(path: other) }) else {
            Issue.record("expected missingTable")
            return
        }
        #expect(what.contains("tables: pictures"))

        let noMetadata = dir.file("nometa.mbtiles")
        try makeDatabase(
            noMetadata,
            """
            CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);
            INSERT INTO tiles VALUES (0, 0, 0, x'89504E470D0A1A0A00');
            """)
        let archive = try MBTilesArchive(path: noMetadata)
        #expect(archiveFault { try archive.readMetadata() } == .missingTable("'metadata' table"))
        #expect(archive.content == .encoded(.png))
        #expect(try archive.tileCount() == 1)
        #expect(archive.schema.hasMetadataTable == false && archive.schema.hasUniqueIndex == false)
    }

    @Test func rowsThatAreNotTiles() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("rows.mbtiles")
        try makeDatabase(
            path,
            """
            CREATE TABLE metadata (name TEXT, value TEXT);
            CREATE TABLE tiles (zoom_level, tile_column, tile_row, tile_data);
            INSERT INTO tiles VALUES (1, 0, 0, x'01');
            INSERT INTO tiles VALUES ('abc', 0, 0, x'02');
            INSERT INTO tiles VALUES (NULL, 0, 0, x'03');
            INSERT INTO tiles VALUES (2, 1.5, 0, x'04');
            INSERT INTO tiles VALUES (2, 4, 0, x'05');
            INSERT INTO tiles VALUES (31, 0, 0, x'06');
            INSERT INTO tiles VALUES (-1, 0, 0, x'07');
            INSERT INTO tiles VALUES (3, 1, 1, 12345);
            INSERT INTO tiles VALUES (3, 1, 2, NULL);
            INSERT INTO tiles VALUES (3, 2, 2.0, 'text tile');
            """)
        let archive = try MBTilesArchive(path: path)
        var problems: [String] = []
        var storages: [SQLiteStorageClass] = []
        try archive.forEachRawRow { row in
            if let problem = row.coordinateProblem { problems.append(problem) }
            storages.append(row.tileDataStorage)
        }
        #expect(
            problems == [
                "zoom_level 'abc' is not a whole number",
                "zoom_level NULL is not a whole number",
                "tile_column 1.5 is not a whole number",
                "tile_column 4 is outside 0..<4 at zoom 2",
                "zoom_level 31 is outside 0...30",
                "zoom_level -1 is outside 0...30",
            ])
        #expect(storages == [.blob, .blob, .blob, .blob, .blob, .blob, .blob, .integer, .null, .text])
        // The typed API refuses them with invalidRow / nullTile, never crashes.
        guard case .invalidRow = archiveFault({ try archive.forEachTile { _, _ in } }) else {
            Issue.record("forEachTile must report the bad row")
            return
        }
        guard case .invalidRow = archiveFault({ try archive.zoomLevels() }) else {
            Issue.record("zoomLevels must report the bad zoom")
            return
        }
        let numeric = try TileCoordinate(zoom: 3, x: 1, y: 6)  // TMS row 1
        guard case .invalidRow(let what) = archiveFault({ try archive.tileData(at: numeric) }) else {
            Issue.record("numeric tile_data must be refused")
            return
        }
        #expect(what.contains("integer 12345"))
        #expect(
            archiveFault { try archive.tileData(at: TileCoordinate(zoom: 3, x: 1, y: 5)) }
                == .nullTile(try TileCoordinate(zoom: 3, x: 1, y: 5)))
        // A text tile reads as its bytes (REAL 2.0 row matches the integer row 2).
        #expect(try archive.tileData(at: TileCoordinate(zoom: 3, x: 2, y: 5)) == Data("text tile".utf8))
        #expect(try archive.tileData(at: TileCoordinate(zoom: 1, x: 0, y: 1)) == Data([1]))
    }

    @Test func metadataValuesThatAreNotWhatTheyClaim() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("meta.mbtiles")
        try makeDatabase(
            path,
            """
            CREATE TABLE metadata (name TEXT, value TEXT);
            CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);
            INSERT INTO metadata VALUES ('name', 'm');
            INSERT INTO metadata VALUES ('format', 'pbf');
            INSERT INTO metadata VALUES ('bounds', '[-180, -85, 180, 85]');
            INSERT INTO metadata VALUES ('center', '0,0,99');
            INSERT INTO metadata VALUES ('minzoom', 'zero');
            INSERT INTO metadata VALUES ('maxzoom', 4);
            INSERT INTO metadata VALUES ('json', '{"vector_layers": [{"id": ["a", "b"], "fields": {"name": ["String"]}}]}');
            """)
        let archive = try MBTilesArchive(path: path)
        let metadata = try archive.readMetadata()
        #expect(metadata["maxzoom"] == "4")  // an INTEGER value reads as its text
        #expect(try metadata.maxZoom == 4)
        #expect(throws: TileMetadataError.self) { try metadata.bounds }
        #expect(throws: TileMetadataError.self) { try metadata.center }
        #expect(throws: TileMetadataError.self) { try metadata.minZoom }
        let errors = MBTilesMetadataValidator.validate(metadata, content: try archive.contentSummary())
            .filter { $0.severity == .error }.map(\.message)
        #expect(errors.contains { $0.contains("'bounds' is '[-180, -85, 180, 85]'") })
        #expect(errors.contains { $0.contains("'center' is '0,0,99'") })
        #expect(errors.contains { $0.contains("'minzoom' is 'zero'") })
        #expect(errors.contains { $0.contains("vector_layers[0].id is an array, expected a string") })
        #expect(errors.contains { $0.contains("vector_layers[0].fields.name is an array") })

        // A value that is not UTF-8.
        let binary = dir.file("binary.mbtiles")
        try makeDatabase(
            binary,
            """
            CREATE TABLE metadata (name TEXT, value TEXT);
            CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);
            INSERT INTO metadata VALUES ('name', x'FFFE00');
            """)
        #expect(
            archiveFault { try MBTilesArchive(path: binary).readMetadata() } == .invalidMetadata("the value of 'name' is not UTF-8 text"))
    }

    /// A hostile `tiles` view over an endless recursive query is stopped by the step time limit.
    @Test func hostileEndlessViewDoesNotHang() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("endless.mbtiles")
        try makeDatabase(
            path,
            """
            CREATE VIEW tiles AS WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n)
                SELECT 0 AS zoom_level, 0 AS tile_column, i AS tile_row, CASE WHEN i < 0 THEN x'00' END AS tile_data FROM n;
            """)
        let start = Date()
        let fault = archiveFault { try MBTilesArchive(path: path, options: MBTilesOpenOptions(stepTimeLimit: 0.5)) }
        guard case .database(_, let message) = fault else {
            Issue.record("expected the query to be stopped, got \(String(describing: fault))")
            return
        }
        #expect(message.contains("time limit"))
        #expect(Date().timeIntervalSince(start) < 10)
    }
}

@Suite struct MBTilesConcurrencyTests {
    /// Many threads read every tile of one archive at once and all see the right bytes.
    @Test func concurrentReadersSeeTheSameTiles() throws {
        let archive = try openFixture("node-mbtiles/plain_3.mbtiles", immutable: false)
        let tiles = try allTiles(archive)
        let expected = Dictionary(uniqueKeysWithValues: tiles.map { ($0.0, $0.1) })
        let mismatches = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            var bad = 0
            for (i, (tile, data)) in tiles.enumerated() where i % 8 == worker || i % 3 == 0 {
                let ok = (try? archive.withTileBytes(at: tile) { $0.elementsEqual(data) }) ?? nil
                if ok != true { bad += 1 }
                if (try? archive.containsTile(at: tile)) != true { bad += 1 }
            }
            mismatches.withLock { $0 += bad }
        }
        #expect(mismatches.withLock { $0 } == 0)
        #expect(expected.count == 2621)
    }

    /// Opening from a read-only directory works and creates nothing beside the file.
    @Test func readOnlyOpenCreatesNoSideFiles() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("ro.mbtiles")
        try FileManager.default.copyItem(atPath: TestSupport.fixture("martin/world_cities.mbtiles"), toPath: path)
        for immutable in [false, true] {
            let archive = try MBTilesArchive(path: path, options: MBTilesOpenOptions(immutable: immutable))
            DispatchQueue.concurrentPerform(iterations: 4) { _ in _ = try? archive.tileCount() }
            #expect(try archive.tileCount() == 196)
            #expect(directoryEntries(dir) == ["ro.mbtiles"])
        }
        // The shared fixtures directory is read-only: opening there must still work.
        #expect(try openFixture("martin/world_cities.mbtiles", immutable: false).tileCount() == 196)
    }
}

/// The content summary taken through the coordinate index, column by column, against the single
/// grouped pass it replaces in the prefetch store: equal on every layout, junk rows included.
@Suite struct ContentSummaryByColumnsTests {
    @Test func bothSummariesAgreeOnRandomStoresWithJunkRows() throws {
        let directory = try TemporaryDirectory()
        var generator = SplitMix64(seed: 7)
        for round in 0..<12 {
            let path = directory.file("s\(round).mbtiles")
            var sql = """
                CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);
                CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row);
                BEGIN;
                """
            // Clusters of tiles at a few zooms: dense blocks, lone tiles and thin diagonals.
            for _ in 0..<Int.random(in: 1...5, using: &generator) {
                let zoom = Int.random(in: 0...12, using: &generator)
                let size = 1 << zoom
                let x0 = Int.random(in: 0..<size, using: &generator), y0 = Int.random(in: 0..<size, using: &generator)
                for _ in 0..<Int.random(in: 1...60, using: &generator) {
                    let x = min(size - 1, x0 + Int.random(in: 0...7, using: &generator))
                    let y = min(size - 1, y0 + Int.random(in: 0...7, using: &generator))
                    sql += "INSERT OR IGNORE INTO tiles VALUES (\(zoom), \(x), \(y), x'00');\n"
                }
            }
            // Rows the summary must not count: out of range, negative, fractional, text, NULL,
            // zooms past 30, and a whole zoom of nothing but junk.
            sql += """
                INSERT INTO tiles VALUES (3, 8, 1, x'00'), (3, 1, 8, x'00'), (3, -1, 2, x'00'), (3, 2, -1, x'00');
                INSERT INTO tiles VALUES (3, 2.5, 1, x'00'), (3, 1, 2.5, x'00'), (3, 'a', 1, x'00'), (3, 1, 'b', x'00');
                INSERT INTO tiles VALUES (3, NULL, 1, x'00'), (NULL, 1, 1, x'00'), (31, 0, 0, x'00'), (2.5, 0, 0, x'00');
                INSERT INTO tiles VALUES (13, 9000, 1, x'00'), (13, -4, -4, x'00'), ('z', 0, 0, x'00');
                COMMIT;
                """
            try makeDatabase(path, sql)
            let connection = try SQLiteConnection(filename: path, archivePath: path, readOnly: true, uri: false)
            #expect(try MBTilesSchema.detect(connection, path: path).hasIndexInCoordinateOrder)
            let grouped = try TileContentSummary.query(connection)
            let byColumns = try TileContentSummary.queryByColumns(connection)
            #expect(byColumns == grouped, "round \(round)")
            #expect(!grouped.levels.isEmpty && !grouped.levels.contains { $0.zoom == 13 || $0.zoom > 30 })
        }
    }

    @Test func onlyAnIndexInCoordinateOrderCounts() throws {
        let directory = try TemporaryDirectory()
        let other = directory.file("other.mbtiles")
        try makeDatabase(
            other,
            """
            CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);
            CREATE UNIQUE INDEX by_row ON tiles (tile_row, tile_column, zoom_level);
            """)
        let connection = try SQLiteConnection(filename: other, archivePath: other, readOnly: true, uri: false)
        #expect(try !MBTilesSchema.detect(connection, path: other).hasIndexInCoordinateOrder)
    }
}
