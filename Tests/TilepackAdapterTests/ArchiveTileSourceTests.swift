import Foundation
import Testing
import TileLayer
import TilepackAdapter
import TilepackCore
import TilepackImaging
import TilepackStorage
import TilepackTestSupport

// Serialized: several of these tests hold archive reads at a gate, and each held read holds one of
// libdispatch's worker threads for the queue's quality of service, of which there is one per core.
// Two such tests at once on a 2-core machine starved each other's reads until a deadline passed
// (requestsForTilesScrolledAwayAreCancelledWithoutBeingRead, in full runs only).
@Suite(.serialized) struct ArchiveTileSourceTests {
    // MARK: Formats from real archives

    @Test(arguments: [
        "node-mbtiles/plain_1.mbtiles", "martin/geography-class-jpg.mbtiles", "martin/geography-class-png.mbtiles",
        "mbutil/one_tile.mbtiles",
    ])
    func fixtureTilesDecodeStraightIntoTheBufferInEveryPixelFormat(_ fixture: String) throws {
        let archive = try MBTilesArchive(path: TestSupport.fixture(fixture))
        let reader = ArchiveTileReader(archive: archive)
        var checked = 0
        try archive.forEachTile { t, bytes in
            guard checked < 6 else { return }
            checked += 1
            for format in PixelFormat.allCases {
                let expected = try ImageDecoder.decode(bytes, pixelFormat: format)
                var buffer = [UInt8](repeating: 0x5A, count: 256 * 256 * format.bytesPerPixel)
                let outcome = try buffer.withUnsafeMutableBytes { try reader.read(t, tileSize: 256, pixelFormat: format, into: $0) }
                #expect(outcome == .delivered)
                #expect(buffer == expected.pixels, "\(fixture) \(t) in \(format)")
            }
        }
        #expect(checked > 0)
    }

    @Test func oneCallBitmapWithoutALayer() throws {
        let archive = try openTileArchive(path: TestSupport.fixture("martin/geography-class-jpg.mbtiles"))
        let bitmap = try #require(try archive.bitmap(at: tile(1, 1, 0), pixelFormat: .bgra8888))
        #expect(bitmap.pixelFormat == .bgra8888 && bitmap.width == 256)
        let bytes = try #require(try archive.tileData(at: tile(1, 1, 0)))
        #expect(bitmap == (try ImageDecoder.decode(bytes, pixelFormat: .bgra8888)))
        #expect(try archive.bitmap(at: tile(2, 0, 0)) == nil)
        // At another size: the four zoom-1 tiles merged into one 512 tile 0/0/0.
        let merged = try #require(try archive.bitmap(at: tile(0, 0, 0), tileSize: 512, pixelFormat: .rgba8888))
        let northEast = try #require(try archive.bitmap(at: tile(1, 1, 0)))
        #expect(try crop(merged, x: 256, y: 0, size: 256) == northEast)
    }

    @Test func archivesAreRecognisedFromTheirBytesNotTheirNames() throws {
        let dir = try TemporaryDirectory("adapter")
        let bundle = dir.file("looks-like.mbtiles"), mbtiles = dir.file("looks-like.tilepack")
        try writeBundle(bundle, tiles: [tile(0, 0, 0)])
        try writeMBTiles(mbtiles, tiles: [tile(0, 0, 0)])
        #expect(try TileArchiveFormat.detect(path: bundle) == .bundle)
        #expect(try TileArchiveFormat.detect(path: mbtiles) == .mbtiles)
        #expect(try openTileArchive(path: bundle) is BundleArchive)
        #expect(try openTileArchive(path: mbtiles) is MBTilesArchive)
        #expect(try openTileArchive(path: bundle).bitmap(at: tile(0, 0, 0)) == labelledTile(tile(0, 0, 0)))
        #expect(try openTileArchive(path: TestSupport.fixture("martin/png.pmtiles")) is PMTilesArchive)

        for (file, words) in [("pmtiles/invalid.pmtiles", "text"), ("pmtiles/empty.pmtiles", "empty")] {
            #expect {
                try openTileArchive(path: TestSupport.fixture(file))
            } throws: { error in
                guard let error = error as? TileArchiveError, case .notAnArchive(let detected) = error.fault else { return false }
                return detected.contains(words) && error.path.hasSuffix(file)
            }
        }
        #expect(throws: TileArchiveError.self) { try openTileArchive(path: dir.file("absent.mbtiles")) }
    }

    // MARK: hasTile from the index

    @Test func hasTileReadsTheIndexOnlyAndMissingTilesAreNeverRequested() async throws {
        let dir = try TemporaryDirectory("adapter")
        let path = dir.file("sparse.mbtiles")
        // Zoom 2 with only the western half, in bounds declared for the whole world (so the eastern
        // tiles are inside the layer's bounding box and asked for).
        try writeMBTiles(
            path, tiles: allTiles(0...1) + allTiles(2...2).filter { $0.x < 2 },
            metadata: ["bounds": "-180,-85.0511,180,85.0511"])
        let archive = InstrumentedArchive(try MBTilesArchive(path: path))
        let source = ArchiveTileSource(archive: archive)
        let layer = source.makeLayer()
        layer.setFallbackEnabled(false)
        let view = worldView(zoom: 2, layer: layer)
        let counts0 = archive.snapshot
        #expect(counts0.reads.isEmpty)

        let plan = try #require(view.tilePlans().first)
        #expect(Set(plan.tiles) == Set(allTiles(2...2).filter { $0.x < 2 }))
        #expect(archive.snapshot.reads.isEmpty, "hasTile read a tile")
        #expect(Set(archive.snapshot.contains).isSuperset(of: allTiles(2...2)))

        let frame = await view.render(timeout: TestSupport.settleSeconds)
        #expect(frame.drawn.count == 8)
        let reads = archive.snapshot.reads
        #expect(Set(reads) == Set(plan.tiles))
        #expect(reads.count == 8)
        // The eastern half shows the view's background, and later frames do not ask again.
        _ = await view.render(timeout: TestSupport.settleSeconds)
        #expect(archive.snapshot.reads.count == 8)
        #expect(!source.mapTileLayer(layer, hasTileAt: tile(2, 3, 0)))
    }

    // MARK: Failures

    @Test func aNullTileIsReportedOnceWithItsCoordinateAndArchiveAndNotRetried() async throws {
        let path = TestSupport.fixture("node-mbtiles/corrupt_null_tile.mbtiles")
        let log = FailureLog()
        let archive = InstrumentedArchive(try MBTilesArchive(path: path))
        let source = ArchiveTileSource(archive: archive, onFailure: log.handler)
        let layer = source.makeLayer()
        layer.setFallbackEnabled(false)
        // NULL at z1, x0, TMS row 0: XYZ 1/0/1.
        let broken = tile(1, 0, 1)
        #expect(source.mapTileLayer(layer, hasTileAt: broken))

        let clock = Locked<Double>(100)
        let view = HeadlessMapView(
            viewport: ViewportSize(width: 512, height: 512), center: GeoCoordinate(latitude: 0, longitude: 0),
            zoomLevel: 1, clock: { clock.withLock { $0 } })
        view.addMapTileLayer(layer)
        let first = await view.render(timeout: TestSupport.settleSeconds)
        #expect(first.drawn.count == 3)
        for _ in 0..<3 {
            clock.withLock { $0 += 120 }  // past any retry back-off
            _ = await view.render(timeout: TestSupport.settleSeconds)
        }
        let failures = log.all
        #expect(failures.count == 1)
        let failure = try #require(failures.first)
        #expect(failure.tile == broken && failure.archivePath == path)
        #expect(failure.description.contains("1/0/1") && failure.description.contains("corrupt_null_tile.mbtiles"))
        #expect(archive.snapshot.reads.filter { $0 == broken }.count == 1)
        #expect(!source.mapTileLayer(layer, hasTileAt: broken))
        #expect(source.failures.map(\.tile) == [broken])
    }

    @Test func aTileThatDoesNotDecodeIsReportedOnce() throws {
        let path = TestSupport.fixture("martin/invalid-tile-format.mbtiles")
        let log = FailureLog()
        let reader = try ArchiveTileReader(path: path, onFailure: log.handler)
        var tiles: [TileCoordinate] = []
        try reader.archive.forEachTile { t, _ in tiles.append(t) }
        let first = try #require(tiles.first)
        for _ in 0..<3 {
            var buffer = [UInt8](repeating: 0, count: 256 * 256 * 4)
            do {
                let outcome = try buffer.withUnsafeMutableBytes { try reader.read(first, tileSize: 256, pixelFormat: .rgba8888, into: $0) }
                #expect(outcome == .missing)  // after the first failure
            } catch let error as ArchiveTileError {
                #expect(error.tile == first)
                guard case .decoding = error.reason else {
                    Issue.record("unexpected \(error)")
                    continue
                }
            }
        }
        #expect(log.all.count == 1)
        #expect(log.all.first?.tile == first)
        #expect(!reader.hasTile(first, tileSize: 256))
    }

    @Test func badArgumentsAreErrorsNotCrashes() throws {
        let dir = try TemporaryDirectory("adapter")
        let path = dir.file("one.tilepack")
        try writeBundle(path, tiles: [tile(0, 0, 0)])
        let reader = try ArchiveTileReader(path: path)
        var small = [UInt8](repeating: 0, count: 100)
        #expect(throws: ArchiveTileError.self) {
            try small.withUnsafeMutableBytes { try reader.read(tile(0, 0, 0), tileSize: 256, pixelFormat: .rgba8888, into: $0) }
        }
        #expect(throws: ArchiveTileError.self) { try reader.bitmap(at: tile(0, 0, 0), tileSize: 300) }
        #expect(throws: ArchiveTileError.self) { try reader.bitmap(at: tile(0, 0, 0), tileSize: 0) }
        // Core's one rule: 8 is a power of two but below 16, refused as the layer refuses it.
        #expect(throws: ArchiveTileError.self) { try reader.bitmap(at: tile(0, 0, 0), tileSize: 8) }
        #expect(reader.failures.isEmpty)  // caller mistakes are not tile failures
    }

    // MARK: Executor and cancellation

    @Test func requestsReturnAtOnceAndRunOnABoundedExecutor() async throws {
        let dir = try TemporaryDirectory("adapter")
        let path = dir.file("labels.tilepack")
        try writeBundle(path, tiles: allTiles(0...2))
        let gate = Gate()
        let archive = InstrumentedArchive(try BundleArchive(path: path), gate: { _ in gate.pass() })
        let source = ArchiveTileSource(archive: archive, options: ArchiveTileSource.Options(maximumConcurrency: 2))
        let layer = source.makeLayer()
        let finished = Locked<[TileCoordinate: Bitmap?]>([:])
        var requests: [TileRequest] = []
        let start = Date()
        for t in allTiles(2...2) {
            let request = TileRequest(tile: t, finish: { bitmap in finished.withLock { $0[t] = bitmap } })
            requests.append(request)
            #expect(source.mapTileLayer(layer, requestDataForTileAt: t, tileRequest: request) == .accepted)
        }
        // Reads are held at the gate (for up to 20 s): returning at once proves they run elsewhere.
        #expect(Date().timeIntervalSince(start) < 5)
        #expect(await eventually { archive.snapshot.concurrentReads == 2 })
        #expect(source.waitingRequestCount == 14)
        gate.release()
        #expect(await eventually { finished.withLock { $0.count } == 16 })
        #expect(archive.snapshot.maximumConcurrentReads == 2)
        for t in allTiles(2...2) {
            #expect(finished.withLock { $0[t] ?? nil } == labelledTile(t))
        }
        #expect(requests.allSatisfy { $0.status == .complete })
    }

    @Test func requestsForTilesScrolledAwayAreCancelledWithoutBeingRead() async throws {
        let dir = try TemporaryDirectory("adapter")
        let (gate, archive, source) = try gatedLabels(dir, concurrency: 1)
        let layer = source.makeLayer()
        layer.setFallbackEnabled(false)
        // A 256 x 256 view at zoom 3 over the north-west: tiles 3/0/0 ... 3/1/1.
        let view = HeadlessMapView(
            viewport: ViewportSize(width: 256, height: 256),
            center: WebMercator.coordinate(atWorldPoint: MercatorPoint(x: 0.125, y: 0.125)), zoomLevel: 3)
        view.addMapTileLayer(layer)
        view.update()
        #expect(await eventually { archive.snapshot.concurrentReads == 1 && source.waitingRequestCount == 3 })

        // Scroll to the south-east: the view cancels the requests of the tiles that left it.
        let home = view.center
        view.center = WebMercator.coordinate(atWorldPoint: MercatorPoint(x: 0.875, y: 0.875))
        let plan = try #require(view.tilePlans().first)
        #expect(Set(plan.tiles) == [tile(3, 6, 6), tile(3, 7, 6), tile(3, 6, 7), tile(3, 7, 7)])
        view.update()
        // The 3 old requests still waiting were dropped unread; the 4 new ones wait behind the gate.
        #expect(await eventually { source.waitingRequestCount == 4 })
        gate.release()
        let frame = await view.render(timeout: TestSupport.settleSeconds)
        #expect(Set(frame.drawn.map(\.tile)) == Set(plan.tiles))
        // Only the one read already running when we scrolled touched an old tile.
        let oldReads = archive.snapshot.reads.filter { $0.x < 2 && $0.y < 2 }
        #expect(oldReads.count == 1)
        // Cancelled requests are no failures: nothing diagnosed, and scrolling back asks at once
        // (a failure would hold them back for the retry delay).
        #expect(layer.diagnostics.filter { $0.kind == .tileFailed }.isEmpty)
        view.center = home
        let back = await view.render(timeout: TestSupport.settleSeconds)
        #expect(Set(back.drawn.map(\.tile)) == [tile(3, 0, 0), tile(3, 1, 0), tile(3, 0, 1), tile(3, 1, 1)])
    }

    @Test func cancelRequestsNotNeededByAPlanDropsWaitingOnes() async throws {
        let dir = try TemporaryDirectory("adapter")
        let (gate, archive, source) = try gatedLabels(dir, concurrency: 1)
        let layer = source.makeLayer()
        let requests = allTiles(3...3).prefix(4).map { t in TileRequest(tile: t) { _ in } }
        for request in requests { _ = source.mapTileLayer(layer, requestDataForTileAt: request.tile, tileRequest: request) }
        #expect(await eventually { archive.snapshot.concurrentReads == 1 && source.waitingRequestCount == 3 })
        let view = HeadlessMapView(
            viewport: ViewportSize(width: 256, height: 256),
            center: WebMercator.coordinate(atWorldPoint: MercatorPoint(x: 0.875, y: 0.875)), zoomLevel: 3)
        view.addMapTileLayer(layer)
        let plan = try #require(view.tilePlans().first)
        #expect(source.cancelRequests(notNeededBy: plan) == 3)
        #expect(source.waitingRequestCount == 0)
        gate.release()
        #expect(await eventually { requests.allSatisfy { $0.status != .pending } })
        #expect(requests.filter { $0.status == .failed }.count == 3)
    }

    @Test func aRunningMergeStopsWhenCancelled() throws {
        let dir = try TemporaryDirectory("adapter")
        let path = dir.file("labels.tilepack")
        try writeBundle(path, tiles: allTiles(0...1))
        let reader = try ArchiveTileReader(path: path)
        let asked = Locked(0)
        var buffer = [UInt8](repeating: 0, count: 512 * 512 * 4)
        let outcome = try buffer.withUnsafeMutableBytes { bytes in
            try reader.read(
                tile(0, 0, 0), tileSize: 512, pixelFormat: .rgba8888, into: bytes,
                isCancelled: {
                    asked.withLock {
                        $0 += 1
                        return $0 > 2
                    }  // cancelled after the first archive tile
                })
        }
        #expect(outcome == .cancelled)
    }

    // MARK: Cache

    @Test func decodedTilesAreCachedWithinTheByteBudget() throws {
        let dir = try TemporaryDirectory("adapter")
        let path = dir.file("labels.mbtiles")
        try writeMBTiles(path, tiles: allTiles(0...1))
        let archive = InstrumentedArchive(try MBTilesArchive(path: path))
        let tileBytes = 256 * 256 * 4
        let reader = ArchiveTileReader(archive: archive, options: ArchiveReaderOptions(cacheByteLimit: 2 * tileBytes + 100))
        for t in allTiles(1...1) {
            #expect(try reader.bitmap(at: t, tileSize: 256) == labelledTile(t))
            #expect(reader.cache.byteCount <= reader.cache.byteLimit)
        }
        #expect(reader.cache.count == 2)
        #expect(archive.snapshot.reads.count == 4)
        // The two most recent are served from memory, the first ones were evicted.
        let recent = allTiles(1...1).suffix(2)
        for t in recent { #expect(try reader.bitmap(at: t, tileSize: 256) == labelledTile(t)) }
        #expect(archive.snapshot.reads.count == 4)
        #expect(reader.cache.statistics.hits == 2)
        _ = try reader.bitmap(at: allTiles(1...1)[0], tileSize: 256)
        #expect(archive.snapshot.reads.count == 5)
        #expect(reader.cache.statistics.evictions >= 2)
        // Another pixel format is another entry.
        #expect(
            try reader.bitmap(at: recent.last!, tileSize: 256, pixelFormat: .bgra8888)
                == labelledTile(recent.last!).converted(to: .bgra8888))
        #expect(archive.snapshot.reads.count == 6)
        // No budget, no cache.
        let uncached = ArchiveTileReader(archive: archive)
        _ = try uncached.bitmap(at: tile(0, 0, 0), tileSize: 256)
        _ = try uncached.bitmap(at: tile(0, 0, 0), tileSize: 256)
        #expect(archive.snapshot.reads.count == 8)
        #expect(uncached.cache.count == 0)
    }

    // MARK: Metadata configures the layer

    @Test func metadataConfiguresTheLayer() throws {
        let plain = try ArchiveTileSource(path: TestSupport.fixture("node-mbtiles/plain_1.mbtiles"))
        let layer = plain.makeLayer()
        let box = try #require(layer.boundingBox)
        #expect(abs(box.west - -179.9999999749438) < 1e-9 && abs(box.north - 84.99999999782301) < 1e-9)
        #expect(abs(box.south - -69.99999999526695) < 1e-9 && abs(box.east - 179.9999999749438) < 1e-9)
        // No minzoom/maxzoom keys: the levels holding tiles, 0...4.
        #expect(plain.layerConfiguration().archiveZoomLevels == 0...4)
        // Shown to the view's deepest level: past zoom 4 the deepest tiles are scaled up (overzoom).
        #expect((0...20).allSatisfy { layer.isShown(atZoomLevel: $0) })
        #expect(plain.layerConfiguration().servedZoomLevels == 0...4)
        #expect(layer.tileSize == 256)
        #expect(layer.dataSource is ArchiveTileSource)

        // JPEG: opaque. Declared zooms 0...1.
        let jpeg = try ArchiveTileSource(path: TestSupport.fixture("martin/geography-class-jpg.mbtiles"))
        let jpegLayer = jpeg.makeLayer()
        #expect(!jpegLayer.transparent)
        #expect(jpegLayer.isShown(atZoomLevel: 1) && jpegLayer.isShown(atZoomLevel: 2))
        #expect(jpeg.layerConfiguration().servedZoomLevels == 0...1)
        // The same archive for a 512 layer: one more view level (zoom-1 tiles merge into 512 tiles at view level 2).
        let retina = jpeg.makeLayer(tileSize: 512)
        #expect(retina.tileSize == 512)
        #expect(jpeg.layerConfiguration(tileSize: 512).servedZoomLevels == 0...2)

        // WebP 512 px, declared 0...0: a 512 layer shows view levels 0...1; a 256 layer cuts quarters for 0...1.
        let webp = try ArchiveTileSource(path: TestSupport.fixture("martin/webp.mbtiles"))
        #expect(webp.layerConfiguration().tileSize == 512)
        #expect(webp.layerConfiguration().servedZoomLevels == 0...1)
        #expect(webp.layerConfiguration(tileSize: 256).servedZoomLevels == 0...1)
        #expect(webp.layerConfiguration().visibleZoomLevels == 0...20)

        // RGBA PNG (labelledTile encodes with alpha) and an overlay: transparent; raw RGB: opaque.
        let dir = try TemporaryDirectory("adapter")
        try writeBundle(
            dir.file("rgb.tilepack"), tiles: [tile(0, 0, 0)], encoding: .raw(.rgb888),
            metadata: ["bounds": "-10,-20,30,40", "minzoom": "3", "maxzoom": "9"])
        let rgb = try ArchiveTileSource(path: dir.file("rgb.tilepack"))
        let rgbLayer = rgb.makeLayer()
        #expect(!rgbLayer.transparent)
        #expect(rgbLayer.boundingBox == GeoBoundingBox(west: -10, south: -20, east: 30, north: 40))
        #expect(!rgbLayer.isShown(atZoomLevel: 2) && rgbLayer.isShown(atZoomLevel: 3) && rgbLayer.isShown(atZoomLevel: 20))
        #expect(rgb.layerConfiguration().servedZoomLevels == 3...9)
        try writeMBTiles(dir.file("rgba.mbtiles"), tiles: [tile(0, 0, 0)])
        #expect(try ArchiveTileSource(path: dir.file("rgba.mbtiles")).makeLayer().transparent)
        try writeBundle(
            dir.file("overlay.tilepack"), tiles: [tile(0, 0, 0)], encoding: .raw(.rgb888),
            metadata: ["type": "overlay", "bounds": "not,a,box"])
        let overlay = try ArchiveTileSource(path: dir.file("overlay.tilepack"))
        let overlayConfiguration = overlay.layerConfiguration()
        #expect(overlayConfiguration.transparent)
        #expect(overlayConfiguration.boundingBox == nil)
        #expect(overlayConfiguration.notes.contains { $0.contains("bounds") })

        // A layer already in a view is locked: configuring it changes nothing, and says so.
        let locked = MapTileLayer()
        let view = HeadlessMapView(viewport: ViewportSize(width: 10, height: 10))
        view.addMapTileLayer(locked)
        let result = rgb.configure(locked)
        #expect(result.updates["boundingBox"] == .ignoredLocked)
        #expect(locked.boundingBox == nil)
    }
}
