// fuzz-bundle: feeds damaged bundles to the .tilepack reader; any crash, trap, hang or unbounded
// allocation is a bug. Run it through tools/fuzz-bundle.sh.
//
// Built with `-sanitize=fuzzer -D TILEPACK_LIBFUZZER` (and `-Xcc -DTILEPACK_FUZZING` for CFuzzDriver) it is a libFuzzer target (coverage-guided);
// set TILEPACK_FUZZ_MAKE_CORPUS=DIR to write the seed corpus and exit. Built normally it is a
// seeded random-mutation harness:
//   fuzz-bundle [--seconds N] [--seed S] [--make-corpus DIR] [--corpus DIR]
//
// Input format: byte 0 selects the mode, the rest is the file. With bit 0 set the harness first
// recomputes every CRC-32 of the file (as Specs/bundle-format.md places them), so that mutations
// reach the structural checks behind the checksums instead of stopping at the first CRC.
import BenchSupport
import Foundation
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage

#if TILEPACK_LIBFUZZER
import CFuzzDriver
#endif

nonisolated(unsafe) var sink: UInt64 = 0

/// Runs one input through open, verify, iteration and lookups.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    guard let mode = input.first else { return }
    var bytes = [UInt8](input.dropFirst())
    if mode & 1 == 1 { reseal(&bytes) }
    guard let archive = try? BundleArchive(data: Data(bytes), path: "fuzz-input") else { return }
    _ = try? archive.verify()
    var seen: [TileCoordinate] = []
    try? archive.forEachTile { tile, data in
        if seen.count < 32 { seen.append(tile) }
        sink &+= UInt64(data.count)
    }
    _ = try? archive.zoomLevels()
    _ = try? archive.metadata()
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: min(archive.maximumTileLength, 1 << 20), alignment: 16)
    defer { buffer.deallocate() }
    for tile in seen {
        _ = try? archive.containsTile(at: tile)
        _ = try? archive.readTile(at: tile, into: buffer)
        _ = try? archive.withTileBytes(at: tile) { sink &+= UInt64($0.count) }
        if let neighbour = TileCoordinate(validatingZoom: tile.zoom, x: tile.x, y: (tile.y + 1) % (1 << tile.zoom)) {
            _ = try? archive.tileData(at: neighbour)
        }
    }
}

// MARK: Checksums, per the spec

func u32(_ b: [UInt8], _ o: Int) -> UInt32? {
    guard o >= 0, o <= b.count - 4 else { return nil }
    return (0..<4).reduce(0) { $0 | UInt32(b[o + $1]) << (8 * UInt32($1)) }
}
func u64(_ b: [UInt8], _ o: Int) -> UInt64? {
    guard o >= 0, o <= b.count - 8 else { return nil }
    return (0..<8).reduce(0) { $0 | UInt64(b[o + $1]) << (8 * UInt64($1)) }
}
func put32(_ b: inout [UInt8], _ o: Int, _ v: UInt32) {
    guard o >= 0, o <= b.count - 4 else { return }
    for i in 0..<4 { b[o + i] = UInt8(truncatingIfNeeded: v >> (8 * UInt32(i))) }
}
func crc(_ b: [UInt8], _ start: Int, _ count: Int) -> UInt32? {
    guard start >= 0, count >= 0, start <= b.count, count <= b.count - start else { return nil }
    return b[start..<(start + count)].withUnsafeBytes { BundleFormat.crc32($0) }
}

/// Recomputes payload, metadata, index and header CRCs wherever the header's numbers allow.
func reseal(_ b: inout [UInt8]) {
    guard b.count >= 128, let metadataLength = u64(b, 32), let indexOffset = u64(b, 40), let indexLength = u64(b, 48),
        let dataOffset = u64(b, 56), let tiles = u64(b, 72), let payloads = u64(b, 80)
    else { return }
    let size = UInt64(b.count)
    if tiles < size, payloads < size, indexOffset < size, dataOffset < size {
        let records = (Int(indexOffset) + 248 + 12 * Int(tiles) + 7) & ~7
        for n in 0..<Int(payloads) {
            let r = records + 24 * n
            guard let offset = u64(b, r), let length = u32(b, r + 8), offset < size else { break }
            if let value = crc(b, Int(dataOffset) + Int(offset), Int(length)) { put32(&b, r + 16, value) }
        }
    }
    if metadataLength < size, let value = crc(b, 128, Int(metadataLength)) { put32(&b, 88, value) }
    if indexOffset < size, indexLength < size, let value = crc(b, Int(indexOffset), Int(indexLength)) { put32(&b, 92, value) }
    if let value = crc(b, 0, 124) { put32(&b, 124, value) }
}

// MARK: Seed corpus: valid bundles of every content kind

func tile(_ z: Int, _ x: Int, _ y: Int) -> TileCoordinate {
    TileCoordinate(validatingZoom: z, x: x, y: y) ?? TileCoordinate(validatingZoom: 0, x: 0, y: 0)!
}

func seedBundles() throws -> [[UInt8]] {
    let directory = NSTemporaryDirectory() + "fuzz-bundle-seeds-\(getpid())"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var results: [[UInt8]] = []
    func make(_ name: String, _ content: TileContent, _ metadata: [String: String], _ tiles: [(TileCoordinate, [UInt8])]) throws {
        let path = directory + "/" + name
        let writer = try BundleWriter(destination: path, content: content, metadata: TileMetadata(metadata))
        for (t, bytes) in tiles { try bytes.withUnsafeBytes { try writer.addTile(at: t, bytes: $0) } }
        try writer.finish()
        results.append([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
    }
    let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + (0..<120).map { UInt8($0 / 10) }
    try make(
        "two.tilepack", .encoded(.json), ["name": "two", "format": "json"],
        [(tile(1, 0, 0), Array("{\"a\":1}".utf8)), (tile(1, 1, 0), Array("[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]".utf8))])
    try make(
        "png.tilepack", .encoded(.png), ["name": "p", "format": "png", "bounds": "-180,-85,180,85"],
        [
            (tile(0, 0, 0), png), (tile(1, 0, 0), [1, 2, 3, 4, 5]), (tile(1, 1, 1), png), (tile(2, 3, 2), []),
            (tile(3, 7, 0), (0..<40).map { UInt8(truncatingIfNeeded: $0 &* 97) }),
        ])
    try make(
        "raw.tilepack", .rawBitmap(RawBitmapLayout(pixelFormat: .rgb565, width: 16, height: 16)), ["name": "raw"],
        [
            (tile(2, 1, 1), [UInt8](repeating: 7, count: 512)), (tile(2, 1, 2), (0..<512).map { UInt8(truncatingIfNeeded: $0) }),
            (tile(5, 31, 0), [UInt8](repeating: 7, count: 512)),
        ])
    try make("empty.tilepack", .encoded(.pbf), [:], [])
    return results
}

/// Writes the seed corpus: each valid bundle with mode byte 0 (as is) and 1 (resealed).
func writeCorpus(to directory: String) throws {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    for (i, bundle) in try seedBundles().enumerated() {
        for mode: UInt8 in [0, 1] {
            try Data([mode] + bundle).write(to: URL(fileURLWithPath: "\(directory)/seed-\(i)-\(mode)"))
        }
    }
}

#if TILEPACK_LIBFUZZER

// SwiftPM gives an executable its own main, so libFuzzer's loop is started explicitly.
if let directory = ProcessInfo.processInfo.environment["TILEPACK_FUZZ_MAKE_CORPUS"] {
    try writeCorpus(to: directory)
    exit(0)
}
var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
let status = withUnsafeMutablePointer(to: &argv) { argvPointer in
    tilepack_fuzz_run_libfuzzer(&argc, argvPointer) { data, size in
        fuzzOne(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }
}
exit(status)

#else

// MARK: Seeded random-mutation harness

var seconds = 60.0
var seed: UInt64 = 1
var corpusDirectory: String?
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--seconds": seconds = Double(arguments.next() ?? "") ?? seconds
    case "--seed": seed = UInt64(arguments.next() ?? "") ?? seed
    case "--corpus": corpusDirectory = arguments.next()
    case "--make-corpus":
        try writeCorpus(to: arguments.next() ?? "fuzz-corpus")
        exit(0)
    default:
        print("usage: fuzz-bundle [--seconds N] [--seed S] [--corpus DIR] [--make-corpus DIR]")
        exit(2)
    }
}

var corpus: [[UInt8]] = try seedBundles()
if let corpusDirectory, let names = try? FileManager.default.contentsOfDirectory(atPath: corpusDirectory) {
    for name in names.sorted() {
        if let data = try? Data(contentsOf: URL(fileURLWithPath: corpusDirectory + "/" + name)), data.count > 1 {
            corpus.append([UInt8](data.dropFirst()))
        }
    }
}
var rng = SplitMix64(seed: seed)
let deadline = Date().addingTimeInterval(seconds)
var runs = 0
while Date() < deadline {
    for _ in 0..<256 {
        var bytes = corpus[rng.below(corpus.count)]
        switch rng.below(6) {
        case 0:  // flip bits
            for _ in 0..<(1 + rng.below(4)) where !bytes.isEmpty { bytes[rng.below(bytes.count)] ^= UInt8(1 << rng.below(8)) }
        case 1:  // random bytes
            for _ in 0..<(1 + rng.below(8)) where !bytes.isEmpty { bytes[rng.below(bytes.count)] = UInt8(truncatingIfNeeded: rng.next()) }
        case 2:  // truncate
            bytes.removeLast(rng.below(bytes.count + 1))
        case 3:  // an interesting 32- or 64-bit value in a header or record field
            let values: [UInt64] = [0, 1, 7, 8, 0xFF, 0xFFFF_FFFF, 0x8000_0000, UInt64.max, UInt64.max - 7, 1 << 40, UInt64(bytes.count)]
            let value = values[rng.below(values.count)]
            let offset = rng.below(max(1, min(bytes.count, 512)))
            for i in 0..<(rng.below(2) == 0 ? 4 : 8) where offset + i < bytes.count {
                bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))
            }
        case 4:  // splice with another input
            let other = corpus[rng.below(corpus.count)]
            let cut = rng.below(min(bytes.count, other.count) + 1)
            bytes = Array(bytes.prefix(cut)) + Array(other.dropFirst(cut))
        default:  // insert or delete a run
            let at = rng.below(bytes.count + 1)
            if rng.below(2) == 0 {
                bytes.insert(contentsOf: (0..<(1 + rng.below(16))).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, at: at)
            } else {
                bytes.removeSubrange(at..<min(bytes.count, at + 1 + rng.below(16)))
            }
        }
        let input = [UInt8(rng.below(2))] + bytes
        input.withUnsafeBytes { fuzzOne($0) }
        runs += 1
    }
}
print("fuzz-bundle: \(runs) inputs in \(Int(seconds)) s (seed \(seed), \(corpus.count) corpus files): no crash")

#endif
