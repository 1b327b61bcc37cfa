import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

@testable import TilepackImaging

/// Real tiles written by other tools, read in place from Tests/Fixtures.
@Suite struct FixtureTileTests {
    @Test func decodesTheMartinWebPTileAt512Pixels() throws {
        let data = try FixtureTile.data("martin/webp.mbtiles", zoom: 0, x: 0, tmsRow: 0)
        #expect(try ImageDecoder.imageInfo(data) == ImageInfo(format: .webp, width: 512, height: 512))
        let bitmap = try ImageDecoder.decode(data, pixelFormat: .rgba8888)
        #expect(bitmap.width == 512 && bitmap.height == 512)
        // A world map: many distinct colours, not a blank or constant buffer.
        let colours = Set(
            stride(from: 0, to: bitmap.pixels.count, by: 4 * 97).map { i in
                bitmap.pixels[i..<i + 3].reduce(0) { $0 << 8 | Int($1) }
            })
        #expect(colours.count > 50)
        // Refused where a 256 px tile is expected, before anything is written.
        var buffer = [UInt8](repeating: 7, count: 256 * 256 * 4)
        let error = imagingError {
            try buffer.withUnsafeMutableBytes { out in
                try ImageDecoder.decode(data, into: out, pixelFormat: .rgba8888, expectedWidth: 256, expectedHeight: 256)
            }
        }
        #expect(error == .sizeMismatch(expected: PixelSize(width: 256, height: 256), actual: PixelSize(width: 512, height: 512)))
        #expect(buffer.allSatisfy { $0 == 7 })
    }

    @Test func decodesThePalettePNGTile() throws {
        let data = try FixtureTile.data("node-mbtiles/plain_1.mbtiles", zoom: 3, x: 4, tmsRow: 4)
        #expect(data[24] == 4 && data[25] == 3)  // bit depth 4, colour type 3 (palette)
        let bitmap = try ImageDecoder.decode(data, pixelFormat: .rgba8888)
        #expect(bitmap.width == 256 && bitmap.height == 256)
        let rgb565 = try ImageDecoder.decode(data, pixelFormat: .rgb565)
        #expect(rgb565 == bitmap.converted(to: .rgb565))
        // PNG encode and decode give back the same pixels.
        let again = try ImageDecoder.decode(PNGEncoder.encode(bitmap), pixelFormat: .rgba8888)
        #expect(again == bitmap)
    }

    @Test func decodesTheJPEGTileInEveryFormatConsistently() throws {
        let data = try FixtureTile.data("martin/geography-class-jpg.mbtiles", zoom: 1, x: 1, tmsRow: 0)
        #expect(try ImageDecoder.imageInfo(data) == ImageInfo(format: .jpeg, width: 256, height: 256))
        let rgba = try ImageDecoder.decode(data, pixelFormat: .rgba8888)
        #expect(stride(from: 3, to: rgba.pixels.count, by: 4).allSatisfy { rgba.pixels[$0] == 255 })
        for format in PixelFormat.allCases {
            #expect(try ImageDecoder.decode(data, pixelFormat: format) == rgba.converted(to: format), "\(format)")
        }
        let colours = Set(
            stride(from: 0, to: rgba.pixels.count, by: 4 * 61).map { i in
                rgba.pixels[i..<i + 3].reduce(0) { $0 << 8 | Int($1) }
            })
        #expect(colours.count > 50)
    }

    @Test func webPDecodesConsistentlyInEveryFormat() throws {
        let data = try FixtureTile.data("martin/webp.mbtiles", zoom: 0, x: 0, tmsRow: 0)
        let rgba = try ImageDecoder.decode(data, pixelFormat: .rgba8888)
        for format in PixelFormat.allCases where format != .rgba8888 {
            #expect(try ImageDecoder.decode(data, pixelFormat: format) == rgba.converted(to: format), "\(format)")
        }
    }

    @Test func decodesEveryTileOfTheSharedFixturesWhenPresent() throws {
        for (file, size) in [
            ("martin/geography-class-png.mbtiles", 256), ("martin/geography-class-jpg.mbtiles", 256),
            ("martin/webp.mbtiles", 512), ("node-mbtiles/plain_2.mbtiles", 256),
        ] {
            var tiles: [Data] = []
            try MBTilesArchive(path: TestSupport.fixture(file)).forEachTile { _, bytes in tiles.append(Data(bytes)) }
            #expect(!tiles.isEmpty, "\(file)")
            for tile in tiles {
                var buffer = [UInt8](repeating: 0, count: size * size * 4)
                try buffer.withUnsafeMutableBytes { out in
                    try ImageDecoder.decode(tile, into: out, pixelFormat: .bgra8888, expectedWidth: size, expectedHeight: size)
                }
            }
        }
    }
}

/// One tile of a shared fixture archive, read in place (the fixtures are not copied into the project).
enum FixtureTile {
    static func data(_ fixture: String, zoom: Int, x: Int, tmsRow: Int) throws -> Data {
        let tile = try TileCoordinate(zoom: zoom, x: x, row: tmsRow, scheme: .tms)
        guard let data = try MBTilesArchive(path: TestSupport.fixture(fixture)).tileData(at: tile) else {
            throw TileArchiveError(path: fixture, fault: .corrupt("no tile \(tile)"))
        }
        return data
    }
}
