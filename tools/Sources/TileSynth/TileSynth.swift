import BenchSupport
import Foundation
import TilepackCore
@_spi(TilepackInternal) import TilepackImaging

/// Synthetic tiles for samples, tests and benchmarks: deterministic, different for every tile,
/// and map-like (land, water, a graticule, the tile's own `z/x/y` written in its top-left corner).
public enum TileSynth {
    /// Where the label is drawn: its top-left corner, in tile pixels, and its scale.
    public static let labelOrigin = (x: 6, y: 6)
    public static let labelScale = 2
    public static let labelColor = RGBA8(r: 20, g: 20, b: 20)
    public static let labelBackground = RGBA8(r: 255, g: 255, b: 255)

    static let water = RGBA8(r: 170, g: 211, b: 223)
    static let land = RGBA8(r: 242, g: 239, b: 233)
    static let park = RGBA8(r: 200, g: 226, b: 180)
    static let graticule = RGBA8(r: 150, g: 150, b: 160)

    /// A map-like tile: water and land from a smooth function of longitude and latitude (so that
    /// neighbouring tiles and zoom levels agree), graticule lines (90 / 2^z degrees apart), and the label.
    public static func mapTile(_ tile: TileCoordinate, size: Int = 256) -> Bitmap {
        var bitmap = Bitmap(width: size, height: size, pixelFormat: .rgba8888)
        let worldPixels = Double(size) * Double(1 << tile.zoom)
        // Longitude of each column and latitude of each row, once.
        let longitudes = (0..<size).map { px in (Double(tile.x * size + px) + 0.5) / worldPixels * 360 - 180 }
        let latitudes = (0..<size).map { py -> Double in
            let n = Double.pi * (1 - 2 * (Double(tile.y * size + py) + 0.5) / worldPixels)
            return atan(sinh(n)) * 180 / .pi
        }
        let degreesPerPixel = 360 / worldPixels
        // Four graticule lines across a tile at every zoom; each zoom's lines include the previous zoom's.
        let spacing = 90 / Double(1 << tile.zoom)
        bitmap.pixels.withUnsafeMutableBufferPointer { p in
            for py in 0..<size {
                let lat = latitudes[py]
                for px in 0..<size {
                    let lon = longitudes[px]
                    let h = sin(lon * 0.05) * cos(lat * 0.07) + 0.5 * sin(lon * 0.13 + lat * 0.11) + 0.25 * cos(lat * 0.31 - lon * 0.17)
                    var c = h > 0.35 ? park : h > -0.2 ? land : water
                    let lonLine = abs(lon / spacing - (lon / spacing).rounded()) * spacing < degreesPerPixel * 0.75
                    let latLine = abs(lat / spacing - (lat / spacing).rounded()) * spacing < degreesPerPixel * 0.75 * cos(lat * .pi / 180)
                    if lonLine || latLine { c = graticule }
                    let i = (py * size + px) * 4
                    p[i] = c.r
                    p[i + 1] = c.g
                    p[i + 2] = c.b
                    p[i + 3] = 255
                }
            }
        }
        drawLabel(on: &bitmap, tile)
        return bitmap
    }

    /// Writes "z/x/y" on a white box at ``labelOrigin``.
    public static func drawLabel(on bitmap: inout Bitmap, _ tile: TileCoordinate) {
        let text = "\(tile.zoom)/\(tile.x)/\(tile.y)"
        let (w, h) = TileFont.size(of: text, scale: labelScale)
        bitmap.fillRect(x: labelOrigin.x - 2, y: labelOrigin.y - 2, width: w + 4, height: h + 4, color: labelBackground)
        bitmap.drawText(text, x: labelOrigin.x, y: labelOrigin.y, scale: labelScale, color: labelColor)
    }

    /// A small tile (about 1 KB as PNG): a flat colour that depends on the tile, a few roads at
    /// positions that depend on it, and the label; every tile's bytes differ.
    public static func smallTile(_ tile: TileCoordinate, size: Int = 256) -> Bitmap {
        var rng = SplitMix64(seed: UInt64(tile.zoom) << 58 ^ UInt64(tile.x) << 29 ^ UInt64(tile.y))
        let base = RGBA8(r: UInt8(200 + rng.next() % 50), g: UInt8(200 + rng.next() % 50), b: UInt8(190 + rng.next() % 50))
        var bitmap = Bitmap(width: size, height: size, pixelFormat: .rgba8888, fill: base)
        for _ in 0..<3 {
            let position = Int(rng.next() % UInt64(size - 4))
            let road = RGBA8(r: 255, g: UInt8(200 + rng.next() % 55), b: 120)
            if rng.next() % 2 == 0 {
                bitmap.fillRect(x: 0, y: position, width: size, height: 3, color: road)
            } else {
                bitmap.fillRect(x: position, y: 0, width: 3, height: size, color: road)
            }
        }
        drawLabel(on: &bitmap, tile)
        return bitmap
    }

    /// A large, photo-like tile (60-100 KB as PNG): smooth terrain shading with fine noise.
    public static func terrainTile(_ tile: TileCoordinate, size: Int = 256) -> Bitmap {
        var rng = SplitMix64(seed: UInt64(tile.zoom) << 58 ^ UInt64(tile.x) << 29 ^ UInt64(tile.y) ^ 0x9E37)
        var bitmap = Bitmap(width: size, height: size, pixelFormat: .rgba8888)
        let fx = Double(tile.x) * 0.7, fy = Double(tile.y) * 0.9
        bitmap.pixels.withUnsafeMutableBufferPointer { p in
            for py in 0..<size {
                for px in 0..<size {
                    let u = Double(px) / Double(size) * 6 + fx, v = Double(py) / Double(size) * 6 + fy
                    let elevation = 0.5 + 0.25 * sin(u) * cos(v) + 0.15 * sin(2.3 * u + 1.7 * v) + 0.1 * cos(5.1 * v - 3.3 * u)
                    let noise = Double(rng.next() % 16) - 8
                    let i = (py * size + px) * 4
                    p[i] = UInt8(clamping: Int(90 + elevation * 120 + noise))
                    p[i + 1] = UInt8(clamping: Int(110 + elevation * 100 + noise))
                    p[i + 2] = UInt8(clamping: Int(70 + elevation * 60 + noise))
                    p[i + 3] = 255
                }
            }
        }
        drawLabel(on: &bitmap, tile)
        return bitmap
    }

    /// Writes `tiles` as files `root/z/x/y.<fileExtension>` (rows in `scheme`), in parallel, each
    /// rendered by `render` and encoded by `encode` (PNG by default).
    public static func writeTree(
        root: String, tiles: [TileCoordinate], scheme: TileScheme = .xyz, fileExtension: String = "png",
        encode: @Sendable (Bitmap) throws -> Data = { try PNGEncoder.encode($0) },
        render: @Sendable (TileCoordinate) -> Bitmap
    ) throws {
        let fm = FileManager.default
        var folders = Set<String>()
        for tile in tiles { folders.insert("\(root)/\(tile.zoom)/\(tile.x)") }
        for folder in folders { try fm.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: ProcessInfo.processInfo.activeProcessorCount) { worker in
            var i = worker
            while i < tiles.count {
                let tile = tiles[i]
                do {
                    let encoded = try encode(render(tile))
                    try encoded.write(to: URL(fileURLWithPath: "\(root)/\(tile.zoom)/\(tile.x)/\(tile.row(in: scheme)).\(fileExtension)"))
                } catch {
                    failures.add("\(tile): \(error)")
                }
                i += ProcessInfo.processInfo.activeProcessorCount
            }
        }
        if let first = failures.first { throw SynthError(message: first) }
    }

    /// Every tile of zooms `zooms` (the whole world), in (z, x, y) order.
    public static func pyramid(_ zooms: ClosedRange<Int>) -> [TileCoordinate] {
        zooms.flatMap { z in
            (0..<(1 << z)).flatMap { x in (0..<(1 << z)).map { y in TileCoordinate(validatingZoom: z, x: x, y: y)! } }
        }
    }

    /// The first `count` tiles of a pyramid from zoom 0 down, for trees of an exact size.
    public static func firstTiles(_ count: Int) -> [TileCoordinate] {
        var result: [TileCoordinate] = []
        var z = 0
        while result.count < count {
            let side = 1 << z
            outer: for x in 0..<side {
                for y in 0..<side {
                    if result.count == count { break outer }
                    result.append(TileCoordinate(validatingZoom: z, x: x, y: y)!)
                }
            }
            z += 1
        }
        return result
    }
}

public struct SynthError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [String] = []
    func add(_ message: String) {
        lock.lock()
        messages.append(message)
        lock.unlock()
    }
    var first: String? {
        lock.lock()
        defer { lock.unlock() }
        return messages.first
    }
}
