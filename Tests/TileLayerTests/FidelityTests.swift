import Foundation
import Testing
import TilepackCore
import TilepackImaging
import TilepackTestSupport

@testable import TileLayer

/// Holds every tile request; records which were cancelled (through the request's own
/// cancellation) and completes those as failed, as a data source that stops work would.
final class CancellableSource: MapTileLayerDataSource {
    let held = Locked<[TileRequest]>([])
    let cancelled = Locked<[TileCoordinate]>([])
    let asked = Locked<[TileCoordinate]>([])

    func mapTileLayer(_ layer: MapTileLayer, requestDataForTileAt tile: TileCoordinate, tileRequest: TileRequest) -> TileRequestDisposition
    {
        asked.withLock { $0.append(tile) }
        held.withLock { $0.append(tileRequest) }
        tileRequest.onCancellation { [cancelled] in
            cancelled.withLock { $0.append(tile) }
            tileRequest.fail()
        }
        return .accepted
    }

    var pending: Int { held.withLock { $0.filter { $0.status == .pending }.count } }

    /// Completes every pending request with a solid tile.
    func release(_ color: RGBA8) {
        for request in held.withLock({ $0 }) where request.status == .pending {
            request.copy(from: Data(solid(color, size: request.tileSize, format: request.pixelFormat).pixels))
            request.complete()
        }
    }
}

/// A 1-pixel checkerboard of two colours, so that any scaling shows.
func checkerboard(_ size: Int, _ a: RGBA8, _ b: RGBA8) -> Bitmap {
    var bitmap = Bitmap(width: size, height: size, pixelFormat: .rgba8888)
    for y in 0..<size { for x in 0..<size { bitmap.setPixel(x: x, y: y, (x ^ y) & 1 == 0 ? a : b) } }
    return bitmap
}

@Suite("Tile layer fidelity (issue 14)")
struct FidelityTests {
    // MARK: Tiles of another size (item 2)

    @Test("a 512 px @2x image of a 256 px layer is drawn pixel for pixel on a 2x screen; 128 px is scaled up; 64 px refused")
    func imagesOfOtherSizes() async throws {
        let directory = try TemporaryDirectory()
        let image = checkerboard(512, red, blue)
        let folder = directory.url.appendingPathComponent("0/0")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try PNGEncoder.encode(image).write(to: folder.appendingPathComponent("0@2x.png"))
        try PNGEncoder.encode(solid(green, size: 128)).write(to: folder.appendingPathComponent("0@1x.png"))
        try PNGEncoder.encode(solid(green, size: 64)).write(to: folder.appendingPathComponent("0@3x.png"))
        let template = "file://" + directory.url.path + "/{z}/{x}/{y}@{scale}x.png"

        // 2x screen: the layer's 256 px tile lands on 512 output pixels, exactly the image's.
        let retina = MapTileLayer(overlay: URLTemplateTileSource(urlTemplate: template))
        let view = HeadlessMapView(viewport: ViewportSize(width: 256, height: 256), scale: .x2)
        view.addMapTileLayer(retina)
        let frame = await settledFrame(view)
        #expect(frame.drawn.count == 1 && frame.drawn.allSatisfy { !$0.isApproximate })
        #expect(frame.bitmap.size == image.size)
        #expect(frame.bitmap == image)

        // 1x screen, a 128 px image (half the tile size): accepted and enlarged.
        let small = MapTileLayer(overlay: URLTemplateTileSource(urlTemplate: template))
        let plain = HeadlessMapView(viewport: ViewportSize(width: 256, height: 256))
        plain.addMapTileLayer(small)
        let smallFrame = await settledFrame(plain)
        #expect(smallFrame.drawn.count == 1 && smallFrame.bitmap.pixel(x: 200, y: 30) == green)

        // 3x screen, a 64 px image (a quarter): refused, with the rule in the message.
        let tiny = MapTileLayer(overlay: URLTemplateTileSource(urlTemplate: template))
        tiny.setFallbackEnabled(false)
        let triple = HeadlessMapView(viewport: ViewportSize(width: 256, height: 256), scale: .x3)
        triple.addMapTileLayer(tiny)
        #expect(await settledFrame(triple).drawn.isEmpty)
        #expect(
            tiny.diagnostics.contains {
                $0.kind == .tileFailed && $0.message.contains("64x64") && $0.message.contains("from 128 to 1024 px")
            })
    }

    @Test("a data source's URL to a 512 px image (way 3) and the disk cache keep the image's own size")
    func urlWayAndCacheKeepTheImageSize() async throws {
        let directory = try TemporaryDirectory()
        let image = checkerboard(512, red, blue)
        let file = directory.url.appendingPathComponent("tile.png")
        try PNGEncoder.encode(image).write(to: file)
        let source = RecordingSource(ways: [.url], urlFor: { _ in file })
        let layer = makeLayer(source, cacheRoot: directory)
        layer.setCacheEnabled(true, identifier: "retina")
        let view = HeadlessMapView(viewport: ViewportSize(width: 256, height: 256), scale: .x2)
        view.addMapTileLayer(layer)
        #expect(await settledFrame(view).bitmap == image)
        // A second layer on the same cache folder is served from the disk, still at 512 px.
        let again = RecordingSource(ways: [.url], urlFor: { _ in nil })
        let cached = makeLayer(again, cacheRoot: directory)
        cached.setCacheEnabled(true, identifier: "retina")
        let second = HeadlessMapView(viewport: ViewportSize(width: 256, height: 256), scale: .x2)
        second.addMapTileLayer(cached)
        #expect(await settledFrame(second).bitmap == image)
        #expect(again.snapshot.url.isEmpty)
    }

    @Test("complete(with:) takes an image of an accepted size in the request's format, once")
    func completeWithImage() {
        let got = Locked<Bitmap?>(nil)
        let request = TileRequest(tile: tile(1, 0, 0)) { bitmap in got.withLock { $0 = bitmap } }
        #expect(!request.complete(with: solid(red, size: 64)))  // below half the tile size
        #expect(!request.complete(with: solid(red, size: 2048)))  // above four times
        #expect(!request.complete(with: solid(red, size: 512, format: .bgra8888)))  // another format
        #expect(!request.complete(with: Bitmap(width: 512, height: 256, pixelFormat: .rgba8888)))
        #expect(request.status == .pending)
        #expect(request.complete(with: solid(red, size: 512)))
        #expect(got.withLock { $0 }?.width == 512)
        #expect(!request.complete(with: solid(red, size: 512)))
        #expect(!request.complete())
    }

    // MARK: Opacity per tile (item 3)

    @Test("an opaque layer keeps the layer below from loading only where it has a tile that has not failed")
    func opacityPerTile() async throws {
        // The top layer (opaque) has tiles only in the west half and fails at 1/0/1.
        final class TopSource: MapTileLayerDataSource {
            func mapTileLayer(_ layer: MapTileLayer, hasTileAt tile: TileCoordinate) -> Bool { tile.x == 0 }
            func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData {
                tile == TileCoordinate(validatingZoom: 1, x: 0, y: 1) ? .unavailable : .bitmap(Data(solid(blue).pixels))
            }
        }
        let lowerSource = RecordingSource(ways: [.synchronous], color: { _ in red })
        let top = makeLayer(TopSource())
        top.setZIndex(1)
        top.setFallbackEnabled(false)
        let lower = makeLayer(lowerSource)
        lower.setFallbackEnabled(false)
        let view = viewAt(0, 0, zoom: 1, 512, 512)
        view.addMapTileLayer(lower)
        view.addMapTileLayer(top)
        let frame = await settledFrame(view)
        // Under the top layer's tile 1/0/0 nothing was loaded; the holes (east half, and the failed
        // 1/0/1) show the layer below.
        #expect(Set(lowerSource.snapshot.sync) == [tile(1, 1, 0), tile(1, 1, 1), tile(1, 0, 1)])
        #expect(frame.bitmap.pixel(x: 100, y: 100) == blue)
        #expect(frame.bitmap.pixel(x: 400, y: 100) == red && frame.bitmap.pixel(x: 400, y: 400) == red)
        #expect(frame.bitmap.pixel(x: 100, y: 400) == red)
        #expect(!view.tilePlans()[0].coveredByOpaqueLayer)
    }

    @Test("rectangles: covered by a union of rectangles, not by a part")
    func pixelRectCover() {
        let r = PixelRect(left: 0, top: 0, right: 10, bottom: 10)
        let halves = [PixelRect(left: -5, top: 0, right: 5, bottom: 12), PixelRect(left: 5, top: -1, right: 20, bottom: 10)]
        #expect(r.isCovered(by: halves))
        #expect(!r.isCovered(by: [halves[0]]))
        #expect(!r.isCovered(by: [PixelRect(left: 0, top: 0, right: 10, bottom: 9), PixelRect(left: 0, top: 0, right: 9, bottom: 10)]))
        #expect(!r.isCovered(by: []))
    }

    // MARK: Fallback while loading (item 4)

    @Test("at a new zoom, tiles still loading get their parent fetched as a stand-in, replaced when they arrive")
    func fallbackWhileLoading() async throws {
        // Zoom 1 tiles come at once; zoom 2 tiles are held.
        final class Source: MapTileLayerDataSource {
            let held = CancellableSource()
            func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData {
                tile.zoom == 1 ? .bitmap(Data(solid(tile.x == 0 ? red : green).pixels)) : .notSupplied
            }
            func mapTileLayer(_ layer: MapTileLayer, requestDataForTileAt tile: TileCoordinate, tileRequest: TileRequest)
                -> TileRequestDisposition
            {
                held.mapTileLayer(layer, requestDataForTileAt: tile, tileRequest: tileRequest)
            }
        }
        let source = Source()
        let view = viewAt(0, 0, zoom: 2, 1024, 1024)
        view.addMapTileLayer(makeLayer(source))
        view.update()
        #expect(await eventually { source.held.pending == 16 })
        #expect(view.renderFrame().drawn.isEmpty)  // nothing in memory yet
        view.update()  // the tiles are still loading: their parents are fetched
        #expect(await eventually { view.renderFrame().drawn.count == 16 })
        let approximate = view.renderFrame()
        #expect(approximate.drawn.allSatisfy { $0.isApproximate && $0.sourceZoom == 1 })
        #expect(approximate.bitmap.pixel(x: 100, y: 100) == red && approximate.bitmap.pixel(x: 900, y: 900) == green)
        source.held.release(blue)
        #expect(await view.waitUntilIdle(timeout: TestSupport.settleSeconds))
        let real = view.renderFrame()
        #expect(real.drawn.count == 16 && real.drawn.allSatisfy { !$0.isApproximate })
        #expect(real.bitmap.pixel(x: 100, y: 100) == blue)
    }

    @Test("tiles that keep failing show their ancestor")
    func fallbackForFailingTiles() async {
        let source = RecordingSource(ways: [.synchronous], color: { _ in red })
        final class Failing: MapTileLayerDataSource {
            let inner: RecordingSource
            init(_ inner: RecordingSource) { self.inner = inner }
            func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData {
                tile.zoom == 3 ? .unavailable : inner.mapTileLayer(layer, dataForTileAt: tile)
            }
        }
        let view = viewAt(0, 0, zoom: 3, 512, 512)
        view.addMapTileLayer(makeLayer(Failing(source)))
        let frame = await settledFrame(view)
        #expect(frame.drawn.count == 4 && frame.drawn.allSatisfy { $0.isApproximate && $0.sourceZoom == 2 })
        #expect(frame.bitmap.pixel(x: 256, y: 256) == red)
        #expect(Set(source.snapshot.sync) == [tile(2, 1, 1), tile(2, 2, 1), tile(2, 1, 2), tile(2, 2, 2)])
    }

    // MARK: Zero copy (item 5)

    @Test("completing a request hands its buffer to the bitmap without copying it")
    func zeroCopyCompletion() {
        let address = Locked<Int>(0)
        let request = TileRequest(tile: tile(0, 0, 0)) { bitmap in
            let base = bitmap?.pixels.withUnsafeBytes { bytes in Int(bitPattern: bytes.baseAddress) } ?? -1
            address.withLock { $0 = base }
        }
        request.bytes.storeBytes(of: 0xAB, toByteOffset: 5, as: UInt8.self)
        #expect(request.complete())
        #expect(address.withLock { $0 } == Int(bitPattern: request.bytes.baseAddress))
    }

    // MARK: Scrolling cancels (item 6)

    @Test("tiles that left the view have their requests cancelled; that is no failure")
    func scrollingCancels() async throws {
        let clock = ManualClock()
        let source = CancellableSource()
        let layer = makeLayer(source)
        layer.setFallbackEnabled(false)
        let view = viewAt(0, 0, zoom: 2, 1024, 1024, clock: clock)
        view.addMapTileLayer(layer)
        view.update()
        #expect(await eventually { source.pending == 16 })
        view.setCenter(GeoCoordinate(latitude: 0, longitude: 0), zoomLevel: 0)
        view.viewport = ViewportSize(width: 256, height: 256)
        view.update()
        // Every zoom-2 request saw its cancellation; the data source failed them.
        #expect(await eventually { source.cancelled.withLock { $0.count } == 16 })
        #expect(Set(source.cancelled.withLock { $0 }) == Set(allTiles(2)))
        #expect(await eventually { source.pending == 1 })  // 0/0/0
        source.release(red)
        #expect(await view.waitUntilIdle(timeout: TestSupport.settleSeconds))
        #expect(layer.diagnostics.filter { $0.kind == .tileFailed || $0.kind == .requestDropped }.isEmpty)
        // Back at zoom 2 without the clock moving: asked again at once (a failure would wait for its retry).
        view.setCenter(GeoCoordinate(latitude: 0, longitude: 0), zoomLevel: 2)
        view.viewport = ViewportSize(width: 1024, height: 1024)
        view.update()
        #expect(await eventually { source.pending == 16 })
        #expect(source.asked.withLock { $0.filter { $0.zoom == 2 }.count } == 32)
        source.release(red)
        #expect(await view.waitUntilIdle(timeout: TestSupport.settleSeconds))
    }

    // MARK: Small contradictions (item 8)

    @Test("cache identifiers keep Unicode letters and digits (NFC), strip the rest but _ and -")
    func unicodeCacheIdentifier() {
        #expect(MapTileLayer.sanitizeCacheIdentifier("é-ü_1") == "é-ü_1")
        #expect(MapTileLayer.sanitizeCacheIdentifier("Карта 東京/../٣") == "Карта東京٣")
        #expect(MapTileLayer.sanitizeCacheIdentifier("cafe\u{301}") == "café")
        #expect(MapTileLayer.sanitizeCacheIdentifier("../.. /") == "")
    }
}

func allTiles(_ zoom: Int) -> [TileCoordinate] {
    (0..<(1 << zoom)).flatMap { x in (0..<(1 << zoom)).map { y in tile(zoom, x, y) } }
}
