import ArgumentParser
import Foundation
import Testing
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

@testable import tilepack

/// What a newcomer meets first: `--help`, README's recipes, exit statuses (issue 29).
@Suite struct NewcomerTests {
    // MARK: 4. --help names every format, and coordinates longitude first

    /// Every command that reads or writes archives names every format, PMTiles included, from the
    /// one list (`TileArchiveFormat`).
    @Test func everyArchiveCommandNamesEveryFormat() {
        let commands: [any ParsableCommand.Type] = [
            Tilepack.self, ImportCommand.self, ConvertCommand.self, VerifyCommand.self, InfoCommand.self,
            ExportCommand.self, RenderCommand.self, ExtractCommand.self, MergeCommand.self,
        ]
        for command in commands {
            let help = command == Tilepack.self ? Tilepack.helpMessage(columns: 1000) : Tilepack.helpMessage(for: command, columns: 1000)
            for format in TileArchiveFormat.allCases {
                #expect(help.contains(format.fileExtension), "\(command) --help omits \(format.fileExtension):\n\(help)")
            }
            #expect(!help.contains("MBTiles and LZ4 bundles"), "\(command) --help:\n\(help)")
        }
    }

    /// The example in `render --help` parses, and its centre is London (longitude first).
    @Test func renderExampleIsLondonLongitudeFirst() throws {
        let help = Tilepack.helpMessage(for: RenderCommand.self, columns: 1000)
        let line = try #require(help.split(separator: "\n").first { $0.contains("Example: tilepack render") })
        let words = line.split(separator: " ").map(String.init)
        let arguments = Array(words.drop { $0 != "render" }).map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "'")) }
        let command = try #require(try CommandLineArguments.parse(arguments) as? RenderCommand)
        #expect(
            abs(command.center.coordinate.latitude - 51.54) < 0.01 && abs(command.center.coordinate.longitude + 0.01) < 0.01,
            "\(line)")
    }

    // MARK: 10. README's GNU parallel recipe numbers the parts from 0

    /// Runs README's `seq A B | parallel ...` line as GNU parallel would (`{}` the input line,
    /// `{#}` the job number from 1): the shards are exactly 0..<N of N, each parsed by `import`.
    @Test func readmeParallelRecipeCoversEveryShard() throws {
        let readme = try String(contentsOf: TestSupport.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let line = try #require(
            readme.split(separator: "\n").first { $0.contains("| parallel ") && $0.contains("--shard") },
            "README has a GNU parallel line with --shard")
        let words = line.split(separator: " ").map(String.init)
        #expect(words.first == "seq")
        let first = try #require(Int(words[1])), last = try #require(Int(words[2]))
        let command = Array(words.drop { $0 != "parallel" }.dropFirst())
        #expect(command.first == "tilepack")
        let template = Array(command.dropFirst())
        var shards: [ShardSpec] = []
        for (job, input) in (first...last).enumerated() {
            let arguments = template.map {
                $0.replacingOccurrences(of: "{#}", with: "\(job + 1)").replacingOccurrences(of: "{}", with: "\(input)")
            }
            let parsed = try #require(try CommandLineArguments.parse(arguments) as? ImportCommand, "\(arguments)")
            shards.append(try #require(parsed.shard?.spec, "\(arguments)"))
        }
        let count = try #require(shards.first?.count)
        #expect(shards.map(\.index).sorted() == Array(0..<count) && shards.allSatisfy { $0.count == count }, "\(line)")
    }

    // MARK: 21. import --append into a file with triggers: exit 1, a message about triggers

    @Test func appendIntoAFileWithTriggersIsExitOne() async throws {
        let dir = try TemporaryDirectory()
        let archive = dir.file("a.mbtiles")
        let tree = TestSupport.packageRoot.appendingPathComponent("samples/tiles").path
        let made = try await Binary.run(["import", tree, archive, "--max-zoom", "1", "--quiet"])
        try #require(made.status == 0, "\(made)")
        let sqlite = Process()
        sqlite.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        sqlite.arguments = ["sqlite3", archive, "CREATE TRIGGER t AFTER INSERT ON tiles BEGIN SELECT 1; END;"]
        try sqlite.run()
        sqlite.waitUntilExit()
        try #require(sqlite.terminationStatus == 0)
        let result = try await Binary.run(["import", tree, archive, "--append", "--min-zoom", "2", "--max-zoom", "2", "--quiet"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("triggers (t)") && !result.stderr.contains("version"), "\(result)")
    }

    // MARK: 2. extract: a box of nothing fails, a box across the antimeridian is said once

    @Test func extractOfASwappedBoxFailsAndABoxAcrossTheAntimeridianIsSaidOnce() async throws {
        let dir = try TemporaryDirectory()
        let world = dir.file("world.mbtiles")
        let made = try await Binary.run(["import", TestSupport.packageRoot.appendingPathComponent("samples/tiles").path, world, "--quiet"])
        try #require(made.status == 0, "\(made)")
        let berlin = dir.file("berlin.mbtiles")
        let part = try await Binary.run(["extract", world, berlin, "--bbox", "13.3,52.45,13.5,52.56", "--min-zoom", "3", "--quiet"])
        try #require(part.status == 0, "\(part)")
        let swapped = try await Binary.run(["extract", berlin, dir.file("out.mbtiles"), "--bbox", "52.45,13.3,52.56,13.5", "--quiet"])
        #expect(
            swapped.status == 1 && swapped.stderr.contains("the box 52.45,13.3,52.56,13.5 (west,south,east,north) lies outside the bounds"),
            "\(swapped)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("out.mbtiles")))
        let across = try await Binary.run(["extract", world, dir.file("across.mbtiles"), "--bbox", "170,-10,-170,10", "--quiet"])
        let note = "the box crosses the antimeridian (west 170 > east -170)"
        #expect(across.status == 0 && across.stderr.components(separatedBy: note).count == 2, "\(across)")
    }

    // MARK: 1. render -o onto its own input

    @Test func renderRefusesToWriteOverAnInput() async throws {
        let dir = try TemporaryDirectory()
        let archive = dir.file("a.mbtiles")
        let made = try await Binary.run([
            "import", TestSupport.packageRoot.appendingPathComponent("samples/tiles").path, archive, "--max-zoom", "1", "--quiet",
        ])
        try #require(made.status == 0, "\(made)")
        try FileManager.default.createSymbolicLink(atPath: dir.file("link.mbtiles"), withDestinationPath: archive)
        let result = try await Binary.run([
            "render", archive, "--center", "0,0", "--zoom", "1", "--size", "64x64", "-o", dir.file("link.mbtiles"), "--force",
        ])
        #expect(result.status == 1 && result.stderr.contains("the output is the input \(archive)"), "\(result)")
        let verify = try await Binary.run(["verify", archive])
        #expect(verify.status == 0, "\(verify)")
    }
}
