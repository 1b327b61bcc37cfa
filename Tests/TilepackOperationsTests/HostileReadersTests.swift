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

    /// A PMTiles to PMTiles copy carries runs as ranges: the run of 2^32 - 1 tiles is one entry
    /// of the output, written in a blink, not four billion tiles one by one.
    @Test func convertToPMTilesCarriesARunOfBillionsAsARange() throws {
        let dir = try TemporaryDirectory("hostile-run-copy")
        let path = try Self.write(HostilePMTiles.billionsRun(), in: dir, "run.pmtiles")
        let report = try ArchiveConverter.run(source: path, destination: dir.file("copy.pmtiles"), options: ConvertOptions())
        #expect(report.tiles == Int(UInt32.max))
        let copy = try PMTilesArchive(path: dir.file("copy.pmtiles"))
        #expect(copy.header.addressedTiles == UInt64(UInt32.max))
        #expect(copy.header.tileEntries == 1 && copy.header.tileContents == 1)
        #expect(copy.header.minZoom == 0 && copy.header.maxZoom == 16)
        let inside = try #require(PMTilesFormat.tile(ofID: 3_000_000_000))  // at zoom 16, inside the run
        #expect(try copy.withTileBytes(at: inside) { Array($0) } == HostilePMTiles.pngBytes)
        #expect(try copy.zoomLevels().reduce(0) { $0 + $1.tileCount } == Int(UInt32.max))
    }

    /// Runs or tile by tile, the copy of a real archive is the same: the same tiles, entries and
    /// contents, and the same bytes as a writer fed the tiles one at a time.
    @Test func aCopyByRunsEqualsATileByTileCopy() throws {
        let dir = try TemporaryDirectory("run-copy")
        let source = TestSupport.fixture("pmtiles/stamen_toner_raster_CC-BY+ODbL_z3.pmtiles")
        _ = try ArchiveConverter.run(source: source, destination: dir.file("runs.pmtiles"), options: ConvertOptions())
        let input = try PMTilesArchive(path: source)
        let runs = try PMTilesArchive(path: dir.file("runs.pmtiles"))
        let writer = try PMTilesWriter(destination: dir.file("tiles.pmtiles"), metadata: try runs.metadata())
        try input.forEachTile { tile, bytes in try writer.addTile(at: tile, bytes: bytes) }
        try writer.finish()
        let runBytes = try Data(contentsOf: URL(fileURLWithPath: dir.file("runs.pmtiles")))
        let tileBytes = try Data(contentsOf: URL(fileURLWithPath: dir.file("tiles.pmtiles")))
        #expect(runs.header.addressedTiles == input.header.addressedTiles && runs.header.addressedTiles > 0)
        #expect(runBytes == tileBytes)
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
