import Foundation
import Testing
import TilepackCore
@testable import TilepackImaging

/// Real tiles written by other tools (extracted from ../shared/fixtures, see Resources/README.md).
@Suite struct FixtureTileTests {
    @Test func decodesTheMartinWebPTileAt512Pixels() throws {
        let data = try Resources.data("martin-webp-0-0-0.webp")
        #expect(try ImageDecoder.imageInfo(data) == ImageInfo(format: .webp, width: 512, height: 512))
        let bitmap = try ImageDecoder.decode(data, pixelFormat: .rgba8888)
        #expect(bitmap.width == 512 && bitmap.height == 512)
        // A world map: many distinct colours, not a blank or constant buffer.
        let colours = Set(stride(from: 0, to: bitmap.pixels.count, by: 4 * 97).map { i in
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
        let data = try Resources.data("plain_1-3-4-4.png")
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
        let data = try Resources.data("geography-class-1-1-0.jpg")
        #expect(try ImageDecoder.imageInfo(data) == ImageInfo(format: .jpeg, width: 256, height: 256))
        let rgba = try ImageDecoder.decode(data, pixelFormat: .rgba8888)
        #expect(stride(from: 3, to: rgba.pixels.count, by: 4).allSatisfy { rgba.pixels[$0] == 255 })
        for format in PixelFormat.allCases {
            #expect(try ImageDecoder.decode(data, pixelFormat: format) == rgba.converted(to: format), "\(format)")
        }
        let colours = Set(stride(from: 0, to: rgba.pixels.count, by: 4 * 61).map { i in
            rgba.pixels[i..<i + 3].reduce(0) { $0 << 8 | Int($1) }
        })
        #expect(colours.count > 50)
    }

    @Test func webPDecodesConsistentlyInEveryFormat() throws {
        let data = try Resources.data("martin-webp-0-0-0.webp")
        let rgba = try ImageDecoder.decode(data, pixelFormat: .rgba8888)
        for format in PixelFormat.allCases where format != .rgba8888 {
            #expect(try ImageDecoder.decode(data, pixelFormat: format) == rgba.converted(to: format), "\(format)")
        }
    }

    @Test func decodesEveryTileOfTheSharedFixturesWhenPresent() throws {
        // Reads the archives in place through the sqlite3 CLI when both are available.
        guard TestSupport.fixturesAvailable, FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3") else { return }
        for (file, size) in [("martin/geography-class-png.mbtiles", 256), ("martin/geography-class-jpg.mbtiles", 256),
                             ("martin/webp.mbtiles", 512), ("node-mbtiles/plain_2.mbtiles", 256)] {
            let tiles = try sqliteHexBlobs(TestSupport.fixture(file), "select hex(tile_data) from tiles")
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

import TilepackTestSupport

/// Blobs from an SQLite file through the `sqlite3` CLI (Storage is not a dependency of these tests).
func sqliteHexBlobs(_ path: String, _ sql: String) throws -> [Data] {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
    process.arguments = ["-readonly", path, sql]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: output, as: UTF8.self).split(separator: "\n").map { line in
        var data = Data(capacity: line.utf8.count / 2)
        var high: UInt8?
        for c in line.utf8 {
            let v = c <= 57 ? c - 48 : c - 55
            if let h = high { data.append(h << 4 | v); high = nil } else { high = v }
        }
        return data
    }
}
