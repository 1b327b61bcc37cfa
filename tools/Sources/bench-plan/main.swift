// bench-plan: issue 46's planning goals at scale.
//
//   swift run -c release --package-path tools bench-plan [tiles] [runs]
//
// One MBTiles of 1,000,000 tiles (default): zooms 0-9 complete and zoom 10 from the west, each
// tile 100-2,100 bytes (larger to the north-west, as cities are, plus noise), written once by the
// C floor's bulk insert and kept in /tmp. Then, alternated, `runs` times each (medians):
//   - planning a region of it (a pentagon over most of zoom 10's tiles, zooms 0-10): open the
//     file, read the sizes (`AreaTileSizes.read`: Core's covers, `length(tile_data)` per range),
//     choose (`TilePlanner.plan`) and predict the MBTiles output's size;
//   - the floor: one C connection stepping `SELECT length(tile_data)` over the same rectangles.
// The goal: the plan within 1.5x of the floor. Then the prediction at scale: the plan's tiles
// written by MBTilesWriter in the plan's write order (as `extract --budget` writes them) and by
// PMTilesWriter and BundleWriter, each file's size against its prediction (goal: within 1% or
// 64 KiB, never above the budget).
import BenchSupport
import Foundation
import MBTilesFloor
import TilepackCore
import TilepackPlan
import TilepackStorage

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
/// `--no-write`: the timings alone (for a profiler: callgrind over one run).
let writes = !CommandLine.arguments.contains("--no-write")
let tileCount = arguments.first ?? 1_000_000
let runs = arguments.count > 1 ? arguments[1] : 5
let path = "/tmp/bench-plan-\(tileCount).mbtiles"

/// Writes the archive unless it is there from an earlier run.
func makeArchive() {
    if FileManager.default.fileExists(atPath: path) { return }
    var rng = SplitMix64(seed: 46)
    let pool = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 8)
    for i in 0..<pool.count { pool[i] = UInt8(truncatingIfNeeded: rng.next()) }
    var z: [Int32] = [], x: [Int32] = [], y: [Int32] = [], length: [Int32] = []
    var data: [UnsafePointer<UInt8>?] = []
    var zoom = 0
    outer: while true {
        let side = 1 << zoom
        for column in 0..<side {
            for row in 0..<side {
                if z.count == tileCount { break outer }
                let west = Double(side - column) / Double(side), north = Double(side - row) / Double(side)
                let size = 100 + Int(1_500 * west * north) + rng.below(500)
                let offset = rng.below(pool.count - size)
                z.append(Int32(zoom))
                x.append(Int32(column))
                y.append(Int32(side - 1 - row))  // TMS
                length.append(Int32(size))
                data.append(UnsafePointer(pool.baseAddress!.advanced(by: offset).assumingMemoryBound(to: UInt8.self)))
            }
        }
        zoom += 1
    }
    let start = now()
    precondition(mbtiles_floor_bulk_insert(path + ".part", z, x, y, data, length, Int64(z.count), 100_000) == 0, "writing the archive failed")
    precondition(rename(path + ".part", path) == 0)
    print("wrote \(path): \(z.count) tiles to zoom \(zoom) in \(String(format: "%.1f", now() - start)) s")
}

/// Zoom 10's tiles reach 43 degrees east at 1,000,000 tiles: a pentagon over most of them (no
/// edge longer than 180 degrees of longitude, which a region takes the short way, over the antimeridian).
let region = try! GeoRegion(polygons: [[[
    GeoCoordinate(latitude: -75, longitude: -170), GeoCoordinate(latitude: -75, longitude: -70), GeoCoordinate(latitude: -75, longitude: 30),
    GeoCoordinate(latitude: 10, longitude: 40), GeoCoordinate(latitude: 80, longitude: 30), GeoCoordinate(latitude: 80, longitude: -70),
    GeoCoordinate(latitude: 80, longitude: -170), GeoCoordinate(latitude: -75, longitude: -170),
]]])
let area = PlanArea.region(region)
let zooms = 0...10

makeArchive()
let uri = "file:" + path + "?mode=ro"
let rectangles = zooms.flatMap { try! area.cover(atZoom: $0).frame }
let columns = (rectangles.map { Int32($0.zoom) }, rectangles.map { Int32($0.columns.lowerBound) }, rectangles.map { Int32($0.columns.upperBound) })
let rows = (
    rectangles.map { Int32((1 << $0.zoom) - 1 - $0.rows.upperBound) }, rectangles.map { Int32((1 << $0.zoom) - 1 - $0.rows.lowerBound) }
)

func floor() -> (bytes: Int64, rows: Int64) {
    var count: Int64 = 0
    let sum = mbtiles_floor_sum_lengths(uri, columns.0, columns.1, columns.2, rows.0, rows.1, Int64(rectangles.count), &count)
    precondition(sum >= 0, "the floor's query failed")
    return (sum, count)
}

func sizes() -> AreaTileSizes {
    let archive = try! MBTilesArchive(path: path)
    return try! AreaTileSizes.read(from: archive, area: area, zooms: zooms)
}

// The budget: every tile of the area to zoom 9 and half of zoom 10's bytes.
let all = sizes()
let budget = all.levels.dropLast().reduce(0) { $0 + $1.bytes } * 12 / 10 + all.levels.last!.bytes / 2
print("region: \(all.levels.reduce(0) { $0 + $1.count }) tiles of \(tileCount) in the area, zooms \(zooms); budget \(budget) bytes")

/// This process's CPU seconds (both sides run on this thread; the file is in the page cache, so
/// they wait for no disk): steadier than wall time on a machine others are building on.
func cpu() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

var floorTimes: [(wall: Double, cpu: Double)] = [], planTimes: [(wall: Double, cpu: Double)] = []
var readTimes: [(wall: Double, cpu: Double)] = []
var floorRows: Int64 = 0
for _ in 0..<runs {
    var (wall, used) = (now(), cpu())
    floorRows = floor().rows
    floorTimes.append((now() - wall, cpu() - used))
    (wall, used) = (now(), cpu())
    let read = sizes()
    readTimes.append((now() - wall, cpu() - used))
    _ = TilePlanner.plan(read, budget: budget, format: .mbtiles)
    planTimes.append((now() - wall, cpu() - used))
}
func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] * 1000 }
print("floor rows: \(floorRows) (the rectangles the library asks SQLite for: the region's tiles and the frame around them)")
report(
    "planning a region of a \(tileCount)-tile MBTiles (median of \(runs), alternated)",
    [
        Comparison(
            "plan (open, sizes, choice, prediction), wall", value: median(planTimes.map(\.wall)), unit: "ms",
            vs: "SELECT length(tile_data) in C", referenceValue: median(floorTimes.map(\.wall)), goal: (1.5, false)),
        Comparison(
            "plan (open, sizes, choice, prediction), CPU", value: median(planTimes.map(\.cpu)), unit: "ms",
            vs: "SELECT length(tile_data) in C", referenceValue: median(floorTimes.map(\.cpu)), goal: (1.5, false)),
        Comparison(
            "sizes alone (AreaTileSizes.read), CPU", value: median(readTimes.map(\.cpu)), unit: "ms", vs: "SELECT length(tile_data) in C",
            referenceValue: median(floorTimes.map(\.cpu))),
    ])

/// Writes the plan's tiles as `extract --budget` does and returns the file's size.
func write(_ plan: TilePlan, format: PlanOutputFormat) throws -> Int {
    let source = try MBTilesArchive(path: path)
    let output = "/tmp/bench-plan-out.\(format == .bundle ? "tilepack" : format.rawValue)"
    unlink(output)
    let metadata = TileMetadata(["name": "bench", "format": "png"])
    switch format {
    case .mbtiles:
        let writer = try MBTilesWriter(creating: output, metadata: metadata)
        for tile in plan.tilesInWriteOrder { _ = try source.withTileBytes(at: tile) { try writer.write($0, at: tile) } }
        _ = try writer.finish()
    case .pmtiles:
        let writer = try PMTilesWriter(destination: output, metadata: metadata)
        for tile in plan.tilesInWriteOrder { _ = try source.withTileBytes(at: tile) { try writer.addTile(at: tile, bytes: $0) } }
        _ = try writer.finish()
    case .bundle:
        let writer = try BundleWriter(
            destination: output, content: .encoded(.png), metadata: metadata, options: BundleWriter.Options(derivation: .fillMissing))
        for tile in plan.tilesInWriteOrder { _ = try source.withTileBytes(at: tile) { try writer.addTile(at: tile, bytes: $0) } }
        _ = try writer.finish()
    }
    defer { unlink(output) }
    return Int(try FileManager.default.attributesOfItem(atPath: output)[.size] as! UInt64)
}

print("== the size prediction at scale (goal: within 1% or 64 KiB, never above the budget) ==")
for format in PlanOutputFormat.allCases where writes {
    let plan = TilePlanner.plan(all, budget: budget, format: format)
    let size = try write(plan, format: format)
    let error = abs(size - plan.predictedSize)
    let met = error <= max(plan.predictedSize / 100, 64 * 1024) && size <= budget
    print(
        "\(format.rawValue): \(plan.tiles) tiles, complete to zoom \(plan.completeZoom ?? -1); predicted \(plan.predictedSize), wrote \(size)"
            + " (off by \(error) B, \(String(format: "%.3f", Double(error) * 100 / Double(size)))%), budget \(budget): \(met ? "met" : "NOT met")")
}
