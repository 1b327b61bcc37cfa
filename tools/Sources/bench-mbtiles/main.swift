// bench-mbtiles: tilepack's MBTiles reader and writer against a plain C sqlite3_step floor.
//
//   swift run -c release --package-path tools bench-mbtiles [tileCount] [reads]
//
// One archive of >= 100,000 tiles (z0-8 complete plus z9 columns 0..), random point reads through
// MBTilesArchive.withTileBytes vs one prepared statement in a C loop (same URI flags), the same
// with 2 threads (each side with its own connections), and bulk writes through MBTilesWriter vs
// the same C insert loop (same pragmas, schema, statement and transaction size).
import BenchSupport
import Foundation
import MBTilesFloor
import TilepackCore
import TilepackStorage

/// Rows per transaction on both sides (a divisor of the default tile count, so that every commit
/// happens inside the timed write calls).
let perTransaction = 60_000

/// The tiles to write: coordinates and slices of one random byte pool (200...1200 bytes each).
struct TileSet: @unchecked Sendable {
    var z: [Int32] = [], x: [Int32] = [], y: [Int32] = []
    var offset: [Int] = [], length: [Int32] = []
    let pool: UnsafeMutableRawBufferPointer

    init(count: Int) {
        var rng = SplitMix64(seed: 7)
        pool = UnsafeMutableRawBufferPointer.allocate(byteCount: 4 << 20, alignment: 8)
        for i in 0..<pool.count { pool[i] = UInt8(truncatingIfNeeded: rng.next()) }
        var zoom = 0
        outer: while true {
            let side = 1 << zoom
            for col in 0..<side {
                for row in 0..<side {
                    if z.count == count { break outer }
                    z.append(Int32(zoom))
                    x.append(Int32(col))
                    y.append(Int32(row))
                    let len = Int(200 + rng.next() % 1001)
                    offset.append(Int(rng.next() % UInt64(pool.count - len)))
                    length.append(Int32(len))
                }
            }
            zoom += 1
        }
    }

    var count: Int { z.count }
    func bytes(_ i: Int) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: pool[offset[i]..<offset[i] + Int(length[i])]) }
    func coordinate(_ i: Int) -> TileCoordinate {
        // The numbers were generated in range.
        TileCoordinate(validatingZoom: Int(z[i]), x: Int(x[i]), y: Int(y[i]))!
    }
}

func libraryWrite(_ tiles: TileSet, to path: String) throws -> (insert: Double, finish: Double) {
    let start = now()
    let writer = try MBTilesWriter(
        creating: path, metadata: TileMetadata(["name": "bench", "format": "png"]),
        options: MBTilesWriterOptions(overwrite: true, tilesPerTransaction: perTransaction))
    for i in 0..<tiles.count { try writer.write(tiles.bytes(i), at: tiles.coordinate(i)) }
    let inserted = now()
    try writer.finish()
    return (inserted - start, now() - inserted)
}

func floorWrite(_ tiles: TileSet, to path: String) -> Double {
    unlink(path)
    let pointers: [UnsafePointer<UInt8>?] = (0..<tiles.count).map { tiles.bytes($0).baseAddress!.assumingMemoryBound(to: UInt8.self) }
    let start = now()
    let rc = mbtiles_floor_bulk_insert(path, tiles.z, tiles.x, tiles.y, pointers, tiles.length, Int64(tiles.count), Int64(perTransaction))
    precondition(rc == 0, "floor insert failed")
    return now() - start
}

func libraryReads(_ archive: MBTilesArchive, _ coordinates: ArraySlice<TileCoordinate>) -> Int64 {
    var checksum: Int64 = 0
    for tile in coordinates {
        let value = try? archive.withTileBytes(at: tile) { bytes in Int64(bytes.count) + Int64(bytes.count > 0 ? bytes[0] : 0) }
        checksum += (value ?? nil) ?? 0
    }
    return checksum
}

/// The C readers, one per thread (each used by one thread only).
struct FloorReaders: @unchecked Sendable {
    let handles: [OpaquePointer]
}

func floorRun(_ reader: OpaquePointer, _ picks: Picks, _ range: Range<Int>) -> Int64 {
    picks.z.withUnsafeBufferPointer { z in
        picks.x.withUnsafeBufferPointer { x in
            picks.y.withUnsafeBufferPointer { y in
                mbtiles_floor_reader_run(
                    reader, z.baseAddress! + range.lowerBound, x.baseAddress! + range.lowerBound,
                    y.baseAddress! + range.lowerBound, Int64(range.count))
            }
        }
    }
}

struct Picks: @unchecked Sendable {
    var coordinates: [TileCoordinate] = []
    var z: [Int32] = [], x: [Int32] = [], y: [Int32] = []
}

func run() throws {
    let arguments = CommandLine.arguments
    let tileCount = arguments.count > 1 ? Int(arguments[1]) ?? 120_000 : 120_000
    let readCount = arguments.count > 2 ? Int(arguments[2]) ?? 200_000 : 200_000
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("bench-mbtiles-\(getpid())").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }

    let tiles = TileSet(count: tileCount)
    let bytes = tiles.length.reduce(0) { $0 + Int($1) }
    print(
        "bench-mbtiles: \(tiles.count) tiles (z0-\(tiles.z.last!)), \(bytes / 1_000_000) MB of tile data, \(readCount) random reads per thread"
    )

    // Bulk writes: alternate library and floor, median of 3 each.
    let libraryPath = dir + "/library.mbtiles", floorPath = dir + "/floor.mbtiles"
    var libraryTotals: [Double] = [], libraryInserts: [Double] = [], libraryFinishes: [Double] = [], floorTotals: [Double] = []
    for _ in 0..<3 {
        let (insert, finish) = try libraryWrite(tiles, to: libraryPath)
        libraryInserts.append(insert)
        libraryFinishes.append(finish)
        libraryTotals.append(insert + finish)
        floorTotals.append(floorWrite(tiles, to: floorPath))
    }
    func median(_ v: [Double]) -> Double { v.sorted()[v.count / 2] }
    let n = Double(tiles.count)

    // Random point reads on the library-written archive, both sides opened with mode=ro&immutable=1.
    let archive = try MBTilesArchive(path: libraryPath, options: MBTilesOpenOptions(immutable: true))
    let stored = try archive.tileCount()
    precondition(stored == tiles.count)
    var rng = SplitMix64(seed: 99)
    var picks = Picks()
    for _ in 0..<(readCount * 2) {
        let i = Int(rng.next() % UInt64(tiles.count))
        picks.coordinates.append(tiles.coordinate(i))
        picks.z.append(tiles.z[i])
        picks.x.append(tiles.x[i])
        picks.y.append(tiles.y[i])
    }
    let uri = "file:" + libraryPath + "?mode=ro&immutable=1"
    // The library maps immutable files (mmap_size 1 GiB); the fair floor does the same, and the
    // floor with SQLite's default settings shows what that choice is worth.
    let mmap: Int64 = 1 << 30  // MBTilesOpenOptions' default for immutable files
    let floorReaders = FloorReaders(handles: (0..<2).map { _ in mbtiles_floor_reader_open(uri, mmap)! })
    let plainFloor = mbtiles_floor_reader_open(uri, 0)!
    defer {
        floorReaders.handles.forEach { mbtiles_floor_reader_close($0) }
        mbtiles_floor_reader_close(plainFloor)
    }
    let firstHalf = 0..<readCount, secondHalf = readCount..<(2 * readCount)

    // Warm the page cache and both sides; the checksums prove both read the same bytes.
    let libraryChecksum = libraryReads(archive, picks.coordinates[firstHalf])
    let floorChecksum = floorRun(floorReaders.handles[0], picks, firstHalf)
    precondition(libraryChecksum == floorChecksum && floorChecksum > 0, "checksums differ: \(libraryChecksum) vs \(floorChecksum)")
    _ = floorRun(floorReaders.handles[1], picks, secondHalf)
    _ = libraryReads(archive, picks.coordinates[secondHalf])

    let libraryOne = medianSeconds(runs: 5) { _ = libraryReads(archive, picks.coordinates[firstHalf]) }
    let floorOne = medianSeconds(runs: 5) { _ = floorRun(floorReaders.handles[0], picks, firstHalf) }
    _ = floorRun(plainFloor, picks, firstHalf)
    let plainFloorOne = medianSeconds(runs: 5) { _ = floorRun(plainFloor, picks, firstHalf) }
    let frozen = picks
    let libraryTwo = medianSeconds(runs: 5) {
        DispatchQueue.concurrentPerform(iterations: 2) { t in
            _ = libraryReads(archive, frozen.coordinates[t == 0 ? firstHalf : secondHalf])
        }
    }
    let floorTwo = medianSeconds(runs: 5) {
        DispatchQueue.concurrentPerform(iterations: 2) { t in
            _ = floorRun(floorReaders.handles[t], frozen, t == 0 ? firstHalf : secondHalf)
        }
    }
    let reads = Double(readCount)
    report(
        "random point reads (tiles/s, median of 5)",
        [
            Comparison(
                "1 thread: MBTilesArchive.withTileBytes", value: reads / libraryOne, unit: "reads/s",
                vs: "C sqlite3_step loop, same mmap_size", referenceValue: reads / floorOne, goal: (0.9, true)),
            Comparison(
                "1 thread: MBTilesArchive.withTileBytes", value: reads / libraryOne, unit: "reads/s",
                vs: "C loop, SQLite default settings (no mmap)", referenceValue: reads / plainFloorOne),
            Comparison(
                "2 threads: MBTilesArchive.withTileBytes", value: 2 * reads / libraryTwo, unit: "reads/s",
                vs: "C loop, 2 threads", referenceValue: 2 * reads / floorTwo, goal: (0.9, true)),
            Comparison(
                "scaling: library 2 threads", value: 2 * reads / libraryTwo, unit: "reads/s",
                vs: "library 1 thread", referenceValue: reads / libraryOne, goal: (1.5, true)),
            Comparison(
                "scaling: C loop 2 threads", value: 2 * reads / floorTwo, unit: "reads/s",
                vs: "C loop 1 thread", referenceValue: reads / floorOne),
        ])
    report(
        "bulk writes (tiles/s, median of 3)",
        [
            Comparison(
                "MBTilesWriter create + write calls (all commits)", value: n / median(libraryInserts), unit: "tiles/s",
                vs: "C insert loop incl. commits", referenceValue: n / median(floorTotals), goal: (0.9, true)),
            Comparison(
                "MBTilesWriter end to end (+ finish)", value: n / median(libraryTotals), unit: "tiles/s",
                vs: "C insert loop incl. commits", referenceValue: n / median(floorTotals)),
        ])
    print(String(format: "finish (derive + validate + agg hash + metadata + fsync + rename): median %.3f s", median(libraryFinishes)))
    let hashSeconds = try medianSeconds(runs: 3) { _ = try archive.aggregateTilesHash() }
    print(String(format: "  of which agg_tiles_hash alone (MBTilesArchive.aggregateTilesHash, warm): median %.3f s", hashSeconds))
    print("peak RSS: \(peakResidentBytes() / 1_000_000) MB")
}

do {
    try run()
} catch {
    print("bench-mbtiles failed: \(error)")
    exit(1)
}
