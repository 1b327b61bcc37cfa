import Foundation
import Testing
import TilepackCore
import TilepackImaging
import TilepackTestSupport

@testable import TileLayer

/// The guide's SimpleBitmapTileLayer: red and green 256x256 RGBA bitmaps made once, copied into
/// each tile request on a global queue, completed after the copy.
final class SimpleBitmapTileLayerSource: MapTileLayerDataSource {
    let redBitmap: Data
    let greenBitmap: Data

    init() {
        var red = Data(count: 256 * 256 * 4)
        var green = Data(count: 256 * 256 * 4)
        for i in stride(from: 0, to: 256 * 256 * 4, by: 4) {
            red[i] = 0xFF
            red[i + 1] = 0x00
            red[i + 2] = 0x00
            red[i + 3] = 0xFF
            green[i] = 0x00
            green[i + 1] = 0xFF
            green[i + 2] = 0x00
            green[i + 3] = 0xFF
        }
        redBitmap = red
        greenBitmap = green
    }

    func mapTileLayer(_ layer: MapTileLayer, requestDataForTileAt tile: TileCoordinate, tileRequest: TileRequest) -> TileRequestDisposition
    {
        DispatchQueue.global().async {
            let x = tile.x, y = tile.y
            let bitmap = ((x % 2 == 0 && y % 2 == 1) || (x % 2 == 1 && y % 2 == 0)) ? self.redBitmap : self.greenBitmap
            // Copy exactly bytesLength, then complete.
            bitmap.withUnsafeBytes { tileRequest.bytes.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<tileRequest.bytesLength])) }
            tileRequest.complete(.complete)
        }
        return .accepted
    }
}

@Suite("The seeds' examples")
struct SeedExampleTests {
    @Test("red/green checkerboard bitmap layer: every tile's pixels have its colour", arguments: [(3.0, ScreenScale.x1), (5.5, .x2)])
    func checkerboard(zoom: Double, scale: ScreenScale) async throws {
        let layer = MapTileLayer(name: "SimpleBitmapTileLayer")
        layer.setDataSource(SimpleBitmapTileLayerSource())
        layer.setPixelFormat(.rgba8888)
        layer.setTransparent(false)
        layer.setMapLayerType(.area)
        let view = HeadlessMapView(
            viewport: ViewportSize(width: 700, height: 500), scale: scale,
            center: GeoCoordinate(latitude: 48.85, longitude: 2.35), zoomLevel: zoom)
        #expect(view.addMapTileLayer(layer))
        let frame = await settledFrame(view)
        let placements = view.tilePlans()[0].placements
        #expect(placements.count >= 6)
        #expect(frame.drawn.count == placements.count && frame.drawn.allSatisfy { !$0.isApproximate })
        for p in placements {
            let expected = (p.tile.x + p.tile.y) % 2 == 1 ? red : green
            // Centre and the four corners inside the tile (clipped to the image).
            let xs = [max(p.left, 0) + 1, (max(p.left, 0) + min(p.right, frame.bitmap.width)) / 2, min(p.right, frame.bitmap.width) - 2]
            let ys = [max(p.top, 0) + 1, (max(p.top, 0) + min(p.bottom, frame.bitmap.height)) / 2, min(p.bottom, frame.bitmap.height) - 2]
            for x in xs { for y in ys { #expect(frame.bitmap.pixel(x: x, y: y) == expected, "tile \(p.tile) at \(x),\(y)") } }
        }
        let png = try PNGEncoder.encode(frame.bitmap)
        #expect(png.count > 100)
    }

    /// The guide's OlympicParkTileLayer, with the tile server replaced by files on disk named as
    /// its URL format does: `<zoom>/<y>/<x>.png`.
    final class OlympicParkSource: MapTileLayerDataSource {
        let root: URL
        init(root: URL) { self.root = root }
        func mapTileLayer(_ layer: MapTileLayer, urlForTileAt tile: TileCoordinate) -> URL? {
            root.appendingPathComponent("\(tile.zoom)/\(tile.y)/\(tile.x).png")
        }
    }

    static let park = GeoBoundingBox(west: -0.042772, south: 51.525941, east: 0.028296, north: 51.557)

    static func parkLayer(root: URL, cacheRoot: URL) -> MapTileLayer {
        let layer = MapTileLayer(name: "OlympicParkTileLayer", cacheRootDirectory: cacheRoot)
        layer.setDataSource(OlympicParkSource(root: root))
        layer.setBoundingBox(park)
        layer.hide(fromZoomLevel: 0, toZoomLevel: 12)
        layer.hide(fromZoomLevel: 16, toZoomLevel: 20)
        layer.setCacheTimeToLive(60 * 60 * 24)
        layer.setCacheSizeLimit(1024 * 1024 * 64)
        layer.setCacheEnabled(true, identifier: "OlympicParkTileLayer")
        return layer
    }

    @Test("bounded, zoom-limited, cached URL layer served from files (the Olympic Park example)")
    func olympicPark() async throws {
        let directory = try TemporaryDirectory()
        let cacheRoot = try TemporaryDirectory()
        let cover = try TileCover(boundingBox: Self.park, zooms: 13...15)
        let hosted = Array(cover)
        #expect(cover.count(atZoom: 14) >= 4)
        // Files named <zoom>/<y>/<x>.png; each tile's colour encodes its column and row.
        let root = directory.url.appendingPathComponent("maptiles")
        func color(_ t: TileCoordinate) -> RGBA8 { RGBA8(r: UInt8(t.x % 256), g: UInt8(t.y % 256), b: UInt8(t.zoom), a: 255) }
        for t in hosted {
            let folder = root.appendingPathComponent("\(t.zoom)/\(t.y)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try PNGEncoder.encode(solid(color(t))).write(to: folder.appendingPathComponent("\(t.x).png"))
        }

        let layer = Self.parkLayer(root: root, cacheRoot: cacheRoot.url)
        let centre = GeoCoordinate(latitude: (Self.park.north + Self.park.south) / 2, longitude: (Self.park.west + Self.park.east) / 2)
        let view = HeadlessMapView(viewport: ViewportSize(width: 1200, height: 900), center: centre, zoomLevel: 14)
        view.addMapTileLayer(layer)
        let frame = await settledFrame(view)
        let plan = view.tilePlans()[0]
        // Requested exactly the zoom-14 tiles in view that overlap the park; all of them exist.
        #expect(Set(plan.tiles) == Set(hosted.filter { $0.zoom == 14 }))
        #expect(layer.diagnostics.filter { $0.kind == .tileFailed }.isEmpty)
        for p in plan.placements {
            let x = min(max((p.left + p.right) / 2, 0), frame.bitmap.width - 1)
            let y = min(max((p.top + p.bottom) / 2, 0), frame.bitmap.height - 1)
            #expect(frame.bitmap.pixel(x: x, y: y) == color(p.tile))
        }
        // Outside the park: background.
        let outside = frame.bitmap.pixel(x: 0, y: 0)
        #expect(outside == RGBA8(r: 0xF2, g: 0xEF, b: 0xE9, a: 0xFF) || plan.placements.contains { $0.left <= 0 && $0.top <= 0 })

        // Hidden levels: nothing requested.
        view.zoomLevel = 12.5
        #expect(view.tilePlans()[0].tiles.isEmpty && view.tilePlans()[0].tileZoom == nil)
        view.zoomLevel = 16
        #expect(view.tilePlans()[0].tiles.isEmpty)
        view.removeMapTileLayer(layer)

        // The cache persists: with the server gone, a new layer draws the same tiles from disk.
        try FileManager.default.removeItem(at: root)
        let again = Self.parkLayer(root: root, cacheRoot: cacheRoot.url)
        let view2 = HeadlessMapView(viewport: ViewportSize(width: 1200, height: 900), center: centre, zoomLevel: 14)
        view2.addMapTileLayer(again)
        let cached = await settledFrame(view2)
        #expect(cached.bitmap == frame.bitmap)
        #expect(again.diagnostics.filter { $0.kind == .tileFailed }.isEmpty)
    }
}
