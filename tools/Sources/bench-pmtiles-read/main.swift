// bench-pmtiles-read: a local PMTiles read with `pread` (FileByteSource, what tilepack does since
// issue 29, item 15) against the same file memory-mapped (what it did before: a file truncated in
// place then killed the reader with SIGBUS), release build.
//
//   swift run -c release --package-path tools bench-pmtiles-read [--tiles N] [--reads N] [--rounds N]
//       [--window BYTES] [--dir PATH] [--only CONTENDER] [--entry-bytes N]
//
// Writes one PMTiles of synthetic tiles (PNG-signed incompressible payloads of 100 B to 6 KB,
// 30 % "ocean" tiles sharing 4 payloads), then measures, warm (just written: in the page cache),
// single-threaded: random lookups by coordinate (`withTileBytes`: directory search and the bytes),
// a full `forEachTile` pass reading one byte of each tile, and one reading every byte (as verify,
// convert and extract do). Both readers use the same `PMTilesArchive` code; only the byte source
// differs (`--window`: `FileByteSource.coalescedReadLength`, the bytes one read of a pass may span; a
// pass in (zoom, x, y) order holds 8 times that, a strip of columns at a time).
// The contenders run in turn, round by round, and each ratio is the median of the rounds' ratios.
// Two floors without a map, timed in the same rounds: the lookups' byte ranges, located beforehand,
// each read by one bare `pread` into one buffer; and the tile data section read front to back in
// windows of `--window` bytes by bare `pread`s (the copy every reader without a map pays, whatever
// it does with the bytes). `--only NAME` runs one contender alone, for a profiler.
// Two more floors (`floor-touch1`, `floor-touch2`): the lookups' bare preads each followed by one
// or two dependent loads at random places of a table as large as the leaf entries (`--entry-bytes`
// a entry, 12 by default: the compact directory's): the least a lookup that reads its entry pays.
// Each contender is timed in wall time and in this thread's CPU time (getrusage), both reported:
// on a shared machine the CPU time leaves out what other processes ran.
import BenchSupport
import Foundation
import TilepackCore
import TilepackStorage

struct Options {
    var tileCount = 120_000
    var reads = 300_000
    var rounds = 7
    var window = FileByteSource.defaultCoalescedReadLength
    var directory: String?
    var only: String?
    var entryBytes = 12

    init(_ arguments: [String]) {
        var arguments = arguments.makeIterator()
        while let arg = arguments.next() {
            switch arg {
            case "--tiles": tileCount = Int(arguments.next() ?? "") ?? tileCount
            case "--reads": reads = Int(arguments.next() ?? "") ?? reads
            case "--rounds": rounds = Int(arguments.next() ?? "") ?? rounds
            case "--window": window = Int(arguments.next() ?? "") ?? window
            case "--dir": directory = arguments.next()
            case "--only": only = arguments.next()
            case "--entry-bytes": entryBytes = Int(arguments.next() ?? "") ?? entryBytes
            default:
                print(
                    "usage: bench-pmtiles-read [--tiles N] [--reads N] [--rounds N] [--window BYTES] [--dir PATH] [--only CONTENDER] [--entry-bytes N]"
                )
                exit(2)
            }
        }
    }
}

/// The reader before item 15: the whole file mapped, slices handed out without copying.
final class MappedSource: ByteSource, @unchecked Sendable {
    let name: String
    let count: Int
    private let base: UnsafeRawPointer

    init(path: String) {
        name = path
        let fd = open(path, O_RDONLY)
        var info = stat()
        fstat(fd, &info)
        count = Int(info.st_size)
        base = UnsafeRawPointer(mmap(nil, count, PROT_READ, MAP_PRIVATE, fd, 0)!)
        close(fd)
    }

    func withBytes<R>(offset: Int, length: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try checkRange(offset: offset, length: length)
        return try body(UnsafeRawBufferPointer(start: base + offset, count: length))
    }

    deinit { munmap(UnsafeMutableRawPointer(mutating: base), count) }
}

/// Whole zooms from 0 up, then a block of the next, written to `path`.
func writeArchive(path: String, tileCount: Int) throws -> [TileCoordinate] {
    var tiles: [TileCoordinate] = []
    var zoom = 0
    while tiles.count < tileCount {
        let side = 1 << zoom
        for x in 0..<side where tiles.count < tileCount {
            for y in 0..<side where tiles.count < tileCount { tiles.append(TileCoordinate(validatingZoom: zoom, x: x, y: y)!) }
        }
        zoom += 1
    }
    let writer = try PMTilesWriter(destination: path)
    var bytes: [UInt8] = []
    for tile in tiles {
        var rng = SplitMix64(seed: PMTilesFormat.tileID(of: tile) &* 31 &+ 7)
        if rng.next() % 10 < 3 { rng = SplitMix64(seed: rng.next() % 4) }
        let length = 100 + rng.below(6000)
        bytes = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        while bytes.count < length { bytes.append(UInt8(truncatingIfNeeded: rng.next())) }
        try writer.addTile(at: tile, bytes: bytes)
    }
    try writer.finish()
    return tiles
}

/// Keeps the optimiser from dropping reads whose results are otherwise unused.
final class Sink: @unchecked Sendable {
    var value = 0
    static let shared = Sink()
}

func randomLookups(_ archive: PMTilesArchive, _ lookups: [TileCoordinate]) throws {
    var sink = 0
    for tile in lookups { sink &+= try archive.withTileBytes(at: tile) { Int($0[$0.count - 1]) } ?? 0 }
    Sink.shared.value &+= sink
}

func onePass(_ archive: PMTilesArchive) throws {
    var sink = 0
    try archive.forEachTile { _, bytes in sink &+= Int(bytes[bytes.count - 1]) }
    Sink.shared.value &+= sink
}

/// As a converter or a checker does: every byte of every tile read.
func everyBytePass(_ archive: PMTilesArchive) throws {
    var sink: UInt64 = 0
    try archive.forEachTile { _, bytes in
        var sum: UInt64 = 0
        var i = 0
        while i + 8 <= bytes.count {
            sum &+= bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i += 8
        }
        sink &+= sum
    }
    Sink.shared.value &+= Int(truncatingIfNeeded: sink)
}

/// The directory search alone: where each looked-up tile lies, its bytes not read.
func locateOnly(_ archive: PMTilesArchive, _ lookups: [TileCoordinate]) throws {
    var sink = 0
    for tile in lookups { sink &+= try archive.location(of: tile)?.length ?? 0 }
    Sink.shared.value &+= sink
}

/// The directory search, then one bare `pread` of the range it found into one reused buffer: the
/// least a lookup through the directories can cost without a map (the floor plus the search).
func locateThenRead(_ archive: PMTilesArchive, _ lookups: [TileCoordinate], fd: Int32, buffer: UnsafeMutableRawBufferPointer) throws {
    var sink = 0
    let base = Int(archive.header.tileDataOffset)
    for tile in lookups {
        guard let (offset, length) = try archive.location(of: tile), length > 0 else { continue }
        guard pread(fd, buffer.baseAddress, length, off_t(base + Int(offset))) == length else { fatalError("short read") }
        sink &+= Int(buffer[length - 1])
    }
    Sink.shared.value &+= sink
}

/// Bare `pread`s of the given ranges into one reused buffer: the floor of a lookup without a map.
/// With `touches` above 0, each read is followed by that many dependent loads at random places of
/// `table` (the next place found from the value loaded, as a lookup finds its entry from its
/// bucket): the floor of a lookup that must read its entry from a directory of `table`'s size.
func bareReads(
    fd: Int32, _ ranges: [(offset: Int, length: Int)], buffer: UnsafeMutableRawBufferPointer,
    touches: Int = 0, table: UnsafeMutableBufferPointer<UInt32> = .init(start: nil, count: 0), places: [UInt32] = []
) {
    var sink = 0
    var place = 0
    for (index, (offset, length)) in ranges.enumerated() where length > 0 {
        guard pread(fd, buffer.baseAddress, length, off_t(offset)) == length else { fatalError("short read") }
        sink &+= Int(buffer[length - 1])
        var value: UInt32 = 0
        for touch in 0..<touches {
            // `table` holds zeros: the place is random, but waits for the previous load.
            place = Int(places[(index &* 2 &+ touch) % places.count] &+ value) % table.count
            value = table[place]
        }
        sink &+= Int(value)
    }
    Sink.shared.value &+= sink
}

/// The calling thread's CPU seconds (user and system).
func threadCPUSeconds() -> Double {
    var usage = rusage()
    #if os(Linux)
    getrusage(1, &usage)  // RUSAGE_THREAD (Glibc's header defines it only for _GNU_SOURCE)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
    return user + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

/// Contenders timed in turn, round by round, in wall and in this thread's CPU seconds: on a
/// shared machine a contender's wall time holds the time other processes ran, its CPU time not.
struct Rounds {
    var wall: [String: [Double]] = [:]
    var cpu: [String: [Double]] = [:]

    mutating func run(rounds: Int, _ contenders: [(name: String, body: () throws -> Void)]) throws {
        for _ in 0..<max(1, rounds) {
            for (name, body) in contenders {
                let start = now(), startCPU = threadCPUSeconds()
                try body()
                cpu[name, default: []].append(threadCPUSeconds() - startCPU)
                wall[name, default: []].append(now() - start)
            }
        }
    }

    func seconds(_ cpuTime: Bool) -> [String: [Double]] { cpuTime ? cpu : wall }

    func rate(_ name: String, work: Int, cpuTime: Bool) -> Double {
        Double(work) / AlternatingRounds.median(seconds(cpuTime)[name] ?? [])
    }

    func ratio(_ name: String, vs reference: String, cpuTime: Bool) -> Double {
        let times = seconds(cpuTime)
        return AlternatingRounds.median(zip(times[name] ?? [], times[reference] ?? []).map { $1 / $0 })
    }
}

let options = Options(Array(CommandLine.arguments.dropFirst()))
let folder = options.directory ?? NSTemporaryDirectory() + "/bench-pmtiles-read-\(getpid())"
try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
let path = folder + "/bench.pmtiles"
try? FileManager.default.removeItem(atPath: path)
let tiles = try writeArchive(path: path, tileCount: options.tileCount)
var order = SplitMix64(seed: 29)
let lookups = (0..<options.reads).map { _ in tiles[order.below(tiles.count)] }

let positional = try PMTilesArchive(source: FileByteSource(path: path, coalescedReadLength: options.window))
let mapped = try PMTilesArchive(source: MappedSource(path: path))
let base = Int(positional.header.tileDataOffset), dataLength = Int(positional.header.tileDataLength)
let located = try lookups.map { tile in try positional.location(of: tile).map { (base + Int($0.offset), $0.length) } ?? (0, 0) }
let windows = stride(from: base, to: base + dataLength, by: options.window).map { ($0, min(options.window, base + dataLength - $0)) }
let fd = open(path, O_RDONLY)
let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1 << 16, options.window), alignment: 16)
// A table the size of the leaf entries as the directory keeps them (--entry-bytes a entry), for
// the floors that touch memory as a lookup must.
var entryCount = 0
try positional.forEachEntry { _ in entryCount += 1 }
let table = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: max(16, entryCount * options.entryBytes / 4))
table.initialize(repeating: 0)
var placeOrder = SplitMix64(seed: 47)
let places = (0..<(2 * options.reads)).map { _ in UInt32(truncatingIfNeeded: placeOrder.next()) }

let contenders: [(name: String, body: () throws -> Void)] = [
    ("pread-lookups", { try randomLookups(positional, lookups) }),
    ("floor-lookups", { bareReads(fd: fd, located, buffer: buffer) }),
    ("floor-touch1", { bareReads(fd: fd, located, buffer: buffer, touches: 1, table: table, places: places) }),
    ("floor-touch2", { bareReads(fd: fd, located, buffer: buffer, touches: 2, table: table, places: places) }),
    ("mmap-lookups", { try randomLookups(mapped, lookups) }),
    ("locate", { try locateOnly(positional, lookups) }),
    ("locate-pread", { try locateThenRead(positional, lookups, fd: fd, buffer: buffer) }),
    ("pread-pass", { try onePass(positional) }),
    ("floor-pass", { bareReads(fd: fd, windows, buffer: buffer) }),
    ("mmap-pass", { try onePass(mapped) }),
    ("pread-every", { try everyBytePass(positional) }),
    ("mmap-every", { try everyBytePass(mapped) }),
]
var rounds = Rounds()
if let only = options.only {
    guard let contender = contenders.first(where: { $0.name == only }) else {
        print("--only takes one of: \(contenders.map(\.name).joined(separator: ", "))")
        exit(2)
    }
    try rounds.run(rounds: options.rounds, [contender])
    print("\(only): \(format(AlternatingRounds.median(rounds.wall[only]!) * 1000)) ms a run (median of \(options.rounds))")
} else {
    try rounds.run(rounds: options.rounds, contenders)
    let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    let n = tiles.count
    for cpuTime in [true, false] {
        func line(_ what: String, _ name: String, vs reference: String, _ referenceName: String, work: Int, goal: Double? = nil)
            -> Comparison
        {
            Comparison(
                what, value: rounds.rate(name, work: work, cpuTime: cpuTime), unit: "tiles/s", vs: reference,
                referenceValue: rounds.rate(referenceName, work: work, cpuTime: cpuTime), goal: goal.map { ($0, true) },
                pairedRatio: rounds.ratio(name, vs: referenceName, cpuTime: cpuTime))
        }
        let touched = "the bare pread floor and \(entryCount) entries of \(options.entryBytes) B touched"
        report(
            "PMTiles reads, \(n) tiles, \(size / 1_000_000) MB, warm, 1 thread, \(options.rounds) rounds in turn, "
                + (cpuTime ? "thread CPU time" : "wall time") + " (medians; ratios: the median of the rounds')",
            [
                line(
                    "random lookups (pread)", "pread-lookups", vs: "bare pread floor", "floor-lookups", work: options.reads, goal: 1 / 1.2),
                line("random lookups (pread)", "pread-lookups", vs: touched + " once", "floor-touch1", work: options.reads),
                line("random lookups (pread)", "pread-lookups", vs: touched + " twice", "floor-touch2", work: options.reads),
                line("one touch after the floor", "floor-touch1", vs: "bare pread floor", "floor-lookups", work: options.reads),
                line("two touches after the floor", "floor-touch2", vs: "bare pread floor", "floor-lookups", work: options.reads),
                line("random lookups (pread)", "pread-lookups", vs: "memory-mapped", "mmap-lookups", work: options.reads),
                line("the directory search alone", "locate", vs: "bare pread floor", "floor-lookups", work: options.reads),
                line("the search, then a bare pread", "locate-pread", vs: "bare pread floor", "floor-lookups", work: options.reads),
                line("random lookups (pread)", "pread-lookups", vs: "the search and a bare pread", "locate-pread", work: options.reads),
                line("forEachTile pass, one byte a tile (pread)", "pread-pass", vs: "memory-mapped", "mmap-pass", work: n),
                line("the tile data alone, read front to back by bare pread", "floor-pass", vs: "memory-mapped pass", "mmap-pass", work: n),
                line("forEachTile pass, one byte a tile (pread)", "pread-pass", vs: "the copy alone", "floor-pass", work: n),
                line("forEachTile pass reading every byte (pread)", "pread-every", vs: "memory-mapped", "mmap-every", work: n, goal: 0.91),
            ])
    }
}
close(fd)
buffer.deallocate()
table.deallocate()
try? FileManager.default.removeItem(atPath: folder)
