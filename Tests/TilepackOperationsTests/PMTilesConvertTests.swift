import Foundation
import Testing
import TilepackCore
import TilepackOperations
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

/// Converting to and from PMTiles, and the PyPI `pmtiles` package as a witness both ways.
@Suite struct PMTilesConvertTests {
    static let fixtures = [
        "node-mbtiles/plain_1.mbtiles", "martin/world_cities.mbtiles", "martin/webp.mbtiles",
        "martin/geography-class-jpg.mbtiles", "node-mbtiles/plain_3.mbtiles", "martin/uncompressed_mvt.mbtiles",
    ]

    /// MBTiles -> PMTiles -> MBTiles (and -> bundle) keeps every tile's bytes and every metadata key.
    @Test(arguments: fixtures)
    func roundTripKeepsBytesHashAndMetadata(_ fixture: String) throws {
        let dir = try TemporaryDirectory()
        let source = try MBTilesArchive(path: TestSupport.fixture(fixture))
        let report = try ArchiveConverter.run(source: source.path, destination: dir.file("a.pmtiles"), options: ConvertOptions())
        #expect(report.tiles == (try source.tileCount()))
        _ = try ArchiveConverter.run(source: dir.file("a.pmtiles"), destination: dir.file("b.mbtiles"), options: ConvertOptions())
        _ = try ArchiveConverter.run(source: dir.file("a.pmtiles"), destination: dir.file("c.tilepack"), options: ConvertOptions())
        _ = try ArchiveConverter.run(source: dir.file("c.tilepack"), destination: dir.file("d.pmtiles"), options: ConvertOptions())
        let hash = try source.aggregateTilesHash()
        let back = try MBTilesArchive(path: dir.file("b.mbtiles"))
        #expect(try back.aggregateTilesHash() == hash)
        // Stored when the source stores one (as the tiles' hash), else not (Specs/mbtiles.md §5).
        let carried = try source.readMetadata()[TileMetadata.Key.aggregateTilesHash] != nil
        #expect(try back.metadata()[TileMetadata.Key.aggregateTilesHash] == (carried ? hash : nil))
        // The same tiles in the same archive bytes, whichever way they came.
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir.file("a.pmtiles"))).count > 127)
        let a = try PMTilesArchive(path: dir.file("a.pmtiles")), d = try PMTilesArchive(path: dir.file("d.pmtiles"))
        var tiles: [TileCoordinate: Data] = [:]
        try source.forEachTile { t, bytes in tiles[t] = Data(bytes) }
        var count = 0
        try a.forEachTile { t, bytes in
            count += 1
            #expect(tiles[t] == Data(bytes), "\(t)")
        }
        #expect(count == tiles.count)
        #expect(try d.tileCount() == tiles.count)
        let original = try source.metadata()
        let converted = try back.metadata()
        for key in original.keys where key != TileMetadata.Key.aggregateTilesHash && key != TileMetadata.Key.json {
            #expect(converted[key] == original[key], "\(key)")
        }
        if let json = original.json, let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? NSDictionary {
            let again = try #require(converted.json.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? NSDictionary })
            #expect(again == object)
        }
    }

    @Test func verifyAndInfoReadWhatConvertWrote() throws {
        let dir = try TemporaryDirectory()
        _ = try ArchiveConverter.run(
            source: TestSupport.fixture("martin/world_cities.mbtiles"), destination: dir.file("w.pmtiles"), options: ConvertOptions())
        let report = ArchiveVerifier.run(path: dir.file("w.pmtiles"))
        #expect(report.exitCode(strict: false) == 0, "\(report.findings)")
        #expect(report.format == .pmtiles && report.tiles == 196 && report.decodedTiles == 196)
        let info = try ArchiveInspector.run(path: dir.file("w.pmtiles"))
        #expect(info.tiles == 196 && info.format == .pmtiles)
        let archive = try PMTilesArchive(path: dir.file("w.pmtiles"))
        #expect(archive.header.tileType == .mvt && archive.header.tileCompression == .gzip)
        #expect(try archive.metadata()[TileMetadata.Key.aggregateTilesHash] == "84792BF4EE9AEDDC5B1A60E707011FEE")
        #expect(try MBTilesAggregateHash.compute(archive) == "84792BF4EE9AEDDC5B1A60E707011FEE")
        // A stale hash (the tiles changed, the metadata did not) is an error naming the key.
        var metadata = try archive.metadata()
        metadata[TileMetadata.Key.aggregateTilesHash] = "CAFEC0DE"
        let writer = try PMTilesWriter(destination: dir.file("stale.pmtiles"), metadata: metadata)
        try archive.forEachTile { t, bytes in try writer.addTile(at: t, bytes: bytes) }
        try writer.finish()
        let stale = ArchiveVerifier.run(path: dir.file("stale.pmtiles"))
        #expect(stale.exitCode(strict: false) == 1)
        #expect(stale.findings.contains { $0.key == "agg_tiles_hash" && $0.message.contains("CAFEC0DE") })
    }

    // MARK: The reference implementation as a witness

    /// `tools/pmtiles/reference.py`, or `nil` when it failed (an issue recorded; the checks that
    /// call it run only where Python's `pmtiles` imports, or in CI: `.needs(.pmtilesPython)`).
    static func reference(_ arguments: [String]) throws -> Data? {
        let run = try TestSupport.runPython(script: "tools/pmtiles/reference.py", arguments)
        guard run.status == 0 else {
            Issue.record("reference.py \(arguments.joined(separator: " ")) failed: \(run.errors)")
            return nil
        }
        let data = run.output
        return data
    }

    /// What the reference reader lists: "z/x/y" -> (length, crc32).
    static func referenceTiles(_ path: String) throws -> (tiles: [String: [Int]], metadata: [String: Any])? {
        guard let data = try reference(["dump", path]) else { return nil }
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return (try #require(object["tiles"] as? [String: [Int]]), try #require(object["metadata"] as? [String: Any]))
    }

    static func ourTiles(_ archive: any TileArchive) throws -> [String: [Int]] {
        var tiles: [String: [Int]] = [:]
        try archive.forEachTile { t, bytes in tiles["\(t)"] = [bytes.count, Int(BundleFormat.crc32(bytes))] }
        return tiles
    }

    /// The reference reads every file tilepack writes, tile for tile, with its metadata.
    @Test(.needs(.pmtilesPython), arguments: fixtures + ["pmtiles/usgs-mt-whitney-8-15-webp-512.pmtiles"])
    func referenceReadsWhatTilepackWrites(_ fixture: String) throws {
        let dir = try TemporaryDirectory()
        let out = dir.file("out.pmtiles")
        _ = try ArchiveConverter.run(source: TestSupport.fixture(fixture), destination: out, options: ConvertOptions())
        guard let (tiles, metadata) = try Self.referenceTiles(out) else { return }
        let source = try openTileArchive(path: TestSupport.fixture(fixture))
        #expect(tiles == (try Self.ourTiles(source)))
        // The source's name (or, for an unnamed source, the one convert gave it).
        let stored = try source.metadata().name
        let name = stored?.isEmpty ?? true ? ArchiveLocation.baseName(TestSupport.fixture(fixture)) : stored
        #expect(metadata["name"] as? String == name)
    }

    /// Big enough for leaf directories: the reference follows them too.
    @Test(.needs(.pmtilesPython)) func referenceReadsLeaves() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("leaves.pmtiles")
        let writer = try PMTilesWriter(destination: path, metadata: TileMetadata(["name": "leaves"]))
        var random = SplitMix64(seed: 5)
        var values: [UInt64] = []
        for x in 0..<256 {
            for y in 0..<256 where random.next() % 2 == 0 {
                let value = !values.isEmpty && random.next() % 2 == 0 ? values[Int(random.next() % UInt64(values.count))] : random.next()
                values.append(value)
                try writer.addTile(at: TileCoordinate(uncheckedZoom: 8, x: x, y: y), bytes: withUnsafeBytes(of: value) { Array($0) })
            }
        }
        let summary = try writer.finish()
        #expect(summary.leafDirectories > 0)
        guard let (tiles, _) = try Self.referenceTiles(path) else { return }
        #expect(tiles == (try Self.ourTiles(PMTilesArchive(path: path))))
    }

    /// tilepack reads every file the reference writes (its MBTiles converter), tile for tile.
    @Test(.needs(.pmtilesPython), arguments: ["martin/world_cities.mbtiles", "martin/geography-class-jpg.mbtiles", "martin/zoomed_world_cities.mbtiles"])
    func tilepackReadsWhatTheReferenceWrites(_ fixture: String) throws {
        let dir = try TemporaryDirectory()
        let out = dir.file("ref.pmtiles")
        // The reference converter needs minzoom, maxzoom and format: give it a copy that has them.
        let copy = dir.file("in.mbtiles")
        _ = try ArchiveConverter.run(source: TestSupport.fixture(fixture), destination: copy, options: ConvertOptions())
        guard try Self.reference(["write", copy, out]) != nil else { return }
        guard let (tiles, _) = try Self.referenceTiles(out) else { return }
        let archive = try PMTilesArchive(path: out)
        #expect(tiles == (try Self.ourTiles(archive)))
        #expect(tiles == (try Self.ourTiles(MBTilesArchive(path: copy))))
        let report = ArchiveVerifier.run(path: out)
        #expect(report.exitCode(strict: false) == 0, "\(report.findings)")
    }
}
