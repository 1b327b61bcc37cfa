import Foundation
import Testing
import TilepackCore

@testable import TilepackImaging

@Suite struct CompositeTests {
    @Test func sourceOverOnAnOpaqueBackground() {
        var base = Bitmap(width: 2, height: 1, pixelFormat: .rgba8888, fill: RGBA8(r: 0, g: 0, b: 255))
        var top = Bitmap(width: 2, height: 1, pixelFormat: .rgba8888)
        top.setPixel(x: 0, y: 0, RGBA8(r: 255, g: 0, b: 0, a: 128))
        top.setPixel(x: 1, y: 0, RGBA8(r: 255, g: 0, b: 0, a: 0))
        base.composite(top)
        // 255 * 128/255 = 128 red; blue 255 * (1 - 128/255) = 127.
        #expect(base.pixel(x: 0, y: 0) == RGBA8(r: 128, g: 0, b: 127, a: 255))
        #expect(base.pixel(x: 1, y: 0) == RGBA8(r: 0, g: 0, b: 255, a: 255))
    }

    @Test func translucentOverTranslucentFollowsPorterDuff() {
        let s = RGBA8(r: 200, g: 40, b: 0, a: 100), d = RGBA8(r: 0, g: 100, b: 220, a: 150)
        // Exact source-over in straight terms.
        let sa = Double(s.a) / 255, da = Double(d.a) / 255
        let ao = sa + da * (1 - sa)
        func c(_ sc: UInt8, _ dc: UInt8) -> Double { (Double(sc) * sa + Double(dc) * da * (1 - sa)) / ao }
        let want = (c(s.r, d.r), c(s.g, d.g), c(s.b, d.b), ao * 255)
        for baseFormat in [PixelFormat.rgba8888, .bgra8888, .rgba8888Premultiplied, .bgra8888Premultiplied] {
            for topFormat in [PixelFormat.rgba8888, .bgra8888Premultiplied] {
                var base = Bitmap(width: 1, height: 1, pixelFormat: baseFormat, fill: d)
                base.composite(Bitmap(width: 1, height: 1, pixelFormat: topFormat, fill: s))
                let p = base.pixel(x: 0, y: 0)
                let tolerance = 2.0
                #expect(
                    abs(Double(p.r) - want.0) <= tolerance && abs(Double(p.g) - want.1) <= tolerance
                        && abs(Double(p.b) - want.2) <= tolerance && abs(Double(p.a) - want.3) <= 1,
                    "\(topFormat) over \(baseFormat): \(p) vs \(want)")
            }
        }
    }

    @Test func premultipliedBlendingUsesStoredBytesDirectly() {
        var base = Bitmap(width: 1, height: 1, pixelFormat: .rgba8888Premultiplied)
        base.pixels = [0, 60, 120, 120]
        let top = Bitmap(width: 1, height: 1, pixelFormat: .rgba8888Premultiplied, pixels: [100, 0, 0, 100])!
        base.composite(top)
        // out = top + base * (1 - 100/255), channel by channel, rounded.
        let k = 155.0 / 255
        #expect(base.pixels == [100, UInt8((60 * k).rounded()), UInt8((120 * k).rounded()), UInt8((100 + 120 * k).rounded())])
    }

    @Test func opacityScalesTheTopLayer() {
        var base = Bitmap(width: 1, height: 1, pixelFormat: .rgb888, fill: .black)
        base.composite(Bitmap(width: 1, height: 1, pixelFormat: .rgb565, fill: .white), opacity: 0.5)
        #expect(base.pixels == [128, 128, 128])
        var untouched = Bitmap(width: 1, height: 1, pixelFormat: .rgb888, fill: .black)
        untouched.composite(Bitmap(width: 1, height: 1, pixelFormat: .rgba8888, fill: .white), opacity: 0)
        #expect(untouched.pixels == [0, 0, 0])
    }

    @Test func placementAndClipping() {
        var base = Bitmap(width: 4, height: 4, pixelFormat: .bgra8888, fill: .black)
        let top = Bitmap(width: 3, height: 3, pixelFormat: .rgba8888, fill: .white)
        base.composite(top, atX: 2, y: -1)
        for y in 0..<4 {
            for x in 0..<4 {
                let inside = x >= 2 && y <= 1
                #expect(base.pixel(x: x, y: y) == (inside ? .white : .black), "(\(x), \(y))")
            }
        }
        var same = base
        same.composite(top, atX: 10, y: 10)
        same.composite(top, atX: -3, y: 0)
        #expect(same == base)
    }
}
