// Two versions of a tileset for tools/bench-update.sh (issue 30): v1 is the first N tiles of a
// pyramid of small map-like PNG tiles (about 1 KB each, every one unique); v2 re-renders 2% of
// them in one region (pixels changed and re-encoded, so their bytes appear nowhere in v1),
// deletes 0.5% in another and adds one deeper zoom over a small area.
//
//   make-versions OUT_DIR [--tiles 50000]   writes OUT_DIR/v1.mbtiles and OUT_DIR/v2.mbtiles
//   make-versions OUT_DIR --tiles N --changed M   v2 differs from v1 in exactly M tiles, spread
//                                                 over the archive (Scattered.swift)
import Foundation
import TileSynth
import TilepackCore
import TilepackImaging
import TilepackStorage

var arguments = Array(CommandLine.arguments.dropFirst())
var count = 50_000
if let i = arguments.firstIndex(of: "--tiles"), i + 1 < arguments.count, let n = Int(arguments[i + 1]) {
    count = n
    arguments.removeSubrange(i...(i + 1))
}
var scattered: Int?
if let i = arguments.firstIndex(of: "--changed"), i + 1 < arguments.count, let n = Int(arguments[i + 1]), n >= 0 {
    scattered = n
    arguments.removeSubrange(i...(i + 1))
}
guard let out = arguments.first, arguments.count == 1 else {
    FileHandle.standardError.write(Data("usage: make-versions OUT_DIR [--tiles N] [--changed M]\n".utf8))
    exit(2)
}

if let scattered {
    try Scattered.write(out: out, count: count, changed: scattered, rerendered: rerendered)
    exit(0)
}

let tiles = TileSynth.firstTiles(count)
let deepest = tiles.last!.zoom
let atDeepest = tiles.filter { $0.zoom == deepest }
// The region re-rendered: 2% of all tiles, contiguous columns of the deepest zoom, from its middle.
let changedCount = count / 50
let changed = Set(atDeepest.dropFirst(atDeepest.count / 3).prefix(changedCount))
// The region deleted: 0.5%, the last tiles of the zoom above.
let above = tiles.filter { $0.zoom == deepest - 1 }
let deleted = Set(above.suffix(count / 200))
// One deeper zoom over a small area: the children of the first deepest tiles, about 0.5%.
let added = atDeepest.prefix(count / 800).flatMap { t in
    [(0, 0), (1, 0), (0, 1), (1, 1)].map { TileCoordinate(validatingZoom: t.zoom + 1, x: 2 * t.x + $0.0, y: 2 * t.y + $0.1)! }
}.sorted()

/// The tile as v2 draws it: the same map with a new road across it (pixels that differ).
@Sendable func rerendered(_ tile: TileCoordinate) -> Bitmap {
    var bitmap = TileSynth.smallTile(tile)
    let bpp = bitmap.pixelFormat.bytesPerPixel
    for y in 100..<108 {
        for x in 0..<bitmap.width {
            let at = y * bitmap.stride + x * bpp
            bitmap.pixels[at] = 200
            bitmap.pixels[at + 1] = 60
            bitmap.pixels[at + 2] = UInt8(truncatingIfNeeded: 40 + tile.x)
        }
    }
    return bitmap
}

func encodeAll(_ coordinates: [TileCoordinate], _ render: @Sendable (TileCoordinate) -> Bitmap) -> [[UInt8]] {
    let results = Locked([[UInt8]](repeating: [], count: coordinates.count))
    let workers = ProcessInfo.processInfo.activeProcessorCount
    DispatchQueue.concurrentPerform(iterations: workers) { worker in
        for i in stride(from: worker, to: coordinates.count, by: workers) {
            let bytes = Array(try! PNGEncoder.encode(render(coordinates[i])))
            results.withLock { $0[i] = bytes }
        }
    }
    return results.withLock { $0 }
}

let base = encodeAll(tiles) { TileSynth.smallTile($0) }
let changedList = tiles.filter { changed.contains($0) }
let changedBytes = encodeAll(changedList) { rerendered($0) }
let addedBytes = encodeAll(added) { TileSynth.smallTile($0) }

func write(_ path: String, _ rows: [(tile: TileCoordinate, bytes: [UInt8])], version: String) throws {
    try? FileManager.default.removeItem(atPath: path)
    var metadata = TileMetadata()
    metadata.name = "bench-update"
    metadata[TileMetadata.Key.version] = version
    let writer = try MBTilesWriter(creating: path, metadata: metadata, options: MBTilesWriterOptions(aggregateTilesHash: false))
    try writer.write(rows)
    try writer.finish()
}

try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
try write("\(out)/v1.mbtiles", Array(zip(tiles, base)).map { ($0.0, $0.1) }, version: "1")
var replacement: [TileCoordinate: [UInt8]] = [:]
for (tile, bytes) in zip(changedList, changedBytes) { replacement[tile] = bytes }
var v2: [(tile: TileCoordinate, bytes: [UInt8])] = []
for (tile, bytes) in zip(tiles, base) where !deleted.contains(tile) { v2.append((tile, replacement[tile] ?? bytes)) }
v2 += zip(added, addedBytes).map { ($0.0, $0.1) }
try write("\(out)/v2.mbtiles", v2, version: "2")
let changedTotal = changedBytes.reduce(0) { $0 + $1.count } + addedBytes.reduce(0) { $0 + $1.count }
print(
    "v1 \(tiles.count) tiles; v2: \(changedList.count) re-rendered, \(deleted.count) deleted, \(added.count) added at z\(deepest + 1); changed and added tiles \(changedTotal) bytes"
)
