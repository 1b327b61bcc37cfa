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
/// `--no-write`: the timings and the plans' digests alone; `--no-digest`: no digests either (for a profiler).
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
    precondition(
        mbtiles_floor_bulk_insert(path + ".part", z, x, y, data, length, Int64(z.count), 100_000) == 0, "writing the archive failed")
    precondition(rename(path + ".part", path) == 0)
    print("wrote \(path): \(z.count) tiles to zoom \(zoom) in \(String(format: "%.1f", now() - start)) s")
}

/// Zoom 10's tiles reach 43 degrees east at 1,000,000 tiles: a pentagon over most of them (no
/// edge longer than 180 degrees of longitude, which a region takes the short way, over the antimeridian).
let region = try! GeoRegion(polygons: [
    [
        [
            GeoCoordinate(latitude: -75, longitude: -170), GeoCoordinate(latitude: -75, longitude: -70),
            GeoCoordinate(latitude: -75, longitude: 30),
            GeoCoordinate(latitude: 10, longitude: 40), GeoCoordinate(latitude: 80, longitude: 30),
            GeoCoordinate(latitude: 80, longitude: -70),
            GeoCoordinate(latitude: 80, longitude: -170), GeoCoordinate(latitude: -75, longitude: -170),
        ]
    ]
])
let area = PlanArea.region(region)
let zooms = 0...10

makeArchive()
let uri = "file:" + path + "?mode=ro"
let rectangles = zooms.flatMap { try! area.cover(atZoom: $0).frame }
let columns = (
    rectangles.map { Int32($0.zoom) }, rectangles.map { Int32($0.columns.lowerBound) }, rectangles.map { Int32($0.columns.upperBound) }
)
let rows = (
    rectangles.map { Int32((1 << $0.zoom) - 1 - $0.rows.upperBound) }, rectangles.map { Int32((1 << $0.zoom) - 1 - $0.rows.lowerBound) }
)
/// The area's tiles exactly, as runs of one column (zoom, x, TMS rows), from Core's cover alone.
let spans: (zoom: [Int32], x: [Int32], r0: [Int32], r1: [Int32]) = {
    var result: (zoom: [Int32], x: [Int32], r0: [Int32], r1: [Int32]) = ([], [], [], [])
    for zoom in zooms {
        var keys: [Int] = []
        try! area.cover(atZoom: zoom).forEach { x, y in keys.append(x << 32 | ((1 << zoom) - 1 - y)) }
        keys.sort()
        var start = 0
        while start < keys.count {
            var end = start + 1
            while end < keys.count, keys[end] == keys[end - 1] + 1, keys[end] >> 32 == keys[start] >> 32 { end += 1 }
            result.zoom.append(Int32(zoom))
            result.x.append(Int32(keys[start] >> 32))
            result.r0.append(Int32(keys[start] & 0xFFFF_FFFF))
            result.r1.append(Int32(keys[end - 1] & 0xFFFF_FFFF))
            start = end
        }
    }
    return result
}()

/// The floors, each one C connection: `SELECT length(tile_data)` over the covers' rectangles
/// (the frame; what the goal names), over the exact columns, and over the exact columns reading
/// the row too (what a plan must read: coordinates and sizes).
enum Floor: CaseIterable { case frame, columns, columnsAndRows }
func floor(_ kind: Floor) -> (bytes: Int64, rows: Int64) {
    var count: Int64 = 0
    let sum =
        kind == .frame
        ? mbtiles_floor_sum_lengths(uri, columns.0, columns.1, columns.2, rows.0, rows.1, Int64(rectangles.count), &count)
        : mbtiles_floor_sum_column_lengths(
            uri, spans.zoom, spans.x, spans.r0, spans.r1, Int64(spans.x.count), kind == .columnsAndRows ? 1 : 0, &count)
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

/// Wall and CPU milliseconds and user-space instructions (millions; -1 without a counter).
struct Cost { var wall = 0.0, cpu = 0.0, instructions = 0.0 }
let counter = floor_instruction_counter_open()
func measure(_ body: () -> Void) -> Cost {
    let (wall, used, counted) = (now(), cpu(), floor_instruction_counter_read(counter))
    body()
    let instructions = counter < 0 ? -1 : Double(floor_instruction_counter_read(counter) - counted) / 1e6
    return Cost(wall: (now() - wall) * 1000, cpu: (cpu() - used) * 1000, instructions: instructions)
}

var floorCosts: [Floor: [Cost]] = [:], planCosts: [Cost] = [], readCosts: [Cost] = [], choiceCosts: [Cost] = []
var floorRows: [Floor: Int64] = [:]
for _ in 0..<runs {
    for kind in Floor.allCases { floorCosts[kind, default: []].append(measure { floorRows[kind] = floor(kind).rows }) }
    var read: AreaTileSizes?
    readCosts.append(measure { read = sizes() })
    planCosts.append(measure { _ = TilePlanner.plan(read!, budget: budget, format: .mbtiles) })
    choiceCosts.append(planCosts.last!)
    planCosts[planCosts.count - 1].wall += readCosts.last!.wall
    planCosts[planCosts.count - 1].cpu += readCosts.last!.cpu
    planCosts[planCosts.count - 1].instructions += readCosts.last!.instructions
}
func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
func loadAverage() -> String {
    var loads = [0.0, 0.0, 0.0]
    return getloadavg(&loads, 3) == 3 ? loads.map { String(format: "%.1f", $0) }.joined(separator: " ") : "unknown"
}
print(
    "floor rows: frame \(floorRows[.frame]!) (the covers' rectangles), exact columns \(floorRows[.columns]!) in \(spans.x.count) queries;"
        + " load average \(loadAverage())")
let names: [Floor: String] = [
    .frame: "SELECT length(tile_data) over the frame in C", .columns: "the same over the exact columns",
    .columnsAndRows: "tile_row, length(tile_data) over the exact columns",
]
for (measure, unit, key) in [("CPU", "ms", \Cost.cpu), ("wall", "ms", \Cost.wall), ("instructions", "M", \Cost.instructions)] {
    guard counter >= 0 || key != \Cost.instructions else { continue }
    report(
        "planning a region of a \(tileCount)-tile MBTiles, \(measure) (median of \(runs), alternated)",
        Floor.allCases.map { kind in
            Comparison(
                "plan (open, sizes, choice, prediction)", value: median(planCosts.map { $0[keyPath: key] }), unit: unit, vs: names[kind]!,
                referenceValue: median(floorCosts[kind]!.map { $0[keyPath: key] }), goal: kind == .columnsAndRows ? nil : (1.5, false))
        } + [
            Comparison(
                "the choice and prediction alone (TilePlanner.plan)", value: median(choiceCosts.map { $0[keyPath: key] }), unit: unit,
                vs: names[.frame]!, referenceValue: median(floorCosts[.frame]!.map { $0[keyPath: key] })),
            Comparison(
                "sizes alone (AreaTileSizes.read)", value: median(readCosts.map { $0[keyPath: key] }), unit: unit, vs: names[.frame]!,
                referenceValue: median(floorCosts[.frame]!.map { $0[keyPath: key] })),
        ])
}

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

/// The plan as numbers to compare before and after a change to the planner: per zoom the tiles and
/// bytes taken, the prediction, and an FNV-1a hash of the tiles in write order.
func digest(_ plan: TilePlan) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for tile in plan.tilesInWriteOrder {
        for value in [tile.zoom, tile.x, tile.y] {
            hash = (hash ^ UInt64(value)) &* 0x100_0000_01b3
        }
    }
    let zooms = plan.levels.map { "\($0.zoom):\($0.taken)/\($0.takenBytes)" }.joined(separator: " ")
    return "predicted \(plan.predictedSize), hash \(String(hash, radix: 16)); \(zooms)"
}
for format in PlanOutputFormat.allCases where !CommandLine.arguments.contains("--no-digest") {
    print("plan \(format.rawValue): \(digest(TilePlanner.plan(all, budget: budget, format: format)))")
}

print("== the size prediction at scale (goal: within 1% or 64 KiB, never above the budget) ==")
for format in PlanOutputFormat.allCases where writes {
    let plan = TilePlanner.plan(all, budget: budget, format: format)
    let size = try write(plan, format: format)
    let error = abs(size - plan.predictedSize)
    let met = error <= max(plan.predictedSize / 100, 64 * 1024) && size <= budget
    print(
        "\(format.rawValue): \(plan.tiles) tiles, complete to zoom \(plan.completeZoom ?? -1); predicted \(plan.predictedSize), wrote \(size)"
            + " (off by \(error) B, \(String(format: "%.3f", Double(error) * 100 / Double(size)))%), budget \(budget): \(met ? "met" : "NOT met")"
    )
}
