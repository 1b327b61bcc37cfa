import ArgumentParser
import Foundation
import Testing
import TileLayer
import TilepackCore
import TilepackImaging
import TilepackOperations
import TilepackTestSupport
@testable import tilepack

/// `tilepack render`: transparent URL tiles, views with no tile, sparse trees.
@Suite struct RenderTests {
    static func png(_ color: RGBA8) throws -> Data {
        try PNGEncoder.encode(Bitmap(width: 256, height: 256, pixelFormat: .rgba8888, fill: color))
    }

    static func writeTree(_ root: String, tiles: [TileCoordinate], color: RGBA8) throws {
        for tile in tiles {
            let url = URL(fileURLWithPath: "\(root)/\(tile.zoom)/\(tile.x)/\(tile.y).png")
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try png(color).write(to: url)
        }
    }

    static func render(_ arguments: [String]) async throws {
        let command = try #require(try CommandLineArguments.parse(["render"] + arguments) as? RenderCommand)
        try await command.run()
    }

    @Test func transparentURLTilesAreNotPaintedBlack() async throws {
        let dir = try TemporaryDirectory()
        try Self.writeTree(dir.file("t"), tiles: Array(try TileCover.world(zooms: 0...1)), color: RGBA8(r: 0, g: 0, b: 0, a: 0))
        try await Self.render([dir.file("t") + "/{z}/{x}/{y}.png", "--center", "-20,10", "--zoom", "1", "--size", "64x64", "-o", dir.file("a.png")])
        let bitmap = try ImageDecoder.decode(try Data(contentsOf: URL(fileURLWithPath: dir.file("a.png"))), pixelFormat: .rgba8888)
        let pixel = bitmap.pixel(x: 32, y: 32)
        #expect(pixel == RGBA8(r: 0xF2, g: 0xEF, b: 0xE9, a: 0xFF), "\(pixel)")
    }

    @Test func aViewWithNoTileIsAnErrorAndWritesNothing() async throws {
        let dir = try TemporaryDirectory()
        // An archive of Europe at zooms 5-6, looked at over America.
        let tiles = Array(try TileCover(boundingBox: GeoBoundingBox(west: 5, south: 45, east: 15, north: 55), zooms: 5...6))
        try Self.writeTree(dir.file("t"), tiles: tiles, color: RGBA8(r: 200, g: 10, b: 10, a: 255))
        _ = try TileImporter.run(source: dir.file("t"), destination: dir.file("e.mbtiles"), options: ImportOptions())
        do {
            try await Self.render([dir.file("e.mbtiles"), "--center", "-100,40", "--zoom", "5.5", "--size", "64x64", "-o", dir.file("a.png")])
            Issue.record("rendered a view with no tile")
        } catch {
            #expect(Tilepack.message(for: error).contains("shows no tile of any input (\(dir.file("e.mbtiles")) covers "), "\(error)")
            #expect(Tilepack.message(for: error).contains("at zooms 5...6"), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("a.png")))
        // Over Europe the same archive renders.
        try await Self.render([dir.file("e.mbtiles"), "--center", "10,50", "--zoom", "5.5", "--size", "64x64", "-o", dir.file("b.png")])
        #expect(FileManager.default.fileExists(atPath: dir.file("b.png")))
    }

    @Test func absentTilesOfASparseTreeAreOneLine() async throws {
        let dir = try TemporaryDirectory()
        try Self.writeTree(dir.file("t"), tiles: [TileCoordinate(validatingZoom: 1, x: 0, y: 0)!], color: RGBA8(r: 1, g: 2, b: 3, a: 255))
        let template = dir.file("t") + "/{z}/{x}/{y}.png"
        let layer = try URLTemplateLayerFactory().makeLayer(for: template, options: RenderLayerOptions(tileSize: 256, flipped: false, maximumZ: 21))
        let view = HeadlessMapView(viewport: ViewportSize(width: 512, height: 512), center: GeoCoordinate(latitude: 0, longitude: 0), zoomLevel: 1)
        _ = view.addMapTileLayer(layer)
        let frame = await view.render(timeout: TestSupport.settleSeconds)
        #expect(frame.drawn.filter { !$0.isApproximate }.count == 1)
        let failed = layer.diagnostics.filter { $0.kind == .tileFailed }
        #expect(failed.count >= 3, "the library reports each absent tile: \(failed)")
        let lines = RenderCommand.failureSummary(layer: template, diagnostics: layer.diagnostics)
        #expect(lines.count == 1, "\(lines)")
        #expect(lines.first?.hasPrefix("note: \(template): 3 tiles of the view absent (1/") == true, "\(lines)")
    }
}
