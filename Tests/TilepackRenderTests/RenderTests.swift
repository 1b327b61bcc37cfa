import Foundation
import Testing
import TileLayer
import TilepackCore
import TilepackImaging
import TilepackOperations
import TilepackTestSupport

@testable import TilepackRender

/// `render`'s layer composition: transparent URL tiles, views with no tile, sparse trees, `{-y}` templates.
@Suite struct RenderTests {
    static func png(_ color: RGBA8) throws -> Data {
        try PNGEncoder.encode(Bitmap(width: 256, height: 256, pixelFormat: .rgba8888, fill: color))
    }

    static func writeTree(_ root: String, tiles: [TileCoordinate], color: RGBA8, scheme: TileScheme = .xyz) throws {
        for tile in tiles {
            let url = URL(fileURLWithPath: "\(root)/\(tile.zoom)/\(tile.x)/\(tile.row(in: scheme)).png")
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try png(color).write(to: url)
        }
    }

    static func render(_ inputs: [String], lon: Double, lat: Double, zoom: Double, size: Int = 64) async throws -> MapRender.Result {
        try await MapRender.render(
            inputs: inputs, center: GeoCoordinate(latitude: lat, longitude: lon), zoom: zoom,
            viewport: ViewportSize(width: size, height: size), scale: .x1,
            options: RenderLayerOptions(), timeout: TestSupport.settleSeconds)
    }

    @Test func transparentURLTilesAreNotPaintedBlack() async throws {
        let dir = try TemporaryDirectory()
        try Self.writeTree(dir.file("t"), tiles: Array(try TileCover.world(zooms: 0...1)), color: RGBA8(r: 0, g: 0, b: 0, a: 0))
        let result = try await Self.render([dir.file("t") + "/{z}/{x}/{y}.png"], lon: -20, lat: 10, zoom: 1)
        let pixel = result.frame.bitmap.pixel(x: 32, y: 32)
        #expect(pixel == RGBA8(r: 0xF2, g: 0xEF, b: 0xE9, a: 0xFF), "\(pixel)")
    }

    @Test func aViewWithNoTileIsAnError() async throws {
        let dir = try TemporaryDirectory()
        // An archive of Europe at zooms 5-6, looked at over America.
        let tiles = Array(try TileCover(boundingBox: GeoBoundingBox(west: 5, south: 45, east: 15, north: 55), zooms: 5...6))
        try Self.writeTree(dir.file("t"), tiles: tiles, color: RGBA8(r: 200, g: 10, b: 10, a: 255))
        _ = try TileImporter.run(source: dir.file("t"), destination: dir.file("e.mbtiles"), options: ImportOptions())
        do {
            _ = try await Self.render([dir.file("e.mbtiles")], lon: -100, lat: 40, zoom: 5.5)
            Issue.record("rendered a view with no tile")
        } catch let error as RenderError {
            #expect(error.kind == .nothingDrawn)
            #expect(error.description.contains("shows no tile of any input (\(dir.file("e.mbtiles")) covers "), "\(error)")
            #expect(error.description.contains("at zooms 5...6"), "\(error)")
        }
        // Over Europe the same archive renders.
        let europe = try await Self.render([dir.file("e.mbtiles")], lon: 10, lat: 50, zoom: 5.5)
        #expect(!europe.frame.drawn.isEmpty)
    }

    @Test func absentTilesOfASparseTreeAreOneLine() async throws {
        let dir = try TemporaryDirectory()
        try Self.writeTree(dir.file("t"), tiles: [TileCoordinate(validatingZoom: 1, x: 0, y: 0)!], color: RGBA8(r: 1, g: 2, b: 3, a: 255))
        let template = dir.file("t") + "/{z}/{x}/{y}.png"
        let layer = try URLTemplateLayerFactory().makeLayer(
            for: template, options: RenderLayerOptions(tileSize: 256, flipped: false, maximumZ: 21))
        let view = HeadlessMapView(
            viewport: ViewportSize(width: 512, height: 512), center: GeoCoordinate(latitude: 0, longitude: 0), zoomLevel: 1)
        _ = view.addMapTileLayer(layer)
        let frame = await view.render(timeout: TestSupport.settleSeconds)
        #expect(frame.drawn.filter { !$0.isApproximate }.count == 1)
        let failed = layer.diagnostics.filter { $0.kind == .tileFailed }
        #expect(failed.count >= 3, "the library reports each absent tile: \(failed)")
        let lines = MapRender.failureSummary(layer: template, diagnostics: layer.diagnostics)
        #expect(lines.count == 1, "\(lines)")
        #expect(lines.first?.hasPrefix("note: \(template): 3 tiles of the view absent (1/") == true, "\(lines)")
    }

    /// Issue 29 item 8: `{-y}` (TMS rows, as Leaflet, QGIS and OpenLayers write it) is a template.
    @Test func aTMSTemplateWithMinusYIsALayer() async throws {
        let dir = try TemporaryDirectory()
        // Only the north-west tile of zoom 1, stored under its TMS row (1).
        let northWest = try TileCoordinate(zoom: 1, x: 0, y: 0)
        try Self.writeTree(dir.file("t"), tiles: [northWest], color: RGBA8(r: 1, g: 2, b: 3, a: 255), scheme: .tms)
        let template = dir.file("t") + "/{z}/{x}/{-y}.png"
        #expect(URLTemplateLayerFactory().recognises(template))
        let result = try await Self.render([template], lon: 0, lat: 0, zoom: 1, size: 512)
        #expect(result.frame.drawn.filter { !$0.isApproximate }.map(\.tile) == [northWest])
        #expect(result.frame.bitmap.pixel(x: 128, y: 128) == RGBA8(r: 1, g: 2, b: 3, a: 255))
    }

    @Test func anInputThatIsNoLayerIsAnInputError() async throws {
        let dir = try TemporaryDirectory()
        do {
            // A local template without a row (an http(s) URL that is no template is taken for a remote archive).
            _ = try RenderLayerFactories.makeLayer(for: dir.file("t") + "/{z}/{x}.png", options: RenderLayerOptions())
            Issue.record("took a template without a row")
        } catch let error as RenderError {
            #expect(error.kind == .invalidInput && error.description.contains("{y} or {-y}"), "\(error)")
        }
        await #expect(throws: RenderError.self) {
            _ = try await MapRender.render(
                inputs: [], center: GeoCoordinate(latitude: 0, longitude: 0), zoom: 0,
                viewport: ViewportSize(width: 8, height: 8), scale: .x1,
                options: RenderLayerOptions(), timeout: 1)
        }
    }
}
