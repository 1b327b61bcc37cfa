import Foundation
import Testing
import TilepackCore

@testable import TilepackImaging

@Suite struct PNGDecodeTests {
    @Test(arguments: Patterns.pngNames)
    func decodesEveryColourTypeAndDepth(name: String) throws {
        let data = try Resources.data(name)
        let bitmap = try ImageDecoder.decode(data, pixelFormat: .rgba8888)
        #expect(bitmap.width == Patterns.width && bitmap.height == Patterns.height)
        // 16-bit Adam7 images go through libpng's linear 16-bit output and back: +-1.
        expectPixels(bitmap, Patterns.expected(name), tolerance: name.hasSuffix("16-adam7.png") ? 1 : 0)
    }

    @Test(arguments: Patterns.pngNames)
    func everyPixelFormatMatchesConvertingTheRGBADecode(name: String) throws {
        let data = try Resources.data(name)
        let rgba = try ImageDecoder.decode(data, pixelFormat: .rgba8888)
        for format in PixelFormat.allCases {
            let direct = try ImageDecoder.decode(data, pixelFormat: format)
            #expect(direct.pixelFormat == format)
            #expect(direct == rgba.converted(to: format), "\(name) decoded as \(format)")
        }
    }

    @Test func interlacedImagesDecodeLikeTheirNonInterlacedTwins() throws {
        for (interlaced, plain) in [
            ("rgba8-adam7.png", "rgba8.png"), ("pal4-adam7.png", "pal4.png"),
            ("grey1-adam7.png", "grey1.png"), ("rgba16-adam7.png", "rgba16.png"),
        ] {
            let a = try ImageDecoder.decode(Resources.data(interlaced), pixelFormat: .bgra8888)
            let b = try ImageDecoder.decode(Resources.data(plain), pixelFormat: .bgra8888)
            if interlaced.contains("16") {
                expectPixels(a, { x, y in b.pixel(x: x, y: y) }, tolerance: 1)
            } else {
                #expect(a == b, "\(interlaced) vs \(plain)")
            }
        }
    }

    @Test func premultipliedDecodeFollowsTheDocumentedRounding() throws {
        let bitmap = try ImageDecoder.decode(Resources.data("rgba8.png"), pixelFormat: .bgra8888Premultiplied)
        for y in 0..<Patterns.height {
            for x in 0..<Patterns.width {
                let a = Int(Patterns.a(x, y))
                let o = (y * Patterns.width + x) * 4
                let want = [Patterns.b(x, y), Patterns.g(x, y), Patterns.r(x, y)].map {
                    UInt8((Double(Int($0) * a) / 255).rounded())
                }
                #expect(Array(bitmap.pixels[o..<o + 3]) == want && bitmap.pixels[o + 3] == UInt8(a))
            }
        }
    }

    @Test func translucentPixelsBecomeColourOverBlackInOpaqueFormats() throws {
        let bitmap = try ImageDecoder.decode(Resources.data("rgba8.png"), pixelFormat: .rgb888)
        // (0, 0) has alpha 0, (1, 0) alpha 255, (2, 0) alpha 46.
        #expect(bitmap.pixels[0..<3] == [0, 0, 0])
        #expect(Array(bitmap.pixels[3..<6]) == [Patterns.r(1, 0), Patterns.g(1, 0), Patterns.b(1, 0)])
        let a = Int(Patterns.a(2, 0))
        #expect(a == 46)
        #expect(Int(bitmap.pixels[6]) == Int((Double(Int(Patterns.r(2, 0)) * a) / 255).rounded()))
    }

    @Test func decodesIntoTheCallersBufferInEveryFormat() throws {
        let data = try Resources.data("pal8-trns.png")
        for format in PixelFormat.allCases {
            let expected = try ImageDecoder.decode(data, pixelFormat: format)
            var buffer = [UInt8](repeating: 0xAB, count: Patterns.width * Patterns.height * format.bytesPerPixel)
            try buffer.withUnsafeMutableBytes { out in
                try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
                    try ImageDecoder.decode(
                        bytes, into: out, pixelFormat: format,
                        expectedWidth: Patterns.width, expectedHeight: Patterns.height)
                }
            }
            #expect(buffer == expected.pixels, "\(format)")
        }
    }

    @Test func imageInfoReadsOnlyTheHeader() throws {
        let data = try Resources.data("rgba16.png")
        // The header alone is enough: cut the file right after IHDR.
        let info = try data.prefix(33).withUnsafeBytes { (b: UnsafeRawBufferPointer) in
            try ImageDecoder.imageInfo(b)
        }
        #expect(info == ImageInfo(format: .png, width: 13, height: 11))
    }
}
