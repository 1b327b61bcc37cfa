import Foundation
import Testing
import TilepackCore
import TilepackImaging
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

@testable import TilepackServer
@_spi(TilepackInternal) import TilepackCompression

/// The real server on a loopback port, spoken to with raw HTTP/1.1.
@Suite struct ServerLoopbackTests {
    /// A small JSON-tile bundle with holes: tiles at 2/1/1 and 3/2/2, declared zooms 0-3 and
    /// bounds of the middle of the world.
    static func sparseBundle(_ directory: TemporaryDirectory, name: String = "sparse") throws -> String {
        let path = directory.file("\(name).tilepack")
        var metadata = TileMetadata()
        metadata.setMinZoom(0)
        metadata.setMaxZoom(3)
        metadata.setBounds(GeoBoundingBox(west: -90, south: -45, east: 90, north: 45))
        metadata.name = "Sparse <test>"
        metadata.attribution = "<a href=\"x\">attribution</a>"
        try ServerFixtures.writeBundle(
            path, content: .encoded(.json), metadata: metadata,
            tiles: [
                (try TileCoordinate(zoom: 2, x: 1, y: 1), Array("{\"t\":\"2/1/1\"}".utf8)),
                (try TileCoordinate(zoom: 3, x: 2, y: 2), Array("{\"t\":\"3/2/2\"}".utf8)),
            ])
        return path
    }

    @Test func everyFixtureArchiveServesItsBytes() async throws {
        let root = TestSupport.fixturesRoot
        let files = try FileManager.default.subpathsOfDirectory(atPath: root.path)
            .filter { $0.hasSuffix(".mbtiles") || $0.hasSuffix(".pmtiles") || $0.hasSuffix(".tilepack") }.sorted()
        #expect(files.count >= 30)
        var served = 0
        for file in files {
            let path = root.appendingPathComponent(file).path
            struct Enough: Error {}
            var tiles: [(TileCoordinate, [UInt8])] = []
            var readable = true
            do {
                let archive = try openTileArchive(path: path)
                _ = try archive.zoomLevels()
                do {
                    try archive.forEachTile { tile, bytes in
                        tiles.append((tile, Array(bytes)))
                        if tiles.count == 60 { throw Enough() }
                    }
                } catch is Enough {} catch { readable = !tiles.isEmpty }  // a NULL tile stops the walk: serve what came before
            } catch {
                // Not an archive tilepack opens: the server refuses to start, naming the file.
                #expect(throws: TileServerError.self) { try TileServer(options: TileServerOptions(archivePaths: [path])) }
                do { _ = try TileServer(options: TileServerOptions(archivePaths: [path])) } catch {
                    #expect(error.message.contains(path), "\(error.message)")
                    // A PMTiles file (by its magic) is named as one, until a PMTiles reader opens it.
                    if FileManager.default.contents(atPath: path)?.starts(with: Array("PMTiles".utf8)) == true {
                        #expect(error.message.contains("PMTiles"), "\(error.message)")
                    }
                }
                continue
            }
            guard readable else { continue }
            let server = try await RunningServer.start(TileServerOptions(archivePaths: [path]))
            let name = percentEncodedSegment(ArchiveCatalog.name(of: path))
            let generation = try #require(server.server.service.catalog.slots.first?.current)
            for (tile, bytes) in tiles {
                let answer = try await server.get(
                    "/\(name)/\(tile.zoom)/\(tile.x)/\(tile.y).\(generation.extensions.first ?? "bin")",
                    headers: ["Accept-Encoding": "gzip"])
                #expect(answer.status == 200, "\(file) \(tile): \(answer.status) \(answer.text)")
                #expect(answer.body == bytes, "\(file) \(tile): the body differs from the stored tile")
                #expect(answer.header("Content-Type") == generation.servedFormat?.mimeType ?? "application/octet-stream")
                #expect(answer.header("ETag")?.hasPrefix("\"") == true)
            }
            let tileJSON = try await server.get("/\(name).json")
            #expect(tileJSON.status == 200)
            #expect((try? JSONSerialization.jsonObject(with: Data(tileJSON.body))) != nil, "\(file): TileJSON does not parse")
            served += 1
            await server.stop()
        }
        #expect(served >= 20)
    }

    @Test func tileJSONDescribesTheArchive() async throws {
        let directory = try TemporaryDirectory()
        let server = try await RunningServer.start(
            TileServerOptions(archivePaths: [Self.sparseBundle(directory), ServerFixtures.sampleBundle]))
        defer { Task { await server.stop() } }
        let answer = try await server.get("/sparse.json", headers: ["Host": "tiles.example:8080"])
        #expect(answer.status == 200)
        #expect(answer.header("Content-Type") == "application/json")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])
        #expect(json["tilejson"] as? String == "3.0.0")
        #expect(json["tiles"] as? [String] == ["http://tiles.example:8080/sparse/{z}/{x}/{y}.json"])
        #expect(json["name"] as? String == "Sparse <test>")
        #expect(json["format"] as? String == "json")
        #expect(json["minzoom"] as? Int == 0)
        #expect(json["maxzoom"] as? Int == 3)
        #expect(json["bounds"] as? [Double] == [-90, -45, 90, 45])
        #expect((json["center"] as? [Double])?.count == 3)
        #expect(json["attribution"] as? String == "<a href=\"x\">attribution</a>")
        // A Host that is not a plain host name is not echoed: the listening address is used.
        let hostile = try await server.get("/sample.json", headers: ["Host": "evil\"/><x"])
        let tiles = try #require((try JSONSerialization.jsonObject(with: Data(hostile.body)) as? [String: Any])?["tiles"] as? [String])
        #expect(tiles == ["http://127.0.0.1:\(server.port)/sample/{z}/{x}/{y}.png"])
        // Vector archives carry vector_layers from the metadata's json.
        let vector = try await RunningServer.start(
            TileServerOptions(
                archivePaths: [TestSupport.fixture("martin/world_cities.mbtiles")], publicURL: "https://maps.example/base/"))
        defer { Task { await vector.stop() } }
        let vectorAnswer = try await vector.get("/world_cities.json")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(vectorAnswer.body)) as? [String: Any])
        #expect(document["tiles"] as? [String] == ["https://maps.example/base/world_cities/{z}/{x}/{y}.pbf"])
        #expect(document["format"] as? String == "pbf")
        #expect(((document["vector_layers"] as? [[String: Any]])?.first?["id"] as? String)?.isEmpty == false)
    }

    @Test func etagsHeadAndConditionalRequests() async throws {
        let directory = try TemporaryDirectory()
        let mbtiles = try ServerFixtures.sampleMBTiles(in: directory)
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [ServerFixtures.sampleBundle, mbtiles]))
        defer { Task { await server.stop() } }
        let bundle = try BundleArchive(path: ServerFixtures.sampleBundle)
        let tile = try TileCoordinate(zoom: 3, x: 5, y: 2)
        let stored = try #require(try bundle.tileData(at: tile))
        for name in ["sample", "sample-mbtiles"] {
            let target = "/\(name)/3/5/2.png"
            let get = try await server.get(target)
            #expect(get.status == 200)
            #expect(get.body == Array(stored))
            #expect(get.header("Cache-Control") == TileServerOptions.defaultCacheControl)
            let etag = try #require(get.header("ETag"))
            let again = try await server.get(target)
            #expect(again.header("ETag") == etag, "the ETag of an unchanged tile is stable")
            let head = try await server.get(target, method: "HEAD")
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            #expect(head.header("Content-Length") == String(stored.count))
            #expect(head.header("ETag") == etag)
            #expect(head.header("Content-Type") == "image/png")
            let notModified = try await server.get(target, headers: ["If-None-Match": "\"other\", \(etag)"])
            #expect(notModified.status == 304)
            #expect(notModified.body.isEmpty)
            #expect(notModified.header("ETag") == etag)
            #expect(notModified.header("Content-Length") == nil)
            let changed = try await server.get(target, headers: ["If-None-Match": "\"something-else\""])
            #expect(changed.status == 200)
            #expect(changed.body == Array(stored))
            // Another tile has another tag; a missing tile is never 304, whatever the client sends.
            let other = try await server.get("/\(name)/3/5/3.png")
            #expect(other.header("ETag") != etag)
            let missing = try await server.get("/\(name)/5/0/0.png", headers: ["If-None-Match": "*"])
            #expect(missing.status == 404)
        }
        // The bundle's tag is the payload's CRC and length: the same tile in another bundle file has the same tag.
        let copy = directory.file("copy.tilepack")
        try FileManager.default.copyItem(atPath: ServerFixtures.sampleBundle, toPath: copy)
        let second = try await RunningServer.start(TileServerOptions(archivePaths: [copy]))
        defer { Task { await second.stop() } }
        let copied = try await second.get("/copy/3/5/2.png")
        let original = try await server.get("/sample/3/5/2.png")
        #expect(copied.header("ETag") == original.header("ETag"))
    }

    @Test func gzipIsNegotiated() async throws {
        let path = TestSupport.fixture("martin/world_cities.mbtiles")
        let archive = try openTileArchive(path: path)
        let tile = try TileCoordinate(zoom: 0, x: 0, y: 0)
        let stored = try #require(try archive.tileData(at: tile))
        try #require(stored.withUnsafeBytes { TileFormat.isGzip($0) }, "the fixture stores gzip tiles")
        var inflated: [UInt8] = []
        let count = try stored.withUnsafeBytes { try Gzip.inflate($0, into: &inflated, limit: 1 << 26).get() }
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [path]))
        defer { Task { await server.stop() } }
        for ext in ["pbf", "mvt"] {
            let gzip = try await server.get("/world_cities/0/0/0.\(ext)", headers: ["Accept-Encoding": "br, gzip;q=0.5"])
            #expect(gzip.status == 200)
            #expect(gzip.header("Content-Encoding") == "gzip")
            #expect(gzip.header("Vary") == "Accept-Encoding")
            #expect(gzip.header("Content-Type") == "application/vnd.mapbox-vector-tile")
            #expect(gzip.body == Array(stored))
            for refusal in [[:], ["Accept-Encoding": "gzip;q=0"], ["Accept-Encoding": "identity"]] {
                let plain = try await server.get("/world_cities/0/0/0.\(ext)", headers: refusal)
                #expect(plain.status == 200)
                #expect(plain.header("Content-Encoding") == nil)
                #expect(plain.body == Array(inflated[0..<count]), "\(refusal)")
                #expect(plain.header("ETag") != gzip.header("ETag"), "two representations, two tags")
                let head = try await server.get("/world_cities/0/0/0.\(ext)", method: "HEAD", headers: refusal)
                #expect(head.header("Content-Length") == String(count))
            }
        }
        // An extension the archive does not serve is a 404 that says which to use.
        let wrong = try await server.get("/world_cities/0/0/0.png")
        #expect(wrong.status == 404)
        #expect(wrong.text.contains(".pbf or .mvt"))
    }

    @Test func missingTilesFollowOneRule() async throws {
        let directory = try TemporaryDirectory()
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [Self.sparseBundle(directory)]))
        defer { Task { await server.stop() } }
        #expect(try await server.get("/sparse/2/1/1.json").status == 200)
        // Inside the zooms and bounds, no tile: 204, no body, cacheable like a tile.
        let inside = try await server.get("/sparse/2/2/2.json")
        #expect(inside.status == 204)
        #expect(inside.body.isEmpty)
        #expect(inside.header("Cache-Control") == TileServerOptions.defaultCacheControl)
        #expect(try await server.get("/sparse/0/0/0.json").status == 204)
        #expect(try await server.get("/sparse/2/1/1.json", method: "HEAD").status == 200)
        #expect(try await server.get("/sparse/2/2/2.json", method: "HEAD").status == 204)
        // Outside the bounds or the zooms, or not a tile at all: 404 with the reason.
        let outside = try await server.get("/sparse/2/0/0.json")
        #expect(outside.status == 404)
        #expect(outside.text.contains("outside"))
        #expect(try await server.get("/sparse/4/8/8.json").status == 404)
        #expect(try await server.get("/sparse/2/4/0.json").status == 404)
        #expect(try await server.get("/sparse/31/0/0.json").status == 404)
        #expect(try await server.get("/nothing/0/0/0.json").status == 404)
    }

    @Test func pathTricksNeverReachTheFileSystem() async throws {
        let directory = try TemporaryDirectory()
        // A file beside the archive that a path trick would aim at.
        try Data("SECRET".utf8).write(to: URL(fileURLWithPath: directory.file("secret.txt")))
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [Self.sparseBundle(directory)]))
        defer { Task { await server.stop() } }
        let targets = [
            "/../secret.txt", "/sparse/../secret.txt", "/sparse/../../etc/passwd", "/%2e%2e/secret.txt",
            "/sparse/%2e%2e/%2e%2e/etc/passwd", "/sparse/..%2Fsecret.txt", "/%2Fetc%2Fpasswd", "//etc/passwd",
            "/etc/passwd", "\(directory.file("secret.txt"))", "/_/leaflet/../../../../etc/passwd",
            "/_/leaflet/%2e%2e/%2e%2e/etc/passwd", "/sparse/2/1/..%2F..%2F1.json", "/secret.txt", "/secret.json",
            "/sparse/2/1/1.json/../../../secret.txt",
        ]
        for target in targets {
            let answer = try await server.get(target)
            #expect([301, 404].contains(answer.status), "\(target): \(answer.status)")
            #expect(!answer.text.contains("SECRET") && !answer.text.contains("root:"), "\(target) leaked a file")
        }
        // An absolute-form request target is read as its path, and that is no archive's.
        let absolute = try await server.get("http://127.0.0.1/etc/passwd")
        #expect(absolute.status == 404)
        #expect(!absolute.text.contains("root:"))
        #expect(try await server.get("/sparse/2/1/1.json", method: "POST").status == 405)
    }

    @Test func tokenIsRequiredOnEveryRequest() async throws {
        let directory = try TemporaryDirectory()
        let server = try await RunningServer.start(
            TileServerOptions(
                archivePaths: [Self.sparseBundle(directory)], corsOrigins: ["https://app.example"], token: "s3cret"))
        defer { Task { await server.stop() } }
        for target in ["/sparse/2/1/1.json", "/sparse.json", "/", "/sparse/", "/_/health", "/_/metrics", "/_/leaflet/leaflet.js"] {
            let denied = try await server.get(target)
            #expect(denied.status == 401, "\(target)")
            #expect(denied.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
        }
        #expect(try await server.get("/sparse/2/1/1.json", headers: ["Authorization": "Bearer wrong"]).status == 401)
        #expect(try await server.get("/sparse/2/1/1.json?token=wrong").status == 401)
        let bearer = try await server.get("/sparse/2/1/1.json", headers: ["Authorization": "Bearer s3cret"])
        #expect(bearer.status == 200)
        #expect(bearer.header("Cache-Control") == TileServerOptions.privateCacheControl)
        #expect(try await server.get("/sparse/2/1/1.json?token=s3cret").status == 200)
        // Links in TileJSON carry the token the request came with.
        let tileJSON = try await server.get("/sparse.json?token=s3cret")
        #expect(tileJSON.text.contains("/sparse/{z}/{x}/{y}.json?token=s3cret"))
        // A CORS preflight carries no credentials: it is answered without the token.
        let preflight = try await server.get(
            "/sparse/2/1/1.json", method: "OPTIONS",
            headers: [
                "Origin": "https://app.example", "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization",
            ])
        #expect(preflight.status == 204)
        #expect(preflight.header("Access-Control-Allow-Origin") == "https://app.example")
        #expect(preflight.header("Access-Control-Allow-Headers")?.contains("Authorization") == true)
        let cors = try await server.get("/sparse/2/1/1.json", headers: ["Origin": "https://app.example", "Authorization": "Bearer s3cret"])
        #expect(cors.header("Access-Control-Allow-Origin") == "https://app.example")
        #expect(cors.header("Vary")?.contains("Origin") == true)
        let stranger = try await server.get(
            "/sparse/2/1/1.json", headers: ["Origin": "https://evil.example", "Authorization": "Bearer s3cret"])
        #expect(stranger.header("Access-Control-Allow-Origin") == nil)
    }

    @Test func corsForAnyOrigin() async throws {
        let directory = try TemporaryDirectory()
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [Self.sparseBundle(directory)], corsOrigins: ["*"]))
        defer { Task { await server.stop() } }
        let answer = try await server.get("/sparse/2/1/1.json", headers: ["Origin": "https://anyone.example"])
        #expect(answer.header("Access-Control-Allow-Origin") == "*")
        #expect(answer.header("Access-Control-Expose-Headers")?.contains("ETag") == true)
        let plain = try await RunningServer.start(TileServerOptions(archivePaths: [Self.sparseBundle(directory, name: "other")]))
        let none = try await plain.get("/other/2/1/1.json", headers: ["Origin": "https://anyone.example"])
        #expect(none.header("Access-Control-Allow-Origin") == nil, "no CORS unless asked for")
        await plain.stop()
    }

    @Test func pagesHealthAndMetrics() async throws {
        let directory = try TemporaryDirectory()
        let server = try await RunningServer.start(
            TileServerOptions(archivePaths: [Self.sparseBundle(directory), ServerFixtures.sampleBundle]))
        defer { Task { await server.stop() } }
        let index = try await server.get("/")
        #expect(index.status == 200)
        #expect(index.header("Content-Type") == "text/html; charset=utf-8")
        #expect(index.text.contains("href=\"http://127.0.0.1:\(server.port)/sample/\""))
        #expect(index.text.contains("sparse.json"))
        let preview = try await server.get("/sample/")
        #expect(preview.status == 200)
        #expect(preview.text.contains("/_/leaflet/leaflet.js"))
        #expect(!preview.text.contains("https://unpkg") && !preview.text.contains("cdn"), "no script from the internet")
        // Archive metadata is escaped in pages: the name "<test>" never becomes markup.
        let sparse = try await server.get("/sparse/")
        #expect(!sparse.text.contains("Sparse <test>") || !sparse.text.contains("<test>"))
        #expect(!sparse.text.contains("<a href=\"x\">"))
        let redirect = try await server.get("/sample")
        #expect(redirect.status == 301)
        #expect(redirect.header("Location") == "/sample/")
        // In CI, Debian's libjs-leaflet is installed by .ci/run: the assets must be served.
        if ProcessInfo.processInfo.environment["CI"] == "true"
            || FileManager.default.fileExists(atPath: TileServerOptions.defaultLeafletPath + "/leaflet.js")
        {
            let script = try await server.get("/_/leaflet/leaflet.js")
            #expect(script.status == 200)
            #expect(script.body.count > 100_000)
            #expect(try await server.get("/_/leaflet/images/layers.png").header("Content-Type") == "image/png")
        }
        let health = try await server.get("/_/health")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(health.body)) as? [String: Any])
        #expect(document["status"] as? String == "ok")
        #expect((document["archives"] as? [[String: Any]])?.map { $0["name"] as? String } == ["sparse", "sample"])
        _ = try await server.get("/sparse/2/1/1.json")
        _ = try await server.get("/sparse/2/0/0.json")
        let metrics = try await server.get("/_/metrics")
        #expect(metrics.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        let text = metrics.text
        #expect(text.contains("tilepack_http_requests_total{status=\"200\"}"))
        #expect(text.contains("tilepack_http_requests_total{status=\"404\"} 1"), "\(text)")
        #expect(text.contains("tilepack_http_response_body_bytes_total"))
        #expect(text.contains("tilepack_http_request_duration_seconds_bucket"))
    }

    @Test func previewSaysWhenLeafletIsMissing() async throws {
        let directory = try TemporaryDirectory()
        let server = try await RunningServer.start(
            TileServerOptions(
                archivePaths: [Self.sparseBundle(directory)], leafletPath: directory.file("no-leaflet-here")))
        defer { Task { await server.stop() } }
        let page = try await server.get("/sparse/")
        #expect(page.status == 200)
        #expect(page.text.contains("Leaflet was not found in \(directory.file("no-leaflet-here"))"))
        #expect(page.text.contains("libjs-leaflet"))
        #expect(try await server.get("/_/leaflet/leaflet.js").status == 404)
    }

    @Test func rawBitmapBundlesAreServedAsPNG() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("raw.tilepack")
        let layout = RawBitmapLayout(pixelFormat: .rgba8888, width: 64, height: 64)
        var pixels = [UInt8](repeating: 255, count: 64 * 64 * 4)
        for i in 0..<(64 * 64) {
            pixels[4 * i] = UInt8(i % 64 * 4)
            pixels[4 * i + 1] = UInt8(i / 64 * 4)
        }
        try ServerFixtures.writeBundle(path, content: .rawBitmap(layout), tiles: [(try TileCoordinate(zoom: 1, x: 1, y: 0), pixels)])
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [path]))
        defer { Task { await server.stop() } }
        let answer = try await server.get("/raw/1/1/0.png")
        #expect(answer.status == 200)
        #expect(answer.header("Content-Type") == "image/png")
        var decoded = [UInt8](repeating: 0, count: pixels.count)
        try answer.body.withUnsafeBytes { bytes in
            try decoded.withUnsafeMutableBytes {
                try ImageDecoder.decode(bytes, into: $0, pixelFormat: .rgba8888, expectedWidth: 64, expectedHeight: 64)
            }
        }
        #expect(decoded == pixels)
        let etag = try #require(answer.header("ETag"))
        #expect(try await server.get("/raw/1/1/0.png", headers: ["If-None-Match": etag]).status == 304)
        #expect(try await server.get("/raw/1/1/0.png").body == answer.body, "the cached PNG is the same")
        #expect(server.server.service.encodedTiles.byteCount == answer.body.count)
        #expect(try await server.get("/raw/1/0/0.png").status == 204)
    }
}
