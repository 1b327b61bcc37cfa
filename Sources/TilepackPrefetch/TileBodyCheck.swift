import Foundation
import TilepackCore
import TilepackImaging

/// Whether a downloaded body is a tile worth storing: complete, of the expected format, and for
/// images of the expected size. What it refuses: an empty body, an HTML or JSON error page sent
/// with status 200, a truncated image, a "blocked" placeholder of another size.
enum TileBodyCheck {
    /// The format of a sound tile, or why the body is not one.
    static func check(_ data: Data, expectedFormat: TileFormat?, tileSize: Int) -> Result<TileFormat, TileFault> {
        guard !data.isEmpty else { return .failure(.invalidBody("an empty body")) }
        return data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Result<TileFormat, TileFault> in
            guard let format = TileFormat.sniff(bytes) else {
                return .failure(.invalidBody("not a tile (\(describe(bytes)))"))
            }
            if let expectedFormat, format != expectedFormat {
                return .failure(.invalidBody("a \(format) tile where \(expectedFormat) tiles are expected"))
            }
            switch format {
            case .png, .jpeg, .webp, .gif:
                let info: ImageInfo
                do {
                    info = try ImageDecoder.imageInfo(bytes)
                } catch {
                    return .failure(.invalidBody("a damaged \(format) image: \(error)"))
                }
                guard info.width == tileSize, info.height == tileSize else {
                    return .failure(.invalidBody("a \(info.width)x\(info.height) image where tiles are \(tileSize)x\(tileSize)"))
                }
                guard isComplete(bytes, format: format) else {
                    return .failure(.incomplete("a truncated \(format) image (its end marker is missing)"))
                }
            default:
                break
            }
            return .success(format)
        }
    }

    /// A PNG ends with its IEND chunk, a JPEG with EOI: a body cut short by a server is caught
    /// even without a Content-Length.
    static func isComplete(_ bytes: UnsafeRawBufferPointer, format: TileFormat) -> Bool {
        switch format {
        case .png:
            let iend: [UInt8] = [0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]
            return bytes.count >= 12 && Array(bytes[(bytes.count - 8)...]) == iend
        case .jpeg:
            // Some encoders pad after EOI: look for it near the end.
            let tail = bytes[max(0, bytes.count - 64)...]
            var previous: UInt8 = 0
            for byte in tail {
                if previous == 0xFF && byte == 0xD9 { return true }
                previous = byte
            }
            return false
        default:
            return true
        }
    }

    /// The first bytes as text when they are text (an HTML page), else as hex.
    static func describe(_ bytes: UnsafeRawBufferPointer) -> String {
        let prefix = Array(bytes.prefix(24))
        if prefix.allSatisfy({ $0 == 9 || $0 == 10 || $0 == 13 || (32..<127).contains($0) }) {
            return "starts with \"\(String(decoding: prefix, as: UTF8.self).replacingOccurrences(of: "\n", with: " "))\""
        }
        return "starts with bytes " + prefix.prefix(8).map { String(format: "%02x", $0) }.joined(separator: " ")
    }
}

/// Why one tile request failed.
enum TileFault: Error, Hashable, Sendable, CustomStringConvertible {
    /// The body is not a tile to store; not retried (a server answering an error page keeps doing so).
    case invalidBody(String)
    /// An image cut short without a length to tell (no end marker): retried, like a truncated body.
    case incomplete(String)
    /// An HTTP status other than 200, 204, 304 and 404.
    case status(Int, retryAfter: Double?)
    /// Timeouts, refused or dropped connections, truncated bodies.
    case transport(String)

    var retryable: Bool {
        switch self {
        case .invalidBody: false
        case .status(let code, _): code == 429 || code == 408 || (500...599).contains(code)
        case .transport, .incomplete: true
        }
    }

    var httpStatus: Int {
        if case .status(let code, _) = self { return code }
        return 0
    }

    var description: String {
        switch self {
        case .invalidBody(let reason): reason
        case .status(let code, _): "HTTP status \(code)"
        case .transport(let reason), .incomplete(let reason): reason
        }
    }
}
