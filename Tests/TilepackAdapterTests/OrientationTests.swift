import Foundation
import Testing
import TileLayer
import TilepackAdapter
import TilepackCore
@_spi(TilepackInternal) import TilepackImaging
import TilepackStorage
import TilepackTestSupport

/// Tiles drawn with their own z/x/y label, stored in MBTiles (TMS rows) and bundles, rendered
/// through the headless view: every label must come out right side up, in its own place.
@Suite struct OrientationTests {
    /// Checks, pixel by pixel, that the label `z/x/y` of `t` sits where `labelledTile` drew it in
    /// the frame region of the tile, and that the whole tile is exactly the stored one.
    func expectLabel(_ t: TileCoordinate, in frame: Bitmap, originX: Int, originY: Int, size: Int = 256) throws {
        let origin = labelOrigin(size: size)
        let text = t.description
        var glyphPixels = 0
        for (index, character) in text.enumerated() {
            for row in 0..<TileFont.glyphHeight {
                for column in 0..<TileFont.glyphWidth {
                    let x = originX + origin.x + (index * (TileFont.glyphWidth + 1) + column) * origin.scale
                    let y = originY + origin.y + row * origin.scale
                    let expected = TileFont.isSet(character, column: column, row: row) ? black : background(of: t)
                    if expected == black { glyphPixels += 1 }
                    // Every pixel of the font pixel's square.
                    for dy in 0..<origin.scale {
                        for dx in 0..<origin.scale where frame.pixel(x: x + dx, y: y + dy) != expected {
                            Issue.record(
                                "tile \(t): label pixel (\(x + dx), \(y + dy)) of '\(character)' is \(frame.pixel(x: x + dx, y: y + dy)), expected \(expected)"
                            )
                            return
                        }
                    }
                }
            }
        }
        #expect(glyphPixels > 20)
        // The north-west mark is at the top left, and the other corners are not marked.
        #expect(frame.pixel(x: originX + 1, y: originY + 1) == white)
        #expect(frame.pixel(x: originX + size - 2, y: originY + size - 2) == background(of: t))
        #expect(frame.pixel(x: originX + 1, y: originY + size - 2) == background(of: t))
        #expect(try crop(frame, x: originX, y: originY, size: size) == labelledTile(t, size: size))
    }

    func renderWorld(_ source: ArchiveTileSource, zoom: Int, tileSize: Int = 256, format: PixelFormat = .rgba8888) async throws -> MapFrame
    {
        let layer = source.makeLayer(tileSize: tileSize, pixelFormat: format)
        let view = worldView(zoom: zoom, layer: layer)
        let frame = await view.render(timeout: TestSupport.settleSeconds)
        #expect(frame.drawn.allSatisfy { !$0.isApproximate })
        return frame
    }

    @Test func mbtilesStoresTMSRowsAndTheLabelsComeOutRightSideUp() async throws {
        let dir = try TemporaryDirectory("adapter")
        let path = dir.file("labels.mbtiles")
        try writeMBTiles(path, tiles: allTiles(0...2))

        // Storage really holds TMS rows: 2/1/0 (XYZ, north) is stored as tile_row 3.
        let archive = try MBTilesArchive(path: path)
        var rows: [String] = []
        try archive.forEachRawRow { row in
            if case .integer(2) = row.zoomLevel, case .integer(1) = row.tileColumn { rows.append("\(row.tileRow)") }
        }
        #expect(Set(rows) == ["0", "1", "2", "3"])
        #expect(try archive.containsTile(at: tile(2, 1, 0)))

        let source = ArchiveTileSource(archive: archive)
        let frame = try await renderWorld(source, zoom: 2)
        #expect(frame.drawn.count == 16)
        for t in allTiles(2...2) {
            try expectLabel(t, in: frame.bitmap, originX: t.x * 256, originY: t.y * 256)
        }
    }

    @Test(arguments: ["png", "raw-rgba", "raw-bgra", "raw-rgb"])
    func bundleLabelsComeOutRightSideUp(_ kind: String) async throws {
        let dir = try TemporaryDirectory("adapter")
        let path = dir.file("labels.tilepack")
        let encoding: TestEncoding =
            switch kind {
            case "raw-rgba": .raw(.rgba8888)
            case "raw-bgra": .raw(.bgra8888)
            case "raw-rgb": .raw(.rgb888)
            default: .png
            }
        try writeBundle(path, tiles: allTiles(0...2), encoding: encoding)
        let source = try ArchiveTileSource(path: path)
        let frame = try await renderWorld(source, zoom: 2)
        #expect(frame.drawn.count == 16)
        for t in allTiles(2...2) {
            try expectLabel(t, in: frame.bitmap, originX: t.x * 256, originY: t.y * 256)
        }
    }

    @Test func everyLayerPixelFormatGetsTheSameImage() async throws {
        let dir = try TemporaryDirectory("adapter")
        let mbtiles = dir.file("labels.mbtiles"), raw = dir.file("raw.tilepack")
        try writeMBTiles(mbtiles, tiles: allTiles(1...1))
        try writeBundle(raw, tiles: allTiles(1...1), encoding: .raw(.rgba8888))
        for path in [mbtiles, raw] {
            let source = try ArchiveTileSource(path: path)
            for format in PixelFormat.allCases {
                let frame = try await renderWorld(source, zoom: 1, format: format)
                for t in allTiles(1...1) {
                    if format == .rgb565 {
                        // 5/6/5 bits per channel: the colours are rounded, the places are the same.
                        let expected = labelledTile(t).converted(to: .rgb565).converted(to: .rgba8888)
                        #expect(try crop(frame.bitmap, x: t.x * 256, y: t.y * 256, size: 256) == expected)
                    } else {
                        try expectLabel(t, in: frame.bitmap, originX: t.x * 256, originY: t.y * 256)
                    }
                }
            }
        }
    }

    @Test func rawBundleIsDecompressedStraightIntoTheRequestBuffer() throws {
        let dir = try TemporaryDirectory("adapter")
        let path = dir.file("raw.tilepack")
        try writeBundle(path, tiles: allTiles(0...1), encoding: .raw(.bgra8888))
        let archive = try BundleArchive(path: path)
        let reader = ArchiveTileReader(archive: archive)
        for t in allTiles(0...1) {
            var buffer = [UInt8](repeating: 0xAA, count: 256 * 256 * 4)
            let outcome = try buffer.withUnsafeMutableBytes { try reader.read(t, tileSize: 256, pixelFormat: .bgra8888, into: $0) }
            #expect(outcome == .delivered)
            #expect(buffer == labelledTile(t).converted(to: .bgra8888).pixels)
            // Asked in another pixel format, the payload is converted.
            var rgba = [UInt8](repeating: 0, count: 256 * 256 * 4)
            _ = try rgba.withUnsafeMutableBytes { try reader.read(t, tileSize: 256, pixelFormat: .rgba8888, into: $0) }
            #expect(rgba == labelledTile(t).pixels)
        }
    }
}
