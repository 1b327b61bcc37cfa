import TilepackCore

/// A width and height in pixels, as reported in errors.
public struct PixelSize: Hashable, Sendable, CustomStringConvertible {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    public var description: String { "\(width)x\(height)" }
}

/// Why an image could not be decoded, encoded or transformed.
public enum ImagingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The bytes match no known image or tile format.
    case unknownFormat
    /// The bytes are tile content that is not an image (vector tiles, JSON): not decodable to a bitmap.
    case notRaster(TileFormat)
    /// A raster format tilepack does not decode (GIF).
    case unsupportedFormat(TileFormat)
    /// The image declares dimensions over the limit; rejected before any pixel memory is allocated.
    case tooLarge(width: Int, height: Int, limit: Int)
    /// The image is not the size the caller expects (e.g. a 512 px tile where a 256 px one is wanted).
    case sizeMismatch(expected: PixelSize, actual: PixelSize)
    /// The destination buffer is not exactly the size the bitmap needs.
    case bufferSizeMismatch(expected: Int, actual: Int)
    /// The image is corrupt or truncated; `reason` is the decoder's message.
    case corrupt(format: TileFormat, reason: String)
    /// A crop rectangle that does not lie inside the bitmap.
    case regionOutOfBounds(x: Int, y: Int, width: Int, height: Int, bitmap: PixelSize)
    /// An argument outside its valid range (e.g. a sub-square column past the edge).
    case invalidArgument(String)
    /// The encoder failed (e.g. an empty bitmap); `reason` is the encoder's message.
    case encodingFailed(reason: String)

    public var description: String {
        switch self {
        case .unknownFormat:
            "unknown image format: the bytes start with no PNG, JPEG, WebP or GIF signature"
        case .notRaster(let format):
            "\(format) tile content is not decodable to a bitmap (not a raster image)"
        case .unsupportedFormat(let format):
            "\(format) images are not supported by the decoder"
        case .tooLarge(let width, let height, let limit):
            "image of \(width)x\(height) pixels exceeds the limit of \(limit) pixels per side"
        case .sizeMismatch(let expected, let actual):
            "image is \(actual) pixels, expected \(expected)"
        case .bufferSizeMismatch(let expected, let actual):
            "destination buffer holds \(actual) bytes, the bitmap needs exactly \(expected)"
        case .corrupt(let format, let reason):
            "corrupt or truncated \(format) image: \(reason)"
        case .regionOutOfBounds(let x, let y, let width, let height, let bitmap):
            "region \(width)x\(height) at (\(x), \(y)) is not inside the \(bitmap) bitmap"
        case .invalidArgument(let message):
            "invalid argument: \(message)"
        case .encodingFailed(let reason):
            "image encoding failed: \(reason)"
        }
    }
}

/// What an image's headers say: its format and size, read without decoding pixels.
public struct ImageInfo: Hashable, Sendable, CustomStringConvertible {
    public var format: TileFormat
    public var width: Int
    public var height: Int

    public init(format: TileFormat, width: Int, height: Int) {
        self.format = format
        self.width = width
        self.height = height
    }

    public var description: String { "\(format) \(width)x\(height)" }
}
