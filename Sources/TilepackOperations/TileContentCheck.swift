import Foundation
import TilepackCore
import TilepackImaging
@_spi(TilepackInternal) import TilepackStorage
@_spi(TilepackInternal) import TilepackCompression

/// Checks that one tile's content is whole: an image decodes completely, a vector tile inflates
/// and parses as MVT, a JSON tile parses. Used by `verify` on every tile.
enum TileContentCheck {
    /// What a sound tile is.
    struct Outcome: Sendable {
        var format: TileFormat
        /// Pixel size for images.
        var width: Int?
        var height: Int?
    }

    /// The largest vector tile `verify` inflates: 64 MiB (MVT tiles are kilobytes; the bound
    /// stops a gzip bomb).
    static let maximumInflatedSize = 64 << 20

    /// Checks a tile; `scratch` is a per-thread buffer reused between calls.
    static func check(_ bytes: UnsafeRawBufferPointer, scratch: inout [UInt8]) -> Result<Outcome, CheckFailure> {
        guard !bytes.isEmpty else { return .failure(CheckFailure(reason: "empty tile")) }
        guard let format = TileFormat.sniff(bytes) else {
            return .failure(CheckFailure(reason: "bytes of no known tile format (first bytes \(hexPrefix(bytes)))"))
        }
        switch format {
        case .png, .jpeg, .webp, .gif:
            do {
                let info = try ImageDecoder.imageInfo(bytes)
                guard let count = PixelFormat.rgba8888.byteCount(width: info.width, height: info.height) else {
                    return .failure(CheckFailure(reason: "image size \(info.width)x\(info.height) overflows"))
                }
                guard info.width <= 4096, info.height <= 4096 else {
                    return .failure(CheckFailure(reason: "image is \(info.width)x\(info.height), over the 4096 px limit"))
                }
                if scratch.count < count { scratch = [UInt8](repeating: 0, count: count) }
                let decoded: ImagingError? = scratch.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) -> ImagingError? in
                    do throws(ImagingError) {
                        try ImageDecoder.decode(
                            bytes, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]),
                            pixelFormat: .rgba8888, expectedWidth: info.width, expectedHeight: info.height)
                        return nil
                    } catch {
                        return error
                    }
                }
                if let decoded { throw decoded }
                return .success(Outcome(format: format, width: info.width, height: info.height))
            } catch {
                return .failure(CheckFailure(reason: "\(format) does not decode: \(error)"))
            }
        case .pbf:
            if TileFormat.isGzip(bytes) {
                switch inflate(bytes, into: &scratch) {
                case .failure(let failure): return .failure(failure)
                case .success(let count):
                    let ok = scratch.withUnsafeBytes {
                        TileFormat.sniff(UnsafeRawBufferPointer(rebasing: $0[0..<count])) == .pbf || count == 0
                    }
                    guard ok else { return .failure(CheckFailure(reason: "gzip content is not a vector tile")) }
                }
            }
            return .success(Outcome(format: format))
        case .json:
            guard (try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])) != nil else {
                return .failure(CheckFailure(reason: "JSON tile does not parse"))
            }
            return .success(Outcome(format: format))
        }
    }

    /// Inflates a gzip stream completely into `output`, bounded by ``maximumInflatedSize``.
    static func inflate(_ bytes: UnsafeRawBufferPointer, into output: inout [UInt8]) -> Result<Int, CheckFailure> {
        Gzip.inflate(bytes, into: &output, limit: maximumInflatedSize).mapError { CheckFailure(reason: $0.description) }
    }

    static func hexPrefix(_ bytes: UnsafeRawBufferPointer) -> String {
        bytes.prefix(8).map { String(format: "%02x", $0) }.joined(separator: " ")
    }
}

struct CheckFailure: Error, Sendable {
    var reason: String
    /// The finding's kind: `tile` for content, `container` for a payload the archive cannot give.
    var check = "tile"
}
