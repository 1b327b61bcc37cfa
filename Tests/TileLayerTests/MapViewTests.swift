import Foundation
import Testing
import TilepackCore
import TilepackImaging
import TilepackTestSupport

@testable import TileLayer

/// Holds every tile request until `release` is called; then completes them with their colour.
final class GatedSource: MapTileLayerDataSource {
    let held = Locked<[TileRequest]>([])
    let color: @Sendable (TileCoordinate) -> RGBA8
    init(color: @escaping @Sendable (TileCoordinate) -> RGBA8) { self.color = color }
    func mapTileLayer(_ layer: MapTileLayer, requestDataForTileAt tile: TileCoordinate, tileRequest: TileRequest) -> TileRequestDisposition
    {
        held.withLock { $0.append(tileRequest) }
        return .accepted
    }
    var pending: Int { held.withLock { $0.count } }
    func release() {
        let requests = held.withLock { r -> [TileRequest] in
            defer { r = [] }
            return r
        }
        for request in requests {
            request.copy(from: Data(solid(color(request.tile), size: request.tileSize, format: request.pixelFormat).pixels))
            request.complete()
        }
    }
}

func viewAt(
    _ lat: Double, _ lon: Double, zoom: Double, _ w: Int, _ h: Int, scale: ScreenScale = .x1,
    clock: ManualClock? = nil
) -> HeadlessMapView {
    HeadlessMapView(
        viewport: ViewportSize(width: w, height: h), scale: scale,
        center: GeoCoordinate(latitude: lat, longitude: lon), zoomLevel: zoom,
        clock: clock?.function ?? HeadlessMapView.uptime)
}

@Suite("Headless map view")
struct MapViewTests {
    @Test("exactly the tiles in the viewport, with abutting pixel rectangles")
    func tilesInViewport() {
        let view = viewAt(0, 0, zoom: 3, 300, 200)
        view.addMapTileLayer(makeLayer(RecordingSource(ways: [.synchronous])))
        let plan = view.tilePlans()[0]
        #expect(plan.tileZoom == 3)
        #expect(Set(plan.tiles) == [tile(3, 3, 3), tile(3, 4, 3), tile(3, 3, 4), tile(3, 4, 4)])
        let p = plan.placements.first { $0.tile == tile(3, 3, 3) }
        #expect(p == TilePlacement(tile: tile(3, 3, 3), left: -106, top: -156, right: 150, bottom: 100))
        // Neighbours share edges.
        let q = plan.placements.first { $0.tile == tile(3, 4, 3) }
        #expect(q?.left == p?.right)
    }

    /// `print(frame)` is one line of facts (issue 42, part 5, item 8): a 512x512 frame at scale
    /// 2 holds 4 MB of pixels, which the default description printed one by one.
    @Test("a frame prints as one line: size, scale, pixel format, tiles; never its pixels")
    func frameDescriptionIsCompact() async {
        let gated = GatedSource { _ in RGBA8(r: 0, g: 200, b: 0, a: 255) }
        let view = viewAt(0, 0, zoom: 2, 512, 512, scale: .x2)
        view.addMapTileLayer(makeLayer(gated))
        view.update()
        let deadline = ContinuousClock.now + .seconds(10)
        while gated.pending < 4 && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(2)) }
        gated.release()
        #expect(await view.waitUntilIdle(timeout: TestSupport.settleSeconds))
        let frame = view.renderFrame(settled: true)
        #expect(frame.bitmap.pixels.count == 1024 * 1024 * 4)
        let printed = "\(frame)", reflected = String(reflecting: frame)
        #expect(printed.count < 200 && reflected.count < 200, "\(printed.prefix(300))")
        #expect(
            printed.contains("1024x1024 px = 512x512 pt at scale 2") && printed.contains("rgba8888")
                && printed.contains("1 layer,") && printed.contains("4 tiles drawn"), "\(printed)")
        #expect(reflected == printed)
    }

    @Test("fractional zoom: tiles of the level below, enlarged; scale 2 doubles pixels, same tiles")
    func fractionalZoomAndScale() {
        let view = viewAt(0, 0, zoom: 2.5, 512, 512)
        view.addMapTileLayer(makeLayer(RecordingSource(ways: [.synchronous])))
        let plan = view.tilePlans()[0]
        #expect(plan.tileZoom == 2)
        let width = plan.placements[0].right - plan.placements[0].left
        #expect(abs(width - 362) <= 1)  // 256 * 2^0.5
        #expect(Set(plan.tiles) == [tile(2, 1, 1), tile(2, 2, 1), tile(2, 1, 2), tile(2, 2, 2)])

        let retina = viewAt(0, 0, zoom: 2, 512, 512, scale: .x2)
        retina.addMapTileLayer(makeLayer(RecordingSource(ways: [.synchronous])))
        #expect(retina.pixelSize == (1024, 1024))
        let retinaPlan = retina.tilePlans()[0]
        #expect(retinaPlan.placements.allSatisfy { $0.right - $0.left == 512 })
        #expect(Set(retinaPlan.tiles) == [tile(2, 1, 1), tile(2, 2, 1), tile(2, 1, 2), tile(2, 2, 2)])
        #expect(retina.renderFrame().bitmap.width == 1024)
    }

    @Test("tile size shifts the tile zoom in the view: 512 asks one level up, 128 one down")
    func tileSizeInView() {
        for (size, zoom, count) in [(512, 2, 4), (256, 3, 4), (128, 4, 16)] {
            let layer = makeLayer(RecordingSource(ways: [.synchronous]))
            layer.setTileSize(size)
            let view = viewAt(0, 0, zoom: 3, 512, 512)
            view.addMapTileLayer(layer)
            let plan = view.tilePlans()[0]
            #expect(plan.tileZoom == zoom)
            #expect(plan.tiles.count == count)
        }
        let small = makeLayer(RecordingSource(ways: [.synchronous]))
        small.setTileSize(64)
        let deep = viewAt(0, 0, zoom: 20, 256, 256)
        deep.addMapTileLayer(small)
        #expect(deep.tilePlans()[0].tileZoom == nil && deep.tilePlans()[0].tiles.isEmpty)
    }

    @Test("the world repeats across the antimeridian")
    func antimeridian() {
        let view = viewAt(0, 180, zoom: 1, 512, 256)
        view.addMapTileLayer(makeLayer(RecordingSource(ways: [.synchronous])))
        let placements = view.tilePlans()[0].placements
        let left = placements.filter { $0.left < 256 }.map(\.tile.x)
        let right = placements.filter { $0.left >= 256 }.map(\.tile.x)
        #expect(Set(left) == [1] && Set(right) == [0])
    }

    @Test("bounding box: tiles fully outside (or touching only its edge) never requested; antimeridian boxes")
    func boundingBoxFilter() async {
        let source = RecordingSource(ways: [.synchronous])
        let layer = makeLayer(source)
        layer.setBoundingBox(GeoBoundingBox(west: 0, south: 0, east: 90, north: 60))
        let view = viewAt(0, 0, zoom: 1, 512, 512)
        view.addMapTileLayer(layer)
        _ = await settledFrame(view)
        #expect(source.snapshot.sync == [tile(1, 1, 0)])

        let wrapSource = RecordingSource(ways: [.synchronous])
        let wrap = makeLayer(wrapSource)
        wrap.setBoundingBox(GeoBoundingBox(west: 170, south: -10, east: -170, north: 10))
        let wrapView = viewAt(0, 0, zoom: 2, 1024, 1024)
        wrapView.addMapTileLayer(wrap)
        _ = await settledFrame(wrapView)
        #expect(Set(wrapSource.snapshot.sync) == [tile(2, 0, 1), tile(2, 0, 2), tile(2, 3, 1), tile(2, 3, 2)])
    }

    @Test("hidden at the view's level: nothing requested or drawn")
    func hiddenLevel() async {
        let source = RecordingSource(ways: [.synchronous])
        let layer = makeLayer(source)
        layer.hide(atZoomLevel: 2)
        let view = viewAt(0, 0, zoom: 2.7, 512, 512)
        view.addMapTileLayer(layer)
        #expect(await settledFrame(view).drawn.isEmpty)
        #expect(source.snapshot.sync.isEmpty && source.snapshot.hasTile.isEmpty)
        view.zoomLevel = 3
        #expect(await settledFrame(view).drawn.count == 4)
    }

    @Test("requests run concurrently and update() does not wait for slow data sources")
    func nonBlocking() async {
        let gated = GatedSource { _ in green }
        let view = viewAt(0, 0, zoom: 2, 1024, 1024)
        view.addMapTileLayer(makeLayer(gated))
        view.update()  // returns with all 16 requests outstanding at once
        let deadline = ContinuousClock.now + .seconds(10)
        while gated.pending < 16 && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(2)) }
        #expect(gated.pending == 16)
        #expect(view.tilesLoading == 16)
        #expect(view.renderFrame().drawn.isEmpty)
        #expect(await view.waitUntilIdle(timeout: 0.05) == false)
        gated.release()
        #expect(await view.waitUntilIdle(timeout: TestSupport.settleSeconds))
        #expect(view.renderFrame().drawn.count == 16)

        // A synchronous data source that blocks: update() still returns first.
        final class Blocking: MapTileLayerDataSource {
            let gate = DispatchSemaphore(value: 0)
            let waitedOut = Locked(false)
            func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData {
                if gate.wait(timeout: .now() + 5) == .timedOut { waitedOut.withLock { $0 = true } }
                return .bitmap(Data(solid(red).pixels))
            }
        }
        let blocking = Blocking()
        let other = worldView(makeLayer(blocking))
        other.update()
        blocking.gate.signal()
        #expect(await other.waitUntilIdle(timeout: TestSupport.settleSeconds))
        #expect(blocking.waitedOut.withLock { $0 } == false)
    }

    @Test("drawing order: map layer type first, then zIndex, then the order added")
    func ordering() async {
        func layer(_ color: RGBA8, _ type: MapLayerType, _ z: Int) -> MapTileLayer {
            let l = makeLayer(RecordingSource(ways: [.synchronous], color: { _ in color }))
            l.setMapLayerType(type)
            l.setZIndex(z)
            l.setTransparent(true)
            return l
        }
        let view = worldView(layer(blue, .foreground, 0))
        view.addMapTileLayer(layer(green, .area, 5))
        view.addMapTileLayer(layer(red, .area, 1))
        view.addMapTileLayer(layer(red, .background, 900))
        let frame = await settledFrame(view)
        #expect(frame.drawn.map(\.layerIndex) == [3, 2, 1, 0])
        #expect(frame.bitmap.pixel(x: 128, y: 128) == blue)
    }

    @Test("transparent tiles are alpha-blended over the layers below")
    func alphaBlending() async {
        let bottom = makeLayer(RecordingSource(ways: [.synchronous], color: { _ in red }))
        let top = makeLayer(RecordingSource(ways: [.synchronous], color: { _ in RGBA8(r: 0, g: 0, b: 255, a: 128) }))
        top.setTransparent(true)
        top.setZIndex(1)
        let view = worldView(bottom)
        view.addMapTileLayer(top)
        let pixel = await settledFrame(view).bitmap.pixel(x: 50, y: 50)
        #expect(abs(Int(pixel.r) - 127) <= 1 && pixel.g == 0 && abs(Int(pixel.b) - 128) <= 1 && pixel.a == 255)
    }

    @Test("an opaque layer ignores alpha and, covering the viewport, keeps lower layers from loading")
    func opaqueLayer() async {
        let lowerSource = RecordingSource(ways: [.synchronous], color: { _ in red })
        let top = makeLayer(RecordingSource(ways: [.synchronous], color: { _ in RGBA8(r: 0, g: 0, b: 255, a: 0) }))
        top.setZIndex(1)
        let view = worldView(makeLayer(lowerSource))
        view.addMapTileLayer(top)
        let frame = await settledFrame(view)
        #expect(frame.bitmap.pixel(x: 50, y: 50) == blue)
        #expect(lowerSource.snapshot.sync.isEmpty)
        #expect(view.tilePlans()[0].coveredByOpaqueLayer)

        // Bounded to part of the viewport: the layer below is loaded where the opaque layer has no
        // tile (3 of its 4 tiles; the north-east one lies under the opaque layer's tile 1/1/0).
        let boundedLower = RecordingSource(ways: [.synchronous], color: { _ in red })
        let bounded = makeLayer(RecordingSource(ways: [.synchronous], color: { _ in blue }))
        bounded.setBoundingBox(GeoBoundingBox(west: 0, south: 0, east: 180, north: 80))
        bounded.setZIndex(1)
        let view2 = viewAt(0, 0, zoom: 1, 512, 512)
        view2.addMapTileLayer(makeLayer(boundedLower))
        view2.addMapTileLayer(bounded)
        let frame2 = await settledFrame(view2)
        #expect(Set(boundedLower.snapshot.sync) == [tile(1, 0, 0), tile(1, 0, 1), tile(1, 1, 1)])
        #expect(frame2.bitmap.pixel(x: 400, y: 100) == blue && frame2.bitmap.pixel(x: 100, y: 400) == red)
    }

    @Test("fallback: the nearest loaded ancestor's sub-square stands in, marked approximate, never cached, replaced when the tile arrives")
    func fallback() async throws {
        let root = try TemporaryDirectory()
        // Zoom 1: each quadrant its own colour. Zoom 2 (gated): white.
        let colors: [TileCoordinate: RGBA8] = [tile(1, 0, 0): red, tile(1, 1, 0): green, tile(1, 0, 1): blue, tile(1, 1, 1): red]
        let white = RGBA8(r: 255, g: 255, b: 255, a: 255)
        let gated = GatedSource { colors[$0] ?? white }
        let layer = makeLayer(gated, cacheRoot: root)
        layer.setCacheEnabled(true, identifier: "fallback")
        let view = viewAt(0, 0, zoom: 1, 512, 512)
        view.addMapTileLayer(layer)
        view.update()
        while gated.pending < 4 { try await Task.sleep(for: .milliseconds(2)) }
        gated.release()
        #expect(await view.waitUntilIdle(timeout: TestSupport.settleSeconds))

        view.zoomLevel = 2.0
        view.viewport = ViewportSize(width: 1024, height: 1024)
        view.update()
        while gated.pending < 16 { try await Task.sleep(for: .milliseconds(2)) }
        let approximate = view.renderFrame()
        #expect(approximate.drawn.count == 16)
        #expect(approximate.drawn.allSatisfy { $0.isApproximate && $0.sourceZoom == 1 })
        #expect(approximate.bitmap.pixel(x: 100, y: 100) == red)  // tile 2/0/0 <- 1/0/0
        #expect(approximate.bitmap.pixel(x: 900, y: 100) == green)  // tile 2/3/0 <- 1/1/0
        #expect(approximate.bitmap.pixel(x: 100, y: 900) == blue)  // tile 2/0/3 <- 1/0/1
        // Fallback bitmaps are not cached as the real tiles.
        #expect(!FileManager.default.fileExists(atPath: root.file("fallback/2")))

        gated.release()
        #expect(await view.waitUntilIdle(timeout: TestSupport.settleSeconds))
        let real = view.renderFrame()
        #expect(real.drawn.count == 16 && real.drawn.allSatisfy { !$0.isApproximate && $0.sourceZoom == 2 })
        #expect(real.bitmap.pixel(x: 100, y: 100) == white)
        #expect(FileManager.default.fileExists(atPath: root.file("fallback/2/0/0.tile")))
    }

    @Test("fallback disabled: missing tiles stay empty")
    func fallbackDisabled() async throws {
        let gated = GatedSource { _ in red }
        let layer = makeLayer(gated)
        layer.setFallbackEnabled(false)
        let view = viewAt(0, 0, zoom: 1, 512, 512)
        view.addMapTileLayer(layer)
        view.update()
        while gated.pending < 4 { try await Task.sleep(for: .milliseconds(2)) }
        gated.release()
        _ = await view.waitUntilIdle(timeout: TestSupport.settleSeconds)
        view.zoomLevel = 2
        view.update()
        #expect(view.renderFrame().drawn.isEmpty)
        while gated.pending < 4 { try await Task.sleep(for: .milliseconds(2)) }
        gated.release()
        _ = await view.waitUntilIdle(timeout: TestSupport.settleSeconds)
    }

    @Test("fading: a tile fades in over frames when enabled, and shows at once when not")
    func fading() async {
        let clock = ManualClock()
        let layer = makeLayer(RecordingSource(ways: [.synchronous], color: { _ in RGBA8(r: 0, g: 0, b: 0, a: 255) }))
        layer.setFadingEnabled(true)
        layer.setFallbackEnabled(false)
        let view = HeadlessMapView(
            viewport: ViewportSize(width: 256, height: 256),
            background: RGBA8(r: 255, g: 255, b: 255, a: 255), clock: clock.function)
        view.addMapTileLayer(layer)
        view.update()
        _ = await view.waitUntilIdle(timeout: TestSupport.settleSeconds)
        var opacities: [Double] = []
        var reds: [UInt8] = []
        for _ in 0..<4 {
            let frame = view.renderFrame()
            opacities.append(frame.drawn.first?.opacity ?? -1)
            reds.append(frame.bitmap.pixel(x: 10, y: 10).r)
            clock.advance(HeadlessMapView.fadeDuration / 2)
        }
        #expect(opacities == [0, 0.5, 1, 1])
        #expect(reds[0] == 255 && abs(Int(reds[1]) - 128) <= 1 && reds[2] == 0 && reds[3] == 0)
        #expect(view.renderFrame(settled: true).drawn.first?.opacity == 1)

        let still = makeLayer(RecordingSource(ways: [.synchronous]))
        let plain = worldView(still, clock: clock)
        plain.update()
        _ = await plain.waitUntilIdle(timeout: TestSupport.settleSeconds)
        #expect(plain.renderFrame().drawn.first?.opacity == 1)
    }

    @Test("removing a layer discards its loads; centre, zoom and scale setters")
    func viewState() async {
        let view = viewAt(10, 20, zoom: 25, 100, 100)
        #expect(view.zoomLevel == 20)
        view.zoomLevel = -3
        #expect(view.zoomLevel == 0)
        view.setCenter(GeoCoordinate(latitude: 51.5, longitude: -0.1), zoomLevel: 14.25)
        #expect(view.center == GeoCoordinate(latitude: 51.5, longitude: -0.1) && view.zoomLevel == 14.25)
        view.scale = .x3
        #expect(view.pixelSize == (300, 300))
        let gated = GatedSource { _ in red }
        let layer = makeLayer(gated)
        view.addMapTileLayer(layer)
        view.update()
        while gated.pending == 0 { try? await Task.sleep(for: .milliseconds(2)) }
        view.removeMapTileLayer(layer)
        gated.release()
        #expect(await view.waitUntilIdle(timeout: TestSupport.settleSeconds))
        #expect(view.renderFrame().drawn.isEmpty)
    }
}
