internal import TilepackCompression

/// CRC-32 (ISO-HDLC: the CRC of zlib, PNG and gzip), the one implementation tilepack computes
/// with, below both Storage and the tile layer. On Linux it is libdeflate's, which uses carry-less
/// multiplication where the CPU has it (about 6x zlib's `crc32` on this project's machines: 23
/// against 4 GB/s on 64 KiB); on Apple platforms, which ship no libdeflate, the SDK's zlib
/// (``ZlibCRC32``, also built on Linux, where the tests hold it to libdeflate's). Both are
/// TilepackCompression's, the one importer of zlib and libdeflate. Bundle payloads, PNG chunk
/// checks and the tile layer's disk cache go through it; zlib and libpng still check their own
/// streams with zlib's. Combining is the same arithmetic as zlib's `crc32_combine_gen`/`_op`, in Swift.
package enum CRC32 {
    /// The CRC-32 of `bytes`, continuing from `crc` (0 to start).
    package static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        PlatformCRC32.update(crc, bytes)
    }

    /// The operator that appends `length` bytes to a CRC (x^(8·length) modulo the polynomial), for
    /// ``combine(_:_:using:)``; making one costs about 2·log2(length) products, applying it one.
    package static func combineOperator(length: Int) -> UInt32 {
        precondition(length >= 0, "a negative length")
        var result: UInt32 = 0x8000_0000  // x^0
        var power: UInt32 = 0x0080_0000  // x^8: one byte
        var remaining = UInt(length)
        while remaining > 0 {
            if remaining & 1 != 0 { result = multiply(result, power) }
            power = multiply(power, power)
            remaining >>= 1
        }
        return result
    }

    /// The CRC-32 of `a`'s bytes followed by `b`'s, from their CRCs and the operator for `b`'s length.
    package static func combine(_ crcA: UInt32, _ crcB: UInt32, using lengthOperator: UInt32) -> UInt32 {
        multiply(lengthOperator, crcA) ^ crcB
    }

    /// The product of two polynomials modulo the CRC polynomial, in the reflected bit order.
    private static func multiply(_ a: UInt32, _ b: UInt32) -> UInt32 {
        var b = b
        var product: UInt32 = 0
        var bit: UInt32 = 0x8000_0000
        while bit != 0 {
            if a & bit != 0 {
                product ^= b
                if a & (bit - 1) == 0 { break }
            }
            bit >>= 1
            b = b & 1 != 0 ? (b >> 1) ^ 0xEDB8_8320 : b >> 1
        }
        return product
    }
}
