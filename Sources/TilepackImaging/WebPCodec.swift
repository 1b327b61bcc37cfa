#if canImport(CTilepackWebP)
internal import CTilepackWebP
import TilepackCore

/// WebP (lossy, lossless, with alpha) through libwebp's one-shot decoders, which write straight
/// into the caller's buffer and fail as a whole on damaged or truncated data.
enum WebPCodec {
    static func features(_ bytes: UnsafeRawBufferPointer) throws(ImagingError) -> WebPBitstreamFeatures {
        var features = WebPBitstreamFeatures()
        let status = WebPGetFeatures(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, &features)
        guard status == VP8_STATUS_OK else {
            throw .corrupt(format: .webp, reason: "invalid headers (VP8 status \(status.rawValue))")
        }
        return features
    }

    static func info(_ bytes: UnsafeRawBufferPointer) throws(ImagingError) -> ImageInfo {
        let f = try features(bytes)
        guard f.has_animation == 0 else { throw .unsupportedFormat(.webp) }
        return ImageInfo(format: .webp, width: Int(f.width), height: Int(f.height))
    }

    static func decode(
        _ bytes: UnsafeRawBufferPointer, info: ImageInfo, into buffer: UnsafeMutableRawBufferPointer,
        pixelFormat: PixelFormat
    ) throws(ImagingError) {
        let hasAlpha = try features(bytes).has_alpha != 0
        let data = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let count = info.width * info.height

        func run(_ format: PixelFormat, _ target: UnsafeMutableRawBufferPointer) throws(ImagingError) {
            let out = target.baseAddress?.assumingMemoryBound(to: UInt8.self)
            let stride = Int32(info.width * format.bytesPerPixel)
            let result: UnsafeMutablePointer<UInt8>? =
                switch format {
                case .rgba8888: WebPDecodeRGBAInto(data, bytes.count, out, target.count, stride)
                case .bgra8888: WebPDecodeBGRAInto(data, bytes.count, out, target.count, stride)
                default: WebPDecodeRGBInto(data, bytes.count, out, target.count, stride)
                }
            guard result != nil else { throw .corrupt(format: .webp, reason: "libwebp could not decode the bitstream") }
        }

        switch pixelFormat {
        case .rgba8888, .bgra8888: try run(pixelFormat, buffer)
        case .rgba8888Premultiplied, .bgra8888Premultiplied:
            // libwebp's own premultiplication rounds differently from the documented round(c * a / 255).
            let straight: PixelFormat = pixelFormat == .rgba8888Premultiplied ? .rgba8888 : .bgra8888
            try run(straight, buffer)
            if hasAlpha { PixelCodec.convert(buffer.baseAddress!, from: straight, buffer.baseAddress!, to: pixelFormat, count: count) }
        case .rgb888 where !hasAlpha: try run(.rgb888, buffer)
        case .rgb888, .rgb565:
            let via: PixelFormat = hasAlpha ? .rgba8888 : .rgb888
            try ImageDecoder.decodeVia(via, count: count, into: buffer, pixelFormat: pixelFormat) { (temp) throws(ImagingError) in
                try run(via, temp)
            }
        }
    }
}
#endif
