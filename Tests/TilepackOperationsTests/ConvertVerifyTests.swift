import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

@Suite struct ConvertTests {
    /// MBTiles -> bundle -> MBTiles keeps every tile's bytes, so the agg hash is the input's.
    @Test(arguments: [
        "node-mbtiles/plain_1.mbtiles", "martin/world_cities.mbtiles", "martin/webp.mbtiles", "martin/geography-class-jpg.mbtiles",
    ])
    func roundTripKeepsBytesAndHash(_ fixture: String) throws {
        let dir = try TemporaryDirectory()
        let source = try MBTilesArchive(path: TestSupport.fixture(fixture))
        _ = try ArchiveConverter.run(source: source.path, destination: dir.file("a.tilepack"), options: ConvertOptions())
        _ = try ArchiveConverter.run(source: dir.file("a.tilepack"), destination: dir.file("b.mbtiles"), options: ConvertOptions())
        var dedup = ConvertOptions()
        dedup.deduplicate = true
        _ = try ArchiveConverter.run(source: dir.file("b.mbtiles"), destination: dir.file("c.mbtiles"), options: dedup)
        let hash = try source.aggregateTilesHash()
        // Stored when the source stores one (as the tiles' hash), else not (Specs/mbtiles.md §5).
        let carried = try source.readMetadata()[TileMetadata.Key.aggregateTilesHash] != nil
        for path in ["b.mbtiles", "c.mbtiles"] {
            let out = try MBTilesArchive(path: dir.file(path))
            #expect(try out.aggregateTilesHash() == hash)
            #expect(try out.metadata()[TileMetadata.Key.aggregateTilesHash] == (carried ? hash : nil))
        }
        #expect(try MBTilesArchive(path: dir.file("c.mbtiles")).schema.kind == .normalized)
        #expect(try MBTilesArchive(path: dir.file("b.mbtiles")).schema.kind == .flat)
        // Every key of the source's metadata survives.
        let original = try source.metadata()
        let converted = try MBTilesArchive(path: dir.file("b.mbtiles")).metadata()
        for key in original.keys where key != TileMetadata.Key.aggregateTilesHash {
            #expect(converted[key] == original[key], "\(key)")
        }
    }

    @Test func rawBitmapBundleServesPixelsAndConvertsBackToPNG() throws {
        let dir = try TemporaryDirectory()
        var options = ConvertOptions()
        options.encode = .rgba8888
        _ = try ArchiveConverter.run(
            source: TestSupport.fixture("node-mbtiles/plain_1.mbtiles"), destination: dir.file("raw.tilepack"), options: options)
        let raw = try BundleArchive(path: dir.file("raw.tilepack"))
        #expect(raw.content == .rawBitmap(RawBitmapLayout(pixelFormat: .rgba8888, width: 256, height: 256)))
        let tile = try TileCoordinate(zoom: 2, x: 1, y: 1)
        #expect(try raw.tileData(at: tile)?.count == 256 * 256 * 4)
        _ = try ArchiveConverter.run(source: dir.file("raw.tilepack"), destination: dir.file("back.mbtiles"), options: ConvertOptions())
        let back = try MBTilesArchive(path: dir.file("back.mbtiles"))
        #expect(try back.metadata().format == .png)
        #expect(try back.tileCount() == 284 + 1)
        #expect(ArchiveVerifier.run(path: dir.file("back.mbtiles")).errorCount == 0)
    }
}

@Suite struct VerifyTests {
    /// The exit code `verify` owes every real archive (each one's fault: `Tests/Fixtures/SOURCES.md`).
    static let expected: [(String, Set<Int32>)] = [
        ("node-mbtiles/plain_1.mbtiles", [0]), ("node-mbtiles/plain_2.mbtiles", [0]),
        ("node-mbtiles/plain_3.mbtiles", [0]), ("node-mbtiles/plain_4.mbtiles", [0]),
        ("node-mbtiles/unindexed.mbtiles", [0]), ("node-mbtiles/some-empty-tiles.mbtiles", [0]),
        ("node-mbtiles/with spaces.mbtiles", [0]), ("node-mbtiles/geocoder_data.mbtiles", [0]),
        ("node-mbtiles/corrupt_null_tile.mbtiles", [1]), ("node-mbtiles/corrupt.mbtiles", [1, 2]),
        ("martin/geography-class-png.mbtiles", [0]), ("martin/geography-class-png-no-bounds.mbtiles", [0]),
        ("martin/geography-class-jpg.mbtiles", [0]), ("martin/geography-class-jpg-modified.mbtiles", [0]),
        ("martin/world_cities.mbtiles", [0]), ("martin/zoomed_world_cities.mbtiles", [0]),
        ("martin/uncompressed_mvt.mbtiles", [0]), ("martin/json.mbtiles", [0]), ("martin/webp.mbtiles", [0]),
        ("martin/world_cities_modified.mbtiles", [1]), ("martin/world_cities_diff.mbtiles", [1]),
        ("martin/world_cities_bindiff.mbtiles", [1]), ("martin/geography-class-jpg-diff.mbtiles", [0, 1]),
        ("martin/bad_hash.mbtiles", [1]), ("martin/invalid_zoomed_world_cities.mbtiles", [1]),
        ("martin/invalid-tile-idx.mbtiles", [1]), ("martin/invalid-tile-format.mbtiles", [1]),
        ("martin/invalid.mbtiles", [2]), ("mbutil/one_tile.mbtiles", [0]), ("mbutil/utf8grid.mbtiles", [0]),
        // PMTiles: v3 files verify; another version, an empty file or text is not an archive (2).
        ("martin/png.pmtiles", [0]), ("martin/webp2.pmtiles", [0]), ("pmtiles/empty.pmtiles", [2]), ("pmtiles/invalid.pmtiles", [2]),
        ("pmtiles/invalid_v4.pmtiles", [2]), ("pmtiles/test_fixture_1.pmtiles", [0]), ("pmtiles/test_fixture_2.pmtiles", [0]),
        ("pmtiles/test_fixture_mlt.pmtiles", [0]), ("pmtiles/stamen_toner_raster_CC-BY+ODbL_z3.pmtiles", [0]),
        ("pmtiles/usgs-mt-whitney-8-15-webp-512.pmtiles", [0]),
        ("martin/stamen_toner__raster_CC-BY+ODbL_z3.pmtiles", [2]),
    ]

    @Test(arguments: expected)
    func exitCodeMatchesTheFixturesREADME(_ fixture: String, _ codes: Set<Int32>) {
        let report = ArchiveVerifier.run(path: TestSupport.fixture(fixture))
        #expect(codes.contains(report.exitCode(strict: false)), "\(fixture): \(report.findings)")
    }

    @Test func findingsNameTheTileOrKey() {
        let null = ArchiveVerifier.run(path: TestSupport.fixture("node-mbtiles/corrupt_null_tile.mbtiles"))
        #expect(
            null.findings.contains {
                $0.severity == .error && $0.tile == TileReference(zoom: 1, column: 0, tmsRow: 0)
                    && $0.tile?.description == "1/0/1 (TMS row 0)" && $0.message.contains("NULL")
            })
        let index = ArchiveVerifier.run(path: TestSupport.fixture("martin/invalid-tile-idx.mbtiles"))
        #expect(index.findings.contains { $0.severity == .error && $0.message.contains("tile_row 64") })
        let hash = ArchiveVerifier.run(path: TestSupport.fixture("martin/bad_hash.mbtiles"))
        #expect(hash.findings.contains { $0.key == "agg_tiles_hash" && $0.message.contains("CAFEC0DE") })
        let tileHash = ArchiveVerifier.run(path: TestSupport.fixture("martin/invalid_zoomed_world_cities.mbtiles"))
        #expect(tileHash.findings.contains { $0.check == "hash" && $0.message.contains("DEADBEEF") })
        let unindexed = ArchiveVerifier.run(path: TestSupport.fixture("node-mbtiles/unindexed.mbtiles"))
        #expect(unindexed.findings.contains { $0.severity == .warning && $0.message.contains("unique index") })
        #expect(unindexed.exitCode(strict: true) == 1)
        let pmtiles = ArchiveVerifier.run(path: TestSupport.fixture("pmtiles/invalid_v4.pmtiles"))
        #expect(pmtiles.findings.first?.message.contains("PMTiles spec version 4") == true)
        let ascii = ArchiveVerifier.run(path: TestSupport.fixture("martin/stamen_toner__raster_CC-BY+ODbL_z3.pmtiles"))
        #expect(ascii.findings.first?.message.contains("0x33") == true)
    }

    @Test func quickModeSkipsDecodingButStillChecksFormats() {
        var options = VerifyOptions()
        options.quick = true
        let report = ArchiveVerifier.run(path: TestSupport.fixture("martin/invalid-tile-format.mbtiles"), options: options)
        #expect(report.decodedTiles == 0)
        #expect(report.exitCode(strict: false) == 1)
    }

    @Test func aFlippedBitInABundleIsAnError() throws {
        let dir = try TemporaryDirectory()
        _ = try ArchiveConverter.run(
            source: TestSupport.fixture("martin/world_cities.mbtiles"), destination: dir.file("a.tilepack"), options: ConvertOptions())
        #expect(ArchiveVerifier.run(path: dir.file("a.tilepack")).exitCode(strict: false) == 0)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: dir.file("a.tilepack")))
        for offset in stride(from: 9, to: bytes.count, by: max(1, bytes.count / 25)) {
            bytes[offset] ^= 0x04
            try bytes.write(to: URL(fileURLWithPath: dir.file("b.tilepack")))
            #expect(ArchiveVerifier.run(path: dir.file("b.tilepack")).exitCode(strict: false) == 1, "bit flip at \(offset)")
            bytes[offset] ^= 0x04
        }
    }

    @Test func aDamagedPayloadIsReportedWithItsTile() throws {
        // The workers check each payload's CRC as they read the tile to decode it.
        let dir = try TemporaryDirectory()
        _ = try ArchiveConverter.run(
            source: TestSupport.fixture("martin/world_cities.mbtiles"), destination: dir.file("a.tilepack"), options: ConvertOptions())
        var bytes = try Data(contentsOf: URL(fileURLWithPath: dir.file("a.tilepack")))
        bytes[bytes.count - 1] ^= 0x10  // the last byte of the last payload
        try bytes.write(to: URL(fileURLWithPath: dir.file("b.tilepack")))
        let report = ArchiveVerifier.run(path: dir.file("b.tilepack"))
        #expect(report.exitCode(strict: false) == 1)
        let finding = try #require(report.findings.first { $0.severity == .error })
        #expect(finding.check == "container" && finding.tile != nil && finding.message.contains("checksum mismatch"), "\(finding)")
    }
}
