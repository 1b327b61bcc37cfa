/// The layout of one pixel in a bitmap, as a tile layer asks for it.
///
/// Every format stores rows top to bottom, pixels left to right, with no padding between rows
/// (the stride is `width * bytesPerPixel`). Names give the byte order in memory, first byte first:
/// `.rgba8888` is the bytes R, G, B, A. Alpha is straight (not premultiplied) unless the name
/// says `Premultiplied`, in which case each colour byte is `round(colour * alpha / 255)`.
public enum PixelFormat: String, Hashable, Sendable, CaseIterable, Codable, CustomStringConvertible {
    /// R, G, B, A bytes, straight alpha. The tile layer's default (`NMAPixelFormatRGBA`).
    case rgba8888
    /// B, G, R, A bytes, straight alpha (`NMAPixelFormatBGRA`).
    case bgra8888
    /// R, G, B, A bytes, premultiplied alpha (what compositors such as Core Graphics want).
    case rgba8888Premultiplied
    /// B, G, R, A bytes, premultiplied alpha.
    case bgra8888Premultiplied
    /// R, G, B bytes, no alpha (`NMAPixelFormatRGB`): 25 % less memory, opaque tiles only.
    case rgb888
    /// One little-endian 16-bit word per pixel: red in bits 15-11, green 10-5, blue 4-0, no alpha.
    case rgb565

    /// Bytes one pixel takes.
    @inlinable
    public var bytesPerPixel: Int {
        switch self {
        case .rgba8888, .bgra8888, .rgba8888Premultiplied, .bgra8888Premultiplied: 4
        case .rgb888: 3
        case .rgb565: 2
        }
    }

    /// Whether the format carries an alpha channel.
    public var hasAlpha: Bool {
        switch self {
        case .rgba8888, .bgra8888, .rgba8888Premultiplied, .bgra8888Premultiplied: true
        case .rgb888, .rgb565: false
        }
    }

    /// Whether colour bytes are premultiplied by alpha.
    public var isPremultiplied: Bool {
        self == .rgba8888Premultiplied || self == .bgra8888Premultiplied
    }

    /// Bytes a `width` x `height` bitmap takes, or `nil` on overflow.
    public func byteCount(width: Int, height: Int) -> Int? {
        guard width >= 0, height >= 0 else { return nil }
        let (pixels, o1) = width.multipliedReportingOverflow(by: height)
        let (bytes, o2) = pixels.multipliedReportingOverflow(by: bytesPerPixel)
        return o1 || o2 ? nil : bytes
    }

    public var description: String { rawValue }
}
