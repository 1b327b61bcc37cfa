import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

/// One MBTiles fixture and what is known of it (`Tests/Fixtures/SOURCES.md`).
struct MBTilesFixture: CustomTestStringConvertible, Sendable {
    var file: String
    var tiles: Int
    var aggregateHash: String
    /// The stored `agg_tiles_hash` when the file stores one.
    var storedHash: String?
    var testDescription: String { file }
}

/// The README's table, row by row.
let mbtilesFixtures: [MBTilesFixture] = [
    .init(file: "node-mbtiles/plain_1.mbtiles", tiles: 285, aggregateHash: "B022AC7C8C41FEF958506C19E856038E"),
    .init(file: "node-mbtiles/plain_2.mbtiles", tiles: 269, aggregateHash: "C0C18DA7844363EA6D4F9B497BDABA22"),
    .init(file: "node-mbtiles/plain_3.mbtiles", tiles: 2621, aggregateHash: "D3291D96B5AC1612B5507E960F1A1A54"),
    .init(file: "node-mbtiles/plain_4.mbtiles", tiles: 269, aggregateHash: "C0C18DA7844363EA6D4F9B497BDABA22"),
    .init(file: "node-mbtiles/unindexed.mbtiles", tiles: 285, aggregateHash: "B022AC7C8C41FEF958506C19E856038E"),
    .init(file: "node-mbtiles/some-empty-tiles.mbtiles", tiles: 11, aggregateHash: "16DDEE54C1CDE138FBD8EDCF8E76AAEF"),
    .init(file: "node-mbtiles/with spaces.mbtiles", tiles: 0, aggregateHash: "D41D8CD98F00B204E9800998ECF8427E"),
    .init(file: "node-mbtiles/geocoder_data.mbtiles", tiles: 0, aggregateHash: "D41D8CD98F00B204E9800998ECF8427E"),
    .init(file: "node-mbtiles/corrupt_null_tile.mbtiles", tiles: 285, aggregateHash: "CED69DA692C6CE7DD01D35C324DBA515"),
    .init(file: "martin/geography-class-png.mbtiles", tiles: 5, aggregateHash: "A85C80BA1CE047E2D93DAC25C5179775"),
    .init(file: "martin/geography-class-png-no-bounds.mbtiles", tiles: 5, aggregateHash: "A85C80BA1CE047E2D93DAC25C5179775"),
    .init(file: "martin/geography-class-jpg.mbtiles", tiles: 5, aggregateHash: "AE8E5275E14A38477E32A70B1B4E7F22"),
    .init(file: "martin/geography-class-jpg-modified.mbtiles", tiles: 5, aggregateHash: "8077D13E17AC4FC3365D93EAD1B6B626"),
    .init(
        file: "martin/world_cities.mbtiles", tiles: 196, aggregateHash: "84792BF4EE9AEDDC5B1A60E707011FEE",
        storedHash: "84792BF4EE9AEDDC5B1A60E707011FEE"),
    .init(
        file: "martin/zoomed_world_cities.mbtiles", tiles: 72, aggregateHash: "D4E1030D57751A0B45A28A71267E46B8",
        storedHash: "D4E1030D57751A0B45A28A71267E46B8"),
    .init(file: "martin/uncompressed_mvt.mbtiles", tiles: 1, aggregateHash: "07E087D878D8FC2AE9A0341BBB6A1828"),
    .init(file: "martin/json.mbtiles", tiles: 1, aggregateHash: "D7B805EDFC627558647FBD72058420D2"),
    .init(file: "martin/webp.mbtiles", tiles: 1, aggregateHash: "EA9C312A157B0AC3244B88B88694B4C1"),
    .init(file: "martin/world_cities_modified.mbtiles", tiles: 196, aggregateHash: "BA32AE76B9FE313D08FC39A5FFC6D3FB"),
    .init(file: "martin/world_cities_diff.mbtiles", tiles: 3, aggregateHash: "C9B90B490DF381D93F8CD8102A469F47"),
    .init(
        file: "martin/world_cities_bindiff.mbtiles", tiles: 2, aggregateHash: "0A21AAF2C177B86DA3342A4F65794E49",
        storedHash: "0A21AAF2C177B86DA3342A4F65794E49"),
    .init(file: "martin/geography-class-jpg-diff.mbtiles", tiles: 2, aggregateHash: "1027C825F580A4FCE43D6BCB1414ED6D"),
    .init(file: "martin/bad_hash.mbtiles", tiles: 72, aggregateHash: "D4E1030D57751A0B45A28A71267E46B8"),
    .init(file: "martin/invalid_zoomed_world_cities.mbtiles", tiles: 72, aggregateHash: "D4E1030D57751A0B45A28A71267E46B8"),
    .init(file: "martin/invalid-tile-idx.mbtiles", tiles: 1, aggregateHash: "8362F64B5CC847680EF94D3269247934"),
    .init(file: "martin/invalid-tile-format.mbtiles", tiles: 2, aggregateHash: "F2807D56FD64620EEC1BBC7AD51322C2"),
    .init(file: "mbutil/one_tile.mbtiles", tiles: 2, aggregateHash: "D382B2CA82326C3AA48AB01D95F96985"),
    .init(file: "mbutil/utf8grid.mbtiles", tiles: 1, aggregateHash: "84966A60485E8B9865DC6A60D0F6A692"),
]

func openFixture(_ file: String, immutable: Bool = true) throws -> MBTilesArchive {
    try MBTilesArchive(path: TestSupport.fixture(file), options: MBTilesOpenOptions(immutable: immutable))
}

/// The fault an operation threw, or `nil` when it did not throw a TileArchiveError.
func archiveFault<T>(_ body: () throws -> T) -> TileArchiveError.Fault? {
    do {
        _ = try body()
        return nil
    } catch let error as TileArchiveError {
        return error.fault
    } catch {
        Issue.record("expected a TileArchiveError, got \(type(of: error)): \(error)")
        return nil
    }
}

@Suite
struct MBTilesFixtureTests {
    @Test(arguments: mbtilesFixtures)
    func opensCountsAndHashesLikeMartin(_ fixture: MBTilesFixture) throws {
        let archive = try openFixture(fixture.file)
        #expect(try archive.tileCount() == fixture.tiles)
        #expect(try archive.aggregateTilesHash() == fixture.aggregateHash)
        if let stored = fixture.storedHash {
            #expect(try archive.readMetadata()[TileMetadata.Key.aggregateTilesHash] == stored)
        }
        #expect(try archive.integrityCheck().isEmpty)
        // Hashing the rows as a reader meets them gives the same value whenever they come in order.
        var hasher = MBTilesAggregateHasher()
        try archive.forEachRawRow { hasher.add($0) }
        if let inScan = hasher.finalize() { #expect(inScan == fixture.aggregateHash) }
    }

    @Test func rowsOutOfHashOrderAreNotHashedInTheScan() throws {
        let dir = try TemporaryDirectory()
        let writer = try MBTilesWriter(creating: dir.file("o.mbtiles"), metadata: TileMetadata(["name": "o", "format": "png"]))
        for (z, x, y) in [(1, 1, 0), (1, 0, 0), (0, 0, 0)] {
            try writer.write([0x89, 0x50, 0x4E, 0x47, UInt8(x)], at: TileCoordinate(zoom: z, x: x, y: y))
        }
        try writer.finish()
        var hasher = MBTilesAggregateHasher()
        try MBTilesArchive(path: dir.file("o.mbtiles")).forEachRawRow { hasher.add($0) }
        #expect(hasher.finalize() == nil)
    }

    @Test func storedHashesThatTheReadmeSaysDiffer() throws {
        let differing = [
            "martin/world_cities_modified.mbtiles": "578FB5BD",
            "martin/bad_hash.mbtiles": "CAFEC0DE",
            "martin/invalid_zoomed_world_cities.mbtiles": "06AB9AF4",
            "martin/invalid-tile-idx.mbtiles": "D4E1030D",
        ]
        for (file, prefix) in differing {
            let archive = try openFixture(file)
            let stored = try #require(try archive.readMetadata()[TileMetadata.Key.aggregateTilesHash])
            #expect(stored.hasPrefix(prefix), "\(file)")
            #expect(try stored != archive.aggregateTilesHash(), "\(file)")
        }
    }

    @Test func detectsSchemas() throws {
        let plain1 = try openFixture("node-mbtiles/plain_1.mbtiles").schema
        #expect(plain1.kind == .normalized && plain1.hasUniqueIndex && plain1.extraTables.isEmpty && !plain1.hasUTFGrid)
        let plain2 = try openFixture("node-mbtiles/plain_2.mbtiles").schema
        #expect(plain2.kind == .normalized && plain2.hasUTFGrid && plain2.extraTables.isEmpty)
        let plain4 = try openFixture("node-mbtiles/plain_4.mbtiles").schema
        #expect(plain4.kind == .normalized && plain4.hasUniqueIndex)
        #expect(try openFixture("node-mbtiles/unindexed.mbtiles").schema.hasUniqueIndex == false)
        let geocoder = try openFixture("node-mbtiles/geocoder_data.mbtiles").schema
        #expect(geocoder.extraTables == ["geocoder_data"])
        #expect(geocoder.pageSize == 65536)
        let cities = try openFixture("martin/world_cities.mbtiles").schema
        #expect(cities.kind == .flat && cities.hasUniqueIndex && cities.coordinateTable == "tiles" && cities.hasMetadataTable)
        let bindiff = try openFixture("martin/world_cities_bindiff.mbtiles").schema
        #expect(bindiff.extraTables == ["bsdiffrawgz"])
        let zoomed = try openFixture("martin/zoomed_world_cities.mbtiles").schema
        #expect(zoomed.kind == .flatWithHash && zoomed.hasUniqueIndex && zoomed.coordinateTable == "tiles_with_hash")
        let webp = try openFixture("martin/webp.mbtiles").schema
        #expect(webp.kind == .flat && !webp.hasUniqueIndex)
    }

    @Test func contentFromFormatOrSniffing() throws {
        #expect(try openFixture("martin/world_cities.mbtiles").content == .encoded(.pbf))
        #expect(try openFixture("martin/uncompressed_mvt.mbtiles").content == .encoded(.pbf))
        #expect(try openFixture("martin/json.mbtiles").content == .encoded(.json))
        #expect(try openFixture("martin/webp.mbtiles").content == .encoded(.webp))
        // No `format` key: sniffed.
        #expect(try openFixture("node-mbtiles/plain_1.mbtiles").content == .encoded(.png))
        #expect(try openFixture("martin/geography-class-jpg.mbtiles").content == .encoded(.jpeg))
        #expect(try openFixture("martin/invalid-tile-format.mbtiles").content == nil)
        #expect(try openFixture("node-mbtiles/with spaces.mbtiles").content == nil)
    }

    @Test func typedMetadata() throws {
        let metadata = try openFixture("martin/world_cities.mbtiles").readMetadata()
        #expect(metadata.name == "Major cities from Natural Earth data")
        #expect(try metadata.format == .pbf)
        #expect(try metadata.minZoom == 0)
        #expect(try metadata.maxZoom == 6)
        #expect(try metadata.layerType == .overlay)
        let bounds = try #require(try metadata.bounds)
        #expect(abs(bounds.west - -123.12359) < 1e-6 && abs(bounds.north - 59.352706) < 1e-6)
        let center = try #require(try metadata.center)
        #expect(center.zoom == 6)
        #expect(metadata.json?.contains("vector_layers") == true)
        let spaces = try openFixture("node-mbtiles/with spaces.mbtiles").readMetadata()
        #expect(spaces.entries.keys.sorted() == ["json", "version"])
        let plain1 = try openFixture("node-mbtiles/plain_1.mbtiles").readMetadata()
        // DETAILS.md shows `formatter` as None: the stored value is SQL NULL, which reads as absent.
        #expect(plain1["formatter"] == nil)
        #expect(plain1.entries.count == 6)
        #expect(plain1.description == "demo description")
    }

    @Test func zoomLevelsMatchTheDetails() throws {
        let plain1 = try openFixture("node-mbtiles/plain_1.mbtiles").zoomLevels()
        #expect(plain1.map(\.zoom) == [0, 1, 2, 3, 4])
        #expect(plain1.map(\.tileCount) == [1, 4, 16, 56, 208])
        let plain3 = try openFixture("node-mbtiles/plain_3.mbtiles").zoomLevels()
        #expect(plain3.map(\.tileCount) == [12, 42, 143, 504, 1920])
        #expect(try openFixture("martin/zoomed_world_cities.mbtiles").zoomLevels() == [ZoomLevelSummary(zoom: 6, tileCount: 72)])
        #expect(try openFixture("node-mbtiles/some-empty-tiles.mbtiles").zoomLevels().map(\.tileCount) == [4, 7])
        #expect(try openFixture("node-mbtiles/geocoder_data.mbtiles").zoomLevels().isEmpty)
    }

    /// Every stored row, read raw (TMS), is the tile the XYZ API returns at the flipped row, and
    /// the ordered iteration visits each once, in (z, x, y) order.
    @Test(arguments: [
        "node-mbtiles/plain_1.mbtiles", "node-mbtiles/unindexed.mbtiles", "martin/world_cities.mbtiles",
        "martin/zoomed_world_cities.mbtiles", "martin/webp.mbtiles", "node-mbtiles/plain_3.mbtiles",
    ])
    func rawRowsIterationAndPointReadsAgree(_ file: String) throws {
        let archive = try openFixture(file)
        var raw: [TileCoordinate: Data] = [:]
        try archive.forEachRawRow { row in
            let z = try #require(row.zoomLevel.integerValue)
            let x = try #require(row.tileColumn.integerValue)
            let tmsRow = try #require(row.tileRow.integerValue)
            let tile = try TileCoordinate(zoom: z, x: x, y: (1 << z) - 1 - tmsRow)
            #expect(row.tile == tile)
            raw[tile] = Data(try #require(row.tileData))
        }
        var visited: [TileCoordinate] = []
        try archive.forEachTile { tile, bytes in
            visited.append(tile)
            #expect(Data(bytes) == raw[tile], "\(tile)")
        }
        #expect(visited.count == raw.count)
        #expect(visited == visited.sorted())
        #expect(Set(visited).count == visited.count)
        for (tile, data) in raw {
            #expect(try archive.tileData(at: tile) == data)
            #expect(try archive.containsTile(at: tile))
        }
    }

    @Test func pointReadsAndTheRowFlip() throws {
        let archive = try openFixture("martin/zoomed_world_cities.mbtiles")
        // invalid_zoomed_world_cities names 6/10/39 (TMS) as a stored tile: XYZ row 63 - 39 = 24.
        let tile = try TileCoordinate(zoom: 6, x: 10, y: 24)
        #expect(try archive.containsTile(at: tile))
        let size = try archive.withTileBytes(at: tile) { bytes in
            #expect(TileFormat.isGzip(bytes))
            return bytes.count
        }
        #expect((size ?? 0) > 0)
        #expect(try archive.containsTile(at: TileCoordinate(zoom: 6, x: 10, y: 39)) == false)
        #expect(try archive.tileData(at: TileCoordinate(zoom: 0, x: 0, y: 0)) == nil)
        // readTile(into:) copies into the caller's buffer, and refuses one too small.
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        let written = try buffer.withUnsafeMutableBytes { try archive.readTile(at: tile, into: $0) }
        #expect(written == size)
        var small = [UInt8](repeating: 0, count: 4)
        let fault = archiveFault { try small.withUnsafeMutableBytes { try archive.readTile(at: tile, into: $0) } }
        #expect(fault == .bufferTooSmall(tile: tile, needed: size ?? 0, available: 4))
    }

    @Test func nullTileIsATypedErrorNotACrash() throws {
        let archive = try openFixture("node-mbtiles/corrupt_null_tile.mbtiles")
        // NULL at z1 x0 TMS row 0 = XYZ row 1.
        let tile = try TileCoordinate(zoom: 1, x: 0, y: 1)
        #expect(try archive.containsTile(at: tile))
        #expect(archiveFault { try archive.tileData(at: tile) } == .nullTile(tile))
        #expect(archiveFault { try archive.forEachTile { _, _ in } } == .nullTile(tile))
        var nullRows = 0
        try archive.forEachRawRow { row in
            if row.tileData == nil {
                nullRows += 1
                #expect(row.tileDataStorage == .null)
                #expect(row.tile == tile)
            }
        }
        #expect(nullRows == 1)
        // The other tiles still read.
        #expect(try archive.tileData(at: TileCoordinate(zoom: 1, x: 1, y: 1)) != nil)
    }

    @Test func outOfRangeRowIsReportedByTheRawScan() throws {
        let archive = try openFixture("martin/invalid-tile-idx.mbtiles")
        var problems: [String] = []
        try archive.forEachRawRow { row in
            if let problem = row.coordinateProblem { problems.append(problem) }
            #expect(row.tile == nil)
        }
        #expect(problems == ["tile_row 64 is outside 0..<64 at zoom 6"])
        guard case .invalidRow(let message) = archiveFault({ try archive.forEachTile { _, _ in } }) else {
            Issue.record("expected invalidRow")
            return
        }
        #expect(message.contains("64"))
    }

    @Test func perTileHashes() throws {
        var mismatches: [MBTilesTileHashMismatch] = []
        let checked = try openFixture("martin/invalid_zoomed_world_cities.mbtiles").checkTileHashes { mismatches.append($0) }
        #expect(checked == 72)
        #expect(mismatches.count == 1)
        #expect(
            mismatches.first?.zoomLevel == .integer(6) && mismatches.first?.tileColumn == .integer(10)
                && mismatches.first?.tileRow == .integer(39))
        #expect(mismatches.first?.declared == "DEADBEEF")
        #expect(mismatches.first?.computed?.hasPrefix("53B658F8") == true)
        var none = 0
        #expect(try openFixture("martin/zoomed_world_cities.mbtiles").checkTileHashes { _ in none += 1 } == 72)
        #expect(none == 0)
        #expect(try openFixture("martin/world_cities.mbtiles").checkTileHashes { _ in } == 0)
    }

    @Test func diffFilesAndGridOnlyRows() throws {
        // martin's diff: 0/0/0 with NULL data means "delete"; reading it is a NULL-tile error.
        let diff = try openFixture("martin/world_cities_diff.mbtiles")
        #expect(
            archiveFault { try diff.tileData(at: TileCoordinate(zoom: 0, x: 0, y: 0)) }
                == .nullTile(try TileCoordinate(zoom: 0, x: 0, y: 0)))
        // geography-class-jpg-diff: the map row with a NULL tile_id vanishes through the view.
        let jpgDiff = try openFixture("martin/geography-class-jpg-diff.mbtiles")
        #expect(try jpgDiff.containsTile(at: TileCoordinate(zoom: 0, x: 0, y: 0)) == false)
        var count = 0
        try jpgDiff.forEachTile { _, bytes in
            count += 1
            #expect(TileFormat.sniff(bytes) == .jpeg)
        }
        #expect(count == 2)
    }

    @Test func contentSummary() throws {
        let summary = try openFixture("martin/zoomed_world_cities.mbtiles").contentSummary()
        #expect(summary.levels.count == 1)
        let level = try #require(summary.levels.first)
        // DETAILS: columns 10..63, TMS rows 24..45 -> XYZ rows 18..39.
        #expect(level.minX == 10 && level.maxX == 63 && level.minY == 18 && level.maxY == 39)
        #expect(summary.sniffedFormat == .pbf)
    }

    @Test func metadataValidationOfRealFiles() throws {
        let cities = try openFixture("martin/world_cities.mbtiles")
        let issues = MBTilesMetadataValidator.validate(try cities.readMetadata(), content: try cities.contentSummary())
        #expect(issues.filter { $0.severity == .error }.isEmpty, "\(issues)")
        // zoomed_world_cities says minzoom 0 but holds only z6.
        let zoomed = try openFixture("martin/zoomed_world_cities.mbtiles")
        let zoomedIssues = MBTilesMetadataValidator.validate(try zoomed.readMetadata(), content: try zoomed.contentSummary())
        #expect(zoomedIssues.contains { $0.kind == .disagreesWithTiles && $0.key == "minzoom" })
        // with spaces: no name, no format, no tiles.
        let spaces = try openFixture("node-mbtiles/with spaces.mbtiles")
        let spacesIssues = MBTilesMetadataValidator.validate(try spaces.readMetadata(), content: try spaces.contentSummary())
        #expect(spacesIssues.contains { $0.kind == .missing && $0.key == "name" })
        #expect(spacesIssues.contains { $0.kind == .missing && $0.key == "format" })
        #expect(spacesIssues.contains { $0.kind == .disagreesWithTiles && $0.key == nil })
    }
}

@Suite
struct MBTilesFixtureErrorTests {
    @Test func truncatedDatabase() {
        let fault = archiveFault { try openFixture("node-mbtiles/corrupt.mbtiles") }
        #expect(fault == .truncated("the SQLite header declares 16 pages of 1024 bytes (16384 bytes) but the file has 16073 bytes"))
    }

    @Test func sqliteWithoutTilesOrMetadata() {
        guard case .missingTable(let what) = archiveFault({ try openFixture("martin/invalid.mbtiles") }) else {
            Issue.record("expected missingTable")
            return
        }
        #expect(what.contains("'tiles'") && what.contains("no tables"))
    }

    @Test(arguments: [
        "martin/png.pmtiles", "martin/webp2.pmtiles", "martin/stamen_toner__raster_CC-BY+ODbL_z3.pmtiles",
        "pmtiles/stamen_toner_raster_CC-BY+ODbL_z3.pmtiles", "pmtiles/test_fixture_1.pmtiles",
        "pmtiles/invalid_v4.pmtiles", "pmtiles/test_fixture_mlt.pmtiles", "pmtiles/usgs-mt-whitney-8-15-webp-512.pmtiles",
    ])
    func pmtilesIsNamed(_ file: String) throws {
        let path = TestSupport.fixture(file)
        do {
            _ = try MBTilesArchive(path: path)
            Issue.record("opened a PMTiles file")
        } catch {
            #expect(error.path == path)
            guard case .notAnArchive(let detected) = error.fault else {
                Issue.record("expected notAnArchive, got \(error)")
                return
            }
            #expect(detected.contains("PMTiles"))
            #expect(error.description.hasPrefix(path))
        }
    }

    @Test func emptyAndTextFiles() {
        guard case .notAnArchive(let empty) = archiveFault({ try openFixture("pmtiles/empty.pmtiles") }) else {
            Issue.record("expected notAnArchive")
            return
        }
        #expect(empty.contains("empty file"))
        guard case .notAnArchive(let text) = archiveFault({ try openFixture("pmtiles/invalid.pmtiles") }) else {
            Issue.record("expected notAnArchive")
            return
        }
        #expect(text.contains("not an SQLite database") && text.contains("This is an inva"))
    }

    @Test func missingFileAndDirectory() {
        #expect(
            archiveFault { try MBTilesArchive(path: TestSupport.fixture("martin/nope.mbtiles")) }
                == .cannotOpen(errno: ENOENT, reason: String(cString: strerror(ENOENT))))
        guard case .notAnArchive = archiveFault({ try MBTilesArchive(path: TestSupport.fixture("martin")) }) else {
            Issue.record("a directory must be refused")
            return
        }
    }
}
