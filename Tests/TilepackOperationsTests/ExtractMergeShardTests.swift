import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

/// `extract`, `import --shard` and `merge`.
@Suite struct ExtractMergeShardTests {
    static let sampleTree = TestSupport.packageRoot.appendingPathComponent("samples/tiles").path

    static func tiles(_ archive: any TileArchive) throws -> [TileCoordinate: Data] {
        var tiles: [TileCoordinate: Data] = [:]
        try archive.forEachTile { t, bytes in tiles[t] = Data(bytes) }
        return tiles
    }

    static func importTree(_ destination: String, shard: ShardSpec? = nil) throws -> ImportReport {
        var options = ImportOptions()
        options.shard = shard
        options.threads = 2
        return try TileImporter.run(source: sampleTree, destination: destination, options: options)
    }

    @Test func shardSpecs() {
        #expect(ShardSpec("0/3") == ShardSpec(index: 0, count: 3))
        #expect(ShardSpec("2/3")?.index == 2)
        for bad in ["3/3", "-1/3", "1/0", "a/b", "1", "1/2/3", ""] { #expect(ShardSpec(bad) == nil, "\(bad)") }
    }

    /// The bundle of merged shards is the bundle of one import, byte for byte, whatever the
    /// number of shards and the order they are merged in; MBTiles shards merge to the same hash.
    @Test(arguments: [1, 3, 7])
    func mergedShardsAreTheWholeImport(_ count: Int) throws {
        let dir = try TemporaryDirectory()
        let whole = dir.file("whole.tilepack")
        let wholeReport = try Self.importTree(whole)
        var shards: [String] = []
        var seen: [TileCoordinate: Data] = [:]
        var sizes: [Int] = []
        for k in 0..<count {
            let path = dir.file("part-\(k).tilepack")
            let report = try Self.importTree(path, shard: ShardSpec(index: k, count: count))
            #expect(report.skipped.isEmpty)
            sizes.append(report.imported)
            for (t, bytes) in try Self.tiles(BundleArchive(path: path)) {
                #expect(seen.updateValue(bytes, forKey: t) == nil, "tile \(t) in two shards")
            }
            shards.append(path)
        }
        #expect(seen.count == wholeReport.imported)
        // Balanced: no shard is further from the mean than the largest column (17 files with its folder).
        let mean = Double(wholeReport.imported) / Double(count)
        #expect(sizes.allSatisfy { abs(Double($0) - mean) <= 17 }, "\(sizes)")

        let merged = dir.file("merged.tilepack")
        _ = try ArchiveMerger.run(inputs: shards.reversed(), destination: merged)
        let wholeBytes = try Data(contentsOf: URL(fileURLWithPath: whole))
        #expect(try Data(contentsOf: URL(fileURLWithPath: merged)) == wholeBytes)

        // MBTiles shards: the same tiles and agg_tiles_hash as one import.
        var mbtilesShards: [String] = []
        for k in 0..<count {
            let path = dir.file("part-\(k).mbtiles")
            _ = try Self.importTree(path, shard: ShardSpec(index: k, count: count))
            mbtilesShards.append(path)
        }
        _ = try Self.importTree(dir.file("whole.mbtiles"))
        _ = try ArchiveMerger.run(inputs: mbtilesShards, destination: dir.file("merged.mbtiles"))
        let a = try MBTilesArchive(path: dir.file("whole.mbtiles")), b = try MBTilesArchive(path: dir.file("merged.mbtiles"))
        #expect(try a.aggregateTilesHash() == b.aggregateTilesHash())
        #expect(try a.metadata() == b.metadata())
    }

    @Test func duplicatesAreStoredOnceOrNamedOrResolved() throws {
        let dir = try TemporaryDirectory()
        func write(_ name: String, _ tiles: [(TileCoordinate, [UInt8])]) throws -> String {
            let path = dir.file(name)
            let writer = try PMTilesWriter(destination: path, metadata: TileMetadata(["name": name, "format": "png"]))
            for (t, bytes) in tiles { try writer.addTile(at: t, bytes: bytes) }
            try writer.finish()
            return path
        }
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        let t0 = TileCoordinate(uncheckedZoom: 0, x: 0, y: 0), t1 = TileCoordinate(uncheckedZoom: 1, x: 1, y: 0)
        let a = try write("a.pmtiles", [(t0, png + [1]), (t1, png + [2])])
        let b = try write("b.pmtiles", [(t1, png + [2])])
        let c = try write("c.pmtiles", [(t1, png + [3])])
        let same = try ArchiveMerger.run(inputs: [a, b], destination: dir.file("ab.pmtiles"))
        #expect(same.tiles == 2 && same.duplicates == 1)
        #expect {
            _ = try ArchiveMerger.run(inputs: [a, c], destination: dir.file("ac.pmtiles"))
        } throws: { error in
            "\(error)".contains("tile 1/1/0 differs between \(a) and \(c)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("ac.pmtiles")))
        var options = MergeOptions()
        options.onDuplicate = .first
        _ = try ArchiveMerger.run(inputs: [a, c], destination: dir.file("first.pmtiles"), options: options)
        #expect(try PMTilesArchive(path: dir.file("first.pmtiles")).tileData(at: t1) == Data(png + [2]))
        options.onDuplicate = .last
        _ = try ArchiveMerger.run(inputs: [a, c], destination: dir.file("last.mbtiles"), options: options)
        #expect(try MBTilesArchive(path: dir.file("last.mbtiles")).tileData(at: t1) == Data(png + [3]))
        #expect(try MBTilesArchive(path: dir.file("last.mbtiles")).metadata().name == "a.pmtiles")
    }

    /// A region from each kind of archive into each kind: exactly the tiles the box touches.
    @Test(arguments: ["pmtiles/stamen_toner_raster_CC-BY+ODbL_z3.pmtiles", "node-mbtiles/plain_1.mbtiles", "bundle"])
    func extractCopiesTheRegionOnly(_ fixture: String) throws {
        let dir = try TemporaryDirectory()
        var source = TestSupport.fixture(fixture)
        if fixture == "bundle" {
            source = dir.file("source.tilepack")
            _ = try ArchiveConverter.run(
                source: TestSupport.fixture("node-mbtiles/plain_1.mbtiles"), destination: source, options: ConvertOptions())
        }
        let all = try Self.tiles(openTileArchive(path: source))
        let box = GeoBoundingBox(west: -20, south: 30, east: 40, north: 70)
        for (name, minZoom) in [("out.pmtiles", 1), ("out.mbtiles", 0), ("out.tilepack", 2)] {
            var options = ExtractOptions()
            options.bounds = box
            options.minZoom = minZoom
            options.maxZoom = 3
            let report = try TileExtractor.run(source: source, destination: dir.file(name), options: options)
            let expected = all.filter { (t, _) in t.zoom >= minZoom && t.zoom <= 3 && (try? box.intersects(t)) == true }
            let got = try Self.tiles(openTileArchive(path: dir.file(name)))
            #expect(got == expected, "\(name) from \(fixture)")
            #expect(report.tiles == expected.count && !expected.isEmpty)
            let metadata = try openTileArchive(path: dir.file(name)).metadata()
            #expect(metadata[TileMetadata.Key.minZoom] == String(minZoom) && metadata[TileMetadata.Key.maxZoom] == "3")
        }
    }
}
