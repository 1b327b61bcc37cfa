import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

/// Real archives written by other tools, converted to bundles and read back tile for tile.
@Suite
struct BundleFixtureTests {
    @Test(arguments: [
        "martin/world_cities.mbtiles",  // gzip MVT
        "martin/uncompressed_mvt.mbtiles",  // raw MVT
        "martin/geography-class-png.mbtiles",  // PNG rasters
        "martin/geography-class-jpg.mbtiles",  // JPEG rasters
        "martin/json.mbtiles",
        "node-mbtiles/plain_1.mbtiles",  // 285 tiles
        "node-mbtiles/some-empty-tiles.mbtiles",
    ])
    func convertedFixtureReadsBackIdentically(_ name: String) throws {
        let source = try MBTilesArchive(path: TestSupport.fixture(name))
        let content = try #require(source.content)
        let dir = try TemporaryDirectory()
        let path = dir.file("converted.tilepack")
        let writer = try BundleWriter(destination: path, content: content, metadata: try source.metadata())
        var expected: [TileCoordinate: Data] = [:]
        try source.forEachTile { tile, bytes in
            expected[tile] = Data(bytes)
            try writer.addTile(at: tile, bytes: bytes)
        }
        let summary = try writer.finish()
        #expect(summary.tileCount == expected.count)
        #expect(summary.payloadCount == Set(expected.values).count, "one payload per distinct tile")

        let bundle = try BundleArchive(path: path)
        #expect(bundle.content == content)
        #expect(try bundle.metadata() == source.metadata())
        #expect(try bundle.zoomLevels().map(\.tileCount) == source.zoomLevels().map(\.tileCount))
        var seen = 0
        var previous: TileCoordinate?
        try bundle.forEachTile { tile, bytes in
            #expect(expected[tile] == Data(bytes), "\(tile)")
            if let previous { #expect(previous < tile) }
            previous = tile
            seen += 1
        }
        #expect(seen == expected.count)
        for (tile, data) in expected { #expect(try bundle.tileData(at: tile) == data) }
        _ = try bundle.verify()
    }
}
