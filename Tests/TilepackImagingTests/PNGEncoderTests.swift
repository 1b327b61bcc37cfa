import Foundation
import Testing
import TilepackChecksum
import TilepackCore
import TilepackTestSupport

@testable import TilepackImaging
@_spi(TilepackInternal) import TilepackCompression

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

    /// Rows made for each of PNG's filters: the writer picks the filter whose bytes sum least, and
    /// libpng reads the file back to the same pixels (so each filter's arithmetic is PNG's).
    @Test(arguments: [3, 4])
    func eachRowGetsTheFilterThatSumsLeast(channels: Int) throws {
        let width = 8
        let ramp = (0..<width).map { x in UInt8(x * 10) }
        var halving: [UInt8] = []  // each pixel the mean of its left neighbour and 200 above: average
        var previous = 0
        for _ in 0..<width {
            previous = (previous + 200) / 2
            halving.append(UInt8(previous))
        }
        let rows: [[UInt8]] = [
            ramp,  // sub (the row above is zero)
            ramp,  // up
            Array(ramp.prefix(4)) + [UInt8](repeating: 200, count: 4),  // Paeth: the row above, then flat
            // Sub: one step, then flat (with alpha, Paeth by one: its first alpha is predicted from above).
            [UInt8](repeating: 200, count: width),
            halving,  // average
            (0..<width).map { UInt8($0 % 2 * 3) },  // none: small values, each a step from the last
        ]
        let expected: [UInt8] = [1, 2, 4, channels == 4 ? 4 : 1, 3, 0]
        var bitmap = Bitmap(width: width, height: rows.count, pixelFormat: channels == 4 ? .rgba8888 : .rgb888)
        for (y, row) in rows.enumerated() {
            for (x, v) in row.enumerated() { bitmap.setPixel(x: x, y: y, RGBA8(r: v, g: v, b: v, a: 255)) }
        }
        let rowBytes = width * channels
        var filtered = [UInt8](repeating: 0, count: rows.count * (rowBytes + 1))
        bitmap.pixels.withUnsafeBufferPointer { src in
            filtered.withUnsafeMutableBufferPointer { out in
                PNGWriter.filterRows(
                    src.baseAddress!, into: out.baseAddress!, rowBytes: rowBytes, height: rows.count, stride: bitmap.stride,
                    bytesPerPixel: channels)
            }
        }
        #expect(rows.indices.map { filtered[$0 * (rowBytes + 1)] } == expected)
        guard ZlibStream.isAvailable else { return }
        let png = try #require(
            bitmap.pixels.withUnsafeBytes {
                PNGWriter.encode($0, width: width, height: rows.count, channels: channels, stride: bitmap.stride)
            })
        #expect(try ImageDecoder.decode(png, pixelFormat: bitmap.pixelFormat) == bitmap)
        #expect(png[25] == (channels == 4 ? 6 : 2))
    }

    /// Where libdeflate is linked, PNGEncoder writes through PNGWriter (the tiler's encoding).
    @Test func theEncoderWritesThroughLibdeflateWhereLinked() throws {
        var rng = SplitMix64(seed: 7)
        var bitmap = Bitmap(width: 256, height: 256, pixelFormat: .rgba8888)
        for i in bitmap.pixels.indices { bitmap.pixels[i] = UInt8(truncatingIfNeeded: (i / 4 % 256) + Int.random(in: 0...8, using: &rng)) }
        let png = try PNGEncoder.encode(bitmap)
        let own = bitmap.pixels.withUnsafeBytes { PNGWriter.encode($0, width: 256, height: 256, channels: 4, stride: bitmap.stride) }
        #expect(own == (ZlibStream.isAvailable ? png : nil))
        #expect(try ImageDecoder.decode(png, pixelFormat: .rgba8888) == bitmap)
    }

    @Test(.enabled(if: ZlibStream.isAvailable, "libdeflate's ZlibStream is linked on Linux only")) func aZlibStreamThatDoesNotFitIsNil() {
        let input = [UInt8](repeating: 7, count: 10_000)
        let fits = input.withUnsafeBytes { ZlibStream.compress($0, level: 2, capacity: ZlibStream.bound(input.count)) }
        #expect(fits.map { $0.count < 100 } == true)
        #expect(input.withUnsafeBytes { ZlibStream.compress($0, level: 2, capacity: 4) } == nil)
    }

    @Test func emptyBitmapsCannotBeEncoded() {
        let error = imagingError { _ = try PNGEncoder.encode(Bitmap(width: 0, height: 5, pixelFormat: .rgba8888)) }
        guard case .encodingFailed? = error else {
            Issue.record("got \(String(describing: error))")
            return
        }
    }
}
