#if canImport(CTilepackTurboJPEG)
internal import CTilepackTurboJPEG
import TilepackCore

/// A TurboJPEG decompressor handle, freed when the owner goes away.
final class TurboJPEGDecompressor: @unchecked Sendable {
    // Created, used and destroyed within one decode call on one thread.
    let handle: tjhandle

    init?() {
        guard let handle = tjInitDecompress() else { return nil }
        self.handle = handle
    }

    deinit { tjDestroy(handle) }

    var errorMessage: String {
        guard let text = tjGetErrorStr2(handle) else { return "TurboJPEG reported an error" }
        return String(cString: text)
    }
}

/// JPEG through libjpeg-turbo's TurboJPEG API (no longjmp crosses into Swift). Each call uses a
/// fresh decompressor: libjpeg keeps Huffman and quantisation tables from one stream to the next
/// (for abbreviated streams) and a handle that failed mid-stream can be left in a bad state, so a
/// shared handle would make a tile's result depend on the tiles decoded before it.
enum JPEGCodec {
    static func withDecompressor<T>(_ body: (TurboJPEGDecompressor) throws(ImagingError) -> T) throws(ImagingError) -> T {
        guard let decompressor = TurboJPEGDecompressor() else {
            throw .corrupt(format: .jpeg, reason: "TurboJPEG could not create a decompressor")
        }
        return try body(decompressor)
    }

    static func info(_ bytes: UnsafeRawBufferPointer) throws(ImagingError) -> ImageInfo {
        try withDecompressor { (d) throws(ImagingError) in
            var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
            guard
                tjDecompressHeader3(
                    d.handle, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt(bytes.count),
                    &width, &height, &subsampling, &colorspace) == 0
            else {
                throw .corrupt(format: .jpeg, reason: d.errorMessage)
            }
            return ImageInfo(format: .jpeg, width: Int(width), height: Int(height))
        }
    }

    static func decode(
        _ bytes: UnsafeRawBufferPointer, info: ImageInfo, into buffer: UnsafeMutableRawBufferPointer,
        pixelFormat: PixelFormat
    ) throws(ImagingError) {
        // JPEG is opaque: premultiplied equals straight, so TurboJPEG writes every 8-bit format directly.
        let direct: TJPF? =
            switch pixelFormat {
            case .rgba8888, .rgba8888Premultiplied: TJPF_RGBA
            case .bgra8888, .bgra8888Premultiplied: TJPF_BGRA
            case .rgb888: TJPF_RGB
            case .rgb565: nil
            }
        try withDecompressor { (d) throws(ImagingError) in
            func run(_ format: TJPF, _ target: UnsafeMutableRawBufferPointer, _ bpp: Int) throws(ImagingError) {
                // STOPONWARNING: a truncated or damaged stream is an error, not a grey-filled success.
                // LIMITSCANS: bounds the work a hostile progressive JPEG can cause.
                let flags = Int32(TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS)
                guard
                    tjDecompress2(
                        d.handle, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt(bytes.count),
                        target.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(info.width),
                        Int32(info.width * bpp), Int32(info.height), Int32(format.rawValue), flags) == 0
                else {
                    throw .corrupt(format: .jpeg, reason: d.errorMessage)
                }
            }
            if let direct {
                try run(direct, buffer, pixelFormat.bytesPerPixel)
            } else {
                try ImageDecoder.decodeVia(.rgb888, count: info.width * info.height, into: buffer, pixelFormat: pixelFormat) {
                    (temp) throws(ImagingError) in try run(TJPF_RGB, temp, 3)
                }
            }
        }
    }
}
#endif
