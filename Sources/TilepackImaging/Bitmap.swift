import TilepackCore

/// A bitmap that owns its pixels: `width` x `height` pixels in `pixelFormat`, rows top to bottom
/// with no padding (stride `width * pixelFormat.bytesPerPixel`).
///
/// Formats without alpha (`rgb888`, `rgb565`) hold colour composited over black: writing or
/// converting a translucent pixel into them stores its premultiplied colour.
public struct Bitmap: Hashable, Sendable {
    public let width: Int
    public let height: Int
    public let pixelFormat: PixelFormat
    /// The pixel bytes, `height * stride` of them.
    public var pixels: [UInt8]

    /// Bytes per row.
    public var stride: Int { width * pixelFormat.bytesPerPixel }

    /// The size in pixels.
    public var size: PixelSize { PixelSize(width: width, height: height) }

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

    /// A bitmap of `width` x `height` pixels all set to `fill` (straight alpha).
    public init(width: Int, height: Int, pixelFormat: PixelFormat, fill: RGBA8) {
        self.init(width: width, height: height, pixelFormat: pixelFormat)
        let bpp = pixelFormat.bytesPerPixel
        guard !pixels.isEmpty else { return }
        pixels.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress else { return }
            PixelCodec.writeStraight(fill, base, pixelFormat)
            // Double the filled prefix until the buffer is full.
            var filled = bpp
            while filled < raw.count {
                let n = min(filled, raw.count - filled)
                (base + filled).copyMemory(from: base, byteCount: n)
                filled += n
            }
        }
    }

    /// Builds a bitmap by letting `body` fill its uninitialised pixel bytes; `body` must write every
    /// byte or throw.
    init<E: Error>(
        width: Int, height: Int, pixelFormat: PixelFormat, byteCount: Int,
        initializingWith body: (UnsafeMutableRawBufferPointer) throws(E) -> Void
    ) throws(E) {
        var failure: E?
        let pixels = [UInt8](unsafeUninitializedCapacity: byteCount) { buffer, count in
            do throws(E) {
                try body(UnsafeMutableRawBufferPointer(buffer))
                count = byteCount
            } catch {
                failure = error
                count = 0
            }
        }
        if let failure { throw failure }
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.pixels = pixels
    }

    /// The pixel at (`x`, `y`) as straight RGBA, whatever the format (opaque formats give alpha 255).
    public func pixel(x: Int, y: Int) -> RGBA8 {
        precondition(x >= 0 && x < width && y >= 0 && y < height, "pixel (\(x), \(y)) outside \(width)x\(height)")
        let offset = y * stride + x * pixelFormat.bytesPerPixel
        return pixels.withUnsafeBytes { PixelCodec.readStraight($0.baseAddress! + offset, pixelFormat) }
    }

    /// Sets the pixel at (`x`, `y`) from a straight-alpha colour (premultiplied for premultiplied
    /// formats, composited over black for formats without alpha).
    public mutating func setPixel(x: Int, y: Int, _ color: RGBA8) {
        precondition(x >= 0 && x < width && y >= 0 && y < height, "pixel (\(x), \(y)) outside \(width)x\(height)")
        let offset = y * stride + x * pixelFormat.bytesPerPixel
        let format = pixelFormat
        pixels.withUnsafeMutableBytes { PixelCodec.writeStraight(color, $0.baseAddress! + offset, format) }
    }

    /// The same image in another pixel format. Premultiplied to straight and to formats without alpha
    /// use the premultiplied colour directly, so nothing is lost that the target can hold.
    public func converted(to format: PixelFormat) -> Bitmap {
        if format == pixelFormat { return self }
        let count = width * height
        let byteCount = count * format.bytesPerPixel
        let source = self
        return Bitmap(width: width, height: height, pixelFormat: format, byteCount: byteCount) { (dst: UnsafeMutableRawBufferPointer) in
            guard count > 0 else { return }
            source.pixels.withUnsafeBytes { src in
                PixelCodec.convert(src.baseAddress!, from: source.pixelFormat, dst.baseAddress!, to: format, count: count)
            }
        }
    }

    /// Copies the pixels into a caller's buffer of exactly `pixels.count` bytes (a tile request's
    /// `bytesLength`); any other size is an error and nothing is written.
    public func write(into buffer: UnsafeMutableRawBufferPointer) throws(ImagingError) {
        guard buffer.count == pixels.count else {
            throw .bufferSizeMismatch(expected: pixels.count, actual: buffer.count)
        }
        guard !pixels.isEmpty, let base = buffer.baseAddress else { return }
        pixels.withUnsafeBytes { base.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
    }

    /// Copies the pixels into a caller's buffer in another pixel format, converting on the way
    /// (no intermediate bitmap). The buffer must hold exactly `width * height * format.bytesPerPixel` bytes.
    public func write(into buffer: UnsafeMutableRawBufferPointer, pixelFormat format: PixelFormat) throws(ImagingError) {
        let expected = width * height * format.bytesPerPixel
        guard buffer.count == expected else { throw .bufferSizeMismatch(expected: expected, actual: buffer.count) }
        guard expected > 0, let base = buffer.baseAddress else { return }
        let count = width * height
        let from = pixelFormat
        pixels.withUnsafeBytes { PixelCodec.convert($0.baseAddress!, from: from, base, to: format, count: count) }
    }

    /// The `width` x `height` rectangle whose top-left pixel is (`x`, `y`).
    public func cropped(x: Int, y: Int, width: Int, height: Int) throws(ImagingError) -> Bitmap {
        guard x >= 0, y >= 0, width >= 0, height >= 0,
            x <= self.width - width, y <= self.height - height
        else {
            throw .regionOutOfBounds(x: x, y: y, width: width, height: height, bitmap: size)
        }
        let bpp = pixelFormat.bytesPerPixel
        let rowBytes = width * bpp
        let sourceStride = stride
        let source = self
        return Bitmap(width: width, height: height, pixelFormat: pixelFormat, byteCount: rowBytes * height) {
            (dst: UnsafeMutableRawBufferPointer) in
            guard rowBytes > 0, height > 0 else { return }
            source.pixels.withUnsafeBytes { src in
                for row in 0..<height {
                    (dst.baseAddress! + row * rowBytes)
                        .copyMemory(from: src.baseAddress! + (y + row) * sourceStride + x * bpp, byteCount: rowBytes)
                }
            }
        }
    }
}
