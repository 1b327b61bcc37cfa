import Foundation
import Testing
import TilepackCore
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
        guard case .failure(.damaged(.png, let reason)) = check(png) else { Issue.record("not caught"); return }
        #expect(reason.contains("CRC"))
    }

    @Test func truncatedFilesAreCaught() throws {
        let png = try TreeFixtures.png(TileCoordinate(zoom: 1, x: 0, y: 1))
        guard case .failure(.damaged(.png, _)) = check(png.prefix(png.count - 5)) else { Issue.record("truncated PNG passed"); return }
        let jpeg = Data([0xFF, 0xD8, 0xFF, 0xE0, 0, 16] + [UInt8](repeating: 1, count: 40))
        guard case .failure(.damaged(.jpeg, let reason)) = check(jpeg) else { Issue.record("JPEG without EOI passed"); return }
        #expect(reason.contains("end-of-image"))
        #expect(try check(jpeg + Data([0xFF, 0xD9])).get() == .jpeg)
        var webp = Data("RIFF".utf8) + Data([100, 0, 0, 0]) + Data("WEBPVP8 ".utf8) + Data(count: 20)
        guard case .failure(.damaged(.webp, _)) = check(webp) else { Issue.record("short WebP passed"); return }
        webp.replaceSubrange(4..<8, with: [UInt8(webp.count - 8), 0, 0, 0])
        #expect(try check(webp).get() == .webp)
    }

    @Test func emptyAndUnknownBytes() {
        guard case .failure(.empty) = check(Data()) else { Issue.record("empty passed"); return }
        guard case .failure(.unknownFormat) = check(Data([0xFF, 0xFF, 0xFF, 0xFF])) else { Issue.record("unknown passed"); return }
    }
}
