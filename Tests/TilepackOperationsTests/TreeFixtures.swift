import Foundation
import TilepackCore
import TilepackImaging
import TilepackTestSupport

/// Builds small tile trees on disk for the operation tests.
enum TreeFixtures {
    /// A PNG that differs for every tile (its colour comes from the coordinate).
    static func png(_ tile: TileCoordinate, size: Int = 256) throws -> Data {
        let color = RGBA8(
            r: UInt8(truncatingIfNeeded: tile.x * 37 + tile.zoom * 11),
            g: UInt8(truncatingIfNeeded: tile.y * 53 + 7), b: UInt8(truncatingIfNeeded: tile.zoom * 91))
        var bitmap = Bitmap(width: size, height: size, pixelFormat: .rgba8888, fill: color)
        bitmap.drawText("\(tile)", x: 4, y: 4, color: .black)
        return try PNGEncoder.encode(bitmap)
    }

    /// Every tile of zooms `zooms`.
    static func tiles(_ zooms: ClosedRange<Int>) -> [TileCoordinate] {
        zooms.flatMap { z in
            (0..<(1 << z)).flatMap { x in (0..<(1 << z)).compactMap { y in TileCoordinate(validatingZoom: z, x: x, y: y) } }
        }
    }

    /// Writes `tiles` as `root/z/a/b.ext` in `layout` and `scheme`; returns the bytes written per tile.
    @discardableResult
    static func writeTree(
        _ root: String, tiles: [TileCoordinate], layout: String = "zxy", scheme: TileScheme = .xyz,
        ext: String = "png", content: (TileCoordinate) throws -> Data = { try png($0) }
    ) throws -> [TileCoordinate: Data] {
        var written: [TileCoordinate: Data] = [:]
        for tile in tiles {
            let row = tile.row(in: scheme)
            let (a, b) = layout == "zxy" ? (tile.x, row) : (row, tile.x)
            let folder = "\(root)/\(tile.zoom)/\(a)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let data = try content(tile)
            try data.write(to: URL(fileURLWithPath: "\(folder)/\(b).\(ext)"))
            written[tile] = data
        }
        return written
    }

    static func write(_ text: String, to path: String) throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }
}
