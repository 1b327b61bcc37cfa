import Foundation
import Synchronization
import Testing
import TilepackCore
import TilepackImaging
import TilepackTestSupport

@testable import TileLayer

/// A one-tile view at zoom 0: the whole world is tile 0/0/0.
func worldView(_ layer: MapTileLayer, clock: ManualClock? = nil) -> HeadlessMapView {
    let view = HeadlessMapView(
        viewport: ViewportSize(width: 256, height: 256), scale: .x1,
        center: GeoCoordinate(latitude: 0, longitude: 0), zoomLevel: 0,
        clock: clock?.function ?? HeadlessMapView.uptime)
    view.addMapTileLayer(layer)
    return view
}

@Suite("Data source: three ways, precedence, hasTile")
struct DataSourceTests {
    @Test("way 1: raw bitmap returned synchronously")
    func synchronousWay() async {
        let source = RecordingSource(ways: [.synchronous], color: { _ in green })
        let view = worldView(makeLayer(source))
        let frame = await settledFrame(view)
        #expect(frame.bitmap.pixel(x: 128, y: 128) == green)
        #expect(source.snapshot.sync == [tile(0, 0, 0)])
    }

    @Test("way 2: raw bitmap through a tile request completed on another thread")
    func requestWay() async {
        let source = RecordingSource(ways: [.request], color: { _ in blue })
        let view = worldView(makeLayer(source))
        let frame = await settledFrame(view)
        #expect(frame.bitmap.pixel(x: 10, y: 250) == blue)
        #expect(source.snapshot.request == [tile(0, 0, 0)])
    }

    @Test("way 3: a file URL, PNG converted to the layer's pixel format")
    func urlWay() async throws {
        let directory = try TemporaryDirectory()
        let root = try writeTileTree(directory, tiles: [tile(0, 0, 0)]) { _ in green }
        let source = RecordingSource(ways: [.url], urlFor: { root.appendingPathComponent("\($0.zoom)/\($0.x)/\($0.y).png") })
        let layer = makeLayer(source)
        layer.setPixelFormat(.rgb565)
        let view = worldView(layer)
        let frame = await settledFrame(view)
        #expect(frame.bitmap.pixel(x: 128, y: 128) == green)
        #expect(source.snapshot.url == [tile(0, 0, 0)])
    }

    @Test("precedence: synchronous bitmap > tile request > URL")
    func precedence() async throws {
        let all = RecordingSource(ways: [.synchronous, .request, .url], color: { _ in red })
        _ = await settledFrame(worldView(makeLayer(all)))
        #expect(all.snapshot.sync.count == 1 && all.snapshot.request.isEmpty && all.snapshot.url.isEmpty)

        let two = RecordingSource(ways: [.request, .url], color: { _ in red })
        _ = await settledFrame(worldView(makeLayer(two)))
        #expect(two.snapshot.request.count == 1 && two.snapshot.url.isEmpty)
    }

    @Test("no way implemented: the tile fails with a diagnostic")
    func noWay() async {
        let source = RecordingSource(ways: [])
        let layer = makeLayer(source)
        let frame = await settledFrame(worldView(layer))
        #expect(frame.drawn.isEmpty)
        #expect(layer.diagnostics.contains { $0.kind == .tileFailed && $0.message.contains("none of the three ways") })
    }

    @Test("hasTile absent means true; false means the tile is never asked for again")
    func hasTile() async {
        struct Plain: MapTileLayerDataSource {
            func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData {
                .bitmap(Data(solid(red).pixels))
            }
        }
        #expect(Plain().mapTileLayer(MapTileLayer(), hasTileAt: tile(3, 1, 1)))
        let plainFrame = await settledFrame(worldView(makeLayer(Plain())))
        #expect(plainFrame.drawn.count == 1)

        let clock = ManualClock()
        let source = RecordingSource(ways: [.synchronous], exists: { $0.zoom != 1 || $0.x != 0 })
        let layer = makeLayer(source)
        layer.setFallbackEnabled(false)
        let view = HeadlessMapView(viewport: ViewportSize(width: 512, height: 512), zoomLevel: 1, clock: clock.function)
        view.addMapTileLayer(layer)
        for _ in 0..<5 {
            view.update()
            _ = await view.waitUntilIdle(timeout: TestSupport.settleSeconds)
            clock.advance(120)
        }
        let calls = source.snapshot
        #expect(Set(calls.sync) == [tile(1, 1, 0), tile(1, 1, 1)])
        #expect(calls.sync.count == 2)
        // Asked once each; the false answers are remembered.
        #expect(calls.hasTile.filter { $0 == tile(1, 0, 0) }.count == 1)
        #expect(view.tilePlans()[0].tiles == [tile(1, 1, 0), tile(1, 1, 1)])
    }

    @Test("way 1 with the wrong number of bytes is refused")
    func wrongSizeSynchronous() async {
        struct Short: MapTileLayerDataSource {
            func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData {
                .bitmap(Data(count: 100))
            }
        }
        let layer = makeLayer(Short())
        let frame = await settledFrame(worldView(layer))
        #expect(frame.drawn.isEmpty)
        #expect(layer.diagnostics.contains { $0.kind == .tileFailed && $0.message.contains("100 bytes") })
    }

    @Test("way 1 unavailable fails the tile")
    func unavailable() async {
        struct None: MapTileLayerDataSource {
            func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData { .unavailable }
        }
        let layer = makeLayer(None())
        let frame = await settledFrame(worldView(layer))
        #expect(frame.drawn.isEmpty)
        #expect(layer.diagnostics.contains { $0.kind == .tileFailed })
    }
}

@Suite("TileRequest")
struct TileRequestTests {
    @Test("bytesLength is tileSize^2 x bytes per pixel, buffer exactly that size, zero-filled")
    func bytesLength() {
        for format in PixelFormat.allCases {
            for size in [64, 256, 512] {
                let request = TileRequest(tile: tile(0, 0, 0), tileSize: size, pixelFormat: format) { _ in }
                #expect(request.bytesLength == size * size * format.bytesPerPixel)
                #expect(request.bytes.count == request.bytesLength)
                #expect(request.bytes.allSatisfy { $0 == 0 })
                request.fail()
            }
        }
    }

    @Test("completed exactly once: later attempts ignored, returned false and diagnosed")
    func completeOnce() {
        let results = Locked<[Bitmap?]>([])
        let diagnostics = Locked<[TileLayerDiagnostic]>([])
        let request = TileRequest(
            tile: tile(2, 1, 1), tileSize: 16, pixelFormat: .rgba8888, contentScaleFactor: 1,
            diagnose: { d in diagnostics.withLock { $0.append(d) } },
            finish: { outcome in
                if case .complete(let b) = outcome { results.withLock { $0.append(b) } } else { results.withLock { $0.append(nil) } }
            })
        #expect(request.status == .pending)
        #expect(request.copy(from: Data(solid(green, size: 16).pixels)))
        #expect(request.complete(.complete))
        #expect(request.status == .complete)
        #expect(!request.complete(.failed))
        #expect(!request.complete(.complete))
        #expect(!request.complete(.pending))
        #expect(request.status == .complete)
        #expect(results.withLock { $0.count } == 1)
        #expect(results.withLock { $0[0]?.pixel(x: 3, y: 3) } == green)
        #expect(diagnostics.withLock { $0.filter { $0.kind == .requestCompletedAgain }.count } == 3)
        // Writing after completion changes nothing already delivered, and copy refuses.
        #expect(!request.copy(from: Data(solid(red, size: 16).pixels)))
    }

    @Test("completable from any thread: of many racing completions exactly one wins")
    func racingCompletions() async {
        for _ in 0..<20 {
            let finishes = Atomic<Int>(0)
            let request = TileRequest(tile: tile(0, 0, 0), tileSize: 8) { _ in finishes.add(1, ordering: .relaxed) }
            let wins = Atomic<Int>(0)
            DispatchQueue.concurrentPerform(iterations: 8) { i in
                if request.complete(i.isMultiple(of: 2) ? .complete : .failed) { wins.add(1, ordering: .relaxed) }
            }
            #expect(wins.load(ordering: .relaxed) == 1)
            #expect(finishes.load(ordering: .relaxed) == 1)
        }
    }

    @Test("copy(from:) checks the length")
    func copyLength() {
        let request = TileRequest(tile: tile(0, 0, 0), tileSize: 4, pixelFormat: .rgb888) { _ in }
        #expect(!request.copy(from: Data(count: 47)))
        #expect(!request.copy(from: Data(count: 49)))
        #expect(request.bytes.allSatisfy { $0 == 0 })
        #expect(request.copy(from: Data(repeating: 7, count: 48)))
        #expect(request.bytes.allSatisfy { $0 == 7 })
        request.fail()
    }

    @Test("a request released without completion is treated as failed and diagnosed")
    func droppedRequest() async {
        let delivered = Locked<[Bitmap?]>([])
        do {
            _ = TileRequest(tile: tile(1, 0, 0), tileSize: 8) { b in delivered.withLock { $0.append(b) } }
        }
        #expect(delivered.withLock { $0.count == 1 && $0[0] == nil })

        struct Dropper: MapTileLayerDataSource {
            func mapTileLayer(_ layer: MapTileLayer, requestDataForTileAt tile: TileCoordinate, tileRequest: TileRequest)
                -> TileRequestDisposition
            {
                .accepted  // and forgets the request
            }
        }
        let layer = makeLayer(Dropper())
        let frame = await settledFrame(worldView(layer))
        #expect(frame.drawn.isEmpty)
        #expect(layer.diagnostics.contains { $0.kind == .requestDropped })
        #expect(layer.diagnostics.contains { $0.kind == .tileFailed && $0.message.contains("released") })
    }

    @Test("a failed tile is asked again, with a doubling back-off so an always-failing source cannot spin")
    func retryBackOff() async {
        final class Failing: MapTileLayerDataSource {
            let count = Atomic<Int>(0)
            func mapTileLayer(_ layer: MapTileLayer, requestDataForTileAt tile: TileCoordinate, tileRequest: TileRequest)
                -> TileRequestDisposition
            {
                count.add(1, ordering: .relaxed)
                DispatchQueue.global().async { tileRequest.complete(.failed) }
                return .accepted
            }
        }
        let clock = ManualClock()
        let source = Failing()
        let view = worldView(makeLayer(source), clock: clock)
        // 200 updates without the clock moving: one request.
        for _ in 0..<200 {
            view.update()
            _ = await view.waitUntilIdle(timeout: TestSupport.settleSeconds)
        }
        #expect(source.count.load(ordering: .relaxed) == 1)
        // Delays 0.5, 1, 2, 4 s: just before each, nothing; at it, one more request.
        var expected = 1
        for delay in [0.5, 1, 2, 4] {
            clock.advance(delay - 0.01)
            view.update()
            _ = await view.waitUntilIdle(timeout: TestSupport.settleSeconds)
            #expect(source.count.load(ordering: .relaxed) == expected)
            clock.advance(0.01)
            view.update()
            _ = await view.waitUntilIdle(timeout: TestSupport.settleSeconds)
            expected += 1
            #expect(source.count.load(ordering: .relaxed) == expected)
        }
        // The delay stops growing at the maximum.
        for _ in 0..<10 {
            clock.advance(HeadlessMapView.maximumRetryDelay)
            view.update()
            _ = await view.waitUntilIdle(timeout: TestSupport.settleSeconds)
        }
        #expect(source.count.load(ordering: .relaxed) == expected + 10)
    }

    @Test("a failed tile that later succeeds is drawn")
    func failThenSucceed() async {
        final class Flaky: MapTileLayerDataSource {
            let calls = Atomic<Int>(0)
            func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData {
                calls.add(1, ordering: .relaxed).newValue == 1 ? .unavailable : .bitmap(Data(solid(green).pixels))
            }
        }
        let clock = ManualClock()
        let view = worldView(makeLayer(Flaky()), clock: clock)
        view.update()
        _ = await view.waitUntilIdle(timeout: TestSupport.settleSeconds)
        #expect(view.renderFrame().drawn.isEmpty)
        clock.advance(1)
        view.update()
        _ = await view.waitUntilIdle(timeout: TestSupport.settleSeconds)
        #expect(view.renderFrame().bitmap.pixel(x: 5, y: 5) == green)
    }
}
