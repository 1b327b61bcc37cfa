#if canImport(CTilepackDeflate) && !PortableCodecs
internal import CTilepackDeflate
import Foundation

/// Whole-buffer zlib streams (RFC 1950) by libdeflate, for the PNG encoder's image data: at its
/// level 2, on map tiles, about 7x faster than zlib's level 6 with `Z_FILTERED` (libpng's
/// default) for 5 % more bytes; and whole gzip members inflated for ``inflateGzip(_:length:)``'s
/// callers. It lives beside ``Gzip`` in the one module that imports libdeflate and zlib (whose
/// CRC-32 routines Checksum's `CRC32` calls); Linux only, as libdeflate is: elsewhere
/// ``isAvailable`` is false and the PNG encoder keeps the platform's own.
package enum ZlibStream {
    package static let isAvailable = true

    /// `input` as one zlib stream at libdeflate's `level` (1...12), or nil when `capacity` bytes
    /// cannot hold it (or libdeflate cannot allocate its compressor).
    package static func compress(_ input: UnsafeRawBufferPointer, level: Int, capacity: Int) -> [UInt8]? {
        precondition((1...12).contains(level), "libdeflate's levels are 1...12")
        guard let compressor = Pool.shared.take(level: level) else { return nil }
        defer { Pool.shared.give(compressor, level: level) }
        var out = [UInt8](repeating: 0, count: max(capacity, 0))
        let written = out.withUnsafeMutableBytes { dst in
            libdeflate_zlib_compress(compressor, input.baseAddress, input.count, dst.baseAddress, dst.count)
        }
        guard written > 0 else { return nil }
        out.removeSubrange(written...)
        return out
    }

    /// The most bytes a zlib stream of `length` input bytes can take at any level.
    package static func bound(_ length: Int) -> Int {
        Int(libdeflate_zlib_compress_bound(nil, length))
    }

    /// One gzip member (RFC 1952) inflated whole by libdeflate, about twice as fast as zlib's
    /// streaming inflate: `nil` unless `input` is exactly one member that inflates to exactly
    /// `length` bytes, its CRC and size trailer matching (the caller's streaming inflater then
    /// says what is wrong).
    package static func inflateGzip(_ input: UnsafeRawBufferPointer, length: Int) -> [UInt8]? {
        guard length >= 0, let decompressor = libdeflate_alloc_decompressor() else { return nil }
        defer { libdeflate_free_decompressor(decompressor) }
        var out = [UInt8](unsafeUninitializedCapacity: length) { _, initialized in initialized = length }
        var read = 0
        var written = 0
        let result = out.withUnsafeMutableBytes { dst in
            libdeflate_gzip_decompress_ex(decompressor, input.baseAddress, input.count, dst.baseAddress, dst.count, &read, &written)
        }
        guard result == LIBDEFLATE_SUCCESS, read == input.count, written == length else { return nil }
        return out
    }

    /// Compressors kept for reuse (one costs hundreds of KiB of tables to allocate), a few per level.
    private final class Pool: @unchecked Sendable {
        static let shared = Pool()
        private let lock = NSLock()
        private var idle: [Int: [OpaquePointer]] = [:]

        /// A compressor for `level`, nil when libdeflate cannot allocate one.
        func take(level: Int) -> OpaquePointer? {
            lock.lock()
            let kept = idle[level]?.popLast()
            lock.unlock()
            return kept ?? libdeflate_alloc_compressor(Int32(level))
        }

        func give(_ compressor: OpaquePointer, level: Int) {
            lock.lock()
            defer { lock.unlock() }
            if idle[level, default: []].count < 16 {
                idle[level, default: []].append(compressor)
            } else {
                libdeflate_free_compressor(compressor)
            }
        }
    }
}
#else
/// No libdeflate on this platform (or with the `PortableCodecs` trait): the PNG encoder keeps
/// the platform's own zlib.
package enum ZlibStream {
    package static let isAvailable = false
    package static func compress(_ input: UnsafeRawBufferPointer, level: Int, capacity: Int) -> [UInt8]? { nil }
    package static func bound(_ length: Int) -> Int { length + length / 1000 * 5 + 64 }
    package static func inflateGzip(_ input: UnsafeRawBufferPointer, length: Int) -> [UInt8]? { nil }
}
#endif
