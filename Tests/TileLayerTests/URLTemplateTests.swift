import Foundation
import Synchronization
import Testing
import TilepackCore
import TilepackImaging
import TilepackTestSupport

@testable import TileLayer

/// A real JPEG tile written by TileMill (fixture geography-class-jpg.mbtiles, zoom 0), read with the sqlite3 tool.
func fixtureJPEG() throws -> Data? {
    let path = TestSupport.fixture("martin/geography-class-jpg.mbtiles")
    guard FileManager.default.fileExists(atPath: path), FileManager.default.fileExists(atPath: "/usr/bin/sqlite3") else { return nil }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
    process.arguments = ["-readonly", path, "SELECT hex(tile_data) FROM tiles WHERE zoom_level = 0 LIMIT 1"]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let hex = Array(String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).utf8)
    guard hex.count >= 4, hex.count % 2 == 0 else { return nil }
    func nibble(_ c: UInt8) -> UInt8 { c <= 57 ? c - 48 : c - 55 }
    return Data(stride(from: 0, to: hex.count, by: 2).map { nibble(hex[$0]) << 4 | nibble(hex[$0 + 1]) })
}

@Suite("URL template source (MKTileOverlay)")
struct URLTemplateTests {
    @Test("{x} {y} {z} {scale} replaced; several occurrences; integral scales without a fraction")
    func placeholders() {
        let source = URLTemplateTileSource(urlTemplate: "https://tiles.example/{z}/{x}/{y}@{scale}x.png?x={x}&s={scale}")
        #expect(
            source.url(forTilePath: TilePath(x: 3, y: 2, z: 5, contentScaleFactor: 2))?.absoluteString
                == "https://tiles.example/5/3/2@2x.png?x=3&s=2")
        #expect(
            source.url(forTilePath: TilePath(x: 0, y: 0, z: 0, contentScaleFactor: 1.5))?.absoluteString
                == "https://tiles.example/0/0/0@1.5x.png?x=0&s=1.5")
        #expect(URLTemplateTileSource(urlTemplate: nil).url(forTilePath: TilePath(x: 0, y: 0, z: 0)) == nil)
        #expect(
            URLTemplateTileSource(urlTemplate: "/srv/tiles/{z}/{x}/{y}.png").url(forTilePath: TilePath(x: 1, y: 2, z: 3))
                == URL(fileURLWithPath: "/srv/tiles/3/1/2.png"))
    }

    @Test("defaults: not flipped, minimumZ 0, maximumZ 21, canReplaceMapContent false")
    func defaults() {
        let source = URLTemplateTileSource(urlTemplate: "https://h/{z}/{x}/{y}")
        #expect(!source.isGeometryFlipped && source.minimumZ == 0 && source.maximumZ == 21 && !source.canReplaceMapContent)
        #expect(source.urlTemplate == "https://h/{z}/{x}/{y}")
    }

    @Test("geometryFlipped counts rows from the south: y -> 2^z - 1 - y")
    func flipped() {
        let source = URLTemplateTileSource(urlTemplate: "https://h/{z}/{x}/{y}", isGeometryFlipped: true)
        #expect(source.url(forTilePath: TilePath(x: 1, y: 1, z: 3))?.absoluteString == "https://h/3/1/6")
        #expect(source.url(forTilePath: TilePath(x: 0, y: 0, z: 0))?.absoluteString == "https://h/0/0/0")
        #expect(source.url(forTilePath: TilePath(x: 0, y: 0, z: 1))?.absoluteString == "https://h/1/0/1")
    }

    @Test("{-y} is the TMS row whether or not the source is flipped (Leaflet, QGIS, OpenLayers)")
    func minusY() {
        let source = URLTemplateTileSource(urlTemplate: "https://h/{z}/{x}/{-y}.png")
        #expect(source.url(forTilePath: TilePath(x: 1, y: 1, z: 3))?.absoluteString == "https://h/3/1/6.png")
        let flipped = URLTemplateTileSource(urlTemplate: "https://h/{z}/{x}/{-y}.png", isGeometryFlipped: true)
        #expect(flipped.url(forTilePath: TilePath(x: 1, y: 1, z: 3))?.absoluteString == "https://h/3/1/6.png")
    }

    @Test("{s} takes subdomains[(x + y) % count] (XYZ row, as Leaflet), a, b, c by default; the same tile always the same host")
    func subdomains() {
        let source = URLTemplateTileSource(urlTemplate: "https://{s}.tiles.example/{z}/{x}/{y}.png", isGeometryFlipped: true)
        #expect(source.subdomains == ["a", "b", "c"])
        #expect(source.url(forTilePath: TilePath(x: 1, y: 1, z: 3))?.absoluteString == "https://c.tiles.example/3/1/6.png")
        #expect(source.url(forTilePath: TilePath(x: 2, y: 2, z: 3))?.absoluteString == "https://b.tiles.example/3/2/5.png")
        let two = URLTemplateTileSource(urlTemplate: "https://{s}.h/{z}/{x}/{y}", subdomains: ["t1", "t2"])
        #expect(two.url(forTilePath: TilePath(x: 0, y: 0, z: 1))?.absoluteString == "https://t1.h/1/0/0")
        #expect(two.url(forTilePath: TilePath(x: 1, y: 0, z: 1))?.absoluteString == "https://t2.h/1/1/0")
        #expect(URLTemplateTileSource(urlTemplate: "https://{s}.h/{z}/{x}/{y}", subdomains: []).subdomains == ["a", "b", "c"])
    }

    @Test("minimumZ/maximumZ: tiles outside are never requested")
    func zoomLimits() async throws {
        let directory = try TemporaryDirectory()
        let tiles = (0...3).flatMap { z in (0..<(1 << z)).flatMap { x in (0..<(1 << z)).map { tile(z, x, $0) } } }
        let root = try writeTileTree(directory, tiles: tiles) { _ in green }
        let source = URLTemplateTileSource(urlTemplate: root.path + "/{z}/{x}/{y}.png", minimumZ: 2, maximumZ: 2)
        #expect(!source.mapTileLayer(MapTileLayer(), hasTileAt: tile(1, 0, 0)))
        #expect(source.mapTileLayer(MapTileLayer(), hasTileAt: tile(2, 0, 0)))
        #expect(!source.mapTileLayer(MapTileLayer(), hasTileAt: tile(3, 0, 0)))
        let layer = MapTileLayer(overlay: source)
        layer.setFallbackEnabled(false)
        let view = HeadlessMapView(viewport: ViewportSize(width: 512, height: 512), zoomLevel: 1)
        view.addMapTileLayer(layer)
        #expect(await settledFrame(view).drawn.isEmpty)
        #expect(view.tilePlans()[0].tiles.isEmpty)
        view.zoomLevel = 2
        #expect(await settledFrame(view).drawn.count == 4)
        view.zoomLevel = 3
        #expect(await settledFrame(view).drawn.isEmpty)
    }

    @Test("maximumZ with fallback: deeper views scale up maximumZ tiles; the flip uses the ancestor's zoom")
    func overzoomFlipped() async throws {
        let directory = try TemporaryDirectory()
        // A TMS tree at zoom 1: file row r holds XYZ row 1 - r. North tiles red, south tiles blue.
        let root = directory.url.appendingPathComponent("tms")
        for x in 0..<2 {
            for row in 0..<2 {
                let folder = root.appendingPathComponent("1/\(x)")
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                try pngData(row == 1 ? red : blue).write(to: folder.appendingPathComponent("\(row).png"))
            }
        }
        let source = URLTemplateTileSource(
            urlTemplate: "file://" + root.path + "/{z}/{x}/{y}.png",
            isGeometryFlipped: true, maximumZ: 1)
        let layer = MapTileLayer(overlay: source)
        let view = HeadlessMapView(viewport: ViewportSize(width: 1024, height: 1024), zoomLevel: 2)
        view.addMapTileLayer(layer)
        let frame = await settledFrame(view)
        #expect(frame.drawn.count == 16)
        #expect(frame.drawn.allSatisfy { $0.isApproximate && $0.sourceZoom == 1 })
        #expect(frame.bitmap.pixel(x: 100, y: 100) == red)
        #expect(frame.bitmap.pixel(x: 900, y: 900) == blue)
        #expect(layer.diagnostics.filter { $0.kind == .tileFailed }.isEmpty)
    }

    @Test("canReplaceMapContent makes the layer opaque; false leaves it transparent")
    func canReplaceMapContent() {
        #expect(!MapTileLayer(overlay: URLTemplateTileSource(urlTemplate: "x", canReplaceMapContent: true)).transparent)
        #expect(MapTileLayer(overlay: URLTemplateTileSource(urlTemplate: "x")).transparent)
    }

    @Test("URL building overridable: a quadkey server")
    func overrideURL() async throws {
        final class Quadkeys: URLTemplateTileSource, @unchecked Sendable {
            let root: String
            init(root: String) {
                self.root = root
                super.init(urlTemplate: nil)
            }
            override func url(forTilePath path: TilePath) -> URL? {
                let key = TileCoordinate(validatingZoom: path.z, x: path.x, y: path.y)?.quadkey ?? ""
                return URL(fileURLWithPath: "\(root)/\(key).png")
            }
        }
        let directory = try TemporaryDirectory()
        for (key, color) in [("0", red), ("1", green), ("2", blue), ("3", red)] {
            try pngData(color).write(to: directory.url.appendingPathComponent("\(key).png"))
        }
        let view = HeadlessMapView(viewport: ViewportSize(width: 512, height: 512), zoomLevel: 1)
        view.addMapTileLayer(MapTileLayer(overlay: Quadkeys(root: directory.path)))
        let frame = await settledFrame(view)
        #expect(frame.bitmap.pixel(x: 100, y: 100) == red)
        #expect(frame.bitmap.pixel(x: 400, y: 100) == green)
        #expect(frame.bitmap.pixel(x: 100, y: 400) == blue)
    }

    @Test("loading overridable: tiles made in memory, errors fail the tile")
    func overrideLoad() async throws {
        final class Generated: URLTemplateTileSource, @unchecked Sendable {
            override func loadTile(at path: TilePath) async throws -> Data {
                if path.x == 1 { throw TileLoadError.network(url: "gen", reason: "no tile east") }
                return try pngData(green)
            }
        }
        let layer = MapTileLayer(overlay: Generated(urlTemplate: nil))
        layer.setFallbackEnabled(false)
        let view = HeadlessMapView(viewport: ViewportSize(width: 512, height: 512), zoomLevel: 1)
        view.addMapTileLayer(layer)
        let frame = await settledFrame(view)
        #expect(frame.drawn.map(\.tile.x).sorted() == [0, 0])
        #expect(frame.bitmap.pixel(x: 10, y: 10) == green)
        #expect(layer.diagnostics.contains { $0.kind == .tileFailed && $0.message.contains("no tile east") })
    }

    @Test(
        "http tiles from a loopback server: PNG and JPEG converted to the layer's format; a size below half the tile size and 404 refused")
    func httpTiles() async throws {
        let directory = try TemporaryDirectory()
        let root = directory.url
        for (z, x, y, color, size) in [(1, 0, 0, red, 256), (1, 1, 0, green, 256), (1, 0, 1, blue, 64)] {
            let folder = root.appendingPathComponent("\(z)/\(x)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try pngData(color, size: size).write(to: folder.appendingPathComponent("\(y).png"))
        }
        let jpeg = try fixtureJPEG()
        if let jpeg { try jpeg.write(to: root.appendingPathComponent("0/0/0.png", isDirectory: false).creatingParent()) }

        let server = try LoopbackHTTPServer(files: root)
        defer { server.stop() }
        do {
            let source = URLTemplateTileSource(urlTemplate: server.baseURL + "/{z}/{x}/{y}.png")
            let layer = MapTileLayer(overlay: source)
            layer.setPixelFormat(.bgra8888)
            layer.setFallbackEnabled(false)
            let view = HeadlessMapView(viewport: ViewportSize(width: 512, height: 512), zoomLevel: 1)
            view.addMapTileLayer(layer)
            let frame = await settledFrame(view)
            #expect(Set(server.requests.map(\.path)) == ["/1/0/0.png", "/1/1/0.png", "/1/0/1.png", "/1/1/1.png"])
            #expect(frame.bitmap.pixel(x: 100, y: 100) == red)
            #expect(frame.bitmap.pixel(x: 400, y: 100) == green)
            #expect(frame.drawn.count == 2)
            let failures = layer.diagnostics.filter { $0.kind == .tileFailed }.map(\.message)
            #expect(failures.contains { $0.contains("64x64") && $0.contains("from 128 to 1024 px") })
            #expect(failures.contains { $0.contains("HTTP status 404") })

            if let jpeg {
                let jpegLayer = MapTileLayer(overlay: URLTemplateTileSource(urlTemplate: server.baseURL + "/{z}/{x}/{y}.png"))
                jpegLayer.setPixelFormat(.rgb565)
                let world = HeadlessMapView(viewport: ViewportSize(width: 256, height: 256), zoomLevel: 0)
                world.addMapTileLayer(jpegLayer)
                let jpegFrame = await settledFrame(world)
                #expect(jpegFrame.drawn.count == 1)
                // The same JPEG decoded straight to RGB565 by the imaging module: the layer drew exactly that.
                let expected = try ImageDecoder.decode(jpeg, pixelFormat: .rgb565).converted(to: .rgba8888)
                for (x, y) in [(10, 10), (128, 128), (200, 60), (255, 255)] {
                    #expect(jpegFrame.bitmap.pixel(x: x, y: y) == expected.pixel(x: x, y: y))
                }
            }
        }
    }

    @Test("file loader: missing file, oversize file and unknown scheme are typed errors")
    func loaderErrors() async throws {
        let directory = try TemporaryDirectory()
        await #expect(throws: TileLoadError.self) { try await TileURLLoader.load(URL(fileURLWithPath: directory.file("nope.png"))) }
        let big = directory.file("big.png")
        _ = FileManager.default.createFile(atPath: big, contents: nil)
        let handle = try #require(FileHandle(forWritingAtPath: big))
        try handle.truncate(atOffset: UInt64(TileURLLoader.maximumTileBytes + 1))
        try handle.close()
        await #expect(throws: TileLoadError.tooLarge(url: big, limit: TileURLLoader.maximumTileBytes)) {
            try await TileURLLoader.load(URL(fileURLWithPath: big))
        }
        await #expect(throws: TileLoadError.unsupportedScheme("ftp://h/x.png")) {
            try await TileURLLoader.load(URL(string: "ftp://h/x.png")!)
        }
        let garbage = directory.file("garbage.png")
        _ = FileManager.default.createFile(atPath: garbage, contents: Data("not an image".utf8))
        #expect(throws: TileLoadError.self) {
            try TileDecoding.bitmap(Data("not an image".utf8), tileSize: 256, pixelFormat: .rgba8888, source: garbage)
        }
    }
}

extension URL {
    /// Creates the parent folder and returns the URL.
    func creatingParent() throws -> URL {
        try FileManager.default.createDirectory(at: deletingLastPathComponent(), withIntermediateDirectories: true)
        return self
    }
}
