import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@testable import TilepackImaging

@Suite struct PNGEncoderTests {
    @Test(arguments: PixelFormat.allCases)
    func encodedPNGsDecodeToTheSamePixels(format: PixelFormat) throws {
        var bitmap = Bitmap(width: 37, height: 19, pixelFormat: format)
        for y in 0..<19 {
            for x in 0..<37 {
                bitmap.setPixel(
                    x: x, y: y, RGBA8(r: UInt8(x * 6), g: UInt8(y * 13), b: UInt8(((x ^ y) * 5) & 255), a: UInt8((x * y * 3) & 255)))
            }
        }
        let png = try PNGEncoder.encode(bitmap)
        #expect(TileFormat.sniff(png) == .png)
        let info = try ImageDecoder.imageInfo(png)
        #expect(info == ImageInfo(format: .png, width: 37, height: 19))
        let decoded = try ImageDecoder.decode(png, pixelFormat: format)
        #expect(decoded == bitmap)
        // Opaque formats are written as RGB (colour type 2), alpha ones as RGBA (6).
        #expect(png[25] == (format.hasAlpha ? 6 : 2))
    }

    @Test func noiseEncodesAtWorstSlightlyLargerThanRaw() throws {
        var rng = SplitMix64(seed: 42)
        var bitmap = Bitmap(width: 300, height: 200, pixelFormat: .rgba8888)
        for i in bitmap.pixels.indices { bitmap.pixels[i] = UInt8.random(in: 0...255, using: &rng) }
        let png = try PNGEncoder.encode(bitmap)
        #expect(try ImageDecoder.decode(png, pixelFormat: .rgba8888) == bitmap)
    }

    @Test func emptyBitmapsCannotBeEncoded() {
        let error = imagingError { _ = try PNGEncoder.encode(Bitmap(width: 0, height: 5, pixelFormat: .rgba8888)) }
        guard case .encodingFailed? = error else {
            Issue.record("got \(String(describing: error))")
            return
        }
    }
}
