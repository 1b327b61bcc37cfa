import TilepackCore

extension Bitmap {
    /// Draws `top` over this bitmap with its top-left pixel at (`atX`, `y`), source-over
    /// (Porter-Duff): `out = top + this * (1 - topAlpha)` in premultiplied terms, with `top`'s alpha
    /// scaled by `opacity` (clamped to 0...1). Either bitmap may be in any format: straight alpha is
    /// premultiplied before blending and the result stored back in this bitmap's format; a bitmap
    /// without alpha is opaque. Parts of `top` outside this bitmap are clipped.
    public mutating func composite(_ top: Bitmap, atX: Int = 0, y: Int = 0, opacity: Double = 1) {
        let o = UInt32((min(max(opacity.isNaN ? 0 : opacity, 0), 1) * 255).rounded())
        guard o > 0 else { return }
        let x0 = max(atX, 0), y0 = max(y, 0)
        let x1 = min(atX + top.width, width), y1 = min(y + top.height, height)
        guard x0 < x1, y0 < y1 else { return }
        let dstFormat = pixelFormat, srcFormat = top.pixelFormat
        let dbpp = dstFormat.bytesPerPixel, sbpp = srcFormat.bytesPerPixel
        let dstStride = stride, srcStride = top.stride
        top.pixels.withUnsafeBytes { src in
            pixels.withUnsafeMutableBytes { dst in
                let sBase = src.baseAddress!, dBase = dst.baseAddress!
                for row in y0..<y1 {
                    let sRow = sBase + (row - y) * srcStride
                    let dRow = dBase + row * dstStride
                    for col in x0..<x1 {
                        var s = PixelCodec.readPremultiplied(sRow + (col - atX) * sbpp, srcFormat)
                        if o != 255 {
                            s = RGBA8(
                                r: UInt8(div255(UInt32(s.r) * o)), g: UInt8(div255(UInt32(s.g) * o)),
                                b: UInt8(div255(UInt32(s.b) * o)), a: UInt8(div255(UInt32(s.a) * o)))
                        }
                        if s.a == 0 && s.r == 0 && s.g == 0 && s.b == 0 { continue }
                        let p = dRow + col * dbpp
                        if s.a == 255 {
                            PixelCodec.writePremultiplied(s, p, dstFormat)
                            continue
                        }
                        let d = PixelCodec.readPremultiplied(p, dstFormat)
                        let inv = UInt32(255 - s.a)
                        @inline(__always) func blend(_ sc: UInt8, _ dc: UInt8) -> UInt8 {
                            UInt8(min(UInt32(sc) + div255(UInt32(dc) * inv), 255))
                        }
                        let out = RGBA8(r: blend(s.r, d.r), g: blend(s.g, d.g), b: blend(s.b, d.b), a: blend(s.a, d.a))
                        PixelCodec.writePremultiplied(out, p, dstFormat)
                    }
                }
            }
        }
    }
}
