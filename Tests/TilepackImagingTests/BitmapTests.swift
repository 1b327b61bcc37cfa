import Foundation
import Testing
import TilepackCore

@testable import TilepackImaging

@Suite struct BitmapTests {
    @Test func sizesFollowThePixelFormat() {
        #expect(Bitmap(width: 256, height: 256, pixelFormat: .rgba8888).pixels.count == 262_144)
        #expect(Bitmap(width: 256, height: 256, pixelFormat: .rgb565).pixels.count == 131_072)
        #expect(Bitmap(width: 3, height: 2, pixelFormat: .rgb888, pixels: [UInt8](repeating: 0, count: 17)) == nil)
    }

    @Test func bytesFollowTheDocumentedLayout() {
        let c = RGBA8(r: 200, g: 100, b: 50, a: 128)
        func bytes(_ f: PixelFormat) -> [UInt8] { Bitmap(width: 1, height: 1, pixelFormat: f, fill: c).pixels }
        #expect(bytes(.rgba8888) == [200, 100, 50, 128])
        #expect(bytes(.bgra8888) == [50, 100, 200, 128])
        // round(200 * 128 / 255) = 100, round(100 * 128 / 255) = 50, round(50 * 128 / 255) = 25
        #expect(bytes(.rgba8888Premultiplied) == [100, 50, 25, 128])
        #expect(bytes(.bgra8888Premultiplied) == [25, 50, 100, 128])
        #expect(bytes(.rgb888) == [100, 50, 25])  // over black
        let opaque = Bitmap(width: 1, height: 1, pixelFormat: .rgb565, fill: RGBA8(r: 255, g: 0, b: 255)).pixels
        #expect(opaque == [0x1F, 0xF8])  // 0xF81F little-endian: red bits 15-11, blue 4-0
        let green = Bitmap(width: 1, height: 1, pixelFormat: .rgb565, fill: RGBA8(r: 0, g: 255, b: 0)).pixels
        #expect(green == [0xE0, 0x07])
    }

    @Test func premultiplyRoundingIsExactForEveryColourAndAlpha() {
        for c in 0...255 {
            for a in 0...255 {
                let want = UInt8((Double(c * a) / 255).rounded())
                if premultiply(UInt8(c), UInt8(a)) != want {
                    Issue.record("\(c) * \(a)")
                    return
                }
            }
        }
    }

    @Test func pixelRoundTripsInEveryFormat() {
        let colours = [
            RGBA8(r: 1, g: 2, b: 3), RGBA8(r: 255, g: 128, b: 0, a: 255), RGBA8(r: 10, g: 200, b: 90, a: 0),
            RGBA8(r: 90, g: 180, b: 250, a: 200),
        ]
        for format in PixelFormat.allCases {
            var bitmap = Bitmap(width: 4, height: 1, pixelFormat: format)
            for (i, c) in colours.enumerated() { bitmap.setPixel(x: i, y: 0, c) }
            for (i, c) in colours.enumerated() {
                let got = bitmap.pixel(x: i, y: 0)
                switch format {
                case .rgba8888, .bgra8888: #expect(got == c)
                case .rgba8888Premultiplied, .bgra8888Premultiplied:
                    #expect(got.a == c.a)
                    if c.a == 255 { #expect(got == c) }
                    if c.a == 0 { #expect(got == .transparent) }
                    if c.a == 200 { #expect(abs(Int(got.b) - Int(c.b)) <= 1 && abs(Int(got.r) - Int(c.r)) <= 1) }
                case .rgb888:
                    #expect(got == RGBA8(r: premultiply(c.r, c.a), g: premultiply(c.g, c.a), b: premultiply(c.b, c.a)))
                case .rgb565:
                    let want = RGBA8(r: premultiply(c.r, c.a), g: premultiply(c.g, c.a), b: premultiply(c.b, c.a))
                    #expect(
                        abs(Int(got.r) - Int(want.r)) <= 4 && abs(Int(got.g) - Int(want.g)) <= 2
                            && abs(Int(got.b) - Int(want.b)) <= 4 && got.a == 255)
                }
            }
        }
    }

    @Test func rgb565RoundTripIsStable() {
        // Every 16-bit word expands to 8 bits and packs back to itself.
        for word in 0...0xFFFF {
            let (r, g, b) = unpack565(UInt16(word))
            if pack565(r, g, b) != UInt16(word) {
                Issue.record("word \(word)")
                return
            }
        }
    }

    @Test func conversionsBetweenFormats() {
        var straight = Bitmap(width: 3, height: 2, pixelFormat: .rgba8888)
        for y in 0..<2 {
            for x in 0..<3 { straight.setPixel(x: x, y: y, RGBA8(r: UInt8(x * 80), g: UInt8(y * 90), b: 7, a: UInt8(x * 100 + y * 50))) }
        }
        for format in PixelFormat.allCases {
            let converted = straight.converted(to: format)
            #expect(converted.pixelFormat == format && converted.pixels.count == 6 * format.bytesPerPixel)
        }
        // Swizzles are lossless both ways; premultiplied <-> premultiplied too.
        #expect(straight.converted(to: .bgra8888).converted(to: .rgba8888) == straight)
        let p = straight.converted(to: .rgba8888Premultiplied)
        #expect(p.converted(to: .bgra8888Premultiplied).converted(to: .rgba8888Premultiplied) == p)
        // Premultiplied to opaque formats uses the premultiplied colour as is.
        #expect(p.converted(to: .rgb888) == straight.converted(to: .rgb888))
        #expect(p.converted(to: .rgb888).pixels == stride(from: 0, to: 24, by: 4).flatMap { Array(p.pixels[$0..<$0 + 3]) })
    }

    @Test func writeIntoChecksTheExactSize() throws {
        let bitmap = Bitmap(width: 2, height: 2, pixelFormat: .rgb888, fill: RGBA8(r: 1, g: 2, b: 3))
        var exact = [UInt8](repeating: 0, count: 12)
        try exact.withUnsafeMutableBytes { b in try bitmap.write(into: b) }
        #expect(exact == [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3])
        var short = [UInt8](repeating: 0, count: 11)
        let error = imagingError { try short.withUnsafeMutableBytes { b in try bitmap.write(into: b) } }
        #expect(error == .bufferSizeMismatch(expected: 12, actual: 11))
        #expect(short.allSatisfy { $0 == 0 })
        var rgba = [UInt8](repeating: 0, count: 16)
        try rgba.withUnsafeMutableBytes { b in try bitmap.write(into: b, pixelFormat: .bgra8888) }
        #expect(rgba == [3, 2, 1, 255, 3, 2, 1, 255, 3, 2, 1, 255, 3, 2, 1, 255])
    }

    @Test func croppingCopiesTheRectangleAndRejectsOutOfBounds() throws {
        var bitmap = Bitmap(width: 4, height: 3, pixelFormat: .rgb565)
        for y in 0..<3 { for x in 0..<4 { bitmap.setPixel(x: x, y: y, RGBA8(r: UInt8(x * 64), g: UInt8(y * 100), b: 0)) } }
        let crop = try bitmap.cropped(x: 1, y: 1, width: 3, height: 2)
        #expect(crop.width == 3 && crop.height == 2)
        for y in 0..<2 { for x in 0..<3 { #expect(crop.pixel(x: x, y: y) == bitmap.pixel(x: x + 1, y: y + 1)) } }
        #expect(try bitmap.cropped(x: 0, y: 0, width: 4, height: 3) == bitmap)
        #expect(try bitmap.cropped(x: 4, y: 3, width: 0, height: 0).pixels.isEmpty)
        for (x, y, w, h) in [(-1, 0, 2, 2), (3, 0, 2, 1), (0, 2, 1, 2), (0, 0, -1, 1), (Int.max, 0, 1, 1)] {
            #expect(
                imagingError { _ = try bitmap.cropped(x: x, y: y, width: w, height: h) }
                    == .regionOutOfBounds(x: x, y: y, width: w, height: h, bitmap: PixelSize(width: 4, height: 3)))
        }
    }
}
