import BenchSupport
// fuzz-decode: the TilepackImaging decoders (PNG, JPEG, WebP, sniffing, limits) on hostile bytes.
//
// Built by tools/fuzz-decode.sh with -sanitize=fuzzer, it runs under libFuzzer (arguments are
// libFuzzer's: corpus directories, -max_total_time=60, ...). Built normally, it runs a seeded
// random-mutation loop: fuzz-decode [--seconds N] [--seed S] CORPUS_DIR...
// Either way a crash, trap or hang is the failure; a thrown ImagingError is a pass.
import CFuzzDriver
import Foundation
import TilepackCore
import TilepackImaging

/// One input: sniff, read the headers, decode into a bitmap and into a caller's buffer, checking
/// what a successful decode promises.
func fuzzOne(_ bytes: UnsafeRawBufferPointer) {
    let formats = PixelFormat.allCases
    let format = formats[bytes.count % formats.count]
    // A lower bound than the default keeps each run fast; limits are part of what is tested.
    let limit = 1024
    if let bitmap = try? ImageDecoder.decode(bytes, pixelFormat: format, maximumDimension: limit) {
        guard bitmap.width >= 1, bitmap.width <= limit, bitmap.height >= 1, bitmap.height <= limit,
            bitmap.pixels.count == bitmap.width * bitmap.height * format.bytesPerPixel,
            let info = try? ImageDecoder.imageInfo(bytes), info.width == bitmap.width, info.height == bitmap.height
        else { fatalError("decode succeeded with an inconsistent bitmap") }
        // The caller's-buffer path must agree with the bitmap path, byte for byte.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bitmap.pixels.count, alignment: 16)
        defer { buffer.deallocate() }
        do {
            try ImageDecoder.decode(
                bytes, into: buffer, pixelFormat: format, expectedWidth: bitmap.width,
                expectedHeight: bitmap.height, maximumDimension: limit)
            guard buffer.elementsEqual(bitmap.pixels) else { fatalError("buffer decode differs from bitmap decode") }
        } catch {
            fatalError("bitmap decode succeeded but buffer decode failed: \(error)")
        }
        if bitmap.width <= 64 && bitmap.height <= 64 {
            _ = bitmap.resized(width: bitmap.width * 2, height: bitmap.height * 2)
            _ = try? bitmap.subSquare(levelsDown: 1, column: 1, row: 0, outputSize: 32)
        }
    } else {
        _ = try? ImageDecoder.imageInfo(bytes)
    }
}

let libFuzzerCallback: tilepack_fuzz_callback = { data, size in
    fuzzOne(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// Structure-blind mutations that still reach deep into the decoders: bit flips, interesting
/// values (including huge big-endian sizes over width/height/length fields), truncation,
/// splices from another seed, inserted and deleted runs.
func mutate(_ input: [UInt8], _ other: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
    var data = input.isEmpty ? [0] : input
    for _ in 0..<Int.random(in: 1...6, using: &rng) {
        let i = Int.random(in: 0..<data.count, using: &rng)
        switch Int.random(in: 0..<8, using: &rng) {
        case 0: data[i] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
        case 1: data[i] = [0, 0xFF, 0x7F, 0x80, 1][Int.random(in: 0..<5, using: &rng)]
        case 2:
            let v: UInt32 = [0xFFFF_FFFF, 0x7FFF_FFFF, 0x0001_0000, 0, 4097, 16384][Int.random(in: 0..<6, using: &rng)]
            for k in 0..<4 where i + k < data.count { data[i + k] = UInt8(truncatingIfNeeded: v >> (24 - 8 * k)) }
        case 3: data.removeSubrange(Int.random(in: 0...i, using: &rng)...)
        case 4 where !other.isEmpty:
            let j = Int.random(in: 0..<other.count, using: &rng)
            let n = min(Int.random(in: 1...256, using: &rng), other.count - j, data.count - i)
            data.replaceSubrange(i..<i + n, with: other[j..<j + n])
        case 5:
            data.insert(contentsOf: (0..<Int.random(in: 1...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }, at: i)
        case 6: data.removeSubrange(i..<min(data.count, i + Int.random(in: 1...64, using: &rng)))
        default: data[i] = data[i] &+ UInt8.random(in: 1...3, using: &rng)
        }
        if data.isEmpty { data = [0] }
    }
    return data
}

@main
struct FuzzDecode {
    static func main() {
        runLibFuzzerIfBuilt(libFuzzerCallback)
        seededLoop()
    }

    /// The fallback harness (no libFuzzer): mutates seeds for a bounded time.
    static func seededLoop() {
        let run = SeededFuzzRun(target: "fuzz-decode")
        let (seconds, seed, seeds) = (run.seconds, run.seed, run.seeds)
        let crashFile = FileManager.default.currentDirectoryPath + "/fuzz-decode-last-input"
        var rng = SplitMix64(seed: seed)
        let start = Date()
        var runs = 0, decoded = 0
        for s in seeds { s.withUnsafeBytes { fuzzOne($0) } }
        while Date().timeIntervalSince(start) < seconds {
            let input = mutate(
                seeds[Int.random(in: 0..<seeds.count, using: &rng)], seeds[Int.random(in: 0..<seeds.count, using: &rng)], &rng)
            if runs % 64 == 0 { _ = FileManager.default.createFile(atPath: crashFile, contents: Data(input)) }
            input.withUnsafeBytes { bytes in
                fuzzOne(bytes)
                if (try? ImageDecoder.imageInfo(bytes)) != nil { decoded += 1 }
            }
            runs += 1
        }
        try? FileManager.default.removeItem(atPath: crashFile)
        print(
            "fuzz-decode (seeded mutation, seed \(seed)): \(runs) inputs in \(Int(seconds)) s from \(seeds.count) seeds, \(decoded) with readable headers, no crash"
        )
    }
}
