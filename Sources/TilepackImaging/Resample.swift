import TilepackCore

#if canImport(CTilepackPixman)
internal import CTilepackPixman
#endif

/// Premultiplied RGBA with 8 bits a channel, one `UInt32` per pixel (bytes R, G, B, A in memory):
/// the working space for resampling. Interpolating premultiplied values keeps the colour of
/// transparent pixels from bleeding into their neighbours.
///
/// Bilinear scaling is pixman's (SIMD, 7-bit weights, `PIXMAN_REPEAT_PAD` edges); halving is a
/// rounded 2x2 box average here; nearest sampling, and bilinear sampling finer than pixman's
/// 16.16 fixed point can place, are plain Swift.
struct PremultipliedImage {
    var width: Int
    var height: Int
    var pixels: [UInt32]

    init(width: Int, height: Int, pixels: [UInt32]) {
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    init(_ bitmap: Bitmap) {
        width = bitmap.width
        height = bitmap.height
        let count = width * height
        pixels = [UInt32](unsafeUninitializedCapacity: count) { buffer, initialized in
            if count > 0, let out = buffer.baseAddress {
                bitmap.pixels.withUnsafeBytes { src in
                    PixelCodec.convert(
                        src.baseAddress!, from: bitmap.pixelFormat, UnsafeMutableRawPointer(out),
                        to: .rgba8888Premultiplied, count: count)
                }
            }
            initialized = count
        }
    }

    func bitmap(_ format: PixelFormat) -> Bitmap {
        let count = width * height
        return Bitmap(width: width, height: height, pixelFormat: format, byteCount: count * format.bytesPerPixel) { dst in
            guard count > 0, let out = dst.baseAddress else { return }
            pixels.withUnsafeBytes { PixelCodec.convert($0.baseAddress!, from: .rgba8888Premultiplied, out, to: format, count: count) }
        }
    }

    /// Halves the size, averaging 2x2 blocks with rounding (an odd last row or column repeats the edge).
    func halved() -> PremultipliedImage {
        let w2 = (width + 1) / 2
        let h2 = (height + 1) / 2
        let width = width, height = height
        let out = [UInt32](unsafeUninitializedCapacity: w2 * h2) { o, initialized in
            pixels.withUnsafeBufferPointer { v in
                for y in 0..<h2 {
                    let r0 = 2 * y * width
                    let r1 = min(2 * y + 1, height - 1) * width
                    let t = y * w2
                    for x in 0..<w2 {
                        let c0 = 2 * x, c1 = min(2 * x + 1, width - 1)
                        o[t + x] = Self.average(v[r0 + c0], v[r0 + c1], v[r1 + c0], v[r1 + c1])
                    }
                }
            }
            initialized = w2 * h2
        }
        return PremultipliedImage(width: w2, height: h2, pixels: out)
    }

    /// The rounded mean of four pixels, channel by channel, two channels at a time in 16-bit lanes.
    @inline(__always)
    static func average(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32) -> UInt32 {
        let m: UInt32 = 0x00FF_00FF
        let even = (a & m) &+ (b & m) &+ (c & m) &+ (d & m) &+ 0x0002_0002
        let odd = ((a >> 8) & m) &+ ((b >> 8) & m) &+ ((c >> 8) & m) &+ ((d >> 8) & m) &+ 0x0002_0002
        return ((even >> 2) & m) | (((odd >> 2) & m) << 8)
    }

    /// The largest image side pixman's 16.16 fixed-point coordinates address.
    static let pixmanSideLimit = 32767
    /// The smallest source step per output pixel handed to pixman: below it its fixed point
    /// would misplace the samples, and plain Swift samples instead.
    static let pixmanFinestStep = 1.0 / 256

    /// Samples the source rectangle (`x0`, `y0`, `w`, `h`) in pixel units (fractions allowed) onto
    /// an `outputWidth` x `outputHeight` grid, pixel centres aligned. Samples near the rectangle's
    /// edge use the neighbouring source pixels, clamped at the image's edge.
    func sampled(
        x0: Double, y0: Double, w: Double, h: Double, outputWidth: Int, outputHeight: Int,
        filter: ResampleFilter
    ) -> PremultipliedImage {
        let sx = w / Double(outputWidth), sy = h / Double(outputHeight)
        let limit = Self.pixmanSideLimit
        if filter == .bilinear, max(width, height, outputWidth, outputHeight) <= limit,
            sx >= Self.pixmanFinestStep, sy >= Self.pixmanFinestStep,
            let image = sampledByPixman(x0: x0, y0: y0, sx: sx, sy: sy, outputWidth: outputWidth, outputHeight: outputHeight)
        {
            return image
        }
        return sampledPortably(x0: x0, y0: y0, sx: sx, sy: sy, outputWidth: outputWidth, outputHeight: outputHeight, filter: filter)
    }

    private static func fixed(_ value: Double) -> Int32 { Int32((value * 65536).rounded()) }

    /// Bilinear sampling through pixman (`PIXMAN_OP_SRC` with a scaling transform); `nil` if pixman
    /// refuses an image, or is not there (Apple platforms: the portable sampler then does it all).
    private func sampledByPixman(
        x0: Double, y0: Double, sx: Double, sy: Double,
        outputWidth: Int, outputHeight: Int
    ) -> PremultipliedImage? {
        #if canImport(CTilepackPixman) && !PortableCodecs
        #if _endian(little)
        let format = PIXMAN_a8b8g8r8  // bytes R, G, B, A in memory
        #else
        let format = PIXMAN_r8g8b8a8
        #endif
        // Every output pixel is written by the SRC composite (or the result is dropped).
        var out = [UInt32](unsafeUninitializedCapacity: outputWidth * outputHeight) { _, n in n = outputWidth * outputHeight }
        let (width, height) = (width, height)
        let done = pixels.withUnsafeBufferPointer { src -> Bool in
            out.withUnsafeMutableBufferPointer { dst -> Bool in
                guard let srcBase = src.baseAddress, let dstBase = dst.baseAddress,
                    // pixman only reads the source of a SRC composite; its API takes a mutable pointer.
                    let source = pixman_image_create_bits(
                        format, Int32(width), Int32(height),
                        UnsafeMutablePointer(mutating: srcBase), Int32(width * 4))
                else { return false }
                defer { pixman_image_unref(source) }
                guard
                    let destination = pixman_image_create_bits(
                        format, Int32(outputWidth), Int32(outputHeight),
                        dstBase, Int32(outputWidth * 4))
                else { return false }
                defer { pixman_image_unref(destination) }
                // Destination pixel centre (u + 0.5) lands on source x0 + (u + 0.5) * sx.
                var transform = pixman_transform()
                transform.matrix = ((Self.fixed(sx), 0, Self.fixed(x0)), (0, Self.fixed(sy), Self.fixed(y0)), (0, 0, 65536))
                guard pixman_image_set_transform(source, &transform) != 0,
                    pixman_image_set_filter(source, PIXMAN_FILTER_BILINEAR, nil, 0) != 0
                else { return false }
                pixman_image_set_repeat(source, PIXMAN_REPEAT_PAD)
                pixman_image_composite32(
                    PIXMAN_OP_SRC, source, nil, destination, 0, 0, 0, 0, 0, 0,
                    Int32(outputWidth), Int32(outputHeight))
                return true
            }
        }
        return done ? PremultipliedImage(width: outputWidth, height: outputHeight, pixels: out) : nil
        #else
        return nil
        #endif
    }

    /// Nearest sampling, and bilinear sampling (with float weights) where pixman cannot place samples.
    private func sampledPortably(
        x0: Double, y0: Double, sx: Double, sy: Double, outputWidth: Int, outputHeight: Int,
        filter: ResampleFilter
    ) -> PremultipliedImage {
        let (width, height) = (width, height)
        var out = [UInt32](repeating: 0, count: outputWidth * outputHeight)
        switch filter {
        case .nearest:
            let xs = (0..<outputWidth).map { (i: Int) -> Int in min(max(Int((x0 + (Double(i) + 0.5) * sx).rounded(.down)), 0), width - 1) }
            let ys = (0..<outputHeight).map { (i: Int) -> Int in min(max(Int((y0 + (Double(i) + 0.5) * sy).rounded(.down)), 0), height - 1)
            }
            pixels.withUnsafeBufferPointer { v in
                out.withUnsafeMutableBufferPointer { o in
                    for y in 0..<outputHeight {
                        let row = ys[y] * width, t = y * outputWidth
                        for x in 0..<outputWidth { o[t + x] = v[row + xs[x]] }
                    }
                }
            }
        case .bilinear:
            func taps(_ count: Int, _ origin: Double, _ scale: Double, _ limit: Int) -> [(Int, Int, Float)] {
                (0..<count).map { i in
                    let u = min(max(origin + (Double(i) + 0.5) * scale - 0.5, 0), Double(limit - 1))
                    let i0 = Int(u.rounded(.down))
                    return (i0, min(i0 + 1, limit - 1), Float(u - Double(i0)))
                }
            }
            let xt = taps(outputWidth, x0, sx, width)
            let yt = taps(outputHeight, y0, sy, height)
            pixels.withUnsafeBufferPointer { v in
                out.withUnsafeMutableBufferPointer { o in
                    for y in 0..<outputHeight {
                        let (r0, r1, fy) = yt[y]
                        for x in 0..<outputWidth {
                            let (c0, c1, fx) = xt[x]
                            let a = v[r0 * width + c0], b = v[r0 * width + c1]
                            let c = v[r1 * width + c0], d = v[r1 * width + c1]
                            var pixel: UInt32 = 0
                            for shift in stride(from: UInt32(0), to: 32, by: 8) {
                                @inline(__always) func lane(_ p: UInt32) -> Float { Float((p >> shift) & 255) }
                                let top = lane(a) + (lane(b) - lane(a)) * fx
                                let bottom = lane(c) + (lane(d) - lane(c)) * fx
                                let value = UInt32(min(max(top + (bottom - top) * fy + 0.5, 0), 255))
                                pixel |= value << shift
                            }
                            o[y * outputWidth + x] = pixel
                        }
                    }
                }
            }
        }
        return PremultipliedImage(width: outputWidth, height: outputHeight, pixels: out)
    }
}

extension Bitmap {
    /// The image scaled to `width` x `height` (pixel centres aligned). Bilinear downscaling halves
    /// by 2x2 averaging while the image is at least twice the target, so power-of-two reductions
    /// (512 -> 256) are exact box filters; upscaling interpolates (pixman's SIMD bilinear scaler).
    /// Alpha is handled in premultiplied space. A zero size gives an empty bitmap.
    public func resized(width: Int, height: Int, filter: ResampleFilter = .bilinear) -> Bitmap {
        precondition(width >= 0 && height >= 0, "negative bitmap size")
        if width == self.width && height == self.height { return self }
        if width == 0 || height == 0 || self.width == 0 || self.height == 0 {
            return Bitmap(width: width, height: height, pixelFormat: pixelFormat)
        }
        var image = PremultipliedImage(self)
        if filter == .bilinear {
            while image.width >= 2 * width && image.height >= 2 * height { image = image.halved() }
        }
        if image.width != width || image.height != height {
            image = image.sampled(
                x0: 0, y0: 0, w: Double(image.width), h: Double(image.height),
                outputWidth: width, outputHeight: height, filter: filter)
        }
        return image.bitmap(pixelFormat)
    }

    /// The fallback/overzoom image: the part of this (ancestor) tile covering the descendant tile
    /// `levelsDown` zoom levels below it at (`column`, `row`) among the `2^levelsDown` x
    /// `2^levelsDown` descendants (0, 0 top left), scaled to `outputSize` x `outputSize`.
    /// Sub-pixel squares are fine (e.g. 10 levels down a 256 px tile). Bilinear sampling uses the
    /// neighbouring ancestor pixels at the square's edge, so adjacent descendants join seamlessly.
    public func subSquare(
        levelsDown: Int, column: Int, row: Int, outputSize: Int,
        filter: ResampleFilter = .bilinear
    ) throws(ImagingError) -> Bitmap {
        guard (0...30).contains(levelsDown) else {
            throw .invalidArgument("levelsDown \(levelsDown) is outside 0...30")
        }
        let n = 1 << levelsDown
        guard (0..<n).contains(column), (0..<n).contains(row) else {
            throw .invalidArgument("descendant (\(column), \(row)) is outside the \(n)x\(n) grid \(levelsDown) levels down")
        }
        guard (1...16384).contains(outputSize) else {
            throw .invalidArgument("outputSize \(outputSize) is outside 1...16384")
        }
        guard width > 0, height > 0 else { throw .invalidArgument("the ancestor bitmap is empty") }
        if levelsDown == 0 && outputSize == width && outputSize == height { return self }
        var image = PremultipliedImage(self)
        var w = Double(width) / Double(n)
        var h = Double(height) / Double(n)
        var scale = 1.0
        if filter == .bilinear {
            while w >= 2 * Double(outputSize) && h >= 2 * Double(outputSize) {
                image = image.halved()
                w /= 2
                h /= 2
                scale /= 2
            }
        }
        let x0 = Double(column) * Double(width) / Double(n) * scale
        let y0 = Double(row) * Double(height) / Double(n) * scale
        return image.sampled(
            x0: x0, y0: y0, w: w, h: h, outputWidth: outputSize, outputHeight: outputSize,
            filter: filter
        ).bitmap(pixelFormat)
    }
}
