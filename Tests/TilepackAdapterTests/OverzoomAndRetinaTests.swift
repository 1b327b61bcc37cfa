import Foundation
import Testing
import TileLayer
import TilepackAdapter
import TilepackCore
import TilepackImaging
import TilepackStorage
import TilepackTestSupport

/// Issue 14: archive layers past their deepest zoom, and on 2x screens.
@Suite struct OverzoomAndRetinaTests {
    @Test func pastTheDeepestZoomTheDeepestTilesAreScaledUp() async throws {
        let dir = try TemporaryDirectory("adapter")
        let path = dir.file("labels.tilepack")
        try writeBundle(path, tiles: allTiles(0...2), metadata: ["minzoom": "0", "maxzoom": "2"])
        let source = try ArchiveTileSource(path: path)
        let layer = source.makeLayer()
        // Shown to the view's deepest level; hasTile says no past the archive's levels.
        #expect(layer.isShown(atZoomLevel: 3) && layer.isShown(atZoomLevel: 20))
        #expect(!source.mapTileLayer(layer, hasTileAt: tile(4, 5, 6)))
        #expect(source.mapTileLayer(layer, hasTileAt: tile(2, 1, 1)))

        // Zoom 4 over the middle of tile 2/1/1: tiles 4/5/5, 4/6/5, 4/5/6, 4/6/6, from 2/1/1.
        let center = WebMercator.coordinate(atWorldPoint: MercatorPoint(x: 6.0 / 16, y: 6.0 / 16))
        let view = HeadlessMapView(viewport: ViewportSize(width: 512, height: 512), center: center, zoomLevel: 4)
        view.addMapTileLayer(layer)
        let frame = await view.render(timeout: TestSupport.settleSeconds)
        #expect(frame.drawn.count == 4)
        #expect(frame.drawn.allSatisfy { $0.isApproximate && $0.sourceZoom == 2 })
        // What is drawn is the ancestor's quarter-quarter, cropped and scaled: tile 4/5/5 is
        // (column 1, row 1) of the 4 x 4 grid below 2/1/1.
        let expected = try labelledTile(tile(2, 1, 1)).subSquare(levelsDown: 2, column: 1, row: 1, outputSize: 256)
        #expect(try crop(frame.bitmap, x: 0, y: 0, size: 256) == expected)
        #expect(source.layerConfiguration().servedZoomLevels == 0...2)
    }

    @Test func onA2xScreenA256LayerGetsTheDeeperTilesPixelForPixel() async throws {
        let dir = try TemporaryDirectory("adapter")
        let path = dir.file("labels.mbtiles")
        try writeMBTiles(path, tiles: allTiles(0...3))
        let source = try ArchiveTileSource(path: path)
        let layer = source.makeLayer()
        #expect(layer.tileSize == 256)
        // Zoom 2, 2x screen, over tile 2/1/1: its placement is 512 output pixels, made of the four
        // zoom-3 tiles at their own pixels.
        let center = WebMercator.coordinate(atWorldPoint: MercatorPoint(x: 1.5 / 4, y: 1.5 / 4))
        let view = HeadlessMapView(viewport: ViewportSize(width: 256, height: 256), scale: .x2, center: center, zoomLevel: 2)
        view.addMapTileLayer(layer)
        let frame = await view.render(timeout: TestSupport.settleSeconds)
        let placement = try #require(view.tilePlans()[0].placements.first { $0.tile == tile(2, 1, 1) })
        #expect(placement.right - placement.left == 512)
        #expect(placement.left == 0 && placement.top == 0)
        for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            #expect(try crop(frame.bitmap, x: dx * 256, y: dy * 256, size: 256) == labelledTile(tile(3, 2 + dx, 2 + dy)))
        }
        // At zoom 3 (the deepest) there is nothing deeper: the 256 px tiles are enlarged as before.
        view.zoomLevel = 3
        let deepest = await view.render(timeout: TestSupport.settleSeconds)
        #expect(deepest.drawn.allSatisfy { !$0.isApproximate })
    }
}
