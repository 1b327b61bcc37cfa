import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

@testable import TilepackPrefetch

@Suite("Prefetch: fetching a region into an MBTiles store")
struct PrefetchFetchTests {
    @Test("a box is fetched whole: every tile stored once, the archive verifies, events in order", arguments: TestTransport.available)
    func fetchBox(_ transport: TestTransport) async throws {
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let path = directory.file("berlin.mbtiles")
        let prefetcher = try MapDataPrefetcher(
            storePath: path, source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration(), transport: transport.forPrefetch)
        let recorder = EventRecorder()
        prefetcher.addListener(recorder)
        let stream = prefetcher.events()
        let request = PrefetchRequest.boundingBox(berlin, zooms: 0...8)
        let expected = try request.cover()
        let (submission, report) = await prefetcher.fetch(request)
        await prefetcher.drainEvents()
        #expect(submission.error == .none && submission.requestId >= 0)
        let result = try #require(report)
        #expect(result.status == .success)
        #expect(result.tiles == expected.count && result.downloaded == expected.count)
        #expect(result.failed == 0 && result.absent == 0 && result.alreadyPresent == 0)
        #expect(server.server.requestCount == expected.count)
        // Kept-alive connections: no more than the requests in flight per host (4 here).
        #expect(server.server.acceptedConnections <= 4, "\(server.server.acceptedConnections) connections")
        for tile in expected {
            #expect(server.requests(tile) == 1)
            #expect(try prefetcher.store?.tileData(tile) == TestTiles.tile(tile))
        }
        // Events: in-progress first, then exactly one final status; progress never decreases, ends at 1.
        let id = submission.requestId
        #expect(recorder.statuses(id) == [.inProgress, .success])
        let fractions = recorder.progress(id)
        #expect(!fractions.isEmpty && fractions == fractions.sorted() && fractions.last == 1)
        #expect(fractions.allSatisfy { (0...1).contains($0) })
        // A plain MBTiles file: readers open it, verify finds no error. Closing ends the streams,
        // after every event.
        await prefetcher.close()
        var streamed: [PrefetchEvent] = []
        for await event in stream { streamed.append(event) }
        #expect(streamed == recorder.events)
        #expect(prefetcher.fetchMapData(for: request).error == .operationNotAllowed)
        let archive = try MBTilesArchive(path: path)
        #expect(try archive.zoomLevels().map(\.zoom) == Array(0...8))
        let verify = ArchiveVerifier.run(path: path)
        #expect(verify.errorCount == 0, "\(verify.findings)")
        // The store's bookkeeping tables are tilepack's own: no warning, and the schema names them.
        #expect(verify.findings.isEmpty, "\(verify.findings)")
        #expect(archive.schema.prefetchStoreTables == ["tilepack_regions", "tilepack_tile_state"])
        #expect(archive.schema.extraTables.isEmpty)
        let metadata = try archive.readMetadata()
        #expect(
            metadata[TileMetadata.Key.format] == "png" && metadata[TileMetadata.Key.minZoom] == "0"
                && metadata[TileMetadata.Key.maxZoom] == "8")
    }

    @Test("a server that refuses every connection ends the fetch early, as a failure that says so", arguments: TestTransport.available)
    func unreachableServer(_ transport: TestTransport) async throws {
        // A port nobody listens on, held for the whole test.
        let refusing = try RefusingPort()
        let port = refusing.port
        let directory = try TemporaryDirectory()
        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("u.mbtiles"),
            source: PrefetchSource(urlTemplate: "http://127.0.0.1:\(port)/{z}/{x}/{y}.png"),
            configuration: testConfiguration(), transport: transport.forPrefetch)
        let request = PrefetchRequest.boundingBox(berlin, zooms: 0...15)
        let tiles = try request.cover().count
        let report = try #require(await prefetcher.fetch(request).1)
        #expect(report.status == .failure)
        #expect(
            report.error?.contains("refused \(TileDownloader.maximumRefusals) connections in a row") == true,
            "\(report.error ?? "no error")")
        // It stopped: most tiles were never tried (4 workers, 4 attempts each, 40 refusals).
        #expect(report.downloaded == 0 && report.failed < tiles / 4, "\(report.failed) of \(tiles) tiles failed")
        #expect(report.requests < TileDownloader.maximumRefusals + 4 * 4, "\(report.requests) requests")
        await prefetcher.close()
        #expect(ArchiveVerifier.run(path: directory.file("u.mbtiles")).errorCount == 0)
        withExtendedLifetime(refusing) {}
    }

    @Test("every server fault is survived or recorded, and nothing bad is stored", arguments: TestTransport.available)
    func faults(_ transport: TestTransport) async throws {
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let request = PrefetchRequest.boundingBox(berlin, zooms: 11...13)
        let tiles = Array(try request.cover())
        try #require(tiles.count >= 15)
        let body = TestTiles.tile(tiles[0])
        // Transient faults, each once: the tile is stored after a retry.
        server.inject(tiles[0], .status(500, "oops"))
        server.inject(tiles[1], .respond(status: 503, headers: ["Retry-After": "1"], body: Data("busy".utf8)))
        server.inject(tiles[2], .respond(status: 429, headers: ["Retry-After": "0"], body: Data()), .status(502))
        server.inject(tiles[3], .close)
        server.inject(tiles[4], .truncated(status: 200, headers: [:], body: body, sent: body.count / 2))
        server.inject(tiles[5], .delayed(.milliseconds(300), .status(504)))
        // A PNG cut short without a Content-Length to tell (the connection closes after it).
        server.inject(
            tiles[6],
            .raw(Data("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nConnection: close\r\n\r\n".utf8) + body.prefix(body.count - 20)))
        // Permanent answers: recorded, never stored.
        server.always(
            tiles[7],
            .respond(status: 200, headers: ["Content-Type": "text/html"], body: Data("<html><body>Access denied</body></html>".utf8)))
        server.always(tiles[8], .respond(status: 200, headers: ["Content-Type": "image/png"], body: TestTiles.tile128))
        server.always(tiles[9], .respond(status: 200, headers: [:], body: Data()))
        server.always(tiles[10], .status(404, "none"))
        server.always(tiles[11], .respond(status: 204, headers: [:], body: Data()))
        server.always(tiles[12], .status(500, "down"))
        server.always(tiles[13], .respond(status: 403, headers: [:], body: Data("forbidden".utf8)))
        // JSON is a tile format, but not what a .png template serves.
        server.always(
            tiles[14], .respond(status: 200, headers: ["Content-Type": "application/json"], body: Data(#"{"error":"quota exceeded"}"#.utf8))
        )

        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("f.mbtiles"), source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration(), transport: transport.forPrefetch)
        let start = ContinuousClock.now
        let (_, report) = await prefetcher.fetch(request)
        // Retry-After: 1 was waited for (the back-off alone is milliseconds here).
        #expect(ContinuousClock.now - start >= .milliseconds(950))
        let result = try #require(report)
        let store = try #require(prefetcher.store)
        for tile in tiles[0...6] {
            #expect(try store.tileData(tile) == TestTiles.tile(tile), "\(tile)")
            #expect(try store.record(of: tile)?.outcome == .stored)
        }
        #expect(server.requests(tiles[0]) == 2 && server.requests(tiles[2]) == 3 && server.requests(tiles[6]) == 2)
        for tile in tiles[7...14] { #expect(try store.tileData(tile) == nil, "\(tile)") }
        // Not retried: error pages, wrong sizes, empty bodies, 404, 204, 403. Retried to the limit: 500.
        for tile in tiles[7...11] + tiles[13...14] { #expect(server.requests(tile) == 1, "\(tile)") }
        #expect(server.requests(tiles[12]) == 4)
        #expect(try store.record(of: tiles[10])?.outcome == .absent && store.record(of: tiles[11])?.outcome == .absent)
        for tile in tiles[7...9] + tiles[12...14] { #expect(try store.record(of: tile)?.outcome == .failed, "\(tile)") }
        #expect(result.status == .failure)
        #expect(result.absent == 2 && result.failed == 6 && result.downloaded == tiles.count - 8)
        let reasons = Dictionary(uniqueKeysWithValues: result.failures.map { ($0.tile, $0.reason) })
        #expect(reasons["\(tiles[7].zoom)/\(tiles[7].x)/\(tiles[7].y)"]?.contains("<html>") == true)
        #expect(reasons["\(tiles[8].zoom)/\(tiles[8].x)/\(tiles[8].y)"]?.contains("128x128") == true)
        #expect(reasons["\(tiles[9].zoom)/\(tiles[9].x)/\(tiles[9].y)"]?.contains("empty") == true)
        #expect(reasons["\(tiles[14].zoom)/\(tiles[14].x)/\(tiles[14].y)"]?.contains("json tile where png tiles are expected") == true)
        #expect(result.failures.first { $0.status == 500 }?.attempts == 4)
    }

    @Test("a second run downloads only what is missing; failed tiles can be retried alone", arguments: TestTransport.available)
    func resume(_ transport: TestTransport) async throws {
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let path = directory.file("r.mbtiles")
        let request = PrefetchRequest.boundingBox(berlin, zooms: 6...9)
        let tiles = Array(try request.cover())
        let broken = [tiles[1], tiles[5], tiles[9]]
        for tile in broken { server.always(tile, .status(500)) }
        server.always(tiles[3], .status(404))
        let source = PrefetchSource(urlTemplate: server.template)
        do {
            let prefetcher = try MapDataPrefetcher(
                storePath: path, source: source, configuration: testConfiguration { $0.retry.maximumAttempts = 1 },
                transport: transport.forPrefetch)
            let report = try #require(await prefetcher.fetch(request).1)
            #expect(report.status == .failure && report.failed == 3 && report.absent == 1)
            await prefetcher.close()
        }
        for tile in broken { server.always(tile, nil) }
        let before = server.server.requestCount
        // A new prefetcher on the same file (as after a restart): only the failed tiles are requested.
        let prefetcher = try MapDataPrefetcher(
            storePath: path, source: source, configuration: testConfiguration(), transport: transport.forPrefetch)
        let report = try #require(await prefetcher.fetch(request).1)
        #expect(report.status == .success)
        #expect(report.downloaded == 3 && report.alreadyPresent == tiles.count - 4 && report.absent == 1)
        #expect(server.server.requestCount - before == 3)
        #expect(Set(server.server.requests.suffix(3).compactMap { TileServer.tile(path: $0.path) }) == Set(broken))
        // Retrying failed tiles alone when none are left requests nothing.
        let retry = try #require(await prefetcher.fetch(request, options: PrefetchOptions(onlyFailed: true)).1)
        #expect(retry.tiles == 0 && retry.status == .success)
        #expect(server.server.requestCount - before == 3)
        await prefetcher.close()
    }

    @Test("retryFailedTiles requests the failed tiles and nothing else", arguments: TestTransport.available)
    func retryFailedAlone(_ transport: TestTransport) async throws {
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let request = PrefetchRequest.boundingBox(berlin, zooms: 7...9)
        let tiles = Array(try request.cover())
        server.always(tiles[2], .status(503))
        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("x.mbtiles"), source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration { $0.retry.maximumAttempts = 2 }, transport: transport.forPrefetch)
        #expect(try #require(await prefetcher.fetch(request).1).failed == 1)
        server.always(tiles[2], nil)
        let before = server.server.requestCount
        let submission = prefetcher.retryFailedTiles(for: request)
        let report = try #require(await prefetcher.report(for: submission.requestId))
        #expect(report.tiles == 1 && report.downloaded == 1 && report.status == .success)
        #expect(server.server.requestCount - before == 1 && server.requests(tiles[2]) == 3)
        await prefetcher.close()
    }

    @Test("refresh revalidates with If-None-Match; a 304 rewrites nothing", arguments: TestTransport.available)
    func refresh(_ transport: TestTransport) async throws {
        let server = try TileServer(etags: true)
        let directory = try TemporaryDirectory()
        let path = directory.file("e.mbtiles")
        let request = PrefetchRequest.boundingBox(berlin, zooms: 8...9)
        let prefetcher = try MapDataPrefetcher(
            storePath: path, source: PrefetchSource(urlTemplate: server.template), configuration: testConfiguration(),
            transport: transport.forPrefetch)
        let first = try #require(await prefetcher.fetch(request).1)
        let store = try #require(prefetcher.store)
        let tile = Array(try request.cover())[0]
        let fetchedAt = try #require(try store.record(of: tile)).fetchedAt
        #expect(try store.record(of: tile)?.etag == "\"t\(tile.zoom)-\(tile.x)-\(tile.y)\"")
        try await Task.sleep(for: .milliseconds(20))
        let before = server.server.requestCount
        let second = try #require(await prefetcher.fetch(request, options: PrefetchOptions(refresh: true)).1)
        #expect(second.notModified == first.downloaded && second.alreadyPresent == first.downloaded && second.downloaded == 0)
        #expect(server.server.requestCount - before == first.downloaded)
        #expect(server.server.requests.suffix(first.downloaded).allSatisfy { $0.header("if-none-match") != nil })
        let record = try #require(try store.record(of: tile))
        #expect(record.fetchedAt > fetchedAt && record.attempts == 2 && record.bytes == TestTiles.tile(tile).count)
        #expect(try store.tileData(tile) == TestTiles.tile(tile))
        await prefetcher.close()
    }

    @Test("refresh revalidates with If-Modified-Since when the server gives Last-Modified and no ETag", arguments: TestTransport.available)
    func refreshByDate(_ transport: TestTransport) async throws {
        let server = try TileServer(lastModified: true)
        let directory = try TemporaryDirectory()
        let request = PrefetchRequest.boundingBox(berlin, zooms: 8...9)
        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("d.mbtiles"), source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration(), transport: transport.forPrefetch)
        let first = try #require(await prefetcher.fetch(request).1)
        let before = server.server.requestCount
        let second = try #require(await prefetcher.fetch(request, options: PrefetchOptions(refresh: true)).1)
        #expect(second.notModified == first.downloaded && second.downloaded == 0 && second.status == .success)
        let sent = server.server.requests.dropFirst(before)
        #expect(sent.count == first.downloaded)
        #expect(sent.allSatisfy { $0.header("if-modified-since") == TileServer.modified && $0.header("if-none-match") == nil })
        // Without refresh, nothing is asked at all.
        let third = try #require(await prefetcher.fetch(request).1)
        #expect(third.alreadyPresent == first.downloaded && server.server.requestCount == before + first.downloaded)
        await prefetcher.close()
    }

    @Test(
        "a route corridor fetches RouteCover's tiles; TMS and {s} templates are expanded by Core's TileURLTemplate",
        arguments: TestTransport.available)
    func routeTMSAndSubdomains(_ transport: TestTransport) async throws {
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let route = [GeoCoordinate(latitude: 52.52, longitude: 13.40), GeoCoordinate(latitude: 52.40, longitude: 13.06)]
        let request = PrefetchRequest.route(route, radius: 800, zooms: 10...12)
        var expected = 0
        for zoom in 10...12 { expected += try RouteCover(route: route, radius: 800, zoom: zoom).count }
        // TMS rows at the server; {s} in the path (the tests stay on 127.0.0.1).
        let template = server.server.baseURL + "/{s}/{z}/{x}/{y}.png"
        let source = PrefetchSource(urlTemplate: template, scheme: .tms, subdomains: ["a", "b", "c"])
        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("route.mbtiles"), source: source, configuration: testConfiguration(), transport: transport.forPrefetch
        )
        let report = try #require(await prefetcher.fetch(request).1)
        // The server answers XYZ paths; a TMS request for XYZ (z, x, y) asks for row 2^z-1-y.
        #expect(report.tiles == expected && report.downloaded == expected, "\(report.failures.prefix(3))")
        let store = try #require(prefetcher.store)
        for tile in try request.cover() {
            let flipped = try TileCoordinate(zoom: tile.zoom, x: tile.x, y: (1 << tile.zoom) - 1 - tile.y)
            #expect(try store.tileData(tile) == TestTiles.tile(flipped))
            #expect(server.server.requests(to: "/\(["a", "b", "c"][(tile.x + tile.y) % 3])\(TileServer.path(flipped))") == 1)
        }
        await prefetcher.close()
    }

    @Test(
        "a {-y} template (TMS rows, as Leaflet, QGIS and OpenLayers write it) is taken and asks for TMS rows",
        arguments: TestTransport.available)
    func minusYTemplate(_ transport: TestTransport) async throws {
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let source = PrefetchSource(urlTemplate: server.server.baseURL + "/{z}/{x}/{-y}.png")
        #expect(source.invalidReason == nil)
        #expect(PrefetchSource(urlTemplate: server.server.baseURL + "/{z}/{x}.png").invalidReason?.contains("has no {y} or {-y}") == true)
        let request = PrefetchRequest.boundingBox(berlin, zooms: 2...3)
        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("tms.mbtiles"), source: source, configuration: testConfiguration(),
            transport: transport.forPrefetch)
        let report = try #require(await prefetcher.fetch(request).1)
        let cover = try request.cover()
        #expect(report.tiles == cover.count && report.downloaded == cover.count, "\(report.failures.prefix(3))")
        let store = try #require(prefetcher.store)
        for tile in cover {
            let flipped = try TileCoordinate(zoom: tile.zoom, x: tile.x, y: tile.row(in: .tms))
            #expect(try store.tileData(tile) == TestTiles.tile(flipped))
            #expect(server.server.requests(to: TileServer.path(flipped)) == 1)
        }
        await prefetcher.close()
    }

    @Test("the User-Agent names tilepack and its version; a configured one replaces it", arguments: TestTransport.available)
    func userAgent(_ transport: TestTransport) async throws {
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let request = PrefetchRequest.boundingBox(berlin, zooms: 3...3)
        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("u.mbtiles"), source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration(), transport: transport.forPrefetch)
        _ = await prefetcher.fetch(request)
        #expect(server.server.requests.first?.header("user-agent") == "tilepack/\(TilepackVersion.current) (offline prefetch)")
        let custom = try MapDataPrefetcher(
            storePath: directory.file("v.mbtiles"), source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration { $0.userAgent = "my-app/2.0" }, transport: transport.forPrefetch)
        _ = await custom.fetch(request)
        #expect(server.server.requests.last?.header("user-agent") == "my-app/2.0")
    }

    @Test("connections per host and the request rate are bounded", arguments: TestTransport.available)
    func limits(_ transport: TestTransport) async throws {
        let server = try TileServer()
        server.delay.withLock { $0 = .milliseconds(40) }
        let directory = try TemporaryDirectory()
        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("l.mbtiles"), source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration { $0.connectionsPerHost = 3 },
            transport: transport == .urlSession ? nil : transport.make(maximumConnectionsPerHost: 3))
        let report = try #require(await prefetcher.fetch(.boundingBox(berlin, zooms: 0...7)).1)
        #expect(report.downloaded >= 8)
        #expect(server.peakConcurrency <= 3 && server.peakConcurrency >= 2)
        server.delay.withLock { $0 = nil }
        let limited = try MapDataPrefetcher(
            storePath: directory.file("m.mbtiles"), source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration { $0.requestsPerSecond = 40 }, transport: transport.forPrefetch)
        let start = ContinuousClock.now
        let rated = try #require(await limited.fetch(.boundingBox(berlin, zooms: 0...5)).1)
        // n requests at 40/s take at least (n - 1) / 40 s.
        #expect(ContinuousClock.now - start >= .milliseconds((rated.requests - 1) * 25 - 5))
    }
}

@Suite("Prefetch: requests refused, cancelled, busy")
struct PrefetchRequestTests {
    @Test("the request recorded with a region is JSON with sorted keys and reads back as the same request")
    func storedRequestRoundTrips() throws {
        let requests = [
            PrefetchRequest(
                area: .boundingBox(GeoBoundingBox(west: -180, south: -85.0511287798, east: 179.9999999, north: 1e-7)), zooms: 0...14),
            PrefetchRequest(
                area: .route(
                    [
                        GeoCoordinate(latitude: 52.5200066, longitude: 13.404954),
                        GeoCoordinate(latitude: -33.8688197, longitude: 151.2092955),
                    ], radius: 1500.25), zooms: 3...3),
        ]
        for request in requests {
            let text = request.storedJSON
            let isRoute = if case .route = request.area { true } else { false }
            let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
            let sorted = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            let keys = try #require(try JSONSerialization.jsonObject(with: sorted) as? [String: Any]).keys.sorted()
            #expect(keys == (isRoute ? ["maxzoom", "minzoom", "radius", "route"] : ["bbox", "maxzoom", "minzoom"]))
            #expect(text.hasPrefix(isRoute ? "{\"maxzoom\"" : "{\"bbox\""))
            #expect(PrefetchRequest(storedJSON: text) == request, "\(text)")
        }
    }

    @Test("every invalid parameter is refused with invalid parameters and a negative id, before any request")
    func invalidParameters() async throws {
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("i.mbtiles"), source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration())
        let point = [GeoCoordinate(latitude: 52.5, longitude: 13.4)]
        let invalid: [PrefetchRequest] = [
            .route(point, radius: 499.9, zooms: 0...5),
            .route(point, radius: .nan, zooms: 0...5),
            .route([], radius: 1000, zooms: 0...5),
            .route([GeoCoordinate(latitude: 91, longitude: 0)], radius: 1000, zooms: 0...5),
            .boundingBox(berlin, zooms: 0...31),
            .boundingBox(berlin, zooms: -1...3),
            .boundingBox(GeoBoundingBox(west: 13, south: 53, east: 14, north: 52), zooms: 0...3),
            .boundingBox(GeoBoundingBox(west: .nan, south: 52, east: 14, north: 53), zooms: 0...3),
        ]
        for request in invalid {
            let fetch = prefetcher.fetchMapData(for: request)
            #expect(fetch.error == .invalidParameters && fetch.requestId < 0, "\(request)")
            let estimate = prefetcher.estimateMapDataSize(for: request)
            #expect(estimate.error == .invalidParameters && estimate.requestId < 0)
        }
        let valid = prefetcher.fetchMapData(for: .route(point, radius: 500, zooms: 0...2))
        #expect(valid.error == .none)
        #expect(await prefetcher.report(for: valid.requestId)?.downloaded == 3)
        let sources = [
            PrefetchSource(urlTemplate: server.server.baseURL + "/{z}/{x}.png"),
            PrefetchSource(urlTemplate: "ftp://127.0.0.1/{z}/{x}/{y}.png"),
            PrefetchSource(urlTemplate: server.template, scale: 4),
            PrefetchSource(urlTemplate: server.template, subdomains: []),
            // Core's one tile size rule: 300 px (not a power of two) and 8 px (below 16).
            PrefetchSource(urlTemplate: server.template, tileSize: 300),
            PrefetchSource(urlTemplate: server.template, tileSize: 8),
        ]
        for source in sources {
            let other = try MapDataPrefetcher(storePath: directory.file("s.mbtiles"), source: source, configuration: testConfiguration())
            #expect(other.fetchMapData(for: .boundingBox(berlin, zooms: 0...1)).error == .invalidParameters, "\(source)")
        }
        let badConfiguration = try MapDataPrefetcher(
            storePath: directory.file("c.mbtiles"), source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration { $0.connectionsPerHost = 0 })
        #expect(badConfiguration.fetchMapData(for: .boundingBox(berlin, zooms: 0...1)).error == .invalidParameters)
        await prefetcher.close()
        #expect(server.server.requestCount == 3)  // only the one valid request's tiles (z0-2, one each)
    }

    @Test("an area over the tile limit is refused as route area too big")
    func tooBig() async throws {
        let directory = try TemporaryDirectory()
        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("b.mbtiles"), source: PrefetchSource(urlTemplate: "http://127.0.0.1:9/{z}/{x}/{y}.png"),
            configuration: testConfiguration { $0.maximumTiles = 100 })
        let route = [GeoCoordinate(latitude: 52.52, longitude: 13.40), GeoCoordinate(latitude: 48.14, longitude: 11.58)]
        let result = prefetcher.fetchMapData(for: .route(route, radius: 5000, zooms: 8...12))
        #expect(result.error == .routeAreaTooBig && result.requestId < 0)
        #expect(prefetcher.fetchMapData(for: .boundingBox(.world, zooms: 0...4)).error == .routeAreaTooBig)  // 341 tiles
        #expect(prefetcher.fetchMapData(for: .boundingBox(.world, zooms: 0...3)).error == .none)  // 85 tiles
        await prefetcher.close()
        // The default limit is one million tiles.
        #expect(PrefetchConfiguration().maximumTiles == 1_000_000)
    }

    @Test("tile.openstreetmap.org and its subdomains are refused with operation not allowed, before any request; so is a read-only store")
    func operationNotAllowed() async throws {
        let directory = try TemporaryDirectory()
        for template in [
            "https://tile.openstreetmap.org/{z}/{x}/{y}.png", "https://{s}.tile.openstreetmap.org/{z}/{x}/{y}.png",
            "http://A.TILE.OpenStreetMap.org./{z}/{x}/{y}.png",
        ] {
            let prefetcher = try MapDataPrefetcher(
                storePath: directory.file("osm.mbtiles"), source: PrefetchSource(urlTemplate: template),
                configuration: testConfiguration())
            let fetch = prefetcher.fetchMapData(for: .boundingBox(berlin, zooms: 0...2))
            #expect(fetch.error == .operationNotAllowed && fetch.requestId < 0, "\(template)")
            #expect(fetch.reason?.contains("tile usage policy") == true)
            #expect(prefetcher.estimateMapDataSize(for: .boundingBox(berlin, zooms: 0...2)).error == .operationNotAllowed)
        }
        // Not refused: hosts that merely contain the name.
        #expect(PrefetchSource(urlTemplate: "https://tile.openstreetmap.org.example/{z}/{x}/{y}.png").forbiddenReason == nil)
        #expect(PrefetchSource(urlTemplate: "https://mytile.openstreetmap.org.fr/{z}/{x}/{y}.png").forbiddenReason == nil)
        let server = try TileServer()
        let path = directory.file("ro.mbtiles")
        _ = try MBTilesTileStore(path: path)
        let readOnly = try MapDataPrefetcher(
            storePath: path, source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration(), readOnly: true)
        #expect(readOnly.fetchMapData(for: .boundingBox(berlin, zooms: 0...2)).error == .operationNotAllowed)
        #expect(server.server.requestCount == 0)
    }

    @Test("a store opened for writing drops the content identity tilepack stored in the file: the tiles it fetches would make it stale")
    func aStoreDropsAStoredContentIdentity() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("made.mbtiles")
        var options = ConvertOptions()
        options.writing.tileIndex = true
        _ = try ArchiveConverter.run(source: TestSupport.fixture("martin/world_cities.mbtiles"), destination: path, options: options)
        #expect(try MBTilesArchive(path: path).metadata()[ContentIdentity.metadataKey] != nil)
        try MBTilesTileStore(path: path, readOnly: true).close()
        #expect(try MBTilesArchive(path: path).metadata()[ContentIdentity.metadataKey] != nil)
        try MBTilesTileStore(path: path).close()
        #expect(try MBTilesArchive(path: path).metadata()[ContentIdentity.metadataKey] == nil)
    }

    @Test("a store beside a -journal that is not SQLite's is not opened for writing; both files stay as they were")
    func foreignJournalRefusesResuming() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("j.mbtiles")
        try MBTilesTileStore(path: path).close()
        let journal = Data("this is not a rollback journal\n".utf8)
        try journal.write(to: URL(fileURLWithPath: path + "-journal"))
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        do {
            _ = try MapDataPrefetcher(
                storePath: path, source: PrefetchSource(urlTemplate: "http://127.0.0.1:9/{z}/{x}/{y}.png"),
                configuration: testConfiguration())
            Issue.record("opened the store for writing beside a foreign journal")
        } catch {
            guard case .refusesWrites = error.fault else {
                Issue.record("not refused for the journal: \(error)")
                return
            }
            #expect("\(error)".contains("j.mbtiles-journal") && "\(error)".contains("move j.mbtiles-journal away"), "\(error)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path + "-journal")) == journal)
    }

    @Test("cancel mid-flight ends in exactly one cancelled status and leaves a resumable store", arguments: TestTransport.available)
    func cancel(_ transport: TestTransport) async throws {
        let server = try TileServer()
        server.delay.withLock { $0 = .milliseconds(30) }
        let directory = try TemporaryDirectory()
        let path = directory.file("c.mbtiles")
        let prefetcher = try MapDataPrefetcher(
            storePath: path, source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration { $0.connectionsPerHost = 2 }, transport: transport.forPrefetch)
        let recorder = EventRecorder()
        prefetcher.addListener(recorder)
        // The cancel comes from a listener, called on the prefetcher's own queue as the fetch
        // reports its fifth tile: a task on the cooperative pool, which the whole suite shares,
        // may get there only after the fetch has ended.
        let canceller = CancelAfter(tiles: 5)
        prefetcher.addListener(canceller)
        let events = prefetcher.events()
        // Enough tiles (30 ms each, 2 connections at a time) that the fetch is still running then.
        let request = PrefetchRequest.boundingBox(berlin, zooms: 0...15)
        try #require(try request.cover().count > 150)
        let submission = prefetcher.fetchMapData(for: request)
        var seen: [PrefetchEvent] = []
        for await event in events {
            seen.append(event)
            if case .status(_, let status, _) = event, status.isFinal { break }
        }
        let report = try #require(await prefetcher.report(for: submission.requestId))
        await prefetcher.drainEvents()
        #expect(report.status == .cancelled && report.downloaded < report.tiles)
        #expect(recorder.statuses(submission.requestId) == [.inProgress, .cancelled])
        // The stream saw what the listener saw.
        #expect(seen == recorder.events)
        // Cancelling again, or an unknown id, changes nothing.
        prefetcher.cancel(submission.requestId)
        prefetcher.cancel(12345)
        await prefetcher.close()
        // The store is a valid archive, and a new run completes it without asking for stored tiles again.
        #expect(ArchiveVerifier.run(path: path).errorCount == 0)
        server.delay.withLock { $0 = nil }
        let resumed = try MapDataPrefetcher(
            storePath: path, source: PrefetchSource(urlTemplate: server.template), configuration: testConfiguration(),
            transport: transport.forPrefetch)
        let store = try #require(resumed.store)
        let present = try request.cover().filter { try store.containsTile($0) }
        let countBefore = server.server.requestCount
        let second = try #require(await resumed.fetch(request).1)
        #expect(second.status == .success && second.alreadyPresent == present.count)
        let newRequests = server.requestedTiles.suffix(server.server.requestCount - countBefore)
        #expect(Set(newRequests).isDisjoint(with: Set(present)))
        await resumed.close()
    }

    @Test("one request more than the maximum is refused as busy")
    func busy() async throws {
        let server = try TileServer()
        server.delay.withLock { $0 = .milliseconds(20) }
        let directory = try TemporaryDirectory()
        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("busy.mbtiles"), source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration { $0.maximumConcurrentRequests = 2 })
        let first = prefetcher.fetchMapData(for: .boundingBox(berlin, zooms: 0...9))
        let second = prefetcher.estimateMapDataSize(for: .boundingBox(berlin, zooms: 10...12))
        let third = prefetcher.fetchMapData(for: .boundingBox(berlin, zooms: 0...3))
        #expect(first.error == .none && second.error == .none)
        #expect(third.error == .busy && third.requestId < 0)
        #expect(first.requestId != second.requestId)
        prefetcher.cancelAll()
        await prefetcher.close()
        #expect(prefetcher.runningRequests.isEmpty)
    }
}

@Suite("Prefetch: estimates, capacity, purge")
struct PrefetchStoreTests {
    @Test("the estimate counts tiles exactly, minus those stored, and its bytes bracket the real size")
    func estimate() async throws {
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("est.mbtiles"), source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration())
        let recorder = EventRecorder()
        prefetcher.addListener(recorder)
        let request = PrefetchRequest.boundingBox(berlin, zooms: 8...11)
        let cover = try request.cover()
        let first = await prefetcher.estimate(request)
        #expect(first.success && first.tiles == cover.count && first.missing == cover.count)
        let actual = cover.reduce(0) { $0 + TestTiles.tile($1).count }
        #expect(abs(first.bytes - actual) <= max(first.margin, actual / 20), "estimate \(first.bytes) ± \(first.margin), actual \(actual)")
        #expect(first.kilobytes == (first.bytes + 1023) / 1024)
        #expect(first.sampled <= 8 * 4 && first.sampled > 0)
        // Sampling stores nothing.
        #expect(prefetcher.store?.tileCount == 0)
        _ = await prefetcher.fetch(.boundingBox(berlin, zooms: 8...9))
        let second = await prefetcher.estimate(request)
        #expect(second.tiles == cover.count && second.missing == cover.count - cover.count(atZoom: 8) - cover.count(atZoom: 9))
        await prefetcher.drainEvents()
        #expect(recorder.events.filter { if case .estimate = $0 { true } else { false } }.count == 2)
        // Nothing to sample from: 0 KB and false, as the seed's callback. A removed listener hears nothing more.
        prefetcher.removeListener(recorder)
        server.server.stop()
        let failed = await prefetcher.estimate(.boundingBox(berlin, zooms: 13...13))
        #expect(!failed.success && failed.kilobytes == 0 && failed.bytes == 0 && failed.tiles > 0)
        await prefetcher.drainEvents()
        #expect(recorder.events.filter { if case .estimate = $0 { true } else { false } }.count == 2)
        await prefetcher.close()
    }

    @Test("past the capacity, tiles of no kept region go first, least recently used; clearCache purges unused tiles")
    func evictionAndPurge() async throws {
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let tileBytes = TestTiles.tiles256.map(\.count).max() ?? 1
        let capacity = 20 * tileBytes
        let source = PrefetchSource(urlTemplate: server.template)
        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("cap.mbtiles"), source: source,
            configuration: testConfiguration { $0.capacity = capacity })
        let recorder = EventRecorder()
        prefetcher.addListener(recorder)
        let old = PrefetchRequest.boundingBox(GeoBoundingBox(west: 2.25, south: 48.81, east: 2.42, north: 48.90), zooms: 11...13)
        let kept = PrefetchRequest.boundingBox(berlin, zooms: 9...10)
        let oldReport = try #require(await prefetcher.fetch(old).1)
        let oldRegion = oldReport.regionId
        try #require(oldReport.downloaded > 20)
        // Released: its tiles are now unused.
        #expect(try prefetcher.releaseRegion(oldRegion))
        let store = try #require(prefetcher.store)
        var lastUsed: [TileCoordinate: Double] = [:]
        for tile in try old.cover() { lastUsed[tile] = try store.record(of: tile)?.lastUsed }
        #expect(store.totalBytes > 0)
        let keptCover = try kept.cover()
        let keptReport = try #require(await prefetcher.fetch(kept).1)
        #expect(keptReport.status == .success)
        #expect(store.totalBytes <= max(capacity, keptCover.reduce(0) { $0 + TestTiles.tile($1).count }))
        #expect(keptReport.evicted > 0)
        for tile in keptCover { #expect(try store.containsTile(tile)) }
        // Least recently used first: no evicted tile of the old region was used after a survivor.
        let oldTiles = Array(try old.cover())
        let survivors = try oldTiles.filter { try store.containsTile($0) }
        let evicted = oldTiles.filter { !survivors.contains($0) }
        #expect(!evicted.isEmpty)
        if let newestEvicted = evicted.compactMap({ lastUsed[$0] }).max(), let oldestSurvivor = survivors.compactMap({ lastUsed[$0] }).min()
        {
            #expect(newestEvicted <= oldestSurvivor)
        }
        // Purge: every tile outside kept regions goes; the kept region stays.
        let purge = try #require(prefetcher.clearCache())
        #expect(purge.tiles == survivors.count)
        for tile in oldTiles { #expect(try !store.containsTile(tile)) }
        for tile in keptCover { #expect(try store.containsTile(tile)) }
        await prefetcher.drainEvents()
        #expect(recorder.purged == [purge])
        #expect(try prefetcher.regions().map(\.kept) == [false, true])
        await prefetcher.close()
    }

    @Test("store eviction: least recently used first, pinned tiles never, down to the capacity")
    func storeEvictionOrder() throws {
        let directory = try TemporaryDirectory()
        let store = try MBTilesTileStore(path: directory.file("lru.mbtiles"))
        let tiles = try (0..<10).map { try TileCoordinate(zoom: 4, x: $0, y: 3) }
        for (index, tile) in tiles.enumerated() {
            // Used in the order 9, 8, ..., 0: tile 9 is the least recently used.
            try store.record(TileStateRecord(tile: tile, outcome: .stored, fetchedAt: Double(100 - index)), data: Data(count: 100))
        }
        try store.commit()
        #expect(store.totalBytes == 1000)
        let pinned: Set<TileCoordinate> = [tiles[9], tiles[7]]
        let result = try store.evict(toCapacity: 650) { pinned.contains($0) }
        #expect(result.tiles == 4 && result.bytes == 400)
        #expect(store.totalBytes == 600 && store.tileCount == 6)
        let left = try tiles.filter { try store.containsTile($0) }
        #expect(left == [tiles[0], tiles[1], tiles[2], tiles[3], tiles[7], tiles[9]])
        #expect(try store.record(of: tiles[8]) == nil)
        // Under the capacity: nothing to do.
        #expect(try store.evict(toCapacity: 600) { _ in false } == TileStorePurge())
        // Purge keeps only pinned tiles, and drops absent/failed records outside them.
        try store.record(TileStateRecord(tile: try TileCoordinate(zoom: 5, x: 1, y: 1), outcome: .absent, httpStatus: 404), data: nil)
        let purge = try store.purge { pinned.contains($0) }
        #expect(purge.tiles == 4 && purge.records == 1)
        #expect(try tiles.filter { try store.containsTile($0) } == [tiles[7], tiles[9]])
    }

    @Test("a tile stored again replaces its bytes, in the same transaction or a later one; size and count follow")
    func storeReplacesTiles() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("replace.mbtiles")
        let tile = try TileCoordinate(zoom: 2, x: 1, y: 1)
        let other = try TileCoordinate(zoom: 2, x: 0, y: 1)
        do {
            let store = try MBTilesTileStore(path: path)
            try store.record(TileStateRecord(tile: tile, outcome: .stored), data: Data(repeating: 1, count: 100))
            try store.record(TileStateRecord(tile: tile, outcome: .stored), data: Data(repeating: 2, count: 40))
            try store.record(TileStateRecord(tile: other, outcome: .stored), data: Data(repeating: 3, count: 7))
            #expect(store.totalBytes == 47 && store.tileCount == 2)
            try store.commit()
            try store.record(TileStateRecord(tile: other, outcome: .stored), data: Data(repeating: 4, count: 9))
            #expect(store.totalBytes == 49 && store.tileCount == 2)
            try store.close()
        }
        let store = try MBTilesTileStore(path: path)
        #expect(store.totalBytes == 49 && store.tileCount == 2)
        #expect(try store.tileData(tile) == Data(repeating: 2, count: 40))
        #expect(try store.tileData(other) == Data(repeating: 4, count: 9))
        try store.close()
    }

    @Test("committed tiles and their records survive closing and reopening; rows are TMS in the file")
    func storeCrashSafety() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("crash.mbtiles")
        let tile = try TileCoordinate(zoom: 3, x: 1, y: 2)
        do {
            let store = try MBTilesTileStore(path: path)
            try store.record(TileStateRecord(tile: tile, outcome: .stored, bytes: 3), data: Data("abc".utf8))
            try store.commit()
            try store.close()
        }
        let store = try MBTilesTileStore(path: path)
        #expect(try store.tileData(tile) == Data("abc".utf8))
        #expect(try store.record(of: tile)?.outcome == .stored && store.totalBytes == 3 && store.tileCount == 1)
        // Row numbers are TMS in the file: what every MBTiles reader sees.
        try store.close()
        let archive = try MBTilesArchive(path: path)
        #expect(try archive.withTileBytes(at: tile) { Data($0) } == Data("abc".utf8))
    }
}
