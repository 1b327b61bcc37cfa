import Foundation
import Testing
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage

@testable import TilepackOperations

@Suite struct TileIntegrityTests {
    func check(_ data: Data) -> Result<TileFormat, TileIntegrity.Finding> {
        data.withUnsafeBytes { bytes in Result { () throws(TileIntegrity.Finding) in try TileIntegrity.check(bytes) } }
    }

    @Test func soundTilesPass() throws {
        let png = try TreeFixtures.png(TileCoordinate(zoom: 1, x: 0, y: 1))
        #expect(try check(png).get() == .png)
        let gzip = Data([0x1F, 0x8B, 0x08, 0, 0, 0, 0, 0, 0, 3] + [UInt8](repeating: 0, count: 10))
        #expect(try check(gzip).get() == .pbf)
    }

    @Test func pngWithAFlippedBitFailsItsChunkCRC() throws {
        var png = try TreeFixtures.png(TileCoordinate(zoom: 1, x: 0, y: 1))
        png[png.count / 2] ^= 0x10
        guard case .failure(.damaged(.png, let reason)) = check(png) else {
            Issue.record("not caught")
            return
        }
        #expect(reason.contains("CRC"))
    }

    @Test func truncatedFilesAreCaught() throws {
        let png = try TreeFixtures.png(TileCoordinate(zoom: 1, x: 0, y: 1))
        guard case .failure(.damaged(.png, _)) = check(png.prefix(png.count - 5)) else {
            Issue.record("truncated PNG passed")
            return
        }
        let jpeg = Data([0xFF, 0xD8, 0xFF, 0xE0, 0, 16] + [UInt8](repeating: 1, count: 40))
        guard case .failure(.damaged(.jpeg, let reason)) = check(jpeg) else {
            Issue.record("JPEG without EOI passed")
            return
        }
        #expect(reason.contains("end-of-image"))
        #expect(try check(jpeg + Data([0xFF, 0xD9])).get() == .jpeg)
        var webp = Data("RIFF".utf8) + Data([100, 0, 0, 0]) + Data("WEBPVP8 ".utf8) + Data(count: 20)
        guard case .failure(.damaged(.webp, _)) = check(webp) else {
            Issue.record("short WebP passed")
            return
        }
        webp.replaceSubrange(4..<8, with: [UInt8(webp.count - 8), 0, 0, 0])
        #expect(try check(webp).get() == .webp)
    }

    @Test func emptyAndUnknownBytes() {
        guard case .failure(.empty) = check(Data()) else {
            Issue.record("empty passed")
            return
        }
        guard case .failure(.unknownFormat) = check(Data([0xFF, 0xFF, 0xFF, 0xFF])) else {
            Issue.record("unknown passed")
            return
        }
    }

    /// A PNG of hand-made chunks: several data chunks of one length and of others, so that the
    /// combined CRC reuses and remakes its operator; `trailing` bytes after IEND.
    static func chunkedPNG(trailing: [UInt8]) -> [UInt8] {
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let typed = Array(type.utf8) + data
            let crc = typed.withUnsafeBytes { BundleFormat.crc32($0) }
            return withUnsafeBytes(of: UInt32(data.count).bigEndian, Array.init) + typed + withUnsafeBytes(of: crc.bigEndian, Array.init)
        }
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        png += chunk("IHDR", [0, 0, 1, 0, 0, 0, 1, 0, 8, 2, 0, 0, 0])
        for (i, length) in [8192, 8192, 8192, 300, 8192, 0, 17].enumerated() {
            png += chunk("IDAT", (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) })
        }
        png += chunk("tEXt", Array("Comment\0made by hand".utf8))
        png += chunk("IEND", [])
        return png + trailing
    }

    @Test func theWholeFileCRCIsDerivedFromAPNGsChunks() throws {
        for trailing in [[], [0, 0, 0], Array("junk after IEND".utf8)] {
            let png = Self.chunkedPNG(trailing: trailing)
            let result = try png.withUnsafeBytes { try TileIntegrity.checkComputingCRC($0) }
            #expect(result.format == .png)
            #expect(result.crc == png.withUnsafeBytes { BundleFormat.crc32($0) })
        }
        // Damage is still found, and other formats have no derived CRC.
        var damaged = Self.chunkedPNG(trailing: [])
        damaged[5000] ^= 1
        #expect(throws: TileIntegrity.Finding.self) { try damaged.withUnsafeBytes { try TileIntegrity.checkComputingCRC($0) } }
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0, 16] + [UInt8](repeating: 1, count: 40) + [0xFF, 0xD9]
        let checked = try jpeg.withUnsafeBytes { try TileIntegrity.checkComputingCRC($0) }
        #expect(checked.format == .jpeg && checked.crc == nil)
    }
}
