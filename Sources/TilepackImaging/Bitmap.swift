import TilepackCore

/// A bitmap that owns its pixels: `width` x `height` pixels in `pixelFormat`, rows top to bottom
/// with no padding (stride `width * pixelFormat.bytesPerPixel`).
public struct Bitmap: Hashable, Sendable {
    public let width: Int
    public let height: Int
    public let pixelFormat: PixelFormat
    /// The pixel bytes, `height * stride` of them.
    public var pixels: [UInt8]

    /// Bytes per row.
    public var stride: Int { width * pixelFormat.bytesPerPixel }

    /// A bitmap of `width` x `height` pixels, all bytes zero (transparent black where there is alpha).
    public init(width: Int, height: Int, pixelFormat: PixelFormat) {
        precondition(width >= 0 && height >= 0, "negative bitmap size")
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.pixels = [UInt8](repeating: 0, count: pixelFormat.byteCount(width: width, height: height) ?? 0)
    }

    /// Wraps existing pixel bytes; `nil` when their count does not match the size and format.
    public init?(width: Int, height: Int, pixelFormat: PixelFormat, pixels: [UInt8]) {
        guard let count = pixelFormat.byteCount(width: width, height: height), count == pixels.count else { return nil }
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.pixels = pixels
    }
}
