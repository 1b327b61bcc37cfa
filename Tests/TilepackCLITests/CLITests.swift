import ArgumentParser
import Foundation
import Testing
import TilepackCore
import TilepackImaging
import TilepackOperations
import TilepackTestSupport
import TilepackUpdate

@testable import tilepack

/// The built `tilepack` binary, run as a user runs it.
enum Binary {
    static let url: URL? = TestSupport.tilepackBinary

    typealias Result = CommandOutput

    static func run(_ arguments: [String]) async throws -> Result {
        try await TestSupport.run(try #require(url, "the tilepack binary is built beside the tests"), arguments)
    }
}

/// The message ArgumentParser prints for a parse error.
func message(_ body: () throws -> Any) -> String? {
    do {
        _ = try body()
        return nil
    } catch {
        return Tilepack.message(for: error)
    }
}

@Suite struct ArgumentTests {
    // MARK: 1. Negative coordinates

    @Test func bboxTakesALeadingMinus() throws {
        let command = try #require(
            try CommandLineArguments.parse(["import", "tree", "out.mbtiles", "--bbox", "-10,-40,8,47"]) as? ImportCommand)
        #expect(command.bbox?.box == GeoBoundingBox(west: -10, south: -40, east: 8, north: 47))
        // ArgumentParser alone takes the value for an option: the joining is what makes it work.
        #expect(
            message { try Tilepack.parseAsRoot(["import", "tree", "out.mbtiles", "--bbox", "-10,-40,8,47"]) }?.contains("Missing value")
                == true)
    }

    /// `--agg-tiles-hash` reaches the options of every command that writes MBTiles; off by default.
    @Test func aggTilesHashFlagIsOffUnlessGiven() throws {
        let plain = try #require(try CommandLineArguments.parse(["import", "tree", "out.mbtiles"]) as? ImportCommand)
        #expect(!plain.writer.archive.aggregateTilesHash)
        let asked = try #require(try CommandLineArguments.parse(["import", "tree", "out.mbtiles", "--agg-tiles-hash"]) as? ImportCommand)
        #expect(asked.writer.archive.aggregateTilesHash)
        #expect(
            (try CommandLineArguments.parse(["convert", "a.tilepack", "b.mbtiles", "--agg-tiles-hash"]) as? ConvertCommand)?.writer.archive
                .aggregateTilesHash == true)
        #expect(
            (try CommandLineArguments.parse(["extract", "a.tilepack", "b.mbtiles", "--agg-tiles-hash"]) as? ExtractCommand)?.writer.archive
                .aggregateTilesHash == true)
        #expect(
            (try CommandLineArguments.parse(["merge", "a.mbtiles", "b.mbtiles", "c.mbtiles", "--agg-tiles-hash"]) as? MergeCommand)?
                .writer.archive.aggregateTilesHash == true)
        // --keep-mixed-compression likewise, for PMTiles outputs.
        #expect(!plain.writer.archive.keepsMixedTileCompression)
        #expect(
            (try CommandLineArguments.parse(["merge", "a.pmtiles", "b.pmtiles", "c.pmtiles", "--keep-mixed-compression"]) as? MergeCommand)?
                .writer.archive.keepsMixedTileCompression == true)
    }

    @Test func centerTakesALeadingMinusInLonLatOrder() throws {
        let command = try #require(
            try CommandLineArguments.parse(
                ["render", "a.mbtiles", "--center", "-33.9,18.4", "--zoom", "3", "--size", "10x10", "-o", "a.png"]) as? RenderCommand)
        #expect(command.center.coordinate.longitude == -33.9 && command.center.coordinate.latitude == 18.4)
        let capeTown = try #require(
            try CommandLineArguments.parse(
                ["render", "a.mbtiles", "--center", "18.4,-33.9", "--zoom", "1", "--size", "10x10", "-o", "a.png"]) as? RenderCommand)
        #expect(capeTown.center.coordinate.latitude == -33.9)
        // A negative zoom reaches --zoom too: refused for its range (a usage error, in validate()),
        // not for a missing value.
        let negative = message {
            try CommandLineArguments.parse([
                "render", "a.mbtiles", "--center", "18.4,-33.9", "--zoom", "-1", "--size", "10x10", "-o", "a.png",
            ])
        }
        #expect(negative?.contains("--zoom must be in 0...20, not -1.0") == true, "\(negative ?? "parsed")")
    }

    @Test func joiningTouchesOnlyNegativeNumbersAfterLongOptions() {
        #expect(
            CommandLineArguments.joiningNegativeValues(["--bbox", "-1,2,3,4", "-q", "--x", "-.5", "--y=-3", "--", "--z", "-4"])
                == ["--bbox=-1,2,3,4", "-q", "--x=-.5", "--y=-3", "--", "--z", "-4"])
        #expect(CommandLineArguments.joiningNegativeValues(["--force", "-q", "-o", "-1.png"]) == ["--force", "-q", "-o", "-1.png"])
    }

    // MARK: 2. Out-of-range values say so

    @Test func outOfRangeValuesSaySo() {
        let render = ["render", "a.mbtiles", "--zoom", "3", "--size", "10x10", "-o", "a.png", "--center"]
        let swapped = message { try CommandLineArguments.parse(render + ["51.54,-95"]) }
        #expect(swapped?.contains("latitude -95.0 is outside") == true, "\(swapped ?? "")")
        let lonLat = message { try CommandLineArguments.parse(render + ["10,100"]) }
        #expect(lonLat?.contains("the order is lon,lat: did you mean 100.0,10.0?") == true, "\(lonLat ?? "")")
        let longitude = message { try CommandLineArguments.parse(render + ["-200,10"]) }
        #expect(longitude?.contains("longitude -200.0 is outside -180...180") == true, "\(longitude ?? "")")
        let bbox = message { try CommandLineArguments.parse(["import", "t", "o.mbtiles", "--bbox", "-10,50,8,47"]) }
        #expect(bbox?.contains("south 50.0 is north of north 47.0") == true, "\(bbox ?? "")")
        let count = message { try CommandLineArguments.parse(["import", "t", "o.mbtiles", "--bbox", "1,2,3"]) }
        #expect(count?.contains("expected 4 numbers") == true, "\(count ?? "")")
    }

    // MARK: 6. Did you mean

    @Test func aMisspelledSubcommandGetsASuggestion() {
        for (typed, meant) in [
            ("imprt", "import"), ("improt", "import"), ("verfy", "verify"), ("inf", "info"), ("conver", "convert"), ("rendr", "render"),
        ] {
            let text = message { try CommandLineArguments.parse([typed, "x"]) }
            #expect(text?.contains("'\(typed)' is not a tilepack command. Did you mean '\(meant)'?") == true, "\(text ?? "")")
        }
        let far = message { try CommandLineArguments.parse(["frobnicate"]) }
        #expect(far?.contains("is not a tilepack command (commands: import, export") == true, "\(far ?? "")")
        #expect(throws: Never.self) { try CommandLineArguments.parse(["help", "import"]) }
    }

    @Test func theBinaryRunsTheSameSteps() async throws {
        let typo = try await Binary.run(["imprt", "a", "b"])
        #expect(typo.status == 64 && typo.stderr.contains("Did you mean 'import'?"), "\(typo)")
        let dir = try TemporaryDirectory()
        try Data([0x89, 0x50]).write(to: URL(fileURLWithPath: dir.file("t/0/0/0.png")).deletingLastPathComponent().creatingFolder())
        // The minus reaches --bbox in the real command too: the error is about the tree, not the option.
        let negative = try await Binary.run(["import", dir.file("t"), dir.file("o.mbtiles"), "--bbox", "-10,40,8,47", "--quiet"])
        #expect(
            !negative.stderr.contains("Missing value") && negative.stderr.contains("no file of the tree could be imported"), "\(negative)")
    }

    // MARK: 11. Not an archive: exit 2 everywhere

    @Test func notAnArchiveIsExitTwoInEveryCommand() async throws {
        let dir = try TemporaryDirectory()
        // PMTiles of a spec version tilepack does not read (v3 is read: see PMTilesConvertTests).
        let pmtiles = TestSupport.fixture("pmtiles/invalid_v4.pmtiles")
        for arguments in [
            ["verify", pmtiles], ["info", pmtiles], ["export", pmtiles, dir.file("out")],
            ["convert", pmtiles, dir.file("o.mbtiles")],
            ["render", pmtiles, "--center", "0,0", "--zoom", "1", "--size", "8x8", "-o", dir.file("o.png")],
        ] {
            let result = try await Binary.run(arguments)
            #expect(result.status == 2, "\(arguments): \(result)")
            #expect((result.stdout + result.stderr).contains("PMTiles"), "\(arguments): \(result)")
        }
    }

    @Test func verifyAndInfoTakeSeveralArchives() async throws {
        let good = TestSupport.fixture("martin/world_cities.mbtiles")
        let unindexed = TestSupport.fixture("node-mbtiles/unindexed.mbtiles")
        let two = try await Binary.run(["verify", "--quiet", good, unindexed])
        #expect(two.status == 0 && two.stdout.components(separatedBy: ": OK (").count == 3, "\(two)")
        let strict = try await Binary.run(["verify", "--strict", "--quiet", good, unindexed])
        #expect(strict.status == 1 && strict.stdout.contains("unindexed.mbtiles: FAILED"), "\(strict)")
        let withPMTiles = try await Binary.run(["verify", "--quiet", "--json", good, TestSupport.fixture("pmtiles/empty.pmtiles")])
        #expect(withPMTiles.status == 2)
        let reports = try JSONSerialization.jsonObject(with: Data(withPMTiles.stdout.utf8)) as? [[String: Any]]
        #expect(reports?.map { $0["exitCode"] as? Int } == [0, 2] && reports?.first?["verdict"] as? String == "OK")

        let info = try await Binary.run(["info", "--json", good, unindexed])
        #expect(info.status == 0)
        let infos = try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [[String: Any]]
        #expect(infos?.count == 2 && !info.stdout.contains("\\/"))
        let one = try await Binary.run(["info", "--json", good])
        #expect(try JSONSerialization.jsonObject(with: Data(one.stdout.utf8)) is [String: Any])
    }
}

extension URL {
    /// Creates the folder this file goes into; returns the file's URL.
    func creatingFolder() throws -> URL {
        try FileManager.default.createDirectory(at: deletingLastPathComponent(), withIntermediateDirectories: true)
        return self
    }
}

@Suite struct ProgressBarTests {
    final class Sink: Sendable {
        let text = Locked("")
        func write(_ s: String) { text.withLock { $0 += s } }
    }

    @Test func theLastLineIsPrintedOnceAndEnded() {
        let sink = Sink()
        let bar = ProgressBar(label: "import", write: { sink.write($0) })
        bar.draw(OperationProgress(done: 10, total: 10, bytes: 0, elapsed: 1))
        bar.finish()
        bar.draw(OperationProgress(done: 10, total: 10, bytes: 0, elapsed: 1.1))
        bar.finish()
        let text = sink.text.withLock { $0 }
        #expect(text.components(separatedBy: "10/10 tiles").count == 2, "\(text.debugDescription)")
        #expect(text.hasSuffix("\n") && text.filter { $0 == "\n" }.count == 1)
    }

    @Test func aLineWithoutTotalIsEndedBeforeTheResult() {
        let sink = Sink()
        let bar = ProgressBar(label: "verify", write: { sink.write($0) })
        bar.draw(OperationProgress(done: 256, total: nil, bytes: 0, elapsed: 1))
        bar.finish()
        #expect(sink.text.withLock { $0 }.hasSuffix("\n"))
        let nothing = Sink()
        ProgressBar(label: "x", write: { nothing.write($0) }).finish()
        #expect(nothing.text.withLock { $0 }.isEmpty)
    }

    @Test func theLineShowsTotalAndETA() {
        let line = ProgressBar.line(label: "verify", unit: "tiles", OperationProgress(done: 400, total: 1000, bytes: 0, elapsed: 2))
        #expect(line.contains("400/1000 tiles") && line.contains(" 40%") && line.contains("ETA 3s"), "\(line)")
    }
}

/// `diff` and `patch` as a user runs them: counts and identities printed, martin's patch applied
/// with a warning on standard error.
@Suite struct UpdateCommandTests {
    @Test func diffThenPatchPrintTheIdentities() async throws {
        let dir = try TemporaryDirectory()
        let old = TestSupport.fixture("martin/world_cities.mbtiles"), new = TestSupport.fixture("martin/world_cities_modified.mbtiles")
        let diff = try await Binary.run(["diff", old, new, dir.file("p.tppatch"), "--json"])
        #expect(diff.status == 0, "\(diff.stderr)")
        let report = try JSONDecoder().decode(DiffReport.self, from: Data(diff.stdout.utf8))
        #expect(report.added == 1 && report.deleted == 1 && report.changed == 1 && report.before.hasPrefix("tpid1:196:"))
        try FileManager.default.copyItem(atPath: old, toPath: dir.file("base.mbtiles"))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: dir.file("base.mbtiles"))
        let patch = try await Binary.run(["patch", dir.file("base.mbtiles"), dir.file("p.tppatch")])
        #expect(patch.status == 0 && patch.stdout.contains("now \(report.after) (checked)"), "\(patch.stdout) \(patch.stderr)")
        let again = try await Binary.run(["patch", dir.file("base.mbtiles"), dir.file("p.tppatch")])
        #expect(again.status == 0 && again.stdout.contains("already at the version this patch makes"), "\(again.stdout)")
        let info = try await Binary.run(["info", dir.file("base.mbtiles")])
        #expect(info.stdout.contains("identity   \(report.after)") && info.stdout.contains("version    2"), "\(info.stdout)")
        try FileManager.default.copyItem(atPath: old, toPath: dir.file("m.mbtiles"))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: dir.file("m.mbtiles"))
        let martin = try await Binary.run(["patch", dir.file("m.mbtiles"), TestSupport.fixture("martin/world_cities_diff.mbtiles")])
        #expect(martin.status == 0 && martin.stderr.contains("warning:") && martin.stderr.contains("nothing could be checked"))
    }
}

/// `tilepack tile` and `tilepack serve` run a program from a package beside the main one; a user
/// who built it for real work built it in release, and that build is the one that runs.
@Suite struct SiblingProgramTests {
    /// A package tree with a debug `tilepack` and both builds of `tiler/`'s program.
    static func tree(releaseAge: TimeInterval, debugAge: TimeInterval) throws -> (TemporaryDirectory, URL) {
        let root = try TemporaryDirectory("sibling")
        let fm = FileManager.default
        func program(_ path: String, age: TimeInterval) throws {
            let url = root.url.appendingPathComponent(path)
            try fm.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            #expect(fm.createFile(atPath: url.path, contents: Data("#!/bin/sh\n".utf8), attributes: [.posixPermissions: 0o755]))
            try fm.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -age)], ofItemAtPath: url.path)
        }
        try program(".build/debug/tilepack", age: 0)
        try program("tiler/.build/debug/tilepack-tile", age: debugAge)
        try program("tiler/.build/release/tilepack-tile", age: releaseAge)
        return (root, root.url.appendingPathComponent(".build/debug/tilepack"))
    }

    static let tiler = SiblingProgram(name: "tilepack-tile", package: "tiler", command: "tilepack tile")

    @Test func aReleaseBuildIsPreferredOverTheDebugOne() throws {
        let (root, tilepack) = try Self.tree(releaseAge: 60, debugAge: 3600)
        #expect(Self.tiler.locate(from: tilepack) == root.url.appendingPathComponent("tiler/.build/release/tilepack-tile").path)
    }

    @Test func aDebugBuildNewerThanTheReleaseOneIsTheOneADeveloperJustMade() throws {
        let (root, tilepack) = try Self.tree(releaseAge: 3600, debugAge: 60)
        #expect(Self.tiler.locate(from: tilepack) == root.url.appendingPathComponent("tiler/.build/debug/tilepack-tile").path)
    }

    @Test func withoutAReleaseBuildTheDebugOneRuns() throws {
        let (root, tilepack) = try Self.tree(releaseAge: 60, debugAge: 3600)
        try FileManager.default.removeItem(at: root.url.appendingPathComponent("tiler/.build/release"))
        #expect(Self.tiler.locate(from: tilepack) == root.url.appendingPathComponent("tiler/.build/debug/tilepack-tile").path)
    }
}
