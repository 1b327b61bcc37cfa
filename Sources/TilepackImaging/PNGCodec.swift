#if canImport(CTilepackPNG)
internal import CTilepackPNG
import Foundation
import TilepackCore

/// PNG through libpng's simplified `png_image` API, which reports errors without longjmp crossing
/// into Swift. Every colour type and bit depth, tRNS and Adam7 interlacing are expanded by libpng.
enum PNGCodec {
    /// Width and height from the IHDR chunk, which the PNG specification puts first.
    static func info(_ bytes: UnsafeRawBufferPointer) throws(ImagingError) -> ImageInfo {
        guard bytes.count >= 33 else { throw .corrupt(format: .png, reason: "truncated before the end of the IHDR chunk") }
        func u32(_ at: Int) -> UInt32 {
            UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
        }
        guard u32(8) == 13, u32(12) == 0x4948_4452 else {
            throw .corrupt(format: .png, reason: "the first chunk is not a 13-byte IHDR")
        }
        let width = u32(16), height = u32(20)
        guard width > 0, height > 0, width <= 0x7FFF_FFFF, height <= 0x7FFF_FFFF else {
            throw .corrupt(format: .png, reason: "IHDR declares an invalid size of \(width)x\(height)")
        }
        return ImageInfo(format: .png, width: Int(width), height: Int(height))
    }

    static func decode(
        _ bytes: UnsafeRawBufferPointer, info: ImageInfo, into buffer: UnsafeMutableRawBufferPointer,
        pixelFormat: PixelFormat
    ) throws(ImagingError) {
        var image = png_image()
        image.version = UInt32(CTILEPACK_PNG_IMAGE_VERSION)
        defer { png_image_free(&image) }
        guard png_image_begin_read_from_memory(&image, bytes.baseAddress, bytes.count) != 0 else {
            throw .corrupt(format: .png, reason: message(image))
        }
        // libpng re-reads IHDR; it must agree with the size checked against the limits.
        guard Int(image.width) == info.width, Int(image.height) == info.height else {
            throw .corrupt(format: .png, reason: "IHDR size changed between reads")
        }
        // 16-bit files without gAMA/sRGB are sRGB like 8-bit ones (libpng would assume linear).
        image.flags |= UInt32(PNG_IMAGE_FLAG_16BIT_sRGB)
        let hasAlpha = image.format & UInt32(PNG_FORMAT_FLAG_ALPHA) != 0
        let count = info.width * info.height

        func finish(_ format: UInt32, _ target: UnsafeMutableRawBufferPointer, bytesPerPixel: Int) throws(ImagingError) {
            image.format = format
            let stride = Int32(info.width * bytesPerPixel)
            guard png_image_finish_read(&image, nil, target.baseAddress, stride, nil) != 0,
                ctilepack_png_image_failed(&image) == 0
            else {
                throw .corrupt(format: .png, reason: message(image))
            }
        }

        // libpng's simplified reader mishandles Adam7 images scaled from 16 to 8 bits (rows come
        // out in the wrong places here; unpatched 1.6.x overflows the buffer, CVE-2025-65018), so
        // such images are read as 16-bit linear, which needs no scaling, and converted by us.
        let interlaced = bytes[28] != 0
        if interlaced && image.format & UInt32(PNG_FORMAT_FLAG_LINEAR) != 0 {
            try ImageDecoder.decodeVia(.rgba8888, count: count, into: buffer, pixelFormat: pixelFormat) { (temp) throws(ImagingError) in
                let linear = UnsafeMutableRawBufferPointer.allocate(byteCount: count * 8, alignment: 16)
                defer { linear.deallocate() }
                image.format = CTILEPACK_PNG_FORMAT_RGBA | UInt32(PNG_FORMAT_FLAG_LINEAR)
                // The stride of 16-bit formats counts 16-bit components.
                guard png_image_finish_read(&image, nil, linear.baseAddress, Int32(info.width * 4), nil) != 0,
                    ctilepack_png_image_failed(&image) == 0
                else {
                    throw .corrupt(format: .png, reason: message(image))
                }
                linearPremultipliedToSRGB(
                    linear.baseAddress!.assumingMemoryBound(to: UInt16.self),
                    temp.baseAddress!.assumingMemoryBound(to: UInt8.self), count: count)
            }
            return
        }

        switch pixelFormat {
        case .rgba8888: try finish(CTILEPACK_PNG_FORMAT_RGBA, buffer, bytesPerPixel: 4)
        case .bgra8888: try finish(CTILEPACK_PNG_FORMAT_BGRA, buffer, bytesPerPixel: 4)
        case .rgba8888Premultiplied:
            try finish(CTILEPACK_PNG_FORMAT_RGBA, buffer, bytesPerPixel: 4)
            if hasAlpha { PixelCodec.convert(buffer.baseAddress!, from: .rgba8888, buffer.baseAddress!, to: pixelFormat, count: count) }
        case .bgra8888Premultiplied:
            try finish(CTILEPACK_PNG_FORMAT_BGRA, buffer, bytesPerPixel: 4)
            if hasAlpha { PixelCodec.convert(buffer.baseAddress!, from: .bgra8888, buffer.baseAddress!, to: pixelFormat, count: count) }
        case .rgb888 where !hasAlpha:
            try finish(CTILEPACK_PNG_FORMAT_RGB, buffer, bytesPerPixel: 3)
        case .rgb888, .rgb565:
            // Translucent images are composited over black by our own conversion, so every path
            // (decoder, Bitmap.converted) gives the same bytes.
            let via: PixelFormat = hasAlpha ? .rgba8888 : .rgb888
            try ImageDecoder.decodeVia(via, count: count, into: buffer, pixelFormat: pixelFormat) { (temp) throws(ImagingError) in
                try finish(hasAlpha ? CTILEPACK_PNG_FORMAT_RGBA : CTILEPACK_PNG_FORMAT_RGB, temp, bytesPerPixel: via.bytesPerPixel)
            }
        }
    }

    /// libpng's 16-bit linear RGBA (colour premultiplied by alpha) to 8-bit sRGB with straight alpha,
    /// inverting libpng's own decoding, which models sRGB as the power law of gAMA 45455 (2.2).
    static func linearPremultipliedToSRGB(_ src: UnsafePointer<UInt16>, _ dst: UnsafeMutablePointer<UInt8>, count: Int) {
        func encode(_ linear: Double) -> UInt8 {
            UInt8((pow(min(max(linear, 0), 1), 0.45455) * 255).rounded())
        }
        for i in 0..<count {
            let a = src[i * 4 + 3]
            dst[i * 4 + 3] = UInt8((Double(a) / 257).rounded())
            for k in 0..<3 {
                dst[i * 4 + k] = a == 0 ? 0 : encode(Double(src[i * 4 + k]) / Double(a))
            }
        }
    }

    static func message(_ image: png_image) -> String {
        var copy = image.message
        let text = withUnsafeBytes(of: &copy) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        return text.isEmpty ? "libpng reported an error" : text
    }
}

/// Encodes bitmaps as PNG: by `PNGWriter` (libdeflate) where libdeflate is linked and the image
/// is not huge, else through libpng's simplified writer.
public enum PNGEncoder {
    /// The bitmap as a PNG file: 8-bit RGBA for formats with alpha (premultiplied ones are
    /// unpremultiplied first), 8-bit RGB for `rgb888` and `rgb565`.
    public static func encode(_ bitmap: Bitmap) throws(ImagingError) -> Data {
        try checkEncodable(bitmap)
        let source: Bitmap
        let format: UInt32
        switch bitmap.pixelFormat {
        case .rgba8888:
            source = bitmap
            format = CTILEPACK_PNG_FORMAT_RGBA
        case .bgra8888:
            source = bitmap
            format = CTILEPACK_PNG_FORMAT_BGRA
        case .rgb888:
            source = bitmap
            format = CTILEPACK_PNG_FORMAT_RGB
        case .rgba8888Premultiplied, .bgra8888Premultiplied:
            source = bitmap.converted(to: .rgba8888)
            format = CTILEPACK_PNG_FORMAT_RGBA
        case .rgb565:
            source = bitmap.converted(to: .rgb888)
            format = CTILEPACK_PNG_FORMAT_RGB
        }
        // tilepack's own writer (libdeflate) where it is linked; BGRA is reordered for it.
        let ordered = source.pixelFormat == .bgra8888 ? source.converted(to: .rgba8888) : source
        if let file = ordered.pixels.withUnsafeBytes({
            PNGWriter.encode(
                $0, width: ordered.width, height: ordered.height, channels: ordered.pixelFormat.bytesPerPixel, stride: ordered.stride)
        }) {
            return file
        }
        var image = png_image()
        image.version = UInt32(CTILEPACK_PNG_IMAGE_VERSION)
        image.width = UInt32(source.width)
        image.height = UInt32(source.height)
        image.format = format
        defer { png_image_free(&image) }
        // Worst case for stored (incompressible) data: filter bytes, zlib block overheads, chunks.
        let raw = source.height * (source.stride + 1)
        var capacity = raw + raw / 1000 * 5 + 4096
        var result = Data()
        for _ in 0..<2 {
            var size = png_alloc_size_t(capacity)
            var out = [UInt8](repeating: 0, count: capacity)
            let ok = out.withUnsafeMutableBytes { dst in
                source.pixels.withUnsafeBytes { src in
                    png_image_write_to_memory(&image, dst.baseAddress, &size, 0, src.baseAddress, Int32(source.stride), nil)
                }
            }
            if ok != 0 {
                result = Data(out[0..<Int(size)])
                return result
            }
            guard Int(size) > capacity else { throw .encodingFailed(reason: "libpng: \(message(image))") }
            capacity = Int(size)
            image.warning_or_error = 0
            image.message = png_image().message
        }
        throw .encodingFailed(reason: "libpng: \(message(image))")
    }

    static func message(_ image: png_image) -> String { PNGCodec.message(image) }
}
#endif
