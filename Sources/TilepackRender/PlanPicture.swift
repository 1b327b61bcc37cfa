import Foundation
import TileLayer
import TilepackAdapter
import TilepackCore
import TilepackOperations
import TilepackPlan

/// `plan --png`: the plan's area as a map, drawn by the tile layer core as `render` draws: the
/// archive's own tiles, only those the plan takes (the layer scales a parent up where a child is
/// not taken, as the map an app shows from the planned file would), under a tint of one colour
/// per zoom: the deepest zoom the plan takes at each place.
package enum PlanPicture {
    /// One colour per zoom, in turn (zoom modulo the count): distinct hues, a legend's worth.
    package static let palette: [(r: UInt8, g: UInt8, b: UInt8)] = [
        (0x44, 0x77, 0xAA), (0x66, 0xCC, 0xEE),
        (0x22, 0x88, 0x33), (0xCC, 0xBB, 0x44),
        (0xEE, 0x66, 0x77), (0xAA, 0x33, 0x77),
        (0xEE, 0x77, 0x33), (0x33, 0x22, 0x88),
    ]
    /// The tint's opacity over the map.
    static let alpha: UInt8 = 120

    package static func colour(zoom: Int) -> (r: UInt8, g: UInt8, b: UInt8) { palette[zoom % palette.count] }

    /// The picture of `plan`, at most `side` pixels a side, over `archive`'s tiles (nil: the tint
    /// alone, as for a tile server's plan); the frame and the view zoom.
    /// - Throws: ``RenderError`` when the plan takes no tile; an archive's errors as they are.
    package static func render(plan: TilePlan, archive: String?, side: Int = 1024, timeout: Double = 60) async throws -> (
        frame: MapFrame, zoom: Int
    ) {
        guard let extent = plan.extent, let deepest = plan.deepestZoom, let lowest = plan.levels.first?.zoom else {
            throw RenderError(.nothingDrawn, "the plan takes no tile: there is nothing to draw")
        }
        let view = Self.view(of: extent, side: side, zooms: lowest...deepest)
        let map = HeadlessMapView(viewport: view.size, center: view.center, zoomLevel: Double(view.zoom))
        if let archive {
            let source = ArchiveTileSource(archive: try ArchiveLocation.open(archive, bundleAccess: .memoryMap))
            let layer = source.makeLayer(name: archive)
            layer.setDataSource(PlannedTiles(inner: source, plan: plan))
            map.addMapTileLayer(layer)
        }
        let tint = MapTileLayer(name: "zoom per place")
        tint.setDataSource(ZoomTint(plan: plan, lowest: lowest, deepest: deepest))
        tint.setPixelFormat(.rgba8888)
        tint.setTransparent(true)
        tint.setZIndex(1)
        map.addMapTileLayer(tint)
        return (await map.render(timeout: timeout), view.zoom)
    }

    /// The whole zoom and view size at which `box` fits `side` pixels (but not below the plan's
    /// lowest zoom, which has the archive's tiles, nor past 4 times `side`), and its centre.
    static func view(of box: GeoBoundingBox, side: Int, zooms: ClosedRange<Int>) -> (zoom: Int, size: ViewportSize, center: GeoCoordinate) {
        func y(_ latitude: Double) -> Double {
            let phi = max(-85.0511, min(85.0511, latitude)) * .pi / 180
            return (1 - log(tan(phi) + 1 / cos(phi)) / .pi) / 2
        }
        let west = (box.west + 180) / 360
        var width = (box.east + 180) / 360 - west
        if width <= 0 { width += 1 }
        let top = y(box.north), height = max(1e-9, y(box.south) - top)
        let fits = Int(log2(Double(side) / (256 * max(width, height))).rounded(.down))
        let zoom = max(0, min(20, max(fits, min(zooms.lowerBound, fits + 2))))
        let scale = 256 * pow(2, Double(zoom))
        let size = ViewportSize(width: max(64, Int((width * scale).rounded(.up))), height: max(64, Int((height * scale).rounded(.up))))
        let middle = top + height / 2
        let latitude = atan(sinh(.pi * (1 - 2 * middle))) * 180 / .pi
        var longitude = (west + width / 2) * 360 - 180
        if longitude > 180 { longitude -= 360 }
        return (zoom, size, GeoCoordinate(latitude: latitude, longitude: longitude))
    }
}

/// The archive's tiles that the plan takes, and no other.
struct PlannedTiles: MapTileLayerDataSource {
    let inner: ArchiveTileSource
    let plan: TilePlan

    func mapTileLayer(_ layer: MapTileLayer, hasTileAt tile: TileCoordinate) -> Bool {
        plan.contains(tile) && inner.mapTileLayer(layer, hasTileAt: tile)
    }

    func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData {
        inner.mapTileLayer(layer, dataForTileAt: tile)
    }

    func mapTileLayer(_ layer: MapTileLayer, requestDataForTileAt tile: TileCoordinate, tileRequest: TileRequest) -> TileRequestDisposition {
        inner.mapTileLayer(layer, requestDataForTileAt: tile, tileRequest: tileRequest)
    }
}

/// Tiles of the tint: each place coloured by the deepest zoom the plan takes there (to a pixel
/// at most 8 zooms below the tile's), clear outside the plan.
struct ZoomTint: MapTileLayerDataSource {
    let plan: TilePlan
    let lowest: Int
    let deepest: Int

    func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData {
        let size = layer.tileSize
        let levels = max(0, min(deepest - tile.zoom, 8, Int(log2(Double(size)))))
        let blocks = 1 << levels, block = size / blocks
        var pixels = [UInt8](repeating: 0, count: size * size * 4)
        for by in 0..<blocks {
            for bx in 0..<blocks {
                guard let zoom = zoom(x: tile.x << levels + bx, y: tile.y << levels + by, at: tile.zoom + levels) else { continue }
                let colour = PlanPicture.colour(zoom: zoom)
                for row in (by * block)..<((by + 1) * block) {
                    for column in (bx * block)..<((bx + 1) * block) {
                        let at = (row * size + column) * 4
                        pixels[at] = colour.r
                        pixels[at + 1] = colour.g
                        pixels[at + 2] = colour.b
                        pixels[at + 3] = PlanPicture.alpha
                    }
                }
            }
        }
        return .bitmap(Data(pixels))
    }

    /// The deepest zoom the plan takes at the tile (x, y) of zoom `z`: its own or an ancestor's.
    func zoom(x: Int, y: Int, at z: Int) -> Int? {
        for k in stride(from: min(z, deepest), through: lowest, by: -1) {
            let shift = z - k
            if plan.contains(TileCoordinate(uncheckedZoom: k, x: x >> shift, y: y >> shift)) { return k }
        }
        return nil
    }
}
