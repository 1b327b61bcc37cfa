import Foundation
import Testing
import TilepackCore
import TilepackOperations
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

/// Issue 47, item 5: a PMTiles file of under 2 KB whose runs address 2^40 tiles. PMTiles to
/// PMTiles carries the runs as runs (`convert`, in time bounded by the file); every output that
/// writes each tile on its own (MBTiles rows, a bundle's index, a z/x/y tree; `extract`, which cuts
/// tiles out of the runs) refuses a count past `--max-tiles` before it writes anything, naming the
/// count, the limit and the option. Each command runs under a memory limit and a deadline.
@Suite struct PMTilesRunLimitTests {
    /// 256 runs of 2^32 - 1 tiles, one after another from tile id 0 (zooms 0 to 20), all the same
    /// 12 bytes: 2^40 - 256 tiles.
    static let tileCount = 256 * (Int(UInt32.max))

    static func hugeRuns(in dir: TemporaryDirectory) throws -> String {
        var entries: [HostilePMTiles.Entry] = []
        var id: UInt64 = 0
        for _ in 0..<256 {
            entries.append(
                HostilePMTiles.Entry(tileID: id, runLength: UInt64(UInt32.max), length: 12, offset: 0))
            id += UInt64(UInt32.max)
        }
        let bytes = HostilePMTiles.file(root: HostilePMTiles.directory(entries), tileData: HostilePMTiles.pngBytes, maxZoom: 20)
        let path = dir.file("huge.pmtiles")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Runs the command with at most 8 GiB of address space and `timeout` seconds.
    static func tilepack(_ arguments: [String], timeout: Double = 30) async throws -> CommandOutput? {
        guard let binary = TestSupport.tilepackBinary else { return nil }
        let quoted = ([binary.path] + arguments).map { "'\($0)'" }.joined(separator: " ")
        return try await TestSupport.run(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "ulimit -v 8388608; exec \(quoted)"], timeout: timeout)
    }

    /// The words of a refusal: the count, the limit, the option.
    static func refusal(_ output: CommandOutput, count: Int, limit: Int) -> Bool {
        output.status == 1 && !output.timedOut && output.stderr.contains("\(count) tiles")
            && output.stderr.contains("over the limit of \(limit) tiles") && output.stderr.contains("--max-tiles")
    }

    @Test func pmtilesToPMTilesCarriesTheRunsInTimeBoundedByTheFile() async throws {
        let dir = try TemporaryDirectory("huge-runs")
        let input = try Self.hugeRuns(in: dir)
        let output = dir.file("copy.pmtiles")
        guard let result = try await Self.tilepack(["convert", input, output, "-q"]) else { return }
        #expect(result.status == 0 && !result.timedOut, "\(result.stderr)")
        let copy = try PMTilesArchive(path: output)
        #expect(try copy.tileCount() == Self.tileCount)
        #expect(try FileManager.default.attributesOfItem(atPath: output)[.size] as? Int ?? .max < 64 << 10)
    }

    @Test(arguments: ["out.mbtiles", "out.tilepack"])
    func convertIntoAnOutputOfRowsRefusesUpFront(_ name: String) async throws {
        let dir = try TemporaryDirectory("huge-runs")
        let input = try Self.hugeRuns(in: dir)
        guard let result = try await Self.tilepack(["convert", input, dir.file(name), "-q"]) else { return }
        #expect(Self.refusal(result, count: Self.tileCount, limit: 500_000_000), "\(result.status) \(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["huge.pmtiles"], "nothing written")
    }

    @Test func exportRefusesUpFront() async throws {
        let dir = try TemporaryDirectory("huge-runs")
        let input = try Self.hugeRuns(in: dir)
        guard let result = try await Self.tilepack(["export", input, dir.file("tree"), "-q"]) else { return }
        #expect(Self.refusal(result, count: Self.tileCount, limit: 500_000_000), "\(result.status) \(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["huge.pmtiles"], "nothing written")
    }

    @Test(arguments: ["out.mbtiles", "out.pmtiles"])
    func extractRefusesUpFrontWithTheCountItSelects(_ name: String) async throws {
        let dir = try TemporaryDirectory("huge-runs")
        let input = try Self.hugeRuns(in: dir)
        // Zooms 0-16: (4^17 - 1) / 3 tiles.
        let selected = ((1 << 34) - 1) / 3
        guard let result = try await Self.tilepack(["extract", input, dir.file(name), "--max-zoom", "16", "-q"]) else { return }
        #expect(Self.refusal(result, count: selected, limit: 500_000_000), "\(result.status) \(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["huge.pmtiles"], "nothing written")
        // A box of Europe at zoom 20 selects fewer (counted from the runs as squares, never visited).
        guard
            let boxed = try await Self.tilepack([
                "extract", input, dir.file(name), "--min-zoom", "20", "--bbox", "-10,35,30,60", "--max-tiles", "1000", "-q",
            ])
        else { return }
        #expect(boxed.status == 1 && !boxed.timedOut && boxed.stderr.contains("over the limit of 1000 tiles"), "\(boxed.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["huge.pmtiles"], "nothing written")
    }

    @Test func mergeRefusesUpFront() async throws {
        let dir = try TemporaryDirectory("huge-runs")
        let input = try Self.hugeRuns(in: dir)
        guard let result = try await Self.tilepack(["merge", input, dir.file("out.pmtiles"), "-q"]) else { return }
        #expect(Self.refusal(result, count: Self.tileCount, limit: 500_000_000), "\(result.status) \(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["huge.pmtiles"], "nothing written")
    }

    @Test func diffRefusesUpFront() async throws {
        // diff hashes every tile of both archives (their content identities): 2 x 2^40 tiles.
        let dir = try TemporaryDirectory("huge-runs")
        let input = try Self.hugeRuns(in: dir)
        guard let result = try await Self.tilepack(["diff", input, input, dir.file("p.patch")]) else { return }
        #expect(Self.refusal(result, count: 2 * Self.tileCount, limit: 500_000_000), "\(result.status) \(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["huge.pmtiles"], "nothing written")
    }

    @Test func aMapLibreOfflineExportRefusesUpFrontAndReadsOnlyItsSelection() async throws {
        let dir = try TemporaryDirectory("huge-runs")
        let input = try Self.hugeRuns(in: dir)
        let offline = ["--maplibre-offline", "--style-url", "https://example.com/style.json", "-q"]
        guard let result = try await Self.tilepack(["export", input, dir.file("pack.db")] + offline) else { return }
        #expect(Self.refusal(result, count: Self.tileCount, limit: 500_000_000), "\(result.status) \(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["huge.pmtiles"], "nothing written")
        // A small box at zoom 12: its tiles alone are read, not the runs' billions.
        guard
            let small = try await Self.tilepack(
                ["export", input, dir.file("pack.db"), "--bbox", "7.0,46.0,7.2,46.1", "--min-zoom", "12", "--max-zoom", "12"] + offline)
        else { return }
        #expect(small.status == 0 && !small.timedOut, "\(small.stderr)")
        #expect(FileManager.default.fileExists(atPath: dir.file("pack.db")))
    }

    @Test func maxTilesRaisesOrLowersTheLimitAndHelpStatesTheDefault() async throws {
        let dir = try TemporaryDirectory("max-tiles")
        let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
        let count = try openTileArchive(path: sample).tileCount()
        guard let low = try await Self.tilepack(["convert", sample, dir.file("a.mbtiles"), "--max-tiles", "\(count - 1)", "-q"]) else {
            return
        }
        #expect(Self.refusal(low, count: count, limit: count - 1), "\(low.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("a.mbtiles")))
        let enough = try await Self.tilepack(["convert", sample, dir.file("a.mbtiles"), "--max-tiles", "\(count)", "-q"])
        #expect(enough?.status == 0, "\(enough?.stderr ?? "")")
        let tree = try await Self.tilepack(["export", sample, dir.file("tree"), "--max-tiles", "\(count - 1)", "-q"])
        #expect(tree.map { Self.refusal($0, count: count, limit: count - 1) } ?? false, "\(tree?.stderr ?? "")")
        #expect(!FileManager.default.fileExists(atPath: dir.file("tree")))
        for command in ["convert", "export", "extract", "merge", "diff"] {
            let help = try await Self.tilepack([command, "--help"])
            #expect(help?.stdout.contains("--max-tiles") == true && help?.stdout.contains("500000000") == true, "\(command)")
        }
    }
}
