// Apple platforms' decoders and PNG encoder: ImageIO and vImage, the SDK's, where Linux links
// libpng, TurboJPEG and libwebp. Compiled only on a Mac (this project's CI cannot build it; see
// .github/workflows/apple.yml). Everything around it (formats, sizes, limits, pixel conversion)
// is the code Linux runs.
#if !canImport(CTilepackPNG) && canImport(ImageIO)
import Accelerate
import CoreGraphics
import Foundation
import ImageIO
import TilepackCore

/// PNG, JPEG and WebP through ImageIO, drawn by vImage straight into the caller's buffer as
/// straight RGBA in sRGB, then converted in place by `PixelCodec` as on Linux (premultiplying with
/// the documented rounding, compositing translucent images over black for the opaque formats).
/// An image whose source status is not complete (a truncated file) is an error, never a partly
/// grey tile.
enum ImageIORasterDecoder: RasterDecoder {
    /// The image source over `bytes` (not copied: the source lives only within this call), checked complete.
    static func withSource<T>(
        _ bytes: UnsafeRawBufferPointer, format: TileFormat, _ body: (CGImageSource) throws(ImagingError) -> T
    ) throws(ImagingError) -> T {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
            let data = CFDataCreateWithBytesNoCopy(nil, base, bytes.count, kCFAllocatorNull),
            let source = CGImageSourceCreateWithData(data, nil)
        else { throw .corrupt(format: format, reason: "ImageIO could not read the bytes") }
        let status = CGImageSourceGetStatus(source)
        guard status == .statusComplete, CGImageSourceGetCount(source) >= 1 else {
            throw .corrupt(format: format, reason: "ImageIO reports the image source as \(describe(status))")
        }
        // An animated WebP is refused, as libwebp's one-shot decoder refuses it on Linux.
        if format == .webp, CGImageSourceGetCount(source) > 1 { throw .unsupportedFormat(.webp) }
        let first = CGImageSourceGetStatusAtIndex(source, 0)
        guard first == .statusComplete else {
            throw .corrupt(format: format, reason: "ImageIO reports the image as \(describe(first))")
        }
        return try body(source)
    }

    static func info(_ bytes: UnsafeRawBufferPointer, format: TileFormat) throws(ImagingError) -> ImageInfo {
        try withSource(bytes, format: format) { (source) throws(ImagingError) in
            guard let properties = CGImageSourceCopyPropertiesAtIndex(source, 0, nil) as? [CFString: Any],
                let width = (properties[kCGImagePropertyPixelWidth] as? NSNumber)?.intValue,
                let height = (properties[kCGImagePropertyPixelHeight] as? NSNumber)?.intValue
            else { throw .corrupt(format: format, reason: "ImageIO gives no pixel size") }
            return ImageInfo(format: format, width: width, height: height)
        }
    }

    static func decode(
        _ bytes: UnsafeRawBufferPointer, info: ImageInfo, into buffer: UnsafeMutableRawBufferPointer, pixelFormat: PixelFormat
    ) throws(ImagingError) {
        let count = info.width * info.height
        if pixelFormat.bytesPerPixel == 4 {
            try drawStraightRGBA(bytes, info: info, into: buffer)
            if pixelFormat != .rgba8888 {
                PixelCodec.convert(buffer.baseAddress!, from: .rgba8888, buffer.baseAddress!, to: pixelFormat, count: count)
            }
        } else {
            try ImageDecoder.decodeVia(.rgba8888, count: count, into: buffer, pixelFormat: pixelFormat) { (temp) throws(ImagingError) in
                try drawStraightRGBA(bytes, info: info, into: temp)
            }
        }
    }

    /// The image as 8-bit straight RGBA in sRGB, rows of `info.width * 4` bytes, in `buffer`.
    static func drawStraightRGBA(_ bytes: UnsafeRawBufferPointer, info: ImageInfo, into buffer: UnsafeMutableRawBufferPointer)
        throws(ImagingError)
    {
        let format = info.format
        try withSource(bytes, format: format) { (source) throws(ImagingError) in
            let options = [kCGImageSourceShouldCache: false] as CFDictionary
            guard let image = CGImageSourceCreateImageAtIndex(source, 0, options) else {
                throw .corrupt(format: format, reason: "ImageIO could not decode the image")
            }
            guard image.width == info.width, image.height == info.height else {
                throw .corrupt(
                    format: format, reason: "ImageIO decodes \(image.width)x\(image.height), the headers say \(info.width)x\(info.height)")
            }
            guard let sRGB = CGColorSpace(name: CGColorSpace.sRGB),
                var target = vImage_CGImageFormat(
                    bitsPerComponent: 8, bitsPerPixel: 32, colorSpace: sRGB,
                    bitmapInfo: CGBitmapInfo(rawValue: CGImageAlphaInfo.last.rawValue))
            else { throw .corrupt(format: format, reason: "vImage has no 8-bit straight RGBA sRGB format") }
            var destination = vImage_Buffer(
                data: buffer.baseAddress, height: vImagePixelCount(info.height), width: vImagePixelCount(info.width),
                rowBytes: info.width * 4)
            // kvImageNoAllocate: vImage draws into the caller's buffer instead of allocating one.
            let error = vImageBuffer_InitWithCGImage(&destination, &target, nil, image, vImage_Flags(kvImageNoAllocate))
            guard error == kvImageNoError else {
                throw .corrupt(format: format, reason: "vImage could not draw the image (vImage error \(error))")
            }
        }
    }

    static func describe(_ status: CGImageSourceStatus) -> String {
        switch status {
        case .statusComplete: "complete"
        case .statusIncomplete: "incomplete (truncated)"
        case .statusReadingHeader: "still reading its header (truncated)"
        case .statusInvalidData: "invalid data"
        case .statusUnknownType: "of an unknown type"
        case .statusUnexpectedEOF: "ending unexpectedly (truncated)"
        @unknown default: "status \(status.rawValue)"
        }
    }
}

/// Encodes bitmaps as PNG through ImageIO (Apple platforms; libpng's simplified writer on Linux).
/// The pixels are the same as Linux's; the file's bytes (filters, compression) are ImageIO's.
public enum PNGEncoder {
    /// The bitmap as a PNG file: 8-bit RGBA for formats with alpha (premultiplied ones are
    /// unpremultiplied first), 8-bit RGB for `rgb888` and `rgb565`.
    public static func encode(_ bitmap: Bitmap) throws(ImagingError) -> Data {
        try checkEncodable(bitmap)
        let source = bitmap.pixelFormat.hasAlpha ? bitmap.converted(to: .rgba8888) : bitmap.converted(to: .rgb888)
        let alpha: CGImageAlphaInfo = source.pixelFormat == .rgba8888 ? .last : .none
        let pixels = Data(source.pixels)
        guard let sRGB = CGColorSpace(name: CGColorSpace.sRGB), let provider = CGDataProvider(data: pixels as CFData),
            let image = CGImage(
                width: source.width, height: source.height, bitsPerComponent: 8,
                bitsPerPixel: source.pixelFormat.bytesPerPixel * 8, bytesPerRow: source.stride, space: sRGB,
                bitmapInfo: CGBitmapInfo(rawValue: alpha.rawValue), provider: provider, decode: nil,
                shouldInterpolate: false, intent: .defaultIntent)
        else { throw .encodingFailed(reason: "Core Graphics could not make an image of \(bitmap.size)") }
        let output = NSMutableData()
        guard let destination = CGImageDestinationCreateWithData(output as CFMutableData, "public.png" as CFString, 1, nil) else {
            throw .encodingFailed(reason: "ImageIO has no PNG writer")
        }
        CGImageDestinationAddImage(destination, image, nil)
        guard CGImageDestinationFinalize(destination) else { throw .encodingFailed(reason: "ImageIO could not write the PNG") }
        return output as Data
    }
}
#endif
