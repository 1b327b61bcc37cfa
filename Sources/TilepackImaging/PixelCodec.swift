import TilepackCore

/// `round(x / 255)` for `x` in `0...65025`, exactly.
@inline(__always)
func div255(_ x: UInt32) -> UInt32 {
    let t = x &+ 128
    return (t &+ (t >> 8)) >> 8
}

/// `round(c * a / 255)`: a colour byte premultiplied by alpha, as the pixel formats document it.
@inline(__always)
func premultiply(_ c: UInt8, _ a: UInt8) -> UInt8 {
    UInt8(truncatingIfNeeded: div255(UInt32(c) &* UInt32(a)))
}

/// `round(c * 255 / a)` clamped to 255; 0 where alpha is 0.
@inline(__always)
func unpremultiply(_ c: UInt8, _ a: UInt8) -> UInt8 {
    if a == 255 { return c }
    if a == 0 { return 0 }
    let v = (UInt32(c) * 255 + UInt32(a) / 2) / UInt32(a)
    return UInt8(min(v, 255))
}

/// Packs 8-bit colour into the little-endian RGB565 word, rounding each channel to nearest.
@inline(__always)
func pack565(_ r: UInt8, _ g: UInt8, _ b: UInt8) -> UInt16 {
    let r5 = (UInt32(r) * 31 + 127) / 255
    let g6 = (UInt32(g) * 63 + 127) / 255
    let b5 = (UInt32(b) * 31 + 127) / 255
    return UInt16(truncatingIfNeeded: (r5 << 11) | (g6 << 5) | b5)
}

/// Expands an RGB565 word to 8-bit channels by bit replication.
@inline(__always)
func unpack565(_ word: UInt16) -> (UInt8, UInt8, UInt8) {
    let r5 = UInt8(truncatingIfNeeded: word >> 11)
    let g6 = UInt8(truncatingIfNeeded: (word >> 5) & 0x3F)
    let b5 = UInt8(truncatingIfNeeded: word & 0x1F)
    return ((r5 << 3) | (r5 >> 2), (g6 << 2) | (g6 >> 4), (b5 << 3) | (b5 >> 2))
}

/// Reads and writes single pixels in any `PixelFormat` at a raw address.
///
/// Formats without alpha hold colour composited over black, i.e. the premultiplied colour; so
/// writing a translucent pixel into `rgb888`/`rgb565` stores its premultiplied colour and reading
/// any pixel back from them gives alpha 255.
enum PixelCodec {
    /// The pixel as straight RGBA.
    @inline(__always)
    static func readStraight(_ p: UnsafeRawPointer, _ format: PixelFormat) -> RGBA8 {
        let b = p.assumingMemoryBound(to: UInt8.self)
        switch format {
        case .rgba8888: return RGBA8(r: b[0], g: b[1], b: b[2], a: b[3])
        case .bgra8888: return RGBA8(r: b[2], g: b[1], b: b[0], a: b[3])
        case .rgba8888Premultiplied:
            let a = b[3]
            return RGBA8(r: unpremultiply(b[0], a), g: unpremultiply(b[1], a), b: unpremultiply(b[2], a), a: a)
        case .bgra8888Premultiplied:
            let a = b[3]
            return RGBA8(r: unpremultiply(b[2], a), g: unpremultiply(b[1], a), b: unpremultiply(b[0], a), a: a)
        case .rgb888: return RGBA8(r: b[0], g: b[1], b: b[2], a: 255)
        case .rgb565:
            let (r, g, bl) = unpack565(UInt16(b[0]) | UInt16(b[1]) << 8)
            return RGBA8(r: r, g: g, b: bl, a: 255)
        }
    }

    /// The pixel as premultiplied RGBA (colour channels already multiplied by alpha).
    @inline(__always)
    static func readPremultiplied(_ p: UnsafeRawPointer, _ format: PixelFormat) -> RGBA8 {
        let b = p.assumingMemoryBound(to: UInt8.self)
        switch format {
        case .rgba8888:
            let a = b[3]
            return RGBA8(r: premultiply(b[0], a), g: premultiply(b[1], a), b: premultiply(b[2], a), a: a)
        case .bgra8888:
            let a = b[3]
            return RGBA8(r: premultiply(b[2], a), g: premultiply(b[1], a), b: premultiply(b[0], a), a: a)
        case .rgba8888Premultiplied: return RGBA8(r: b[0], g: b[1], b: b[2], a: b[3])
        case .bgra8888Premultiplied: return RGBA8(r: b[2], g: b[1], b: b[0], a: b[3])
        case .rgb888, .rgb565: return readStraight(p, format)
        }
    }

    /// Writes a straight-alpha colour.
    @inline(__always)
    static func writeStraight(_ c: RGBA8, _ p: UnsafeMutableRawPointer, _ format: PixelFormat) {
        if format.isPremultiplied || !format.hasAlpha {
            writePremultiplied(RGBA8(r: premultiply(c.r, c.a), g: premultiply(c.g, c.a), b: premultiply(c.b, c.a), a: c.a), p, format)
            return
        }
        let b = p.assumingMemoryBound(to: UInt8.self)
        if format == .rgba8888 {
            b[0] = c.r
            b[1] = c.g
            b[2] = c.b
            b[3] = c.a
        } else {
            b[0] = c.b
            b[1] = c.g
            b[2] = c.r
            b[3] = c.a
        }
    }

    /// Writes a premultiplied colour.
    @inline(__always)
    static func writePremultiplied(_ c: RGBA8, _ p: UnsafeMutableRawPointer, _ format: PixelFormat) {
        let b = p.assumingMemoryBound(to: UInt8.self)
        switch format {
        case .rgba8888, .bgra8888:
            let straight = RGBA8(r: unpremultiply(c.r, c.a), g: unpremultiply(c.g, c.a), b: unpremultiply(c.b, c.a), a: c.a)
            writeStraight(straight, p, format)
        case .rgba8888Premultiplied:
            b[0] = c.r
            b[1] = c.g
            b[2] = c.b
            b[3] = c.a
        case .bgra8888Premultiplied:
            b[0] = c.b
            b[1] = c.g
            b[2] = c.r
            b[3] = c.a
        case .rgb888:
            b[0] = c.r
            b[1] = c.g
            b[2] = c.b
        case .rgb565:
            let w = pack565(c.r, c.g, c.b)
            b[0] = UInt8(truncatingIfNeeded: w)
            b[1] = UInt8(truncatingIfNeeded: w >> 8)
        }
    }

    /// Converts `count` pixels from `src` in `from` to `dst` in `to`. `src` and `dst` may be the same
    /// memory when `to` takes no more bytes per pixel than `from` (pixels are processed first to last).
    static func convert(_ src: UnsafeRawPointer, from: PixelFormat, _ dst: UnsafeMutableRawPointer, to: PixelFormat, count: Int) {
        let sb = from.bytesPerPixel
        let db = to.bytesPerPixel
        if from == to {
            if UnsafeRawPointer(dst) != src { dst.copyMemory(from: src, byteCount: count * sb) }
            return
        }
        // Fast paths for the conversions decoding and resampling use.
        #if _endian(little)
        if (from == .rgba8888Premultiplied && to == .rgba8888) || (from == .bgra8888Premultiplied && to == .bgra8888) {
            // Whole opaque or transparent pixels as one word; the rest divided channel by channel.
            for i in 0..<count {
                let o = i &* 4
                let word = src.loadUnaligned(fromByteOffset: o, as: UInt32.self)
                let a = UInt8(truncatingIfNeeded: word >> 24)
                if a == 255 || a == 0 {
                    dst.storeBytes(of: a == 0 ? 0 : word, toByteOffset: o, as: UInt32.self)
                } else {
                    let c0 = unpremultiply(UInt8(truncatingIfNeeded: word), a)
                    let c1 = unpremultiply(UInt8(truncatingIfNeeded: word >> 8), a)
                    let c2 = unpremultiply(UInt8(truncatingIfNeeded: word >> 16), a)
                    dst.storeBytes(
                        of: UInt32(c0) | UInt32(c1) << 8 | UInt32(c2) << 16 | UInt32(a) << 24,
                        toByteOffset: o, as: UInt32.self)
                }
            }
            return
        }
        #endif
        if (from == .rgba8888 && to == .rgba8888Premultiplied) || (from == .bgra8888 && to == .bgra8888Premultiplied) {
            let s = src.assumingMemoryBound(to: UInt8.self)
            let d = dst.assumingMemoryBound(to: UInt8.self)
            for i in 0..<count {
                let o = i &* 4
                let a = s[o &+ 3]
                if a == 255 {
                    if UnsafeRawPointer(d) != UnsafeRawPointer(s) {
                        dst.storeBytes(of: src.loadUnaligned(fromByteOffset: o, as: UInt32.self), toByteOffset: o, as: UInt32.self)
                    }
                } else {
                    d[o] = premultiply(s[o], a)
                    d[o &+ 1] = premultiply(s[o &+ 1], a)
                    d[o &+ 2] = premultiply(s[o &+ 2], a)
                    d[o &+ 3] = a
                }
            }
            return
        }
        if from == .rgb888 && to == .rgb565 {
            let s = src.assumingMemoryBound(to: UInt8.self)
            let d = dst.assumingMemoryBound(to: UInt8.self)
            for i in 0..<count {
                let w = pack565(s[i &* 3], s[i &* 3 &+ 1], s[i &* 3 &+ 2])
                d[i &* 2] = UInt8(truncatingIfNeeded: w)
                d[i &* 2 &+ 1] = UInt8(truncatingIfNeeded: w >> 8)
            }
            return
        }
        let wantsPremultiplied = to.isPremultiplied || !to.hasAlpha
        if wantsPremultiplied {
            for i in 0..<count {
                writePremultiplied(readPremultiplied(src + i &* sb, from), dst + i &* db, to)
            }
        } else {
            for i in 0..<count {
                writeStraight(readStraight(src + i &* sb, from), dst + i &* db, to)
            }
        }
    }
}
