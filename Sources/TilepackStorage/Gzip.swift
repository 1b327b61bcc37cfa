import Foundation
internal import CTilepackZlib

/// gzip (RFC 1952) through the system zlib: the one place Storage compresses and decompresses
/// with it (PMTiles directories and metadata).
public enum Gzip {
    /// Why bytes could not be decompressed.
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }

    /// Whether the bytes begin with the gzip magic `1f 8b`.
    public static func isGzip(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= 2 && bytes[0] == 0x1F && bytes[1] == 0x8B
    }

    /// Decompresses one complete gzip member, refusing output beyond `limit` bytes (a small input
    /// that claims to inflate without bound is an error, not an allocation) and bytes after the
    /// member's end.
    public static func decompress(_ bytes: UnsafeRawBufferPointer, limit: Int) -> Result<[UInt8], Failure> {
        guard let input = bytes.baseAddress, bytes.count > 0 else { return .failure(Failure(reason: "no gzip data")) }
        var stream = z_stream()
        // 16 + MAX_WBITS: a gzip header and trailer.
        guard inflateInit2_(&stream, 16 + 15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return .failure(Failure(reason: "zlib could not start"))
        }
        defer { inflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: min(limit, max(4096, bytes.count * 4)))
        stream.next_in = UnsafeMutablePointer(mutating: input.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(min(bytes.count, Int(UInt32.max)))
        var produced = 0
        while true {
            if produced == output.count {
                guard output.count < limit else {
                    return .failure(Failure(reason: "gzip data inflates past the limit of \(limit) bytes"))
                }
                output += [UInt8](repeating: 0, count: min(output.count, limit - output.count))
            }
            let status: Int32 = output.withUnsafeMutableBytes { buffer in
                stream.next_out = buffer.baseAddress!.advanced(by: produced).assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(buffer.count - produced)
                let status = CTilepackZlib.inflate(&stream, Z_NO_FLUSH)
                produced = buffer.count - Int(stream.avail_out)
                return status
            }
            switch status {
            case Z_STREAM_END:
                guard stream.avail_in == 0 else {
                    return .failure(Failure(reason: "\(stream.avail_in) bytes follow the end of the gzip data"))
                }
                output.removeLast(output.count - produced)
                return .success(output)
            case Z_OK: continue
            case Z_BUF_ERROR where stream.avail_in == 0:
                return .failure(Failure(reason: "gzip data is truncated"))
            case Z_BUF_ERROR: continue
            default:
                let message = stream.msg.map { String(cString: $0) } ?? "error \(status)"
                return .failure(Failure(reason: "gzip data is damaged: \(message)"))
            }
        }
    }

    /// Compresses `bytes` into one gzip member (no file name, modification time 0), so that the
    /// same input always gives the same output.
    public static func compress(_ bytes: UnsafeRawBufferPointer, level: Int32 = 6) -> [UInt8] {
        var stream = z_stream()
        guard deflateInit2_(&stream, level, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY,
                            ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            preconditionFailure("zlib deflateInit2 failed with valid arguments")
        }
        defer { deflateEnd(&stream) }
        let bound = Int(deflateBound(&stream, uLong(bytes.count)))
        var output = [UInt8](repeating: 0, count: bound)
        let empty: UInt8 = 0
        let written: Int = withUnsafePointer(to: empty) { emptyPointer in
            output.withUnsafeMutableBytes { out in
                stream.next_in = UnsafeMutablePointer(mutating: (bytes.baseAddress ?? UnsafeRawPointer(emptyPointer)).assumingMemoryBound(to: Bytef.self))
                stream.avail_in = uInt(bytes.count)
                stream.next_out = out.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(out.count)
                let status = deflate(&stream, Z_FINISH)
                precondition(status == Z_STREAM_END, "zlib deflate into deflateBound bytes did not finish")
                return out.count - Int(stream.avail_out)
            }
        }
        output.removeLast(output.count - written)
        return output
    }

    public static func compress(_ bytes: [UInt8], level: Int32 = 6) -> [UInt8] {
        bytes.withUnsafeBytes { compress($0, level: level) }
    }
}
