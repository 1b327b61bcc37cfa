// bench-bundle: the .tilepack bundle against MBTiles on the same tiles (release build).
//
//   swift run -c release --package-path tools bench-bundle [--tiles N] [--reads N] [--dir PATH]
//
// Writes one synthetic tile set (>= 100,000 tiles, PNG-signed incompressible payloads of 100 B to
// 6 KB like real raster tiles, 30 % of them "ocean" tiles sharing 4 payloads) as a bundle, a flat
// MBTiles and a deduplicated MBTiles, then measures in one run: open time, resident memory after
// opening and after random reads, random-read throughput, and file sizes. Reads are warm (the
// files were just written, so they are in the page cache), single-threaded, in the same random
// order for every archive.
import BenchSupport
import Foundation
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage

struct Arguments {
    var tiles = 120_000
    var reads = 300_000
    var directory: String?

    init() {
        var args = CommandLine.arguments.dropFirst().makeIterator()
        while let arg = args.next() {
            switch arg {
            case "--tiles": tiles = Int(args.next() ?? "") ?? tiles
            case "--reads": reads = Int(args.next() ?? "") ?? reads
            case "--dir": directory = args.next()
            default:
                print("usage: bench-bundle [--tiles N] [--reads N] [--dir PATH]")
                exit(2)
            }
        }
    }
}

/// The tiles: whole zoom levels from 0 up, then the rest of the count as a block of the next level.
func tileSet(count: Int) -> [TileCoordinate] {
    var tiles: [TileCoordinate] = []
    var zoom = 0
    while tiles.count < count {
        let side = 1 << zoom
        let remaining = count - tiles.count
        let width = remaining >= side * side ? side : Int(Double(remaining).squareRoot().rounded(.up))
        outer: for x in 0..<min(width, side) {
            for y in 0..<side where y < width || width == side {
                guard tiles.count < count, let tile = TileCoordinate(validatingZoom: zoom, x: x, y: y) else { break outer }
                tiles.append(tile)
            }
        }
        zoom += 1
    }
    return tiles
}

/// The payload of a tile: ocean tiles share 4 payloads, the others are unique incompressible bytes.
func payload(for tile: TileCoordinate, into bytes: inout [UInt8]) {
    var rng = SplitMix64(seed: BundleFormat.key(of: tile) &* 31 &+ 7)
    let ocean = rng.next() % 10 < 3
    if ocean { rng = SplitMix64(seed: rng.next() % 4) }
    let count = 100 + Int(rng.next() % 5900)
    bytes.removeAll(keepingCapacity: true)
    bytes += [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    for _ in 0..<(count / 8) {
        withUnsafeBytes(of: rng.next()) { bytes += $0 }
    }
}

func fileSize(_ path: String) -> Double {
    Double((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0)
}

func resident() -> Double { Double(currentResidentBytes() ?? 0) }

func check(_ condition: Bool, _ message: String) {
    if !condition {
        print("FAILED: \(message)")
        exit(1)
    }
}

/// Reads a few bytes of every 4 KiB page of a tile (what a consumer that uses the tile touches)
/// and returns their sum, so the compiler cannot skip the read.
func touch(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    guard !bytes.isEmpty else { return 0 }
    var sum = UInt64(bytes[bytes.count - 1])
    for i in stride(from: 0, to: bytes.count, by: 4096) { sum &+= UInt64(bytes[i]) }
    return sum
}

/// RssAnon and RssFile of this process, KiB (Linux /proc/self/status).
func rssParts() -> (anon: Double, file: Double) {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
    func field(_ name: String) -> Double {
        for line in text.split(separator: "\n") where line.hasPrefix(name) {
            return Double(line.split(separator: " ").dropFirst().first.map(String.init) ?? "") ?? 0
        }
        return 0
    }
    return (field("RssAnon:"), field("RssFile:"))
}

struct MemoryFigures { var openAnon = 0.0, openFile = 0.0, readAnon = 0.0, readFile = 0.0 }
let memoryProbeReads = 20_000

/// Child mode: `bench-bundle --memory-probe KIND PATH TILES` opens the archive, reads, prints 4 numbers.
if CommandLine.arguments.count == 5, CommandLine.arguments[1] == "--memory-probe" {
    let path = CommandLine.arguments[3]
    let start = rssParts()
    let archive: any TileArchive = CommandLine.arguments[2] == "bundle" ? try BundleArchive(path: path) : try MBTilesArchive(path: path)
    let opened = rssParts()
    let list = tileSet(count: Int(CommandLine.arguments[4]) ?? 1)  // the same tiles, without reading the archive
    let afterList = rssParts()
    var rng = SplitMix64(seed: 7)
    var sum: UInt64 = 0
    for _ in 0..<memoryProbeReads {
        _ = try archive.withTileBytes(at: list[Int(rng.next() % UInt64(list.count))]) { sum &+= touch($0) }
    }
    let read = rssParts()
    // Reads are measured from after the tile list was built, whose own growth is not the archive's.
    print(
        opened.anon - start.anon, opened.file - start.file,
        read.anon - afterList.anon + (opened.anon - start.anon), read.file - afterList.file + (opened.file - start.file), sum)
    exit(0)
}

func probe(_ kind: String, _ path: String) throws -> MemoryFigures {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    process.arguments = ["--memory-probe", kind, path, String(tiles.count)]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let numbers = output.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Double($0) }
    check(numbers.count >= 4, "memory probe for \(kind) printed '\(output)'")
    return MemoryFigures(openAnon: numbers[0], openFile: numbers[1], readAnon: numbers[2], readFile: numbers[3])
}

let arguments = Arguments()
check(arguments.tiles >= 1, "--tiles must be positive")
let directory = arguments.directory ?? NSTemporaryDirectory() + "bench-bundle-\(getpid())"
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { if arguments.directory == nil { try? FileManager.default.removeItem(atPath: directory) } }
let bundlePath = directory + "/bench.tilepack"
let flatPath = directory + "/bench-flat.mbtiles"
let dedupPath = directory + "/bench-dedup.mbtiles"

let tiles = tileSet(count: arguments.tiles)
print(
    "bench-bundle: \(tiles.count) tiles, zooms \(tiles.first?.zoom ?? 0)...\(tiles.last?.zoom ?? 0), \(arguments.reads) random reads, in \(directory)"
)

// Write the same tiles three ways.
var metadata = TileMetadata(["name": "bench", "format": "png", "minzoom": "0", "maxzoom": "\(tiles.last?.zoom ?? 0)"])
metadata.setBounds(GeoBoundingBox(west: -180, south: -85, east: 180, north: 85))
var scratch: [UInt8] = []
var payloadBytes = 0
let bundleWrite = try medianSeconds(runs: 1) {
    let writer = try BundleWriter(destination: bundlePath, content: .encoded(.png), metadata: metadata, overwrite: true)
    for tile in tiles {
        payload(for: tile, into: &scratch)
        payloadBytes += scratch.count
        try scratch.withUnsafeBytes { try writer.addTile(at: tile, bytes: $0) }
    }
    let summary = try writer.finish()
    print(
        "bundle: \(summary.tileCount) tiles, \(summary.payloadCount) payloads (\(summary.lz4PayloadCount) LZ4), \(summary.fileLength) bytes"
    )
}
var mbtilesWrite: [MBTilesWriteSchema: Double] = [:]
for (schema, path) in [(MBTilesWriteSchema.flat, flatPath), (.deduplicated, dedupPath)] {
    mbtilesWrite[schema] = try medianSeconds(runs: 1) {
        let writer = try MBTilesWriter(creating: path, metadata: metadata, options: MBTilesWriterOptions(schema: schema, overwrite: true))
        for tile in tiles {
            payload(for: tile, into: &scratch)
            try writer.write(scratch, at: tile)
        }
        let report = try writer.finish()
        print("mbtiles \(schema): \(report.tileCount) tiles, \(report.storedBlobCount) blobs")
    }
}

// Open time: median of repeated opens (each fully validated: the bundle checks its index CRC).
let opens = 25
let mbtilesOpen = try medianSeconds(runs: opens) { _ = try MBTilesArchive(path: flatPath) }
let bundleOpen = try medianSeconds(runs: opens) { _ = try BundleArchive(path: bundlePath) }

// Random reads, same order for all archives; every byte of each tile is summed so it is touched.
var rng = SplitMix64(seed: 2026)
let order = (0..<arguments.reads).map { _ in tiles[Int(rng.next() % UInt64(tiles.count))] }
func readAll(_ archive: some TileArchive) throws -> (seconds: Double, checksum: UInt64) {
    var sum: UInt64 = 0
    let start = now()
    for tile in order {
        let found = try archive.withTileBytes(at: tile) { bytes -> Bool in
            sum &+= touch(bytes)
            return true
        }
        check(found == true, "tile \(tile) missing from \(archive.path)")
    }
    return (now() - start, sum)
}

// Memory: each archive in a fresh child process (memoryProbe), so neither inherits the other's heap.
let mbtilesMemory = try probe("mbtiles", flatPath)
let bundleMemory = try probe("bundle", bundlePath)
let mbtilesReads = try readAll(MBTilesArchive(path: flatPath))
var bundle: BundleArchive? = try BundleArchive(path: bundlePath)
let bundleReads = try readAll(bundle!)
check(bundleReads.checksum == mbtilesReads.checksum, "the bundle and MBTiles returned different bytes")
let uncheckedReads = try readAll(BundleArchive(path: bundlePath, options: .init(verifiesPayloadChecksums: false)))
check(uncheckedReads.checksum == mbtilesReads.checksum, "unchecked reads returned different bytes")
let dedupReads = try readAll(MBTilesArchive(path: dedupPath))
check(dedupReads.checksum == mbtilesReads.checksum, "deduplicated MBTiles returned different bytes")

// The zero-copy path a tile layer uses: decode into the caller's buffer.
let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bundle!.maximumTileLength, alignment: 16)
let intoStart = now()
for tile in order { _ = try bundle!.readTile(at: tile, into: buffer) }
let bundleInto = now() - intoStart
let mbtilesIntoArchive = try MBTilesArchive(path: flatPath)
let mbIntoStart = now()
for tile in order { _ = try mbtilesIntoArchive.readTile(at: tile, into: buffer) }
let mbtilesInto = now() - mbIntoStart
buffer.deallocate()

let verifyTime = try medianSeconds(runs: 1) { _ = try bundle!.verify() }
bundle = nil

let reads = Double(order.count)
print(
    "payload bytes: \(payloadBytes); bundle write \(format(bundleWrite)) s, MBTiles flat \(format(mbtilesWrite[.flat] ?? 0)) s, dedup \(format(mbtilesWrite[.deduplicated] ?? 0)) s; bundle verify \(format(verifyTime)) s"
)
report(
    "open (median of \(opens))",
    [
        Comparison("bundle open", value: bundleOpen * 1e6, unit: "us", vs: "MBTiles open", referenceValue: mbtilesOpen * 1e6)
    ])
report(
    "resident memory growth in a fresh process (anonymous = heap; file = mapped file pages, clean and reclaimable)",
    [
        Comparison(
            "bundle anonymous after open", value: bundleMemory.openAnon, unit: "KiB", vs: "MBTiles", referenceValue: mbtilesMemory.openAnon),
        Comparison(
            "bundle total after open", value: bundleMemory.openAnon + bundleMemory.openFile, unit: "KiB", vs: "MBTiles",
            referenceValue: mbtilesMemory.openAnon + mbtilesMemory.openFile),
        Comparison(
            "bundle anonymous after \(memoryProbeReads) reads", value: bundleMemory.readAnon, unit: "KiB", vs: "MBTiles",
            referenceValue: mbtilesMemory.readAnon),
        Comparison(
            "bundle total after \(memoryProbeReads) reads", value: bundleMemory.readAnon + bundleMemory.readFile, unit: "KiB",
            vs: "MBTiles", referenceValue: mbtilesMemory.readAnon + mbtilesMemory.readFile),
    ])
report(
    "random reads, withTileBytes (higher is better)",
    [
        Comparison(
            "bundle (CRC checked)", value: reads / bundleReads.seconds, unit: "reads/s", vs: "MBTiles flat",
            referenceValue: reads / mbtilesReads.seconds, goal: (5, true)),
        Comparison(
            "bundle (CRC not checked)", value: reads / uncheckedReads.seconds, unit: "reads/s", vs: "MBTiles flat",
            referenceValue: reads / mbtilesReads.seconds, goal: (5, true)),
        Comparison(
            "bundle (CRC checked)", value: reads / bundleReads.seconds, unit: "reads/s", vs: "MBTiles dedup",
            referenceValue: reads / dedupReads.seconds, goal: (5, true)),
    ])
report(
    "random reads into the caller's buffer, readTile(at:into:) (higher is better)",
    [
        Comparison(
            "bundle (CRC checked)", value: reads / bundleInto, unit: "reads/s", vs: "MBTiles flat", referenceValue: reads / mbtilesInto,
            goal: (5, true))
    ])
report(
    "file size (lower is better)",
    [
        Comparison(
            "bundle", value: fileSize(bundlePath) / 1_048_576, unit: "MiB", vs: "MBTiles flat",
            referenceValue: fileSize(flatPath) / 1_048_576),
        Comparison(
            "bundle", value: fileSize(bundlePath) / 1_048_576, unit: "MiB", vs: "MBTiles dedup",
            referenceValue: fileSize(dedupPath) / 1_048_576),
    ])
