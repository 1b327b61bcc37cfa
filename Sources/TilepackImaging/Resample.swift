import TilepackCore

/// Premultiplied RGBA as floats (0...255), the working space for resampling: interpolating
/// premultiplied values keeps the colour of transparent pixels from bleeding into their neighbours.
struct PremultipliedImage {
    var width: Int
    var height: Int
    var values: [Float]

    init(_ bitmap: Bitmap) {
        width = bitmap.width
        height = bitmap.height
        let count = width * height
        let format = bitmap.pixelFormat
        let bpp = format.bytesPerPixel
        values = [Float](repeating: 0, count: count * 4)
        values.withUnsafeMutableBufferPointer { out in
            bitmap.pixels.withUnsafeBytes { src in
                guard let base = src.baseAddress else { return }
                for i in 0..<count {
                    let c = PixelCodec.readPremultiplied(base + i * bpp, format)
                    out[i * 4] = Float(c.r)
                    out[i * 4 + 1] = Float(c.g)
                    out[i * 4 + 2] = Float(c.b)
                    out[i * 4 + 3] = Float(c.a)
                }
            }
        }
    }

    init(width: Int, height: Int, values: [Float]) {
        self.width = width
        self.height = height
        self.values = values
    }

    func bitmap(_ format: PixelFormat) -> Bitmap {
        let count = width * height
        let bpp = format.bytesPerPixel
        var result = Bitmap(width: width, height: height, pixelFormat: format)
        values.withUnsafeBufferPointer { v in
            result.pixels.withUnsafeMutableBytes { dst in
                guard let base = dst.baseAddress else { return }
                for i in 0..<count {
                    @inline(__always) func byte(_ f: Float) -> UInt8 { UInt8(min(max(f + 0.5, 0), 255)) }
                    let a = byte(v[i * 4 + 3])
                    // Premultiplied colour never exceeds alpha.
                    let c = RGBA8(r: min(byte(v[i * 4]), a), g: min(byte(v[i * 4 + 1]), a), b: min(byte(v[i * 4 + 2]), a), a: a)
                    PixelCodec.writePremultiplied(c, base + i * bpp, format)
                }
            }
        }
        return result
    }

    /// Halves the size, averaging 2x2 blocks (an odd last row or column repeats the edge).
    func halved() -> PremultipliedImage {
        let w2 = (width + 1) / 2
        let h2 = (height + 1) / 2
        var out = [Float](repeating: 0, count: w2 * h2 * 4)
        values.withUnsafeBufferPointer { v in
            out.withUnsafeMutableBufferPointer { o in
                for y in 0..<h2 {
                    let y0 = 2 * y
                    let y1 = min(2 * y + 1, height - 1)
                    for x in 0..<w2 {
                        let x0 = 2 * x
                        let x1 = min(2 * x + 1, width - 1)
                        let a = (y0 * width + x0) * 4, b = (y0 * width + x1) * 4
                        let c = (y1 * width + x0) * 4, d = (y1 * width + x1) * 4
                        let t = (y * w2 + x) * 4
                        for k in 0..<4 { o[t + k] = (v[a + k] + v[b + k] + v[c + k] + v[d + k]) * 0.25 }
                    }
                }
            }
        }
        return PremultipliedImage(width: w2, height: h2, values: out)
    }

    /// Samples the source rectangle (`x0`, `y0`, `w`, `h`) in pixel units (fractions allowed) onto
    /// an `outputWidth` x `outputHeight` grid, pixel centres aligned. Samples near the rectangle's
    /// edge use the neighbouring source pixels, clamped at the image's edge.
    func sampled(x0: Double, y0: Double, w: Double, h: Double, outputWidth: Int, outputHeight: Int,
                 filter: ResampleFilter) -> PremultipliedImage {
        var out = [Float](repeating: 0, count: outputWidth * outputHeight * 4)
        let sx = w / Double(outputWidth)
        let sy = h / Double(outputHeight)
        switch filter {
        case .nearest:
            let xs = (0..<outputWidth).map { min(max(Int((x0 + (Double($0) + 0.5) * sx).rounded(.down)), 0), width - 1) }
            let ys = (0..<outputHeight).map { min(max(Int((y0 + (Double($0) + 0.5) * sy).rounded(.down)), 0), height - 1) }
            values.withUnsafeBufferPointer { v in
                out.withUnsafeMutableBufferPointer { o in
                    for y in 0..<outputHeight {
                        let row = ys[y] * width
                        for x in 0..<outputWidth {
                            let s = (row + xs[x]) * 4, t = (y * outputWidth + x) * 4
                            o[t] = v[s]; o[t + 1] = v[s + 1]; o[t + 2] = v[s + 2]; o[t + 3] = v[s + 3]
                        }
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
            values.withUnsafeBufferPointer { v in
                out.withUnsafeMutableBufferPointer { o in
                    for y in 0..<outputHeight {
                        let (r0, r1, fy) = yt[y]
                        for x in 0..<outputWidth {
                            let (c0, c1, fx) = xt[x]
                            let a = (r0 * width + c0) * 4, b = (r0 * width + c1) * 4
                            let c = (r1 * width + c0) * 4, d = (r1 * width + c1) * 4
                            let t = (y * outputWidth + x) * 4
                            for k in 0..<4 {
                                let top = v[a + k] + (v[b + k] - v[a + k]) * fx
                                let bottom = v[c + k] + (v[d + k] - v[c + k]) * fx
                                o[t + k] = top + (bottom - top) * fy
                            }
                        }
                    }
                }
            }
        }
        return PremultipliedImage(width: outputWidth, height: outputHeight, values: out)
    }
}

extension Bitmap {
    /// The image scaled to `width` x `height` (pixel centres aligned). Bilinear downscaling halves
    /// by 2x2 averaging while the image is at least twice the target, so power-of-two reductions
    /// (512 -> 256) are exact box filters; upscaling interpolates. Alpha is handled in premultiplied
    /// space. A zero size gives an empty bitmap.
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
            image = image.sampled(x0: 0, y0: 0, w: Double(image.width), h: Double(image.height),
                                  outputWidth: width, outputHeight: height, filter: filter)
        }
        return image.bitmap(pixelFormat)
    }

    /// The fallback/overzoom image: the part of this (ancestor) tile covering the descendant tile
    /// `levelsDown` zoom levels below it at (`column`, `row`) among the `2^levelsDown` x
    /// `2^levelsDown` descendants (0, 0 top left), scaled to `outputSize` x `outputSize`.
    /// Sub-pixel squares are fine (e.g. 10 levels down a 256 px tile). Bilinear sampling uses the
    /// neighbouring ancestor pixels at the square's edge, so adjacent descendants join seamlessly.
    public func subSquare(levelsDown: Int, column: Int, row: Int, outputSize: Int,
                          filter: ResampleFilter = .bilinear) throws(ImagingError) -> Bitmap {
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
        var image = PremultipliedImage(self)
        var w = Double(width) / Double(n)
        var h = Double(height) / Double(n)
        var scale = 1.0
        if filter == .bilinear {
            while w >= 2 * Double(outputSize) && h >= 2 * Double(outputSize) {
                image = image.halved()
                w /= 2; h /= 2; scale /= 2
            }
        }
        let x0 = Double(column) * Double(width) / Double(n) * scale
        let y0 = Double(row) * Double(height) / Double(n) * scale
        return image.sampled(x0: x0, y0: y0, w: w, h: h, outputWidth: outputSize, outputHeight: outputSize,
                             filter: filter).bitmap(pixelFormat)
    }
}
