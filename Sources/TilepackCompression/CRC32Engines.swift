internal import CTilepackZlib

#if canImport(CTilepackDeflate)
internal import CTilepackDeflate
#endif

/// A CRC-32 implementation: the same function of the bytes from one library or another.
package protocol CRC32Engine {
    /// The CRC-32 of `bytes`, continuing from `crc` (0 to start).
    static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32
}

#if canImport(CTilepackDeflate) && !PortableCodecs
/// The platform's CRC-32: libdeflate's where it is linked (Linux).
package typealias PlatformCRC32 = LibdeflateCRC32
#else
/// The platform's CRC-32: the SDK's zlib on Apple platforms (and on Linux with the `PortableCodecs` trait).
package typealias PlatformCRC32 = ZlibCRC32
#endif

#if canImport(CTilepackDeflate)
/// libdeflate's CRC-32 (carry-less multiplication where the CPU has it), Linux's.
package enum LibdeflateCRC32: CRC32Engine {
    package static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return crc }
        return libdeflate_crc32(crc, base, bytes.count)
    }
}
#endif

/// zlib's CRC-32: Apple platforms' (every SDK has zlib); on Linux the tests' reference for libdeflate's.
package enum ZlibCRC32: CRC32Engine {
    package static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count > 0 else { return crc }
        // zlib's length is a 32-bit uInt: longer buffers go in pieces.
        var result = crc
        var done = 0
        while done < bytes.count {
            let piece = min(bytes.count - done, 1 << 30)
            result = UInt32(truncatingIfNeeded: crc32(uLong(result), base + done, uInt(piece)))
            done += piece
        }
        return result
    }
}
