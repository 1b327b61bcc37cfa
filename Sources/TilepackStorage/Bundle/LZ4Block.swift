#if canImport(CTilepackLZ4)
internal import CTilepackLZ4
#endif

/// An LZ4 block codec: the block format alone (no frame, no sizes), as bundle payloads store it.
/// liblz4 on Linux (``SystemLZ4``); on Apple platforms, which ship no liblz4, tilepack's own
/// ``PortableLZ4``, which the Linux tests and `tools/fuzz-lz4.sh` hold to liblz4.
@_spi(TilepackInternal) public protocol LZ4BlockCodec {
    /// Compresses `source` into `destination`: the bytes written, or 0 when they would not fit.
    static func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int

    /// Decompresses the block in `source` into `destination`: the bytes produced (at most
    /// `destination.count`), or a negative number when the block is malformed or would produce more.
    static func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int
}

#if canImport(CTilepackLZ4) && !PortableCodecs
/// The LZ4 codec the bundle reader and writer use: liblz4 where it is linked (Linux).
typealias LZ4 = SystemLZ4
#else
/// The LZ4 codec the bundle reader and writer use: tilepack's own on Apple platforms (and on
/// Linux with the `PortableCodecs` trait).
typealias LZ4 = PortableLZ4
#endif

#if canImport(CTilepackLZ4)
/// liblz4's block functions (`LZ4_compress_default`, `LZ4_decompress_safe`).
@_spi(TilepackInternal) public enum SystemLZ4: LZ4BlockCodec {
    public static func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int {
        guard source.count <= Int(LZ4_MAX_INPUT_SIZE), let output = destination.baseAddress else { return 0 }
        return Int(
            LZ4_compress_default(
                source.baseAddress?.assumingMemoryBound(to: CChar.self) ?? UnsafePointer(output.assumingMemoryBound(to: CChar.self)),
                output.assumingMemoryBound(to: CChar.self), Int32(source.count), Int32(min(destination.count, Int(Int32.max)))))
    }

    public static func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int {
        guard source.count <= Int(Int32.max), destination.count <= Int(Int32.max), let input = source.baseAddress else { return -1 }
        // liblz4 accepts a null destination only for an empty one.
        var empty: UInt8 = 0
        return withUnsafeMutablePointer(to: &empty) { placeholder in
            let output = destination.baseAddress ?? UnsafeMutableRawPointer(placeholder)
            return Int(
                LZ4_decompress_safe(
                    input.assumingMemoryBound(to: CChar.self), output.assumingMemoryBound(to: CChar.self),
                    Int32(source.count), Int32(destination.count)))
        }
    }
}
#endif

/// tilepack's own LZ4 block codec, written from the block format's description (a token of two
/// 4-bit lengths, literals, a 16-bit little-endian offset, length bytes of 255 continuing a length
/// of 15): the Apple platforms' codec, built and tested on Linux too.
///
/// Decoding accepts every block that keeps the format's end-of-block rules, with liblz4's
/// `LZ4_decompress_safe` bytes: the last sequence is literals alone and ends the input, the last
/// five bytes of the output are literals, and every match starts at least twelve bytes before the
/// end of the output (``endOfBlockFault(_:decodedLength:)`` states them). It refuses a block that
/// breaks them even where liblz4 takes it (its fast loop into a larger buffer, and its two-stage
/// shortcut while 32 bytes of room remain, skip the checks), and a match offset of 0, which the
/// format calls invalid (liblz4 1.9.4 copies whatever the output held). Every LZ4 encoder keeps
/// the rules, liblz4's and this one's included; whatever this decoder takes, liblz4 takes with the
/// same bytes.
///
/// Encoding is greedy (one 4,096-entry hash table of positions by their next 5 bytes, matches of
/// 4 or more bytes extended both ways), so its blocks differ from liblz4's bytes; any LZ4 decoder reads them.
@_spi(TilepackInternal) public enum PortableLZ4: LZ4BlockCodec {
    /// What ``decompress(_:into:)`` returns for a block with a match offset of 0.
    public static let zeroOffset = -2

    static let minimumMatch = 4
    static let lastLiterals = 5  // the last bytes of a block are literals
    static let matchStartLimit = 12  // the last match starts at least this far from the end
    static let hashBits = 12

    public static func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int {
        let inputEnd = source.count, outputEnd = destination.count
        guard let input = source.baseAddress?.assumingMemoryBound(to: UInt8.self), inputEnd > 0 else { return -1 }
        // An empty output takes exactly one empty sequence.
        guard outputEnd > 0, let output = destination.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            return inputEnd == 1 && input[0] == 0 ? 0 : -1
        }
        var ip = 0, op = 0
        while true {
            guard ip < inputEnd else { return -1 }
            let token = input[ip]
            ip += 1
            var literalLength = Int(token >> 4)
            if literalLength == 15 {
                // 15 literals or more must follow their length bytes.
                guard ip < inputEnd - 15 else { return -1 }
                while true {
                    let byte = input[ip]
                    ip += 1
                    literalLength += Int(byte)
                    guard ip <= inputEnd - 15 else { return -1 }
                    if byte != 255 { break }
                }
            }
            let literalsEnd = op + literalLength
            // A sequence without room for a match after it is the last: literals that end the input.
            if literalsEnd > outputEnd - matchStartLimit || literalLength > inputEnd - ip - (2 + 1 + lastLiterals) {
                guard literalLength == inputEnd - ip, literalsEnd <= outputEnd else { return -1 }
                (output + op).update(from: input + ip, count: literalLength)
                return literalsEnd
            }
            (output + op).update(from: input + ip, count: literalLength)
            ip += literalLength
            op = literalsEnd

            let offset = Int(input[ip]) | Int(input[ip + 1]) << 8
            ip += 2
            guard offset <= op else { return -1 }
            guard offset > 0 else { return zeroOffset }
            var matchLength = Int(token & 15)
            if matchLength == 15 {
                while true {
                    let byte = input[ip]
                    ip += 1
                    matchLength += Int(byte)
                    // At least a token and the last literals' worth of input stays after the lengths.
                    guard ip <= inputEnd - (lastLiterals - 1) else { return -1 }
                    if byte != 255 { break }
                }
            }
            matchLength += minimumMatch
            guard matchLength <= outputEnd - lastLiterals - op else { return -1 }
            let from = output + (op - offset), to = output + op
            if offset >= matchLength {
                to.update(from: from, count: matchLength)
            } else {
                // Overlapping: the match repeats the last `offset` bytes. (Byte by byte is faster
                // here than 8-byte copies from a period behind: 0.75x liblz4's speed against 0.44x.)
                for k in 0..<matchLength { to[k] = from[k] }
            }
            op += matchLength
        }
    }

    /// The end-of-block rule `block` breaks when it decodes to `decodedLength` bytes, or nil when
    /// it keeps them all: the rules of the LZ4 block format, stated apart from the decoder so the
    /// tests and `tools/fuzz-lz4.sh` can tell a refusal the format asks for from a decoder's fault.
    public static func endOfBlockFault(_ block: UnsafeRawBufferPointer, decodedLength: Int) -> String? {
        let end = block.count
        guard end > 0 else { return "an empty block" }
        var ip = 0, op = 0
        func length(_ initial: Int) -> Int? {
            var value = initial
            guard initial == 15 else { return value }
            while ip < end {
                let byte = block[ip]
                ip += 1
                value += Int(byte)
                if byte != 255 { return value }
            }
            return nil
        }
        while ip < end {
            let token = block[ip]
            ip += 1
            guard let literals = length(Int(token >> 4)), literals <= end - ip else { return "literals run past the block" }
            ip += literals
            op += literals
            if ip == end { return nil }  // the last sequence: literals alone, ending the input
            guard end - ip >= 2 else { return "the block ends inside a match offset" }
            ip += 2
            guard let matchLength = length(Int(token & 15)) else { return "a match length runs past the block" }
            if op > decodedLength - matchStartLimit {
                return "a match starts \(decodedLength - op) bytes before the end, not at least \(matchStartLimit)"
            }
            if op + matchLength + minimumMatch > decodedLength - lastLiterals {
                return "a match ends \(decodedLength - op - matchLength - minimumMatch) bytes before the end, not at least \(lastLiterals)"
            }
            op += matchLength + minimumMatch
        }
        return "the last sequence has a match"
    }

    public static func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int {
        let count = source.count, capacity = destination.count
        guard let output = destination.baseAddress?.assumingMemoryBound(to: UInt8.self), capacity > 0 else { return 0 }
        guard let input = source.baseAddress?.assumingMemoryBound(to: UInt8.self), count > 0 else {
            output[0] = 0
            return 1
        }
        var block = BlockWriter(input: input, output: output, capacity: capacity)
        var anchor = 0
        // Matches start at or before `count - matchStartLimit` and end at or before `count - lastLiterals`.
        if count > matchStartLimit {
            guard let literalsFrom = compressMatches(input, count: count, into: &block) else { return 0 }
            anchor = literalsFrom
        }
        guard block.emit(anchor: anchor, literals: count - anchor, offset: 0, matchLength: 0) else { return 0 }
        return block.op
    }

    /// The sequences of `input` up to its last literals, greedily matched, written to `block`:
    /// where the last literals start, or nil when the sequences do not fit.
    @inline(__always)
    private static func compressMatches(_ input: UnsafePointer<UInt8>, count: Int, into block: inout BlockWriter) -> Int? {
        let lastStart = count - matchStartLimit, matchEndLimit = count - lastLiterals
        return withUnsafeTemporaryAllocation(of: Int32.self, capacity: 1 << hashBits) { table -> Int? in
            table.initialize(repeating: -1)
            @inline(__always) func read32(_ at: Int) -> UInt32 { UnsafeRawPointer(input + at).loadUnaligned(as: UInt32.self) }
            // The hash of the 5 bytes at `at` (a 4-byte hash collides on RGBA pixels: raw tiles came out
            // 2.3x liblz4's size with it, within a byte of liblz4's with this one).
            @inline(__always) func hash(_ at: Int) -> Int {
                let bytes = UnsafeRawPointer(input + at).loadUnaligned(as: UInt64.self)
                return Int(truncatingIfNeeded: ((UInt64(littleEndian: bytes) << 24) &* 889_523_592_379) >> (64 - UInt64(hashBits)))
            }
            var ip = 0, misses = 0, anchor = 0
            while ip <= lastStart {
                let value = read32(ip)
                let slot = hash(ip)
                let candidate = Int(table[slot])
                table[slot] = Int32(ip)
                guard candidate >= 0, ip - candidate <= 65535, read32(candidate) == value else {
                    // Incompressible stretches are crossed in growing steps.
                    ip += 1 + misses >> 6
                    misses += 1
                    continue
                }
                misses = 0
                let (start, reference, end) = extendMatch(
                    input, at: ip, reference: candidate, anchor: anchor, matchEndLimit: matchEndLimit)
                guard block.emit(anchor: anchor, literals: start - anchor, offset: start - reference, matchLength: end - start) else {
                    return nil
                }
                anchor = end
                ip = end
                if ip - 2 > start, ip - 2 <= lastStart { table[hash(ip - 2)] = Int32(ip - 2) }
            }
            return anchor
        }
    }

    /// The 4-byte match at `ip` of the bytes at `reference`, extended backwards (not past
    /// `anchor`) and forwards (not past `matchEndLimit`): where it starts, its reference, where it ends.
    @inline(__always)
    private static func extendMatch(
        _ input: UnsafePointer<UInt8>, at ip: Int, reference candidate: Int, anchor: Int, matchEndLimit: Int
    ) -> (start: Int, reference: Int, end: Int) {
        var start = ip, reference = candidate
        while start > anchor, reference > 0, input[start - 1] == input[reference - 1] {
            start -= 1
            reference -= 1
        }
        // Extended 8 bytes at a time: the first differing byte is the lowest set byte of the XOR.
        var end = ip + minimumMatch
        var differs = false
        while end + 8 <= matchEndLimit {
            let a = UInt64(littleEndian: UnsafeRawPointer(input + end).loadUnaligned(as: UInt64.self))
            let b = UInt64(littleEndian: UnsafeRawPointer(input + reference + (end - start)).loadUnaligned(as: UInt64.self))
            if a != b {
                end += (a ^ b).trailingZeroBitCount >> 3
                differs = true
                break
            }
            end += 8
        }
        while !differs, end < matchEndLimit, input[end] == input[reference + (end - start)] { end += 1 }
        return (start, reference, end)
    }

    /// The block being written: sequences of literals from the input and a match.
    private struct BlockWriter {
        let input: UnsafePointer<UInt8>
        let output: UnsafeMutablePointer<UInt8>
        let capacity: Int
        /// The bytes written.
        var op = 0

        /// Writes a sequence: `literals` bytes from `anchor`, then a match (when `matchLength` > 0).
        /// False when it does not fit.
        @inline(__always)
        mutating func emit(anchor: Int, literals: Int, offset: Int, matchLength: Int) -> Bool {
            let extra = matchLength > 0 ? 2 + (matchLength - minimumMatch >= 15 ? (matchLength - minimumMatch - 15) / 255 + 1 : 0) : 0
            let needed = 1 + (literals >= 15 ? (literals - 15) / 255 + 1 : 0) + literals + extra
            guard needed <= capacity - op else { return false }
            let tokenAt = op
            op += 1
            var token = UInt8(min(literals, 15)) << 4
            if literals >= 15 { writeLength(literals - 15) }
            (output + op).update(from: input + anchor, count: literals)
            op += literals
            if matchLength > 0 {
                output[op] = UInt8(truncatingIfNeeded: offset)
                output[op + 1] = UInt8(truncatingIfNeeded: offset >> 8)
                op += 2
                let code = matchLength - minimumMatch
                token |= UInt8(min(code, 15))
                if code >= 15 { writeLength(code - 15) }
            }
            output[tokenAt] = token
            return true
        }

        @inline(__always)
        private mutating func writeLength(_ value: Int) {
            var rest = value
            while rest >= 255 {
                output[op] = 255
                op += 1
                rest -= 255
            }
            output[op] = UInt8(rest)
            op += 1
        }
    }
}
