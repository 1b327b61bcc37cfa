import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

/// Issue 29's reader classes through the operations: a PMTiles run of 2^32 - 1 tiles (13), a
/// header's gzip claim (20), 254-byte output names (20). Each runs in well under a second.
@Suite struct HostileReadersTests {
    static func write(_ bytes: [UInt8], in dir: TemporaryDirectory, _ name: String) throws -> String {
        let path = dir.file(name)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func infoVerifyAndExtractTakeARunOfBillionsAsARange() throws {
        let dir = try TemporaryDirectory("hostile-runs")
        let path = try Self.write(HostilePMTiles.billionsRun(), in: dir, "run.pmtiles")
        let info = try ArchiveInspector.run(path: path)
        #expect(info.tiles == Int(UInt32.max))
        #expect(info.levels.count == 17 && info.levels[8].tiles == 1 << 16 && info.levels[8].maxX == 255)
        #expect(info.distinctTiles == 1)
        let report = ArchiveVerifier.run(path: path)
        #expect(report.tiles == Int(UInt32.max))
        #expect(!report.findings.contains { $0.message.contains("reading the tiles failed") }, "\(report.findings)")
        var options = ExtractOptions()
        options.maxZoom = 0
        let extracted = try TileExtractor.run(source: path, destination: dir.file("z0.mbtiles"), options: options)
        #expect(extracted.tiles == 1)
        options.maxZoom = 16
        options.bounds = GeoBoundingBox(west: 2.33, south: 48.85, east: 2.36, north: 48.87)
        let paris = try TileExtractor.run(source: path, destination: dir.file("paris.pmtiles"), options: options)
        #expect(paris.tiles > 17 && paris.tiles < 200, "\(paris.tiles)")
    }

    @Test func verifyFlagsTilesTheHeaderCallsGzipThatAreNot() throws {
        let dir = try TemporaryDirectory("hostile-gzip")
        let root = HostilePMTiles.directory([HostilePMTiles.Entry(tileID: 0, runLength: 1, length: 12, offset: 0)])
        let lying = try Self.write(
            HostilePMTiles.file(root: root, tileData: HostilePMTiles.pngBytes, maxZoom: 0, tileCompression: 2), in: dir, "lying.pmtiles")
        let report = ArchiveVerifier.run(path: lying)
        #expect(
            report.findings.contains { $0.severity == .error && $0.message.contains("gzip-compressed, but 1 tiles are not gzip") },
            "\(report.findings)")
        // The same tile with the header saying "none": no such finding.
        let honest = try Self.write(
            HostilePMTiles.file(root: root, tileData: HostilePMTiles.pngBytes, maxZoom: 0, tileCompression: 1), in: dir, "honest.pmtiles")
        #expect(!ArchiveVerifier.run(path: honest).findings.contains { $0.message.contains("gzip") })
    }

    @Test func aValid254ByteOutputNameIsWrittenInEveryFormat() throws {
        let dir = try TemporaryDirectory("long-names")
        let source = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
        for ext in ["mbtiles", "pmtiles", "tilepack"] {
            let name = String(repeating: "n", count: 254 - ext.count - 1) + "." + ext
            #expect(name.utf8.count == 254)
            _ = try ArchiveConverter.run(source: source, destination: dir.file(name), options: ConvertOptions())
            #expect(FileManager.default.fileExists(atPath: dir.file(name)))
        }
        // Names of multi-byte characters are cut at a character boundary.
        let accented = String(repeating: "é", count: 120) + ".pmtiles"  // 248 bytes
        _ = try ArchiveConverter.run(source: source, destination: dir.file(accented), options: ConvertOptions())
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).count == 4)
    }
}
