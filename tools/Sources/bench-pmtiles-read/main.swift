// bench-pmtiles-read: a local PMTiles read with `pread` (FileByteSource, what tilepack does since
// issue 29, item 15) against the same file memory-mapped (what it did before: a file truncated in
// place then killed the reader with SIGBUS), release build.
//
//   swift run -c release --package-path tools bench-pmtiles-read [--tiles N] [--reads N] [--window BYTES] [--dir PATH]
//
// Writes one PMTiles of synthetic tiles (PNG-signed incompressible payloads of 100 B to 6 KB,
// 30 % "ocean" tiles sharing 4 payloads), then measures, warm (just written: in the page cache),
// single-threaded: random lookups by coordinate (`tileData`-like: directory search and the bytes),
// a full `forEachTile` pass reading one byte of each tile, and one reading every byte. Both
// readers use the same `PMTilesArchive` code; only the byte source differs (`--window`: the
// bytes one read of the pass may span, `FileByteSource.coalescedReadLength`; 1 reads each tile
// with its own call, as before the windows). The random lookups are also set against their floor
// without a map: the same byte ranges, located beforehand, each read by one bare `pread`.
import BenchSupport
import Foundation
import TilepackCore
import TilepackStorage

var tileCount = 120_000
var reads = 300_000
var window = FileByteSource.defaultCoalescedReadLength
var directory: String?
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let arg = arguments.next() {
    switch arg {
    case "--tiles": tileCount = Int(arguments.next() ?? "") ?? tileCount
    case "--reads": reads = Int(arguments.next() ?? "") ?? reads
    case "--window": window = Int(arguments.next() ?? "") ?? window
    case "--dir": directory = arguments.next()
    default:
        print("usage: bench-pmtiles-read [--tiles N] [--reads N] [--window BYTES] [--dir PATH]")
        exit(2)
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

let folder = directory ?? NSTemporaryDirectory() + "/bench-pmtiles-read-\(getpid())"
try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
let path = folder + "/bench.pmtiles"
try? FileManager.default.removeItem(atPath: path)

// Whole zooms from 0 up, then a block of the next.
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

var order = SplitMix64(seed: 29)
let lookups = (0..<reads).map { _ in tiles[order.below(tiles.count)] }

@MainActor func measure(_ archive: PMTilesArchive) throws -> (lookups: Double, pass: Double, everyByte: Double) {
    var sink = 0
    let random = try medianSeconds(runs: 5) {
        for tile in lookups { sink &+= try archive.withTileBytes(at: tile) { Int($0[$0.count - 1]) } ?? 0 }
    }
    let pass = try medianSeconds(runs: 5) {
        try archive.forEachTile { _, bytes in sink &+= Int(bytes[bytes.count - 1]) }
    }
    // As a converter or a checker does: every byte of every tile read (a copy costs less when the
    // bytes are read anyway than when only one byte of a tile is).
    let everyByte = try medianSeconds(runs: 5) {
        try archive.forEachTile { _, bytes in
            var sum: UInt64 = 0
            var i = 0
            while i + 8 <= bytes.count {
                sum &+= bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                i += 8
            }
            sink &+= Int(truncatingIfNeeded: sum)
        }
    }
    if sink == 42 { print("") }
    return (Double(reads) / random, Double(tiles.count) / pass, Double(tiles.count) / everyByte)
}

/// The floor of a positional read: the same lookups' byte ranges, found beforehand, each read
/// with one bare `pread` into one reused buffer (no directory search, no archive code): what a
/// reader that must not map the file cannot go below.
@MainActor func preadFloor(_ archive: PMTilesArchive) throws -> Double {
    let base = Int(archive.header.tileDataOffset)
    let ranges = try lookups.map { tile in try archive.location(of: tile).map { (base + Int($0.offset), $0.length) } ?? (0, 0) }
    let fd = open(path, O_RDONLY)
    defer { close(fd) }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
    defer { buffer.deallocate() }
    var sink = 0
    let seconds = try medianSeconds(runs: 5) {
        for (offset, length) in ranges where length > 0 {
            guard pread(fd, buffer.baseAddress, length, off_t(offset)) == length else { fatalError("short read of \(path)") }
            sink &+= Int(buffer[length - 1])
        }
    }
    if sink == 42 { print("") }
    return Double(reads) / seconds
}

let positional = try measure(PMTilesArchive(source: FileByteSource(path: path, coalescedReadLength: window)))
let floor = try preadFloor(PMTilesArchive(source: FileByteSource(path: path)))
let mapped = try measure(PMTilesArchive(source: MappedSource(path: path)))
let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
report(
    "PMTiles reads, \(tiles.count) tiles, \(size / 1_000_000) MB, warm, 1 thread",
    [
        Comparison("random lookups (pread)", value: positional.lookups, unit: "tiles/s", vs: "memory-mapped", referenceValue: mapped.lookups),
        Comparison("random lookups (pread)", value: positional.lookups, unit: "tiles/s", vs: "bare pread floor", referenceValue: floor),
        Comparison("forEachTile pass (pread)", value: positional.pass, unit: "tiles/s", vs: "memory-mapped", referenceValue: mapped.pass),
        Comparison(
            "forEachTile pass reading every byte (pread)", value: positional.everyByte, unit: "tiles/s", vs: "memory-mapped",
            referenceValue: mapped.everyByte),
    ])
try? FileManager.default.removeItem(atPath: folder)
