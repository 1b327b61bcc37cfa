import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@testable import TilepackImaging

@Suite struct DecodeErrorTests {
    func decodeError(_ data: Data, _ format: PixelFormat = .rgba8888, maximumDimension: Int = 4096) -> ImagingError? {
        imagingError { _ = try ImageDecoder.decode(data, pixelFormat: format, maximumDimension: maximumDimension) }
    }

    @Test func vectorAndJSONContentIsNotDecodableToABitmap() throws {
        let gzip = try FixtureTile.data("martin/world_cities.mbtiles", zoom: 4, x: 4, tmsRow: 7)
        let mvt = try FixtureTile.data("martin/uncompressed_mvt.mbtiles", zoom: 0, x: 0, tmsRow: 0)
        let json = Data(#"{"foo":"bar"}"#.utf8)
        for data in [gzip, mvt] { #expect(decodeError(data) == .notRaster(.pbf)) }
        #expect(decodeError(json) == .notRaster(.json))
        #expect(ImagingError.notRaster(.pbf).description.contains("not decodable to a bitmap"))
        #expect(imagingError { _ = try ImageDecoder.imageInfo(gzip) } == .notRaster(.pbf))
    }

    @Test func unknownAndUnsupportedFormats() {
        #expect(decodeError(Data(repeating: 0xFF, count: 64)) == .unknownFormat)
        #expect(decodeError(Data()) == .unknownFormat)
        #expect(decodeError(Data("GIF89a\u{1}\u{0}\u{1}\u{0}".utf8)) == .unsupportedFormat(.gif))
    }

    @Test func oversizedImagesAreRejectedFromTheirHeaders() throws {
        // A real, valid 4097 x 1 PNG: over the default limit, fine with a higher one.
        let wide = try PNGEncoder.encode(Bitmap(width: 4097, height: 1, pixelFormat: .rgba8888, fill: .white))
        #expect(decodeError(wide) == .tooLarge(width: 4097, height: 1, limit: 4096))
        #expect(try ImageDecoder.decode(wide, pixelFormat: .rgb565, maximumDimension: 5000).width == 4097)
        // A PNG header claiming 100000 x 100000 with no data behind it: rejected, nothing allocated.
        var huge = try Resources.data("rgba8.png")
        huge.replaceSubrange(16..<24, with: [0, 1, 0x86, 0xA0, 0, 1, 0x86, 0xA0])
        #expect(decodeError(huge) == .tooLarge(width: 100_000, height: 100_000, limit: 4096))
        // JPEG: patch the SOF0 frame size to 5000 x 6000.
        var jpeg = try FixtureTile.data("martin/geography-class-jpg.mbtiles", zoom: 1, x: 1, tmsRow: 0)
        var sof = 2  // walk the marker segments to the frame header
        while jpeg[sof + 1] != 0xC0 && jpeg[sof + 1] != 0xC2 { sof += 2 + Int(jpeg[sof + 2]) << 8 + Int(jpeg[sof + 3]) }
        jpeg.replaceSubrange(sof + 5..<sof + 9, with: [0x17, 0x70, 0x13, 0x88])
        #expect(decodeError(jpeg) == .tooLarge(width: 5000, height: 6000, limit: 4096))
        // WebP against a caller's lower bound.
        #expect(
            decodeError(try FixtureTile.data("martin/webp.mbtiles", zoom: 0, x: 0, tmsRow: 0), maximumDimension: 256)
                == .tooLarge(width: 512, height: 512, limit: 256))
    }

    @Test func wrongBufferSizeIsRejectedBeforeWriting() throws {
        let data = try Resources.data("rgb8.png")
        var buffer = [UInt8](repeating: 9, count: 13 * 11 * 4 - 1)
        let error = imagingError {
            try buffer.withUnsafeMutableBytes { out in
                try ImageDecoder.decode(data, into: out, pixelFormat: .rgba8888, expectedWidth: nil, expectedHeight: nil)
            }
        }
        #expect(error == .bufferSizeMismatch(expected: 572, actual: 571))
        #expect(buffer.allSatisfy { $0 == 9 })
    }

    @Test(arguments: [
        "rgba8.png", "pal8-trns.png", "rgba8-adam7.png", "rgb16.png",
        "plain_1-3-4-4.png", "geography-class-1-1-0.jpg", "martin-webp-0-0-0.webp",
    ])
    func everyTruncationIsAnError(name: String) throws {
        let data = try Resources.data(name)
        // PNG: everything up to the IEND chunk is needed; JPEG and WebP: every byte.
        let needed = TileFormat.sniff(data) == .png ? data.count - 12 : data.count
        let step = max(1, needed / 400)
        for length in Swift.stride(from: 0, to: needed, by: step) {
            let error = decodeError(data.prefix(length), .bgra8888)
            #expect(error != nil, "\(name) cut to \(length) of \(data.count) bytes decoded")
        }
    }

    @Test func aHeaderThatClaimsMoreRowsThanTheDataHoldsIsAnError() throws {
        var data = try Resources.data("rgb8.png")
        data[23] = 40  // height 11 -> 40
        let crc = crc32(data[12..<29])
        data.replaceSubrange(29..<33, with: [UInt8(crc >> 24), UInt8(crc >> 16 & 255), UInt8(crc >> 8 & 255), UInt8(crc & 255)])
        guard case .corrupt(.png, let reason)? = decodeError(data) else {
            Issue.record("expected a corrupt-PNG error")
            return
        }
        #expect(!reason.isEmpty)
    }

    @Test func aChecksumFailureInImageDataIsAnError() throws {
        var data = try Resources.data("rgba8.png")
        let idat = try #require(data.indices.first { data[$0..<min($0 + 4, data.count)].elementsEqual("IDAT".utf8) })
        data[idat + 10] ^= 0x40
        #expect(decodeError(data) != nil)
    }

    @Test(arguments: [
        "rgba8.png", "pal4-adam7.png", "ga16.png", "plain_1-3-4-4.png",
        "geography-class-1-1-0.jpg", "martin-webp-0-0-0.webp",
    ])
    func flippedBitsNeverCrashAndNeverHalfSucceed(name: String) throws {
        let original = try Resources.data(name)
        var rng = SplitMix64(seed: 0x7115_7ACC)
        for _ in 0..<150 {
            var data = original
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                data[Int.random(in: 0..<data.count, using: &rng)] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
            }
            do {
                let bitmap = try ImageDecoder.decode(data, pixelFormat: .rgba8888Premultiplied)
                #expect(bitmap.pixels.count == bitmap.width * bitmap.height * 4)
            } catch {
                #expect(!error.description.isEmpty)
            }
        }
    }
}

func crc32<C: Collection>(_ bytes: C) -> UInt32 where C.Element == UInt8 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }
    return ~crc
}
