import Foundation
import Testing
import TilepackChecksum
import TilepackCore
import TilepackOperations
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

/// `export --maplibre-offline` (issue 31 item 6), read back by `tools/maplibre/read_offline.py`,
/// a reader written from maplibre-native's schema and database code.
@Suite struct MapLibreOfflineTests {
    static func read(_ path: String) throws -> [String: Any]? {
        let run = try TestSupport.runPython(script: "tools/maplibre/read_offline.py", [path])
        guard run.status == 0 else {
            Issue.record("read_offline.py: \(run.errors)")
            return nil
        }
        let data = run.output
        return try JSONSerialization.jsonObject(with: data) as? [String: Any]
    }

    /// The archive's tiles as the reader reports them: sha256 of each tile's bytes, ungzipped.
    static func expected(_ path: String, where keep: (TileCoordinate) -> Bool = { _ in true }) throws -> [String: String] {
        var tiles: [String: String] = [:]
        try ArchiveLocation.open(path).forEachTile { tile, bytes in
            guard keep(tile) else { return }
            var body = Array(bytes)
            if TileFormat.isGzip(bytes) { body = try Gzip.decompress(bytes, limit: 1 << 26).get() }
            tiles["\(tile.zoom)/\(tile.x)/\(tile.y)"] = Digest.hex(Digest.hash(.sha256, body))
        }
        return tiles
    }

    @Test func aRasterArchiveWithTheStyleItNeeds() throws {
        let dir = try TemporaryDirectory()
        let source = TestSupport.fixture("node-mbtiles/plain_1.mbtiles")
        var options = MapLibreOfflineOptions(styleURL: "https://maps.example.com/styles/plain.json")
        options.pixelRatio = 2
        let report = try MapLibreOfflineExporter.run(source: source, destination: dir.file("pack.db"), options: options)
        let pack = try #require(try Self.read(dir.file("pack.db")))
        let tiles = try #require(pack["tiles"] as? [String: String])
        #expect(tiles == (try Self.expected(source)) && report.tiles == 285)
        let definition = try #require(pack["definition"] as? [String: Any])
        #expect(definition["style_url"] as? String == "https://maps.example.com/styles/plain.json")
        #expect(
            definition["pixel_ratio"] as? Double == 2 && definition["min_zoom"] as? Double == 0 && definition["max_zoom"] as? Double == 4)
        #expect(pack["templates"] as? [String] == ["https://maps.example.com/styles/tilepack/{z}/{x}/{y}.png"])
        let style = try #require(pack["style"] as? [String: Any])
        let layers = try #require(style["layers"] as? [[String: Any]])
        #expect(layers.count == 1 && layers[0]["type"] as? String == "raster" && layers[0]["source"] as? String == "tilepack")
    }

    @Test func vectorTilesWithTheUsersStyleInARegion() throws {
        let dir = try TemporaryDirectory()
        let source = TestSupport.fixture("martin/world_cities.mbtiles")
        let style =
            #"{"version":8,"sources":{"cities":{"type":"vector","url":"https://tiles.example.com/cities.json"}},"layers":[{"id":"c","type":"circle","source":"cities","source-layer":"cities"}]}"#
        var options = MapLibreOfflineOptions(styleURL: "https://maps.example.com/styles/cities.json")
        options.style = Data(style.utf8)
        options.sourceName = "cities"
        options.region = try GeoRegion(
            geoJSON: Data(#"{"type":"Polygon","coordinates":[[[-20,30],[40,30],[40,70],[-20,70],[-20,30]]]}"#.utf8))
        options.maxZoom = 5
        _ = try MapLibreOfflineExporter.run(source: source, destination: dir.file("pack.db"), options: options)
        let pack = try #require(try Self.read(dir.file("pack.db")))
        let region = try #require(options.region)
        let tiles = try #require(pack["tiles"] as? [String: String])
        let wanted = try Self.expected(source) { tile in
            tile.zoom <= 5 && (try? RegionCover(region: region, zoom: tile.zoom).contains(tile)) == true
        }
        #expect(tiles == wanted && !tiles.isEmpty)
        // The TileJSON stored under the style's source url, with the archive's vector layers.
        let tilejson = try #require((pack["tilejsons"] as? [String: Any])?["cities"] as? [String: Any])
        #expect((tilejson["vector_layers"] as? [Any])?.isEmpty == false)
        #expect(pack["templates"] as? [String] == ["https://maps.example.com/styles/cities/{z}/{x}/{y}.pbf"])
        // Vector tiles without a style that draws them are refused.
        var bare = MapLibreOfflineOptions(styleURL: "https://maps.example.com/s.json")
        bare.overwrite = true
        #expect(throws: OperationError.self) {
            try MapLibreOfflineExporter.run(source: source, destination: dir.file("b.db"), options: bare)
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("b.db")))
    }
}
