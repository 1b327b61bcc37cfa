import Foundation
import TilepackCore

/// Decodes PNG, JPEG and WebP tiles into bitmaps in a requested pixel format.
///
/// The format comes from the bytes' signature, never a file name. Every decoder reads the image's
/// declared size from its headers and checks it against the limits before any pixel memory is
/// allocated or written. Corrupt and truncated images throw `ImagingError.corrupt`; a buffer is only
/// reported as filled once the library has decoded the whole image.
public enum ImageDecoder {
    /// The default bound on either side of a decoded image.
    public static let defaultMaximumDimension = 4096

    /// The image's format and size, from its headers only (no pixels are decoded).
    public static func imageInfo(_ bytes: UnsafeRawBufferPointer) throws(ImagingError) -> ImageInfo {
        try PlatformRasterDecoder.info(bytes, format: rasterFormat(bytes))
    }

    /// The image's format and size, from its headers only.
    public static func imageInfo(_ data: Data) throws(ImagingError) -> ImageInfo {
        try withBytes(data) { (bytes) throws(ImagingError) in try imageInfo(bytes) }
    }

    /// Decodes the image in `bytes` into `buffer`, which must hold exactly
    /// `width * height * pixelFormat.bytesPerPixel` bytes, in `pixelFormat`.
    ///
    /// Images larger than `maximumDimension` on either side throw `.tooLarge`; when `expectedWidth`
    /// and `expectedHeight` are given, an image of any other size throws `.sizeMismatch`. Both are
    /// checked from the headers before anything is written. On any error the buffer's contents are
    /// unspecified.
    public static func decode(
        _ bytes: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer,
        pixelFormat: PixelFormat, expectedWidth: Int?, expectedHeight: Int?,
        maximumDimension: Int = defaultMaximumDimension
    ) throws(ImagingError) {
        let info = try checkedInfo(bytes, maximumDimension: maximumDimension)
        if expectedWidth != nil || expectedHeight != nil {
            let expected = PixelSize(width: expectedWidth ?? info.width, height: expectedHeight ?? info.height)
            guard expected.width == info.width, expected.height == info.height else {
                throw .sizeMismatch(expected: expected, actual: PixelSize(width: info.width, height: info.height))
            }
        }
        let needed = info.width * info.height * pixelFormat.bytesPerPixel
        guard buffer.count == needed else { throw .bufferSizeMismatch(expected: needed, actual: buffer.count) }
        try decodeChecked(bytes, info: info, into: buffer, pixelFormat: pixelFormat)
    }

    /// Decodes the image in `bytes` into a new bitmap in `pixelFormat`.
    public static func decode(
        _ bytes: UnsafeRawBufferPointer, pixelFormat: PixelFormat,
        maximumDimension: Int = defaultMaximumDimension
    ) throws(ImagingError) -> Bitmap {
        let info = try checkedInfo(bytes, maximumDimension: maximumDimension)
        let byteCount = info.width * info.height * pixelFormat.bytesPerPixel
        return try Bitmap(width: info.width, height: info.height, pixelFormat: pixelFormat, byteCount: byteCount) {
            (buffer: UnsafeMutableRawBufferPointer) throws(ImagingError) in
            try decodeChecked(bytes, info: info, into: buffer, pixelFormat: pixelFormat)
        }
    }

    /// Decodes the image in `data` into a new bitmap in `pixelFormat`.
    public static func decode(
        _ data: Data, pixelFormat: PixelFormat,
        maximumDimension: Int = defaultMaximumDimension
    ) throws(ImagingError) -> Bitmap {
        try withBytes(data) { (bytes) throws(ImagingError) in
            try decode(bytes, pixelFormat: pixelFormat, maximumDimension: maximumDimension)
        }
    }

    /// Decodes the image in `data` into `buffer`; see `decode(_:into:pixelFormat:expectedWidth:expectedHeight:maximumDimension:)`.
    public static func decode(
        _ data: Data, into buffer: UnsafeMutableRawBufferPointer, pixelFormat: PixelFormat,
        expectedWidth: Int?, expectedHeight: Int?,
        maximumDimension: Int = defaultMaximumDimension
    ) throws(ImagingError) {
        try withBytes(data) { (bytes) throws(ImagingError) in
            try decode(
                bytes, into: buffer, pixelFormat: pixelFormat, expectedWidth: expectedWidth,
                expectedHeight: expectedHeight, maximumDimension: maximumDimension)
        }
    }

    // MARK: - Internals

    /// The sniffed format, if it is one this module decodes.
    static func rasterFormat(_ bytes: UnsafeRawBufferPointer) throws(ImagingError) -> TileFormat {
        guard let format = TileFormat.sniff(bytes) else { throw .unknownFormat }
        switch format {
        case .png, .jpeg, .webp: return format
        case .gif: throw .unsupportedFormat(format)
        case .pbf, .json: throw .notRaster(format)
        }
    }

    static func checkedInfo(_ bytes: UnsafeRawBufferPointer, maximumDimension: Int) throws(ImagingError) -> ImageInfo {
        let info = try imageInfo(bytes)
        guard info.width > 0, info.height > 0 else {
            throw .corrupt(format: info.format, reason: "image declares a size of \(info.width)x\(info.height)")
        }
        guard info.width <= maximumDimension, info.height <= maximumDimension else {
            throw .tooLarge(width: info.width, height: info.height, limit: maximumDimension)
        }
        return info
    }

    static func decodeChecked(
        _ bytes: UnsafeRawBufferPointer, info: ImageInfo,
        into buffer: UnsafeMutableRawBufferPointer, pixelFormat: PixelFormat
    ) throws(ImagingError) {
        try PlatformRasterDecoder.decode(bytes, info: info, into: buffer, pixelFormat: pixelFormat)
    }

    /// Decodes through an intermediate buffer in `via`, then converts into `buffer` in `pixelFormat`
    /// (for formats the library cannot produce, such as RGB565 or translucent-to-opaque).
    static func decodeVia(
        _ via: PixelFormat, count: Int, into buffer: UnsafeMutableRawBufferPointer,
        pixelFormat: PixelFormat,
        _ body: (UnsafeMutableRawBufferPointer) throws(ImagingError) -> Void
    ) throws(ImagingError) {
        let temp = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count * via.bytesPerPixel, 1), alignment: 16)
        defer { temp.deallocate() }
        try body(UnsafeMutableRawBufferPointer(rebasing: temp[0..<(count * via.bytesPerPixel)]))
        PixelCodec.convert(UnsafeRawPointer(temp.baseAddress!), from: via, buffer.baseAddress!, to: pixelFormat, count: count)
    }
}

/// One platform's PNG, JPEG and WebP decoders: an image's size from its headers, then its pixels
/// into the caller's buffer in the requested format. On Linux the system libraries (libpng,
/// TurboJPEG, libwebp: ``SystemRasterDecoder``); on Apple platforms ImageIO and vImage
/// (`ImageIORasterDecoder`, compiled only there).
protocol RasterDecoder {
    /// The size from the headers of an image `ImageDecoder.rasterFormat` recognised as `format`.
    static func info(_ bytes: UnsafeRawBufferPointer, format: TileFormat) throws(ImagingError) -> ImageInfo

    /// Decodes the image whose checked headers are `info` into `buffer` (exactly its pixels in `pixelFormat`).
    static func decode(
        _ bytes: UnsafeRawBufferPointer, info: ImageInfo, into buffer: UnsafeMutableRawBufferPointer, pixelFormat: PixelFormat
    ) throws(ImagingError)
}

#if canImport(CTilepackPNG)
typealias PlatformRasterDecoder = SystemRasterDecoder

/// libpng, TurboJPEG and libwebp (Linux).
enum SystemRasterDecoder: RasterDecoder {
    static func info(_ bytes: UnsafeRawBufferPointer, format: TileFormat) throws(ImagingError) -> ImageInfo {
        switch format {
        case .png: return try PNGCodec.info(bytes)
        case .jpeg: return try JPEGCodec.info(bytes)
        case .webp: return try WebPCodec.info(bytes)
        default: throw .unsupportedFormat(format)
        }
    }

    static func decode(
        _ bytes: UnsafeRawBufferPointer, info: ImageInfo, into buffer: UnsafeMutableRawBufferPointer, pixelFormat: PixelFormat
    ) throws(ImagingError) {
        switch info.format {
        case .png: try PNGCodec.decode(bytes, info: info, into: buffer, pixelFormat: pixelFormat)
        case .jpeg: try JPEGCodec.decode(bytes, info: info, into: buffer, pixelFormat: pixelFormat)
        case .webp: try WebPCodec.decode(bytes, info: info, into: buffer, pixelFormat: pixelFormat)
        default: throw .unsupportedFormat(info.format)
        }
    }
}
#else
typealias PlatformRasterDecoder = ImageIORasterDecoder
#endif

extension PNGEncoder {
    /// What either platform's PNG encoder can write: at least one pixel, at most 2^24 a side.
    static func checkEncodable(_ bitmap: Bitmap) throws(ImagingError) {
        guard bitmap.width > 0, bitmap.height > 0 else {
            throw .encodingFailed(reason: "a PNG needs at least one pixel, the bitmap is \(bitmap.size)")
        }
        guard bitmap.width <= 1 << 24, bitmap.height <= 1 << 24 else {
            throw .encodingFailed(reason: "a bitmap of \(bitmap.size) is too large for a PNG")
        }
    }
}

/// Runs `body` on the bytes of `data` with a typed error.
func withBytes<T>(_ data: Data, _ body: (UnsafeRawBufferPointer) throws(ImagingError) -> T) throws(ImagingError) -> T {
    let result: Result<T, ImagingError> = data.withUnsafeBytes { bytes in
        do throws(ImagingError) { return .success(try body(bytes)) } catch { return .failure(error) }
    }
    return try result.get()
}
