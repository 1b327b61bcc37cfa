#if os(Linux)  // liblz4 and libdeflate, the references, are linked on Linux only
import Foundation
import Testing
import TilepackChecksum
import TilepackTestSupport

@_spi(TilepackInternal) @testable import TilepackStorage
@_spi(TilepackInternal) import TilepackCompression

/// The portable LZ4 block codec (Apple platforms' codec) held to liblz4 on Linux: each reads the
/// other's blocks, and both give the same answer on the same block, byte for byte.
@Suite struct LZ4BlockTests {
    /// Inputs of every kind a bundle holds: empty, tiny, runs, text, raw pixels, random bytes.
    static func samples() -> [[UInt8]] {
        var rng = SplitMix64(seed: 34)
        var result: [[UInt8]] = [
            [], [7], Array(repeating: 0, count: 12), Array(repeating: 0, count: 13), Array(repeating: 65, count: 70_000),
        ]
        result.append(Array("the quick brown fox jumps over the lazy dog; the quick brown fox jumps again. ".utf8) + Array(0...255))
        // Raw pixels: a gradient with a repeating pattern (what LZ4 bundles store).
        result.append((0..<256 * 256 * 4).map { UInt8(truncatingIfNeeded: ($0 / 4) % 256 &+ ($0 % 4) * 60 &+ ($0 / 4096)) })
        result.append((0..<5000).map { _ in UInt8.random(in: 0...255, using: &rng) })
        // Short literal runs between matches, offsets near 65535, lengths across 15 and 270.
        var mixed: [UInt8] = []
        for k in 0..<3000 { mixed += k % 7 == 0 ? Array(repeating: UInt8(k % 251), count: k % 300) : [UInt8(k % 256), UInt8(k / 256)] }
        result.append(mixed)
        result.append((0..<200_000).map { UInt8(truncatingIfNeeded: ($0 * 7919) >> 9) })
        return result
    }

    static func compress<C: LZ4BlockCodec>(_ codec: C.Type, _ input: [UInt8], capacity: Int? = nil) -> [UInt8]? {
        let capacity = capacity ?? input.count + input.count / 255 + 16
        var output = [UInt8](repeating: 0, count: capacity)
        let produced = input.withUnsafeBytes { source in output.withUnsafeMutableBytes { codec.compress(source, into: $0) } }
        return produced > 0 ? Array(output[0..<produced]) : nil
    }

    /// The result of decompressing `block` into `capacity` bytes: the bytes, or the negative code.
    static func decompress<C: LZ4BlockCodec>(_ codec: C.Type, _ block: [UInt8], capacity: Int) -> Result<[UInt8], CodecFailure> {
        var output = [UInt8](repeating: 0xA5, count: capacity)
        let produced = block.withUnsafeBytes { source in output.withUnsafeMutableBytes { codec.decompress(source, into: $0) } }
        return produced >= 0 ? .success(Array(output[0..<produced])) : .failure(CodecFailure(code: produced))
    }

    struct CodecFailure: Error, Equatable { var code: Int }

    @Test func eachReadsTheOthersBlocks() throws {
        for input in Self.samples() {
            let portable = try #require(Self.compress(PortableLZ4.self, input), "portable LZ4 failed on \(input.count) bytes")
            let system = try #require(Self.compress(SystemLZ4.self, input))
            #expect(try Self.decompress(SystemLZ4.self, portable, capacity: input.count).get() == input)
            #expect(try Self.decompress(PortableLZ4.self, system, capacity: input.count).get() == input)
            #expect(try Self.decompress(PortableLZ4.self, portable, capacity: input.count).get() == input)
            // Within 5% (and 16 bytes) of liblz4's size: a real compressor, not a literal copier.
            #expect(
                portable.count <= system.count + system.count / 20 + 16,
                "\(input.count) bytes: \(portable.count) vs liblz4's \(system.count)")
        }
    }

    @Test func compressionThatDoesNotFitReturnsZero() {
        let input = Self.samples()[7]  // random bytes: incompressible
        #expect(Self.compress(PortableLZ4.self, input, capacity: input.count - 1) == nil)
        #expect(Self.compress(SystemLZ4.self, input, capacity: input.count - 1) == nil)
        let runs = Array(repeating: UInt8(9), count: 10_000)
        let block = Self.compress(PortableLZ4.self, runs)!
        #expect(Self.compress(PortableLZ4.self, runs, capacity: block.count - 1) == nil)
        #expect(Self.compress(PortableLZ4.self, runs, capacity: block.count) == block)
    }

    /// A block that decodes to another length than the caller's buffer is refused or reported short,
    /// the same way by both codecs: never a silently truncated tile.
    @Test func aBlockOfAnotherLengthIsNeverTakenForTheTile() throws {
        let input = Array(repeating: UInt8(3), count: 1000) + Array(0...200).map { UInt8($0) }
        let block = try #require(Self.compress(PortableLZ4.self, input))
        for codec in [SystemLZ4.self, PortableLZ4.self] as [any LZ4BlockCodec.Type] {
            func run(_ capacity: Int) -> Int {
                var output = [UInt8](repeating: 0, count: capacity)
                return block.withUnsafeBytes { s in output.withUnsafeMutableBytes { codec.decompress(s, into: $0) } }
            }
            #expect(run(input.count - 1) < 0, "\(codec): a block longer than the buffer")
            #expect(run(input.count) == input.count)
            #expect(run(input.count + 100) == input.count, "\(codec): a shorter block says how long it is")
        }
    }

    /// Hand-made blocks at the edges of the format's rules, answered alike.
    @Test func malformedBlocksAreAnsweredAsLiblz4Answers() {
        let blocks: [[UInt8]] = [
            [], [0x00], [0x10, 65], [0xF0], [0xF0, 255, 255], [0x1F, 65, 1, 0],  // literals, lengths cut short
            [0x40, 1, 2, 3, 4, 5, 0, 0x50, 1, 2, 3, 4, 5],  // an offset beyond the start
            [0x40, 1, 2, 3, 4, 4, 0, 0x50, 1, 2, 3, 4, 5],  // a valid match, then the last literals
            [0x4F, 1, 2, 3, 4, 4, 0, 255, 255, 10, 0x50, 1, 2, 3, 4, 5],  // a long match
            [0x4F, 1, 2, 3, 4, 4, 0, 255, 255],  // a match length that runs off the end
            [0x40, 1, 2, 3, 4, 4, 0, 0x10, 9],  // last literals too few
        ]
        for block in blocks {
            for capacity in [0, 1, 5, 8, 13, 20, 600] {
                let system = Self.decompress(SystemLZ4.self, block, capacity: capacity)
                let portable = Self.decompress(PortableLZ4.self, block, capacity: capacity)
                switch (system, portable) {
                case (.success(let a), .success(let b)): #expect(a == b, "\(block) into \(capacity)")
                case (.failure, .failure): break
                default: Issue.record("\(block) into \(capacity): liblz4 \(system), portable \(portable)")
                }
            }
        }
    }

    /// What `tools/fuzz-lz4.sh` found in CI: 13 literals and a match ending 4 bytes before the end
    /// of a 32-byte output. liblz4 takes it (its two-stage shortcut, taken while 32 bytes of room
    /// remain, skips the end-of-block checks); the format forbids it, and the portable decoder refuses it.
    @Test func aBlockBreakingTheEndOfBlockRulesIsRefusedByName() {
        let block: [UInt8] = [0xDB] + Array(1...13) + [8, 0] + [0x40, 1, 2, 3, 4]
        #expect(Self.decompress(SystemLZ4.self, block, capacity: 32).map(\.count) == .success(32))
        #expect(Self.decompress(PortableLZ4.self, block, capacity: 32).map(\.count) == .failure(CodecFailure(code: -1)))
        let fault = block.withUnsafeBytes { PortableLZ4.endOfBlockFault($0, decodedLength: 32) }
        #expect(fault == "a match ends 4 bytes before the end, not at least 5")
        // The same bytes with five last literals keep the rules: both decoders take them alike.
        let kept: [UInt8] = [0xDA] + Array(1...13) + [8, 0] + [0x50, 1, 2, 3, 4, 5]
        #expect(kept.withUnsafeBytes { PortableLZ4.endOfBlockFault($0, decodedLength: 32) } == nil)
        #expect(Self.decompress(PortableLZ4.self, kept, capacity: 32) == Self.decompress(SystemLZ4.self, kept, capacity: 32))
        #expect(Self.decompress(PortableLZ4.self, kept, capacity: 32).map(\.count) == .success(32))
    }

    /// Every block either encoder writes keeps the end-of-block rules.
    @Test func encodersKeepTheEndOfBlockRules() throws {
        for input in Self.samples() {
            for block in [try #require(Self.compress(SystemLZ4.self, input)), try #require(Self.compress(PortableLZ4.self, input))] {
                let fault = block.withUnsafeBytes { PortableLZ4.endOfBlockFault($0, decodedLength: input.count) }
                #expect(fault == nil, "a block of \(input.count) bytes: \(fault ?? "")")
            }
        }
    }

    /// The format calls an offset of 0 invalid; the portable decoder refuses it.
    @Test func aZeroOffsetIsRefused() {
        let block: [UInt8] = [0x40, 1, 2, 3, 4, 0, 0] + [0x50, 1, 2, 3, 4, 5]
        #expect(Self.decompress(PortableLZ4.self, block, capacity: 20) == .failure(CodecFailure(code: PortableLZ4.zeroOffset)))
        #expect(Self.decompress(SystemLZ4.self, block, capacity: 20).map(\.count) == .success(13))  // liblz4 1.9.4 takes it
    }

    /// Random mutations of real blocks: the differential fuzz target's check (tools/fuzz-lz4.sh), bounded.
    @Test func mutatedBlocksGetTheSameAnswerFromBoth() throws {
        var rng = SplitMix64(seed: 3434)
        let seeds = try Self.samples().filter { $0.count < 20_000 }.map { try #require(Self.compress(SystemLZ4.self, $0)) }
        var disagreements: [String] = []
        for _ in 0..<3000 {
            var block = seeds.randomElement(using: &rng)!
            for _ in 0..<Int.random(in: 1...4, using: &rng) where !block.isEmpty {
                let i = Int.random(in: 0..<block.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: block[i] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
                case 1: block[i] = [0, 255, 15, 240, 1][Int.random(in: 0..<5, using: &rng)]
                default: block.removeSubrange(i...)
                }
            }
            let capacity = Int.random(in: 0...25_000, using: &rng)
            let system = Self.decompress(SystemLZ4.self, block, capacity: capacity)
            let portable = Self.decompress(PortableLZ4.self, block, capacity: capacity)
            switch (system, portable) {
            case (.success(let a), .success(let b)) where a == b: continue
            case (.failure, .failure): continue
            case (.success, .failure(let failure)) where failure.code == PortableLZ4.zeroOffset: continue
            case (.success(let a), .failure):
                // liblz4's fast loop and its two-stage shortcut take blocks that break the
                // format's end-of-block rules; the portable decoder may refuse only those.
                if block.withUnsafeBytes({ PortableLZ4.endOfBlockFault($0, decodedLength: a.count) }) != nil { continue }
                disagreements.append(
                    "\(block.count)-byte block that keeps the rules into \(capacity): liblz4 \(a.count) bytes, portable \(portable.map(\.count))"
                )
            default:
                disagreements.append(
                    "\(block.count)-byte block into \(capacity): liblz4 \(system.map(\.count)), portable \(portable.map(\.count))")
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(5))")
    }

    /// zlib's CRC-32 (Apple platforms') and libdeflate's (Linux's) agree on every length and split.
    @Test func zlibAndLibdeflateCRCsAgree() {
        for input in Self.samples() {
            input.withUnsafeBytes { bytes in
                let whole = LibdeflateCRC32.update(0, bytes)
                #expect(ZlibCRC32.update(0, bytes) == whole)
                let half = bytes.count / 2
                let first = ZlibCRC32.update(0, UnsafeRawBufferPointer(rebasing: bytes[..<half]))
                #expect(ZlibCRC32.update(first, UnsafeRawBufferPointer(rebasing: bytes[half...])) == whole)
                #expect(CRC32.checksum(bytes) == whole)
            }
        }
        #expect(Array("123456789".utf8).withUnsafeBytes { ZlibCRC32.update(0, $0) } == 0xCBF4_3926)
    }
}
#endif
