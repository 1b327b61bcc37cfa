import Foundation
import Testing
import TilepackChecksum
import TilepackCore
import TilepackHTTP
import TilepackOperations
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport
@_spi(TilepackInternal) import TilepackCompression

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

    /// A vector style of city labels: glyphs and a sprite, as `--style` gives it.
    static func labelStyle(glyphs: String, sprite: String) -> [String: Any] {
        [
            "version": 8, "glyphs": glyphs, "sprite": sprite,
            "sources": ["cities": ["type": "vector", "url": "https://tiles.example.com/cities.json"]],
            "layers": [
                ["id": "dots", "type": "circle", "source": "cities", "source-layer": "cities"],
                [
                    "id": "names", "type": "symbol", "source": "cities", "source-layer": "cities",
                    "layout": ["text-field": "{name}", "text-font": ["Noto Sans Regular"], "icon-image": "dot"],
                ],
            ],
        ]
    }

    /// Font stacks and sprite files as maplibre-native's offline download asks for them.
    @Test func glyphsAndSpritesAreListedAsMapLibreAsksForThem() throws {
        var style = Self.labelStyle(
            glyphs: "https://f.example/fonts/{fontstack}/{range}.pbf", sprite: "https://s.example/sprites/basic?key=k")
        var layers = try #require(style["layers"] as? [[String: Any]])
        layers.append(["id": "default-font", "type": "symbol", "layout": ["text-field": "x"]])
        layers.append([
            "id": "by-zoom", "type": "symbol",
            "layout": [
                "text-field": "x", "text-font": ["step", ["zoom"], ["literal", ["A Bold"]], 10, ["literal", ["A Regular", "B"]]],
            ],
        ])
        layers.append(["id": "by-feature", "type": "symbol", "layout": ["text-field": "x", "text-font": ["get", "font"]]])
        layers.append(["id": "icons-only", "type": "symbol", "layout": ["icon-image": "dot"]])
        style["layers"] = layers
        let (resources, warnings) = MapLibreStyleResources.list(style: style, pixelRatio: 2)
        let glyphs = resources.filter { $0.kind == .glyphs }
        let stacks = Set(glyphs.compactMap(\.fontStack))
        #expect(stacks == ["Noto Sans Regular", MapLibreStyleResources.defaultFontStack, "A Bold", "A Regular,B"])
        // 256 ranges less the CJK ideographs (U+4E00-U+9FFF, 82 ranges) and Hangul (U+AC00-U+D7AF, 44).
        #expect(glyphs.count == 4 * 130)
        let urls = Set(resources.map(\.url))
        #expect(urls.contains("https://f.example/fonts/Open%20Sans%20Regular%2CArial%20Unicode%20MS%20Regular/0-255.pbf"))
        #expect(urls.contains("https://f.example/fonts/A%20Regular%2CB/65280-65535.pbf"))
        #expect(
            !urls.contains("https://f.example/fonts/A%20Bold/19968-20223.pbf")
                && urls.contains("https://f.example/fonts/A%20Bold/19712-19967.pbf"))
        let sprites = resources.filter { $0.kind != .glyphs }.map { "\($0.kind.rawValue) \($0.url)" }
        #expect(sprites == ["6 https://s.example/sprites/basic@2x.json?key=k", "5 https://s.example/sprites/basic@2x.png?key=k"])
        #expect(warnings.count == 1 && warnings[0].contains("'by-feature'"))
    }

    /// The labels' glyphs and the icons' sprite are stored from the style's URLs (a loopback
    /// server), checked by the independent reader; ranges the font lacks are left out and counted;
    /// an error page served with status 200 for the sprite is an error naming its URL.
    @Test func glyphsAndSpritesFromTheStylesURLs() async throws {
        let dir = try TemporaryDirectory()
        let png = try Data(contentsOf: URL(fileURLWithPath: TestSupport.packageRoot.appendingPathComponent("samples/tiles/2/1/1.png").path))
        let glyph = Data([0x0A, 0x11]) + Data("Noto Sans Regular".utf8)
        let brokenSprite = Locked(false)
        let server = try LoopbackHTTPServer { request in
            switch request.path {
            case "/fonts/Noto%20Sans%20Regular/0-255.pbf", "/fonts/Noto%20Sans%20Regular/256-511.pbf":
                .respond(status: 200, headers: [:], body: glyph)
            case "/sprites/basic.json":
                .respond(status: 200, headers: [:], body: Data(#"{"dot":{"x":0,"y":0,"width":8,"height":8,"pixelRatio":1}}"#.utf8))
            case "/sprites/basic.png":
                brokenSprite.withLock { $0 }
                    ? .respond(status: 200, headers: [:], body: Data("<html>Sorry</html>".utf8))
                    : .respond(status: 200, headers: [:], body: png)
            default: .status(404)
            }
        }
        defer { server.stop() }
        let style = Self.labelStyle(glyphs: "\(server.baseURL)/fonts/{fontstack}/{range}.pbf", sprite: "\(server.baseURL)/sprites/basic")
        let client = TestTransport.available.last!.client()
        let (resources, _) = MapLibreStyleResources.list(style: style, pixelRatio: 1)
        var options = MapLibreOfflineOptions(styleURL: "https://maps.example.com/styles/cities.json")
        options.style = try JSONSerialization.data(withJSONObject: style)
        options.sourceName = "cities"
        options.styleAssets = try await MapLibreStyleResources.load(resources, files: MapLibreAssetFiles(), client: client, retry: .none)
        let report = try MapLibreOfflineExporter.run(
            source: TestSupport.fixture("martin/world_cities.mbtiles"), destination: dir.file("pack.db"), options: options)
        #expect(report.glyphRanges == 2 && report.spriteFiles == 2 && report.missingGlyphRanges == 128)
        let pack = try #require(try Self.read(dir.file("pack.db")))
        let glyphs = try #require(pack["glyphs"] as? [String: String])
        #expect(glyphs["\(server.baseURL)/fonts/Noto%20Sans%20Regular/256-511.pbf"] == Digest.hex(Digest.hash(.sha256, [UInt8](glyph))))
        #expect(glyphs.count == 2 && (pack["missing_glyphs"] as? [String])?.count == 128)
        let sprites = try #require(pack["sprites"] as? [String: String])
        #expect(sprites["\(server.baseURL)/sprites/basic.png"] == Digest.hex(Digest.hash(.sha256, [UInt8](png))))

        brokenSprite.withLock { $0 = true }
        do {
            _ = try await MapLibreStyleResources.load(resources, files: MapLibreAssetFiles(), client: client, retry: .none)
            Issue.record("an HTML page for the sprite was taken")
        } catch {
            #expect("\(error)".contains("\(server.baseURL)/sprites/basic.png") && "\(error)".contains("not a sprite image"))
        }
    }

    /// `--glyphs` and `--sprite` read local files; a font stack that would leave the folder is refused.
    @Test func glyphsAndSpritesFromLocalFiles() async throws {
        let dir = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.file("fonts/Noto Sans Regular"), withIntermediateDirectories: true)
        try Data([0x0A, 0x01, 0x41]).write(to: URL(fileURLWithPath: dir.file("fonts/Noto Sans Regular/0-255.pbf")))
        let png = try Data(contentsOf: URL(fileURLWithPath: TestSupport.packageRoot.appendingPathComponent("samples/tiles/2/1/1.png").path))
        try png.write(to: URL(fileURLWithPath: dir.file("basic@2x.png")))
        try Data("{}".utf8).write(to: URL(fileURLWithPath: dir.file("basic@2x.json")))
        let files = MapLibreAssetFiles(glyphs: dir.file("fonts/{fontstack}/{range}.pbf"), sprite: dir.file("basic"))
        let style = Self.labelStyle(glyphs: "https://f.example/{fontstack}/{range}.pbf", sprite: "https://s.example/basic")
        let loaded = try await MapLibreStyleResources.load(MapLibreStyleResources.list(style: style, pixelRatio: 2).resources, files: files)
        #expect(
            loaded.resources.map(\.0.url).sorted() == [
                "https://f.example/Noto%20Sans%20Regular/0-255.pbf", "https://s.example/basic@2x.json", "https://s.example/basic@2x.png",
            ])
        #expect(loaded.missingGlyphRanges.count == 129)
        // A sprite file that is missing is an error naming it.
        try FileManager.default.removeItem(atPath: dir.file("basic@2x.json"))
        await #expect(throws: OperationError.self) {
            _ = try await MapLibreStyleResources.load(MapLibreStyleResources.list(style: style, pixelRatio: 2).resources, files: files)
        }
        // A font stack naming a path is not looked up outside the fonts folder.
        var sneaky = style
        sneaky["layers"] = [["id": "x", "type": "symbol", "layout": ["text-field": "x", "text-font": ["../../etc"]]]]
        sneaky["sprite"] = nil
        do {
            _ = try await MapLibreStyleResources.load(MapLibreStyleResources.list(style: sneaky, pixelRatio: 1).resources, files: files)
            Issue.record("a font stack with a path was looked up")
        } catch {
            #expect("\(error)".contains("'../../etc' is not a folder name"))
        }
    }
}
