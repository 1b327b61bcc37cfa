import Foundation
import Testing
import Tilepack
import TilepackTestSupport

/// `import Tilepack` alone gives an app the whole read path: open an archive, serve it to a tile
/// layer, render a view (this file imports no other tilepack module).
@Suite struct UmbrellaTests {
    @Test func oneImportReadsAndShowsTheSampleBundle() async throws {
        let path = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
        let archive = try openTileArchive(path: path)
        #expect(try archive.tileCount() == 341)
        let bytes = try #require(try archive.tileData(at: TileCoordinate(zoom: 1, x: 1, y: 0)))
        #expect(TileFormat.sniff(bytes) == .png)

        let source = try ArchiveTileSource(path: path)
        let layer = source.makeLayer(pixelFormat: .rgba8888)
        let view = HeadlessMapView(viewport: ViewportSize(width: 256, height: 256), zoomLevel: 0)
        view.addMapTileLayer(layer)
        let frame = await view.render(timeout: TestSupport.settleSeconds)
        #expect(frame.drawn.count == 1)
        let tile = try #require(try source.archive.bitmap(at: TileCoordinate(zoom: 0, x: 0, y: 0), pixelFormat: .rgba8888))
        #expect(frame.bitmap.pixel(x: 17, y: 200) == tile.pixel(x: 17, y: 200))
    }
}
