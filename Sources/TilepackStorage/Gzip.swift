import Foundation
internal import CTilepackZlib

/// gzip decompression, bounded: the one place above zlib that inflates a gzip stream (vector tiles
/// stored gzip-compressed, checked by `verify` and decompressed by the server for clients that do
/// not accept gzip).
public enum Gzip {
    /// Why a stream did not inflate.
    public enum Failure: Error, Hashable, Sendable, CustomStringConvertible {
        /// The stream inflates past the caller's limit (a gzip bomb, or a limit set too low).
        case tooLarge(limit: Int)
        /// The stream ends before its trailer.
        case truncated
        /// The stream is not gzip or its deflate data is damaged (zlib's message).
        case damaged(String)

        public var description: String {
            switch self {
            case .tooLarge(let limit): "gzip content inflates past \(limit >> 20) MiB"
            case .truncated: "gzip stream is truncated"
            case .damaged(let message): "gzip stream is damaged: \(message)"
            }
        }
    }

    /// Inflates a whole gzip stream into `output` (grown as needed, never past `limit` bytes) and
    /// returns how many bytes it produced. `output` may be reused between calls as scratch.
    public static func inflate(_ bytes: UnsafeRawBufferPointer, into output: inout [UInt8], limit: Int) -> Result<Int, Failure> {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return .failure(.truncated) }
        var stream = z_stream()
        // 16 + MAX_WBITS: expect a gzip header and trailer.
        guard inflateInit2_(&stream, 16 + 15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return .failure(.damaged("zlib could not start"))
        }
        defer { inflateEnd(&stream) }
        if output.count < 64 << 10 { output = [UInt8](repeating: 0, count: min(64 << 10, max(limit, 1))) }
        stream.next_in = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(bytes.count)
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
            case Z_STREAM_END: return .success(produced)
            case Z_OK: continue
            case Z_BUF_ERROR where stream.avail_in == 0: return .failure(.truncated)
            case Z_BUF_ERROR: continue
            default: return .failure(.damaged(stream.msg.map { String(cString: $0) } ?? "error \(status)"))
            }
        }
    }
}
