// fuzz-lz4: tilepack's portable LZ4 block codec (Apple platforms' codec) against liblz4, differentially.
//
// An input is two bytes of output capacity (little-endian) and a block. Both decoders decompress
// the block into buffers of that capacity, filled alike: what the portable decoder takes, liblz4
// takes with the same bytes; what liblz4 takes, the portable decoder takes too unless the format
// forbids it (PortableLZ4.endOfBlockFault names the end-of-block rule the block breaks; liblz4's
// fast loop and its two-stage shortcut skip those checks) or its match offset is 0 (the format
// calls it invalid; liblz4 1.9.4 copies). Then the whole input
// is compressed by each codec and decompressed by the other, which must give it back exactly.
//
// Built by tools/fuzz-lz4.sh with -sanitize=fuzzer it runs under libFuzzer; built normally, a
// seeded random-mutation loop: fuzz-lz4 [--seconds N] [--seed S] CORPUS_DIR. A disagreement is a
// crash (fatalError naming it). TILEPACK_FUZZ_MAKE_CORPUS=DIR writes the seed corpus and exits.
import BenchSupport
import CFuzzDriver
import Foundation
@_spi(TilepackInternal) import TilepackStorage

func decompress<C: LZ4BlockCodec>(_ codec: C.Type, _ block: UnsafeRawBufferPointer, capacity: Int) -> (Int, [UInt8]) {
    var output = [UInt8](repeating: 0x5A, count: capacity)
    let produced = output.withUnsafeMutableBytes { codec.decompress(block, into: $0) }
    return (produced, produced >= 0 ? Array(output[0..<produced]) : [])
}

func compress<C: LZ4BlockCodec>(_ codec: C.Type, _ input: UnsafeRawBufferPointer) -> [UInt8] {
    var output = [UInt8](repeating: 0, count: input.count + input.count / 255 + 16)
    let produced = output.withUnsafeMutableBytes { codec.compress(input, into: $0) }
    guard produced > 0 else { fatalError("\(codec) could not compress \(input.count) bytes into their bound") }
    return Array(output[0..<produced])
}

func fuzzOne(_ bytes: UnsafeRawBufferPointer) {
    if bytes.count >= 2 {
        let capacity = Int(bytes[0]) | Int(bytes[1]) << 8
        let block = UnsafeRawBufferPointer(rebasing: bytes[2...])
        let (systemCount, system) = decompress(SystemLZ4.self, block, capacity: capacity)
        let (portableCount, portable) = decompress(PortableLZ4.self, block, capacity: capacity)
        if portableCount >= 0, portableCount != systemCount || portable != system {
            fatalError(
                "a \(block.count)-byte block into \(capacity) bytes: liblz4 gives \(systemCount), the portable decoder \(portableCount)")
        }
        if systemCount >= 0, portableCount < 0, portableCount != PortableLZ4.zeroOffset,
            PortableLZ4.endOfBlockFault(block, decodedLength: systemCount) == nil
        {
            // The portable decoder may refuse only what the format forbids: a block liblz4 takes
            // although it breaks the end-of-block rules (its fast loop and its two-stage shortcut
            // skip the checks), or a zero offset.
            fatalError(
                "a \(block.count)-byte block that keeps the format's rules, into \(capacity) bytes: liblz4 gives \(systemCount), the portable decoder \(portableCount)"
            )
        }
    }
    // Each codec's block read back by the other.
    let input = Array(bytes)
    input.withUnsafeBytes { raw in
        let byPortable = compress(PortableLZ4.self, raw)
        let byLiblz4 = compress(SystemLZ4.self, raw)
        let back1 = byPortable.withUnsafeBytes { decompress(SystemLZ4.self, $0, capacity: raw.count) }
        let back2 = byLiblz4.withUnsafeBytes { decompress(PortableLZ4.self, $0, capacity: raw.count) }
        guard back1.0 == raw.count, back1.1 == input else {
            fatalError("liblz4 does not read back the portable block of \(raw.count) bytes")
        }
        guard back2.0 == raw.count, back2.1 == input else {
            fatalError("the portable decoder does not read back liblz4's block of \(raw.count) bytes")
        }
    }
}

let libFuzzerCallback: tilepack_fuzz_callback = { data, size in
    fuzzOne(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// Seeds: liblz4 blocks of text, runs, gradients, random bytes and the given files, each after its capacity.
func makeCorpus(_ directory: String, files: [String]) {
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    var rng = SplitMix64(seed: 34)
    var inputs: [[UInt8]] = [
        [], Array("abcabcabcabcabcabcabcabc the end".utf8), Array(repeating: 0, count: 300),
        (0..<4096).map { UInt8(truncatingIfNeeded: $0 * 31 >> 4) }, (0..<2000).map { _ in UInt8.random(in: 0...255, using: &rng) },
        (0..<20_000).map { UInt8(truncatingIfNeeded: ($0 / 4) &+ ($0 % 4) * 64) },
    ]
    for file in files { if let data = FileManager.default.contents(atPath: file), data.count < 65_536 { inputs.append([UInt8](data)) } }
    for (n, input) in inputs.enumerated() {
        let block = input.withUnsafeBytes { compress(SystemLZ4.self, $0) }
        let seed = [UInt8(input.count & 255), UInt8(input.count >> 8)] + block
        _ = FileManager.default.createFile(atPath: "\(directory)/seed-\(n)", contents: Data(seed))
    }
}

func mutate(_ input: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
    var data = input.isEmpty ? [0] : input
    for _ in 0..<Int.random(in: 1...4, using: &rng) {
        let i = Int.random(in: 0..<data.count, using: &rng)
        switch Int.random(in: 0..<6, using: &rng) {
        case 0: data[i] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
        case 1: data[i] = [0, 0xFF, 0x0F, 0xF0, 1, 4][Int.random(in: 0..<6, using: &rng)]
        case 2: data.removeSubrange(Int.random(in: 0...i, using: &rng)...)
        case 3:
            data.insert(contentsOf: (0..<Int.random(in: 1...16, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }, at: i)
        case 4: data.removeSubrange(i..<min(data.count, i + Int.random(in: 1...16, using: &rng)))
        default: data[min(1, data.count - 1)] = UInt8.random(in: 0...255, using: &rng)  // another capacity
        }
        if data.isEmpty { data = [0] }
    }
    return data
}

@main
struct FuzzLZ4 {
    static func main() {
        if let directory = ProcessInfo.processInfo.environment["TILEPACK_FUZZ_MAKE_CORPUS"] {
            makeCorpus(directory, files: Array(CommandLine.arguments.dropFirst()))
            return
        }
        runLibFuzzerIfBuilt(libFuzzerCallback)
        seededLoop()
    }

    /// The fallback harness (no libFuzzer): mutates seeds for a bounded time.
    static func seededLoop() {
        let run = SeededFuzzRun(target: "fuzz-lz4")
        let (seconds, seed, seeds) = (run.seconds, run.seed, run.seeds)
        var rng = SplitMix64(seed: seed)
        let start = Date()
        var runs = 0
        for s in seeds { s.withUnsafeBytes { fuzzOne($0) } }
        while Date().timeIntervalSince(start) < seconds {
            let input = mutate(seeds[Int.random(in: 0..<seeds.count, using: &rng)], &rng)
            input.withUnsafeBytes { fuzzOne($0) }
            runs += 1
        }
        print(
            "fuzz-lz4 (seeded mutation, seed \(seed)): \(runs) inputs in \(Int(seconds)) s from \(seeds.count) seeds, liblz4 and the portable codec agree"
        )
    }
}
