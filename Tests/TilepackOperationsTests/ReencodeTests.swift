import Foundation
import Testing
import TilepackCore
import TilepackImaging
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

/// `convert --format`: tiles re-encoded, each zoom's bytes and PSNR reported.
@Suite struct ReencodeTests {
    static let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path

    static func convert(_ encoding: TileEncoding, to name: String, in dir: TemporaryDirectory) throws -> ConvertReport {
        var options = ConvertOptions()
        options.format = encoding
        return try ArchiveConverter.run(source: sample, destination: dir.file(name), options: options)
    }

    @Test func lossyWebPWithAQualityPerZoom() throws {
        let dir = try TemporaryDirectory("reencode")
        let mixed = try Self.convert(try TileEncoding(format: .webp, quality: "0-2:95,3-:20"), to: "mixed.mbtiles", in: dir)
        #expect(mixed.tiles == 341)
        let zooms = try #require(mixed.reencoded)
        #expect(zooms.map(\.zoom) == [0, 1, 2, 3, 4] && zooms.reduce(0) { $0 + $1.tiles } == 341)
        #expect(zooms.reduce(0) { $0 + $1.bytesBefore } == mixed.bytesIn && zooms.reduce(0) { $0 + $1.bytesAfter } == mixed.bytesOut)
        // The lower quality shows in the PSNR and the bytes.
        let high = try #require(zooms[2].medianPSNR), low = try #require(zooms[3].medianPSNR)
        #expect(high > low && low > 20, "\(high) dB at 95, \(low) dB at 20")
        let archive = try MBTilesArchive(path: dir.file("mixed.mbtiles"))
        #expect(try archive.metadata().entries["format"] == "webp")
        var webp = 0
        try archive.forEachTile { _, bytes in if TileFormat.sniff(bytes) == .webp { webp += 1 } }
        #expect(webp == 341)
        // Against one quality of 95 everywhere: the zooms at 20 are smaller, those at 95 the same.
        let ninetyFive = try #require(try Self.convert(try TileEncoding(format: .webp, quality: "95"), to: "95.pmtiles", in: dir).reencoded)
        #expect(zooms[4].bytesAfter < ninetyFive[4].bytesAfter && zooms[1].bytesAfter == ninetyFive[1].bytesAfter)
    }

    /// Lossless WebP and PNG keep every pixel: the PSNR says "identical".
    @Test func losslessKeepsEveryPixel() throws {
        let dir = try TemporaryDirectory("reencode-lossless")
        for (encoding, name) in [
            (try TileEncoding(format: .webp, lossless: true), "l.tilepack"), (try TileEncoding(format: .png), "p.pmtiles"),
        ] {
            let zooms = try #require(try Self.convert(encoding, to: name, in: dir).reencoded)
            #expect(zooms.allSatisfy { $0.lowestPSNR == 99 && $0.medianPSNR == 99 }, "\(encoding): \(zooms)")
        }
    }

    @Test func theQualityGrammar() throws {
        let e = try TileEncoding(format: .jpeg, quality: "0-12:85,13-16:70,17-:55")
        #expect(e.quality(atZoom: 0) == 85 && e.quality(atZoom: 12) == 85 && e.quality(atZoom: 13) == 70 && e.quality(atZoom: 30) == 55)
        #expect(try TileEncoding(format: .webp, quality: "80").quality(atZoom: 7) == 80)
        #expect(try TileEncoding(format: .webp).quality(atZoom: 3) == TileEncoding.defaultQuality)
        for bad in ["0", "101", "0-12:85,10-16:70", "12-5:80", "a:80", "0-12", "0-12:85:3", "13-:70,0-2:80"] {
            #expect(throws: ImagingError.self, "\(bad)") { try TileEncoding(format: .webp, quality: bad) }
        }
        #expect(throws: ImagingError.self) { try TileEncoding(format: .png, quality: "80") }
        #expect(throws: ImagingError.self) { try TileEncoding(format: .jpeg, lossless: true) }
        #expect(throws: ImagingError.self) { try TileEncoding(format: .pbf) }
    }

    /// Raw pixels and --format do not go together, and nothing is written.
    @Test func rawPixelsAreRefused() throws {
        let dir = try TemporaryDirectory("reencode-raw")
        var options = ConvertOptions()
        options.format = try TileEncoding(format: .webp)
        options.encode = .rgba8888
        #expect(throws: OperationError.self) {
            try ArchiveConverter.run(source: Self.sample, destination: dir.file("x.tilepack"), options: options)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }
}
