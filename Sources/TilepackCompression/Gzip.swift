internal import CTilepackZlib
import Foundation

/// gzip (RFC 1952) through the system zlib (a whole member inflated by libdeflate where it is
/// here, `ZlibStream`): the one place above zlib that compresses and inflates
/// gzip (PMTiles directories and metadata, vector tiles stored gzip-compressed, checked by
/// `verify` and decompressed by the server for clients that do not accept gzip). Inflating is
/// always bounded: a small input that claims to inflate without bound is an error, not an
/// allocation. Whether bytes are gzip at all is Core's `TileFormat.isGzip(_:)` to say.
@_spi(TilepackInternal) public enum Gzip {
    /// Why a stream did not inflate.
    public enum Failure: Error, Hashable, Sendable, CustomStringConvertible {
        /// The stream inflates past the caller's limit (a gzip bomb, or a limit set too low).
        case tooLarge(limit: Int)
        /// The stream ends before its trailer (or there is no stream at all).
        case truncated
        /// The stream is not gzip or its deflate data is damaged (zlib's message).
        case damaged(String)
        /// Bytes follow the end of the gzip member (``decompress(_:limit:)`` only).
        case trailingBytes(Int)

        public var description: String {
            switch self {
            case .tooLarge(let limit): "gzip data inflates past the limit of \(limit) bytes"
            case .truncated: "gzip data is truncated"
            case .damaged(let message): "gzip data is damaged: \(message)"
            case .trailingBytes(let count): "\(count) bytes follow the end of the gzip data"
            }
        }

        /// The same as ``description``.
        public var reason: String { description }
    }

    /// Inflates a whole gzip stream into `output` (grown as needed, never past `limit` bytes) and
    /// returns how many bytes it produced. `output` may be reused between calls as scratch.
    /// Bytes after the member's end are ignored (as gzip readers of tiles do).
    public static func inflate(_ bytes: UnsafeRawBufferPointer, into output: inout [UInt8], limit: Int) -> Result<Int, Failure> {
        inflateMember(bytes, into: &output, limit: limit).map(\.produced)
    }

    /// Decompresses exactly one complete gzip member, refusing output beyond `limit` bytes and
    /// bytes after the member's end.
    public static func decompress(_ bytes: UnsafeRawBufferPointer, limit: Int) -> Result<[UInt8], Failure> {
        // Whole by libdeflate where it is here, into the length the trailer states when that is
        // within the limit and what deflate can make of these bytes (at most 1032:1, so a lying
        // trailer costs no more than the input could): anything else is zlib's to inflate and judge.
        if bytes.count >= 18, let base = bytes.baseAddress {
            let stated = Int(UnsafeRawPointer(base + bytes.count - 4).loadUnaligned(as: UInt32.self).littleEndian)
            if stated <= limit, stated <= bytes.count * 1032, let whole = ZlibStream.inflateGzip(bytes, length: stated) {
                return .success(whole)
            }
        }
        var output = [UInt8](repeating: 0, count: min(limit, max(4096, bytes.count * 4)))
        switch inflateMember(bytes, into: &output, limit: limit) {
        case .failure(let failure): return .failure(failure)
        case .success(let result):
            guard result.unread == 0 else { return .failure(.trailingBytes(result.unread)) }
            output.removeLast(output.count - result.produced)
            return .success(output)
        }
    }

    /// The inflate loop: bytes produced, and input bytes left after the member's end.
    private static func inflateMember(_ bytes: UnsafeRawBufferPointer, into output: inout [UInt8], limit: Int)
        -> Result<(produced: Int, unread: Int), Failure>
    {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return .failure(.truncated) }
        var stream = z_stream()
        // 16 + MAX_WBITS: expect a gzip header and trailer.
        guard inflateInit2_(&stream, 16 + 15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return .failure(.damaged("zlib could not start"))
        }
        defer { inflateEnd(&stream) }
        if output.isEmpty { output = [UInt8](repeating: 0, count: min(64 << 10, max(limit, 1))) }
        stream.next_in = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(min(bytes.count, Int(UInt32.max)))
        var produced = 0
        while true {
            if produced == output.count {
                guard output.count < limit else { return .failure(.tooLarge(limit: limit)) }
                output.append(contentsOf: [UInt8](repeating: 0, count: min(output.count, limit - output.count)))
            }
            let status: Int32 = output.withUnsafeMutableBytes { buffer in
                stream.next_out = buffer.baseAddress.map { $0.advanced(by: produced).assumingMemoryBound(to: Bytef.self) }
                stream.avail_out = uInt(buffer.count - produced)
                let status = CTilepackZlib.inflate(&stream, Z_NO_FLUSH)
                produced = buffer.count - Int(stream.avail_out)
                return status
            }
            switch status {
            case Z_STREAM_END: return .success((produced, Int(stream.avail_in)))
            case Z_OK: continue
            case Z_BUF_ERROR where stream.avail_in == 0: return .failure(.truncated)
            case Z_BUF_ERROR: continue
            default: return .failure(.damaged(stream.msg.map { String(cString: $0) } ?? "error \(status)"))
            }
        }
    }

    /// Compresses `bytes` into one gzip member (no file name, modification time 0), so that the
    /// same input always gives the same output.
    public static func compress(_ bytes: UnsafeRawBufferPointer, level: Int32 = 6) -> [UInt8] {
        guard let packed = compress(bytes, level: level, limit: .max) else {
            preconditionFailure("zlib deflate into deflateBound bytes did not finish")
        }
        return packed
    }

    /// ``compress(_:level:)``, or `nil` as soon as the member would be longer than `limit` bytes
    /// (deflate stops there, the rest of `bytes` not compressed). A member that fits is the same
    /// bytes as ``compress(_:level:)`` gives.
    public static func compress(_ bytes: UnsafeRawBufferPointer, level: Int32 = 6, limit: Int) -> [UInt8]? {
        var stream = z_stream()
        guard
            deflateInit2_(
                &stream, level, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY,
                ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK
        else {
            preconditionFailure("zlib deflateInit2 failed with valid arguments")
        }
        defer { deflateEnd(&stream) }
        let bound = min(Int(deflateBound(&stream, uLong(bytes.count))), limit)
        var output = [UInt8](repeating: 0, count: bound)
        let empty: UInt8 = 0
        let written: Int? = withUnsafePointer(to: empty) { emptyPointer in
            output.withUnsafeMutableBytes { out in
                stream.next_in = UnsafeMutablePointer(
                    mutating: (bytes.baseAddress ?? UnsafeRawPointer(emptyPointer)).assumingMemoryBound(to: Bytef.self))
                stream.avail_in = uInt(bytes.count)
                stream.next_out = out.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(out.count)
                // Into deflateBound bytes deflate finishes; into fewer it may run out of room.
                guard deflate(&stream, Z_FINISH) == Z_STREAM_END else { return nil }
                return out.count - Int(stream.avail_out)
            }
        }
        guard let written else { return nil }
        output.removeLast(output.count - written)
        return output
    }

    public static func compress(_ bytes: [UInt8], level: Int32 = 6) -> [UInt8] {
        bytes.withUnsafeBytes { compress($0, level: level) }
    }
}
