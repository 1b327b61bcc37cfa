// bench-imaging: tile decode throughput through TilepackImaging against plain C loops over the same
// libraries (libpng classic and simplified APIs, TurboJPEG, libwebp), in the same run, with the
// memcpy of one 256 KiB RGBA tile as the floor. Release builds only:
//   swift run -c release --package-path tools bench-imaging [tile count, default 1000]
import BenchSupport
import CImagingFloor
import Foundation
import TilepackCore
import TilepackImaging

let tileCount = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 1000 : 1000
let tileSize = 256
let runs = 5

// MARK: - Map-like tiles

struct Rng {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + Int(next() % UInt64(range.count)) }
    mutating func double() -> Double { Double(next() >> 11) / Double(1 << 53) }
}

/// A 256 px tile that looks like a rendered street map: land, water with a curved shore, parks,
/// buildings and cased roads; or (every third tile) a transparent overlay with roads only.
func renderTile(_ index: Int) -> Bitmap {
    var rng = Rng(state: UInt64(index) &* 0x1234_5678_9ABC)
    let overlay = index % 3 == 2
    var px = [UInt8](repeating: 0, count: tileSize * tileSize * 4)
    func fill(_ x0: Int, _ y0: Int, _ x1: Int, _ y1: Int, _ c: (UInt8, UInt8, UInt8, UInt8)) {
        for y in max(0, y0)..<min(tileSize, y1) where y1 > y0 {
            for x in max(0, x0)..<min(tileSize, x1) where x1 > x0 {
                let o = (y * tileSize + x) * 4
                px[o] = c.0
                px[o + 1] = c.1
                px[o + 2] = c.2
                px[o + 3] = c.3
            }
        }
    }
    if !overlay {
        fill(0, 0, tileSize, tileSize, (242, 239, 233, 255))
        if rng.int(0...2) == 0 {  // water with a wavy shoreline
            let base = Double(rng.int(40...220)), amp = Double(rng.int(5...30)), freq = rng.double() * 0.08 + 0.01
            for x in 0..<tileSize {
                let shore = Int(base + amp * sin(Double(x) * freq + Double(index)))
                fill(x, shore, x + 1, tileSize, (170, 211, 223, 255))
            }
        }
        for _ in 0..<rng.int(0...3) {  // parks
            let x = rng.int(0...230), y = rng.int(0...230)
            fill(x, y, x + rng.int(20...90), y + rng.int(20...90), (200, 230, 180, 255))
        }
        for _ in 0..<rng.int(0...60) {  // buildings
            let x = rng.int(0...250), y = rng.int(0...250)
            fill(x, y, x + rng.int(4...14), y + rng.int(4...14), (217, 208, 201, 255))
        }
    }
    for _ in 0..<rng.int(1...8) {  // roads: casing then fill, horizontal or vertical
        let width = rng.int(2...8), at = rng.int(0...255), horizontal = rng.int(0...1) == 0
        let colour: (UInt8, UInt8, UInt8, UInt8) = rng.int(0...3) == 0 ? (252, 214, 164, 255) : (255, 255, 255, 255)
        let casing: (UInt8, UInt8, UInt8, UInt8) = overlay ? (80, 80, 80, 160) : (190, 180, 170, 255)
        if horizontal {
            fill(0, at - 1, tileSize, at + width + 1, casing)
            fill(0, at, tileSize, at + width, colour)
        } else {
            fill(at - 1, 0, at + width + 1, tileSize, casing)
            fill(at, 0, at + width, tileSize, colour)
        }
    }
    let rgba = Bitmap(width: tileSize, height: tileSize, pixelFormat: .rgba8888, pixels: px)!
    return overlay ? rgba : rgba.converted(to: .rgb888)
}

// MARK: - Fixtures

let fixturesRoot: String = {
    if let env = ProcessInfo.processInfo.environment["TILEPACK_FIXTURES"] { return env }
    // tools/Sources/bench-imaging/main.swift -> the project root -> Tests/Fixtures
    let here = URL(fileURLWithPath: #filePath)
    return here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/Fixtures").path
}()

/// Tile blobs of an MBTiles file, through the sqlite3 CLI (setup only, not timed).
func fixtureTiles(_ file: String) -> [[UInt8]] {
    let path = fixturesRoot + "/" + file
    guard FileManager.default.fileExists(atPath: path) else {
        print("(fixture \(file) not found)")
        return []
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
    process.arguments = ["-readonly", path, "select hex(tile_data) from tiles"]
    let pipe = Pipe()
    process.standardOutput = pipe
    do { try process.run() } catch {
        print("(sqlite3 failed: \(error))")
        return []
    }
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: output, as: UTF8.self).split(separator: "\n").map { line in
        var bytes: [UInt8] = []
        bytes.reserveCapacity(line.utf8.count / 2)
        var high: UInt8?
        for c in line.utf8 {
            let v = c <= 57 ? c - 48 : c - 55
            if let h = high {
                bytes.append(h << 4 | v)
                high = nil
            } else {
                high = v
            }
        }
        return bytes
    }
}

// MARK: - Timing

/// Median seconds to decode every tile once with `decode` into one reused buffer of the right size.
func timeDecoding(
    _ tiles: [[UInt8]], bytesPerPixel: Int = 4, runsOverride: Int? = nil, _ decode: ([UInt8], UnsafeMutableRawBufferPointer) -> Bool
) -> Double {
    var buffers: [Int: UnsafeMutableRawBufferPointer] = [:]
    defer { for b in buffers.values { b.deallocate() } }
    let sizes = tiles.map { tile -> Int in
        (try? tile.withUnsafeBytes { try ImageDecoder.imageInfo($0) }).map { $0.width * $0.height * bytesPerPixel } ?? 0
    }
    for size in Set(sizes) { buffers[size] = .allocate(byteCount: max(size, 1), alignment: 64) }
    var failures = 0
    let seconds = medianSeconds(runs: runsOverride ?? runs) {
        for (tile, size) in zip(tiles, sizes) where !decode(tile, buffers[size]!) { failures += 1 }
    }
    if failures > 0 { print("  !! \(failures) decode failures") }
    return seconds
}

/// Median seconds per decoder, the decoders' runs interleaved so that load from other processes
/// falls on all of them alike.
func timeInterleaved(_ tiles: [[UInt8]], _ decoders: [([UInt8], UnsafeMutableRawBufferPointer) -> Bool]) -> [Double] {
    var samples = [[Double]](repeating: [], count: decoders.count)
    for _ in 0..<runs {
        for (i, decoder) in decoders.enumerated() { samples[i].append(timeDecoding(tiles, runsOverride: 1, decoder)) }
    }
    return samples.map { $0.sorted()[$0.count / 2] }
}

func tilepack(_ format: PixelFormat) -> ([UInt8], UnsafeMutableRawBufferPointer) -> Bool {
    { tile, buffer in
        tile.withUnsafeBytes { bytes in
            (try? ImageDecoder.decode(bytes, into: buffer, pixelFormat: format, expectedWidth: nil, expectedHeight: nil)) != nil
        }
    }
}

typealias CFloor = (
    UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?
) -> Int32
func floorLoop(_ f: @escaping CFloor) -> ([UInt8], UnsafeMutableRawBufferPointer) -> Bool {
    { tile, buffer in
        var w: Int32 = 0, h: Int32 = 0
        return tile.withUnsafeBufferPointer { t in
            f(t.baseAddress, t.count, buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), buffer.count, &w, &h) == 0
        }
    }
}

/// The TurboJPEG floor: one decompressor reused for every tile.
func turboJPEGLoop(_ tj: UnsafeMutableRawPointer?) -> ([UInt8], UnsafeMutableRawBufferPointer) -> Bool {
    { tile, buffer in
        var w: Int32 = 0, h: Int32 = 0
        return tile.withUnsafeBufferPointer { t in
            floor_tj_rgba(tj, t.baseAddress, t.count, buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), buffer.count, &w, &h) == 0
        }
    }
}

func tilesPerSecond(_ count: Int, _ seconds: Double) -> Double { Double(count) / seconds }

/// Checks tilepack's RGBA output against the classic libpng floor, byte for byte.
func sameAsClassic(_ tiles: [[UInt8]]) -> Int {
    var mismatches = 0
    for tile in tiles {
        guard let info = try? tile.withUnsafeBytes({ try ImageDecoder.imageInfo($0) }) else {
            mismatches += 1
            continue
        }
        var a = [UInt8](repeating: 0, count: info.width * info.height * 4), b = a
        _ = a.withUnsafeMutableBytes { tilepack(.rgba8888)(tile, $0) }
        _ = b.withUnsafeMutableBytes { floorLoop(floor_png_classic_rgba)(tile, $0) }
        if a != b { mismatches += 1 }
    }
    return mismatches
}

// MARK: - Run

print("bench-imaging: \(tileCount) generated \(tileSize)x\(tileSize) map-like tiles + fixtures, median of \(runs) runs, release build")
let setupStart = now()
let rendered = (0..<tileCount).map(renderTile)
let pngTiles = rendered.map { [UInt8]((try? PNGEncoder.encode($0)) ?? Data()) }
var jpegScratch = [UInt8](repeating: 0, count: 1 << 20)
let jpegTiles: [[UInt8]] = rendered.map { bitmap in
    let rgba = bitmap.converted(to: .rgba8888)
    let n = rgba.pixels.withUnsafeBufferPointer {
        floor_tj_encode_rgba($0.baseAddress, Int32(tileSize), Int32(tileSize), &jpegScratch, jpegScratch.count)
    }
    return Array(jpegScratch[0..<n])
}
let plain1 = fixtureTiles("node-mbtiles/plain_1.mbtiles")
let geoPNG = fixtureTiles("martin/geography-class-png.mbtiles")
let geoJPG = fixtureTiles("martin/geography-class-jpg.mbtiles")
let webp = fixtureTiles("martin/webp.mbtiles")
let pngBytes = pngTiles.reduce(0) { $0 + $1.count }, jpegBytes = jpegTiles.reduce(0) { $0 + $1.count }
print(
    String(
        format:
            "setup %.1f s: generated PNG %d tiles (%.1f KiB avg), JPEG q85 %d tiles (%.1f KiB avg); fixtures plain_1 %d, geography-class png %d / jpg %d, webp %d",
        now() - setupStart, pngTiles.count, Double(pngBytes) / Double(max(pngTiles.count, 1)) / 1024,
        jpegTiles.count, Double(jpegBytes) / Double(max(jpegTiles.count, 1)) / 1024, plain1.count, geoPNG.count, geoJPG.count, webp.count))
print(
    "output check: tilepack RGBA == libpng classic RGBA for generated PNGs: \(pngTiles.count - sameAsClassic(pngTiles))/\(pngTiles.count), plain_1: \(plain1.count - sameAsClassic(plain1))/\(plain1.count)"
)

// memcpy of one 256 KiB tile: the floor any decode into a caller's buffer sits above.
let memcpySource = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 64)
let memcpyDest = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 64)
memcpySource.initializeMemory(as: UInt8.self, repeating: 7)
let memcpyRounds = 20_000
let memcpySeconds = medianSeconds(runs: runs) {
    for i in 0..<memcpyRounds {
        memcpySource[0] = UInt8(truncatingIfNeeded: i)
        memcpyDest.baseAddress!.copyMemory(from: memcpySource.baseAddress!, byteCount: memcpySource.count)
    }
}
let memcpyMicros = memcpySeconds / Double(memcpyRounds) * 1e6

func micros(_ seconds: Double, _ count: Int) -> Double { seconds / Double(count) * 1e6 }

var comparisons: [Comparison] = []
func pngSet(_ name: String, _ tiles: [[UInt8]]) {
    guard !tiles.isEmpty else { return }
    let times = timeInterleaved(tiles, [tilepack(.rgba8888), floorLoop(floor_png_classic_rgba), floorLoop(floor_png_image_rgba)])
    let (t, classic, simplified) = (times[0], times[1], times[2])
    report(
        "PNG \(name) (\(tiles.count) tiles) -> RGBA",
        [
            Comparison(
                "tilepack decode", value: tilesPerSecond(tiles.count, t), unit: "tiles/s",
                vs: "C libpng classic loop", referenceValue: tilesPerSecond(tiles.count, classic), goal: (0.95, true)),
            Comparison(
                "tilepack decode", value: tilesPerSecond(tiles.count, t), unit: "tiles/s",
                vs: "C libpng png_image loop", referenceValue: tilesPerSecond(tiles.count, simplified), goal: (0.95, true)),
            Comparison(
                "tilepack per tile", value: micros(t, tiles.count), unit: "us",
                vs: "memcpy 256 KiB", referenceValue: memcpyMicros),
        ])
}
pngSet("generated map-like", pngTiles)
pngSet("node-mbtiles/plain_1 (palette)", plain1)
pngSet("martin/geography-class-png x40", Array(repeating: geoPNG, count: 40).flatMap { $0 })

func jpegSet(_ name: String, _ tiles: [[UInt8]]) {
    guard !tiles.isEmpty else { return }
    let tj = floor_tj_create()
    defer { floor_tj_destroy(tj) }
    let times = timeInterleaved(tiles, [tilepack(.rgba8888), turboJPEGLoop(tj)])
    let (t, floor) = (times[0], times[1])
    report(
        "JPEG \(name) (\(tiles.count) tiles) -> RGBA",
        [
            Comparison(
                "tilepack decode", value: tilesPerSecond(tiles.count, t), unit: "tiles/s",
                vs: "C TurboJPEG loop (reused handle)", referenceValue: tilesPerSecond(tiles.count, floor), goal: (0.95, true)),
            Comparison("tilepack per tile", value: micros(t, tiles.count), unit: "us", vs: "memcpy 256 KiB", referenceValue: memcpyMicros),
        ])
}
jpegSet("generated map-like q85", jpegTiles)
jpegSet("martin/geography-class-jpg x40", Array(repeating: geoJPG, count: 40).flatMap { $0 })

if !webp.isEmpty {
    let tiles = Array(repeating: webp[0], count: 50)
    let times = timeInterleaved(tiles, [tilepack(.rgba8888), floorLoop(floor_webp_rgba)])
    let (t, floor) = (times[0], times[1])
    report(
        "WebP martin/webp.mbtiles 512 px x50 -> RGBA",
        [
            Comparison(
                "tilepack decode", value: tilesPerSecond(tiles.count, t), unit: "tiles/s",
                vs: "C WebPDecodeRGBAInto loop", referenceValue: tilesPerSecond(tiles.count, floor), goal: (0.95, true))
        ])
}

// Pixel formats the library cannot write directly cost a conversion pass.
let rgbaTime = timeDecoding(pngTiles, tilepack(.rgba8888))
report(
    "PNG generated, other pixel formats vs tilepack RGBA",
    [PixelFormat.bgra8888, .bgra8888Premultiplied, .rgb888, .rgb565].map { format in
        let t = timeDecoding(pngTiles, bytesPerPixel: format.bytesPerPixel, tilepack(format))
        return Comparison(
            "tilepack \(format)", value: tilesPerSecond(pngTiles.count, t), unit: "tiles/s",
            vs: "tilepack rgba8888", referenceValue: tilesPerSecond(pngTiles.count, rgbaTime))
    })

// Resampling for the tile layer (retina down/up, overzoom), per tile, side by side with Pillow's
// bilinear resize of the same tiles (tools/bench-imaging-pillow.py, run once per round so that the
// two alternate; Pillow premultiplies RGBA itself as tilepack does).
let big = rendered[0].converted(to: .rgba8888).resized(width: 512, height: 512, filter: .nearest)
let small = rendered[0].converted(to: .rgba8888)
let resampleRounds = 50
let pillowScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("bench-imaging-pillow.py").path
let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("bench-imaging-\(getpid())")
try? FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: scratch) }
let smallFile = scratch.appendingPathComponent("256.rgba").path, bigFile = scratch.appendingPathComponent("512.rgba").path
guard FileManager.default.createFile(atPath: smallFile, contents: Data(small.pixels)),
    FileManager.default.createFile(atPath: bigFile, contents: Data(big.pixels))
else {
    print("bench-imaging: cannot write the raw pixel files in \(scratch.path)")
    exit(1)
}

/// One Pillow round: microseconds per tile for up, down and overzoom, or nil when Python or Pillow is missing.
func pillowRound() -> [String: Double]? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", pillowScript, smallFile, bigFile, String(resampleRounds)]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { return nil }
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { return nil }
    return try? JSONDecoder().decode([String: Double].self, from: output)
}

var ours: [String: [Double]] = [:], pillow: [String: [Double]] = [:]
for _ in 0..<runs {
    func time(_ body: () -> Void) -> Double {
        let start = now()
        for _ in 0..<resampleRounds { body() }
        return (now() - start) / Double(resampleRounds) * 1e6
    }
    ours["down", default: []].append(time { _ = big.resized(width: 256, height: 256) })
    ours["up", default: []].append(time { _ = small.resized(width: 512, height: 512) })
    ours["overzoom", default: []].append(time { _ = try? small.subSquare(levelsDown: 2, column: 1, row: 2, outputSize: 256) })
    if let round = pillowRound() { for (key, value) in round { pillow[key, default: []].append(value) } }
}
func median(_ values: [Double]) -> Double { values.isEmpty ? .nan : values.sorted()[values.count / 2] }
var resampling: [Comparison] = []
for (key, label) in [("down", "512 -> 256 bilinear"), ("up", "256 -> 512 bilinear"), ("overzoom", "overzoom 2 levels -> 256")] {
    if pillow[key] != nil {
        resampling.append(
            Comparison(
                label, value: median(ours[key]!), unit: "us", vs: "Pillow BILINEAR",
                referenceValue: median(pillow[key]!), goal: (1, false)))
    }
    resampling.append(Comparison(label, value: median(ours[key]!), unit: "us", vs: "memcpy 256 KiB", referenceValue: memcpyMicros))
}
if pillow.isEmpty { print("(Pillow not found: pip install pillow for the side-by-side figures)") }
report("Resampling (per tile, RGBA straight alpha in and out)", resampling)
print(String(format: "peak RSS %.0f MiB", Double(peakResidentBytes()) / 1_048_576))
