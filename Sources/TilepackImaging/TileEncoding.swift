import Foundation
import TilepackCore

#if canImport(CTilepackTurboJPEG)
internal import CTilepackTurboJPEG
#endif
#if canImport(CTilepackWebP)
internal import CTilepackWebP
#endif

/// How tiles are encoded when tilepack makes or re-encodes them (`tilepack tile`, `convert
/// --format`): a format, a quality for the lossy ones (one for all zooms, or one per zoom range),
/// and WebP's lossless mode. One grammar for every command that encodes:
/// `--format png|jpeg|webp`, `--quality 80` or `--quality 0-12:85,13-16:70,17-:55`, `--lossless`.
public struct TileEncoding: Hashable, Sendable, CustomStringConvertible {
    /// The quality of the lossy formats when none is given: 85, as gdal2tiles' JPEG and WebP
    /// (`--webp-quality` 75 there; 85 keeps photographic tiles free of visible blocks).
    public static let defaultQuality = 85

    public var format: TileFormat
    /// The quality (1...100) by zoom range, in order; the last range may be open (`17-`).
    public var qualities: [(zooms: ClosedRange<Int>, quality: Int)]
    /// WebP only: lossless.
    public var lossless: Bool

    public static func == (a: Self, b: Self) -> Bool {
        a.format == b.format && a.lossless == b.lossless && a.qualities.elementsEqual(b.qualities) { $0 == $1 }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(format)
        hasher.combine(lossless)
        for q in qualities {
            hasher.combine(q.zooms)
            hasher.combine(q.quality)
        }
    }

    /// An encoding; `quality` in the grammar above (nil: ``defaultQuality`` at every zoom).
    /// - Throws: ``ImagingError/encodingFailed(reason:)`` naming what is wrong in the text.
    public init(format: TileFormat, quality: String? = nil, lossless: Bool = false) throws(ImagingError) {
        guard [.png, .jpeg, .webp].contains(format) else {
            throw .invalidArgument("tilepack encodes tiles as png, jpeg or webp, not \(format)")
        }
        guard !lossless || format == .webp else {
            throw .invalidArgument("--lossless is for webp (png is always lossless, jpeg never)")
        }
        self.format = format
        self.lossless = lossless
        qualities = try Self.parseQualities(quality ?? "\(Self.defaultQuality)")
        if quality != nil, format == .png || lossless {
            throw .invalidArgument(
                "--quality is for the lossy encodings (jpeg, webp without --lossless), not \(self.describedFormat)")
        }
    }

    /// `80`, or ranges `0-12:85,13-16:70,17-:55` (in increasing order, not overlapping).
    static func parseQualities(_ text: String) throws(ImagingError) -> [(zooms: ClosedRange<Int>, quality: Int)] {
        func quality(_ s: Substring) throws(ImagingError) -> Int {
            guard let q = Int(s.trimmingCharacters(in: .whitespaces)), (1...100).contains(q) else {
                throw .invalidArgument("quality '\(s)' is not a whole number from 1 to 100")
            }
            return q
        }
        if !text.contains(":") { return [(0...TileCoordinate.maximumZoom, try quality(Substring(text)))] }
        var result: [(zooms: ClosedRange<Int>, quality: Int)] = []
        for part in text.split(separator: ",") {
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            guard pieces.count == 2 else {
                throw .invalidArgument("'\(part)' in --quality is not ZOOMS:QUALITY (e.g. 0-12:85,13-16:70,17-:55)")
            }
            let bounds = pieces[0].split(separator: "-", omittingEmptySubsequences: false).map {
                Int($0.trimmingCharacters(in: .whitespaces))
            }
            let low: Int?, high: Int?
            switch bounds.count {
            case 1: (low, high) = (bounds[0], bounds[0])
            case 2: (low, high) = (bounds[0], pieces[0].hasSuffix("-") ? TileCoordinate.maximumZoom : bounds[1])
            default: (low, high) = (nil, nil)
            }
            guard let low, let high, low >= 0, low <= high, high <= TileCoordinate.maximumZoom else {
                throw .invalidArgument(
                    "'\(pieces[0])' in --quality is not a zoom range within 0...\(TileCoordinate.maximumZoom) (e.g. 13-16 or 17-)")
            }
            if let last = result.last, low <= last.zooms.upperBound {
                throw .invalidArgument("zoom ranges in --quality overlap or are out of order at '\(part)'")
            }
            result.append((low...high, try quality(pieces[1])))
        }
        return result
    }

    /// The quality at `zoom`: its range's, else the nearest range's below it, else the first's.
    public func quality(atZoom zoom: Int) -> Int {
        if let q = qualities.first(where: { $0.zooms.contains(zoom) }) { return q.quality }
        return qualities.last(where: { $0.zooms.upperBound < zoom })?.quality ?? qualities.first?.quality ?? Self.defaultQuality
    }

    var describedFormat: String { lossless ? "webp (lossless)" : format.rawValue }

    public var description: String {
        switch format {
        case .png: return "png"
        case _ where lossless: return "webp (lossless)"
        default:
            let q = qualities.map {
                $0.zooms.count > 1 ? "\($0.zooms.lowerBound)-\($0.zooms.upperBound):\($0.quality)" : "\($0.zooms.lowerBound):\($0.quality)"
            }
            return
                "\(format.rawValue) quality \(qualities.count == 1 && qualities[0].zooms == 0...TileCoordinate.maximumZoom ? "\(qualities[0].quality)" : q.joined(separator: ","))"
        }
    }

    /// `bitmap` (RGBA, straight alpha) encoded for a tile at `zoom`. A PNG of a fully opaque
    /// bitmap is written as RGB (a quarter smaller than RGBA); JPEG drops alpha.
    public func encode(_ bitmap: Bitmap, zoom: Int) throws(ImagingError) -> Data {
        precondition(bitmap.pixelFormat == .rgba8888, "TileEncoding encodes straight RGBA")
        switch format {
        case .png:
            return try PNGEncoder.encode(Self.isOpaque(bitmap) ? bitmap.converted(to: .rgb888) : bitmap)
        case .jpeg:
            return try JPEGEncoder.encode(bitmap, quality: quality(atZoom: zoom))
        default:
            return try WebPEncoder.encode(bitmap, quality: lossless ? nil : quality(atZoom: zoom))
        }
    }

    /// Whether every pixel's alpha is 255 (a format without alpha: always).
    public static func isOpaque(_ bitmap: Bitmap) -> Bool {
        guard bitmap.pixelFormat.bytesPerPixel == 4 else { return true }
        return everyAlpha(of: bitmap.pixels, is: 255)
    }

    /// Whether every pixel's alpha is 0 (straight or premultiplied RGBA or BGRA).
    public static func isBlank(_ bitmap: Bitmap) -> Bool {
        bitmap.pixelFormat.bytesPerPixel == 4 && everyAlpha(of: bitmap.pixels, is: 0)
    }

    /// Whether the alpha byte (the fourth) of every 4-byte pixel of `pixels` is `value`.
    public static func everyAlpha(of pixels: [UInt8], is value: UInt8) -> Bool {
        pixels.withUnsafeBytes { raw in
            var i = 3
            while i < raw.count {
                if raw[i] != value { return false }
                i += 4
            }
            return true
        }
    }
}

/// JPEG through libjpeg-turbo's TurboJPEG compressor (4:2:0, accurate DCT), alpha dropped.
public enum JPEGEncoder {
    public static func encode(_ bitmap: Bitmap, quality: Int) throws(ImagingError) -> Data {
        #if canImport(CTilepackTurboJPEG)
        guard bitmap.width > 0, bitmap.height > 0 else { throw .encodingFailed(reason: "a JPEG needs at least one pixel") }
        let source = bitmap.pixelFormat == .rgba8888 || bitmap.pixelFormat == .rgb888 ? bitmap : bitmap.converted(to: .rgba8888)
        guard let handle = tjInitCompress() else { throw .encodingFailed(reason: "libjpeg-turbo could not start a compressor") }
        defer { tjDestroy(handle) }
        var out: UnsafeMutablePointer<UInt8>?
        var size: UInt = 0
        let pixelFormat = source.pixelFormat == .rgb888 ? Int32(TJPF_RGB.rawValue) : Int32(TJPF_RGBA.rawValue)
        let status = source.pixels.withUnsafeBytes { raw in
            tjCompress2(
                handle, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(source.width), Int32(source.stride),
                Int32(source.height), pixelFormat, &out, &size, Int32(TJSAMP_420.rawValue), Int32(min(max(quality, 1), 100)), 0)
        }
        defer { if let out { tjFree(out) } }
        guard status == 0, let out else {
            throw .encodingFailed(reason: "libjpeg-turbo: \(String(cString: tjGetErrorStr2(handle)))")
        }
        return Data(bytes: out, count: Int(size))
        #else
        throw .encodingFailed(reason: "JPEG encoding is not available on this platform")
        #endif
    }
}

/// WebP through libwebp's one-shot encoders: lossy at a quality, or lossless (`quality` nil).
public enum WebPEncoder {
    public static func encode(_ bitmap: Bitmap, quality: Int?) throws(ImagingError) -> Data {
        #if canImport(CTilepackWebP)
        guard bitmap.width > 0, bitmap.height > 0, bitmap.width <= 16383, bitmap.height <= 16383 else {
            throw .encodingFailed(reason: "a WebP is 1 to 16383 pixels a side, the bitmap is \(bitmap.size)")
        }
        let source = bitmap.pixelFormat == .rgba8888 ? bitmap : bitmap.converted(to: .rgba8888)
        let opaque = TileEncoding.isOpaque(source)
        var out: UnsafeMutablePointer<UInt8>?
        let size: Int
        if opaque {
            // No alpha plane for an opaque tile (smaller, and what cwebp writes for an opaque image).
            let rgb = source.converted(to: .rgb888)
            size = rgb.pixels.withUnsafeBytes { raw in
                let base = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
                return quality.map { WebPEncodeRGB(base, Int32(rgb.width), Int32(rgb.height), Int32(rgb.stride), Float($0), &out) }
                    ?? WebPEncodeLosslessRGB(base, Int32(rgb.width), Int32(rgb.height), Int32(rgb.stride), &out)
            }
        } else {
            size = source.pixels.withUnsafeBytes { raw in
                let base = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
                return quality.map {
                    WebPEncodeRGBA(base, Int32(source.width), Int32(source.height), Int32(source.stride), Float($0), &out)
                }
                    ?? WebPEncodeLosslessRGBA(base, Int32(source.width), Int32(source.height), Int32(source.stride), &out)
            }
        }
        defer { if let out { WebPFree(out) } }
        guard size > 0, let out else { throw .encodingFailed(reason: "libwebp could not encode the bitmap") }
        return Data(bytes: out, count: size)
        #else
        throw .encodingFailed(reason: "WebP encoding is not available on this platform")
        #endif
    }
}

/// The peak signal-to-noise ratio of `b` against `a` (same size, RGBA) over the colour channels
/// of the pixels both draw opaque (alpha 255), in dB; infinity when they are equal, nil when
/// no pixel is opaque in both.
public func peakSignalToNoise(_ a: Bitmap, _ b: Bitmap) -> Double? {
    precondition(a.width == b.width && a.height == b.height && a.pixelFormat == .rgba8888 && b.pixelFormat == .rgba8888)
    var sum = 0.0
    var n = 0
    a.pixels.withUnsafeBytes { pa in
        b.pixels.withUnsafeBytes { pb in
            var i = 0
            while i < pa.count {
                if pa[i + 3] == 255 && pb[i + 3] == 255 {
                    for k in 0..<3 {
                        let d = Double(Int(pa[i + k]) - Int(pb[i + k]))
                        sum += d * d
                    }
                    n += 3
                }
                i += 4
            }
        }
    }
    guard n > 0 else { return nil }
    guard sum > 0 else { return .infinity }
    return 10 * log10(255 * 255 / (sum / Double(n)))
}
