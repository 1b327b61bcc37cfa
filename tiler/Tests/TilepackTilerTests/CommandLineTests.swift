import Foundation
import Testing
import TilepackTestSupport

@testable import TilepackTiler

/// `tilepack-tile`'s options as `tilepack tile --help` shows them (issue 42, part 5, item 1):
/// the options it shares with tilepack's other commands spelled and explained as there.
@Suite struct TileCommandLineTests {
    /// The program `swift test --package-path tiler` built beside this test bundle.
    static let program: URL? = {
        let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return [Bundle.main.bundleURL, here, here.deletingLastPathComponent()]
            .map { $0.appendingPathComponent("tilepack-tile") }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }()

    @Test func theSharedOptionsAreSpelledAsOnEveryTilepackCommand() async throws {
        let program = try #require(Self.program, "tilepack-tile is built beside the tests")
        let dump = try await TestSupport.run(program, ["--experimental-dump-help"])
        try #require(dump.status == 0, "\(dump)")
        let root = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        let command = try #require(root["command"] as? [String: Any])
        let options = (command["arguments"] as? [[String: Any]] ?? []).compactMap { argument -> SharedOptionRules.Option? in
            guard argument["kind"] as? String != "positional" else { return nil }
            let names = argument["names"] as? [[String: Any]] ?? []
            return SharedOptionRules.Option(
                long: names.compactMap { $0["kind"] as? String == "long" ? $0["name"] as? String : nil }.first ?? "",
                short: names.compactMap { $0["kind"] as? String == "short" ? $0["name"] as? String : nil }.first,
                help: argument["abstract"] as? String ?? "", valueName: argument["valueName"] as? String)
        }
        let problems = SharedOptionRules.problems(command: "tilepack tile", options: options)
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        let longs = Set(options.map(\.long))
        #expect(longs.isSuperset(of: ["quiet", "min-zoom", "max-zoom", "zoom", "bbox", "force", "index"]), "\(longs.sorted())")
    }

    /// One end of the zooms given, the other is the raster's (never past the one given).
    @Test func oneEndOfTheZoomsTakesTheOtherFromTheRaster() throws {
        // A raster at zoom 16's resolution that fits one tile at zoom 8.
        let pixel = TilePlan.resolution(zoom: 16, tileSize: 256)
        let side = 256 * 256
        let extent = (minX: 0.0, minY: 0.0, maxX: pixel * Double(side), maxY: pixel * Double(side))
        func plan(_ min: Int?, _ max: Int?) throws -> ClosedRange<Int> {
            try TilePlan(
                extent: extent, pixelSize: pixel, width: side, height: side, tileSize: 256, zooms: nil, minZoom: min, maxZoom: max,
                clip: nil
            ).zooms
        }
        #expect(try plan(nil, nil) == 8...16)
        #expect(try plan(12, nil) == 12...16)
        #expect(try plan(nil, 10) == 8...10)
        #expect(try plan(nil, 5) == 5...5)
        #expect(try plan(18, nil) == 18...18)
    }
}
