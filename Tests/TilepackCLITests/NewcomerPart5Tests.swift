import ArgumentParser
import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackTestSupport

@testable import tilepack

/// What the new user tripped on (issue 42, part 5): each test fails without its change.
@Suite struct NewcomerPart5Tests {
    /// The world sample tree (zooms 0-4) imported, then the part around 4-8 E, 44-47 N extracted:
    /// an archive whose metadata says bounds 4,44,8,47 and which holds the world tiles of the low zooms.
    static func alpsArchive(in dir: TemporaryDirectory, _ extension: String = "mbtiles") async throws -> String {
        let world = dir.file("world.mbtiles")
        let made = try await Binary.run(["import", TestSupport.packageRoot.appendingPathComponent("samples/tiles").path, world, "--quiet"])
        try #require(made.status == 0, "\(made)")
        let part = dir.file("alps.\(`extension`)")
        let cut = try await Binary.run(["extract", world, part, "--bbox", "4,44,8,47", "--quiet"])
        try #require(cut.status == 0, "\(cut)")
        return part
    }

    // MARK: 1. The shared options are spelled one way and mean one thing on every command

    /// Every command's options, from the binary's own description of its commands
    /// (`--experimental-dump-help`, what ArgumentParser's `--help` prints from), checked
    /// against the one spelling and meaning of each shared option (``SharedOptionRules``).
    @Test func everyCommandSpellsTheSharedOptionsOneWay() async throws {
        let dump = try await Binary.run(["--experimental-dump-help"])
        try #require(dump.status == 0, "\(dump)")
        let root = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        var commands: [(name: String, options: [SharedOptionRules.Option])] = []
        func walk(_ command: [String: Any], path: String) {
            let name = path.isEmpty ? (command["commandName"] as? String ?? "") : path + " " + (command["commandName"] as? String ?? "")
            let arguments = command["arguments"] as? [[String: Any]] ?? []
            let options = arguments.compactMap { argument -> SharedOptionRules.Option? in
                guard argument["kind"] as? String != "positional" else { return nil }
                let names = argument["names"] as? [[String: Any]] ?? []
                let long = names.compactMap { $0["kind"] as? String == "long" ? $0["name"] as? String : nil }
                let short = names.compactMap { $0["kind"] as? String == "short" ? $0["name"] as? String : nil }
                return SharedOptionRules.Option(
                    long: long.first ?? "", short: short.first, help: argument["abstract"] as? String ?? "",
                    valueName: argument["valueName"] as? String)
            }
            commands.append((name, options))
            for sub in command["subcommands"] as? [[String: Any]] ?? [] { walk(sub, path: name) }
        }
        walk(try #require(root["command"] as? [String: Any]), path: "")
        #expect(commands.count > 20, "\(commands.map(\.name))")
        var problems: [String] = []
        for command in commands {
            problems += SharedOptionRules.problems(command: command.name, options: command.options)
        }
        // Every command that draws a progress bar takes -q/--quiet (tile: see the tiler's own test).
        for name in ["import", "export", "convert", "verify", "fetch", "extract", "merge"] {
            let options = commands.first { $0.name == "tilepack \(name)" }?.options ?? []
            if !options.contains(where: { $0.long == "quiet" }) {
                problems.append("tilepack \(name) draws a progress bar and has no --quiet")
            }
        }
        // fetch takes the zooms as import and extract do; --zoom A-B stays as its alias.
        let fetch = commands.first { $0.name == "tilepack fetch" }?.options.map(\.long) ?? []
        if !(fetch.contains("min-zoom") && fetch.contains("max-zoom") && fetch.contains("zoom")) {
            problems.append("tilepack fetch: --min-zoom, --max-zoom and the alias --zoom, not \(fetch)")
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    /// `fetch --min-zoom 3 --max-zoom 5` and its alias `--zoom 3-5` ask for the same zooms;
    /// `--max-zoom` alone starts at 0.
    @Test func fetchTakesMinAndMaxZoomAndKeepsZoomAsAnAlias() throws {
        let base = ["fetch", "https://tiles.example/{z}/{x}/{y}.png", "out.mbtiles", "--bbox", "13.3,52.45,13.5,52.56"]
        let split = try #require(try CommandLineArguments.parse(base + ["--min-zoom", "3", "--max-zoom", "5"]) as? FetchCommand)
        let alias = try #require(try CommandLineArguments.parse(base + ["--zoom", "3-5"]) as? FetchCommand)
        let deepest = try #require(try CommandLineArguments.parse(base + ["--max-zoom", "5"]) as? FetchCommand)
        #expect(try split.zooms() == 3...5 && alias.zooms() == 3...5 && deepest.zooms() == 0...5)
        #expect(throws: (any Error).self) { try CommandLineArguments.parse(base + ["--zoom", "3-5", "--max-zoom", "6"]) }
        #expect(throws: (any Error).self) { try CommandLineArguments.parse(base) }
        #expect(throws: (any Error).self) { try CommandLineArguments.parse(base + ["--min-zoom", "6", "--max-zoom", "5"]) }
    }

    // MARK: 2. A refusal is "Error: PLACE: reason", exit 1, no usage line

    @Test func runTimeRefusalsPrintNoUsageLine() async throws {
        let dir = try TemporaryDirectory()
        let archive = dir.file("a.mbtiles")
        let made = try await Binary.run([
            "import", TestSupport.packageRoot.appendingPathComponent("samples/tiles").path, archive, "--max-zoom", "1", "--quiet",
        ])
        try #require(made.status == 0, "\(made)")
        let missing = dir.file("missing.json")
        let cases: [(arguments: [String], place: String)] = [
            (["meta", "set", archive, "--from", missing], missing),
            (
                ["render", dir.file("none.mbtiles"), "--center", "0,0", "--zoom", "1", "--size", "64x64", "-o", dir.file("o.png")],
                dir.file("none.mbtiles")
            ),
            (
                [
                    "export", archive, dir.file("offline.db"), "--maplibre-offline", "--style-url", "https://example.com/style.json",
                    "--style", missing,
                ], missing
            ),
            (
                [
                    "fetch", "https://{s}.tile.openstreetmap.org/{z}/{x}/{y}.png", dir.file("osm.mbtiles"), "--bbox",
                    "13.3,52.45,13.5,52.56", "--zoom", "8-9",
                ], "https://{s}.tile.openstreetmap.org/{z}/{x}/{y}.png"
            ),
        ]
        for (arguments, place) in cases {
            let result = try await Binary.run(arguments)
            #expect(result.status == 1, "\(arguments): \(result)")
            #expect(result.stderr.hasPrefix("Error: \(place): "), "\(arguments): \(result.stderr)")
            #expect(!result.stderr.contains("Usage:") && !result.stderr.contains("--help"), "\(arguments): \(result.stderr)")
        }
    }

    /// What ArgumentParser answers after parsing (help, a clean exit, an exit status) is its own
    /// still: only what a command's run() throws is a refusal.
    @Test func helpAndVersionAreNoRefusals() async throws {
        for arguments in [["import", "--help"], ["help", "import"], ["meta", "set", "--help"], ["--version"]] {
            let result = try await Binary.run(arguments)
            #expect(result.status == 0 && !result.stderr.contains("Error"), "\(arguments): \(result)")
            #expect(
                arguments == ["--version"] ? !result.stdout.isEmpty : result.stdout.contains("USAGE: tilepack"), "\(arguments): \(result)")
        }
    }

    /// `serve` and `tile` without their program: a refusal naming the program, not a usage error.
    @Test func aMissingSiblingProgramIsARefusal() throws {
        let program = SiblingProgram(name: "tilepack-no-such-program", package: "nowhere", command: "tilepack nothing")
        #expect {
            try program.exec([])
        } throws: { error in
            guard let failure = error as? CommandFailure else { return false }
            return failure.description.hasPrefix("tilepack-no-such-program: ")
                && failure.description.contains("swift build -c release --package-path nowhere")
        }
    }

    // MARK: 4. extract: a box that misses the archive's bounds is refused, naming them

    @Test func extractOfABoxBesideTheArchiveIsRefused() async throws {
        let dir = try TemporaryDirectory()
        let alps = try await Self.alpsArchive(in: dir)
        let out = dir.file("out.mbtiles")
        // Latitude first: 44 E to 50 E, 5 N to 15 N, which holds only the world tiles of zooms 0-2.
        let swapped = try await Binary.run(["extract", alps, out, "--bbox", "44,5,50,15", "--quiet"])
        #expect(swapped.status == 1, "\(swapped)")
        #expect(swapped.stderr.contains("4.0,44.0,8.0,47.0") || swapped.stderr.contains("4,44,8,47"), "\(swapped.stderr)")
        #expect(swapped.stderr.contains("5.0,44.0,15.0,50.0"), "\(swapped.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out))
        // A box that overlaps the bounds is extracted as before.
        let inside = try await Binary.run(["extract", alps, dir.file("inside.mbtiles"), "--bbox", "5,45,6,46", "--quiet"])
        #expect(inside.status == 0, "\(inside)")
    }

    // MARK: 5. import widens the metadata to the tiles it holds

    @Test func importWidensMetadataToTheTilesAndSaysSoOnce() async throws {
        let dir = try TemporaryDirectory()
        let alps = try await Self.alpsArchive(in: dir)
        let tree = dir.file("tree")
        let exported = try await Binary.run(["export", alps, tree, "--quiet"])
        try #require(exported.status == 0, "\(exported)")
        let declared = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: tree + "/metadata.json"))) as? [String: Any])
        try #require("\(declared["maxzoom"] ?? "")" == "4", "\(declared)")
        // Zoom 5: the tile over the bounds (16/11) and its neighbour to the east (17/11).
        let tile = try #require(FileManager.default.subpaths(atPath: tree + "/4")?.first { $0.hasSuffix(".png") })
        for column in [16, 17] {
            try FileManager.default.createDirectory(atPath: "\(tree)/5/\(column)", withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: "\(tree)/4/\(tile)", toPath: "\(tree)/5/\(column)/11.png")
        }
        let archive = dir.file("b.mbtiles")
        let imported = try await Binary.run(["import", tree, archive, "--quiet"])
        #expect(imported.status == 0, "\(imported)")
        let notes = imported.stderr.split(separator: "\n").filter { $0.contains("maxzoom") }
        #expect(notes.count == 1 && notes[0].contains("maxzoom 4") && notes[0].contains("bounds"), "\(imported.stderr)")
        let maxzoom = try await Binary.run(["meta", "get", archive, "maxzoom"])
        #expect(maxzoom.stdout == "5\n", "\(maxzoom)")
        let bounds = try await Binary.run(["meta", "get", archive, "bounds"])
        let east = bounds.stdout.split(separator: ",").dropFirst(2).first.flatMap { Double($0) } ?? 0
        #expect(abs(east - 22.5) < 1e-6, "\(bounds)")
        let verify = try await Binary.run(["verify", archive])
        #expect(verify.status == 0 && !verify.stdout.contains("maxzoom"), "\(verify)")
    }

    // MARK: 6. meta set --from: a null for a key that is absent is a no-op

    @Test func metaSetFromFileTakesNullForAnAbsentKeyAsDone() async throws {
        let dir = try TemporaryDirectory()
        let archive = dir.file("a.mbtiles")
        let made = try await Binary.run([
            "import", TestSupport.packageRoot.appendingPathComponent("samples/tiles").path, archive, "--max-zoom", "1", "--quiet",
        ])
        try #require(made.status == 0, "\(made)")
        let file = dir.file("m.json")
        try Data(#"{"attribution": "Someone", "nothere": null}"#.utf8).write(to: URL(fileURLWithPath: file))
        let run = try await Binary.run(["meta", "set", archive, "--from", file])
        #expect(run.status == 0, "\(run)")
        let attribution = try await Binary.run(["meta", "get", archive, "attribution"])
        #expect(attribution.stdout == "Someone\n", "\(attribution)")
        // Nothing left to do: exit 0, the file untouched.
        try Data(#"{"nothere": null}"#.utf8).write(to: URL(fileURLWithPath: file))
        let bytes = try Data(contentsOf: URL(fileURLWithPath: archive))
        let again = try await Binary.run(["meta", "set", archive, "--from", file])
        #expect(again.status == 0 && again.stdout.contains("nothere"), "\(again)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: archive)) == bytes)
        // `meta delete` of an absent key names what it cannot do, as before.
        let delete = try await Binary.run(["meta", "delete", archive, "nothere"])
        #expect(delete.status == 1 && delete.stderr.contains("has no metadata key 'nothere'"), "\(delete)")
    }

    // MARK: 7. A bundle's meta delete says why the file was written again

    @Test func bundleMetadataEditSaysWhyTheFileWasWrittenAgain() async throws {
        let dir = try TemporaryDirectory()
        let bundle = dir.file("a.tilepack")
        let made = try await Binary.run([
            "import", TestSupport.packageRoot.appendingPathComponent("samples/tiles").path, bundle, "--max-zoom", "1", "--quiet",
        ])
        try #require(made.status == 0, "\(made)")
        for arguments in [["meta", "set", bundle, "attribution", "Someone"], ["meta", "delete", bundle, "attribution"]] {
            let run = try await Binary.run(arguments)
            #expect(run.status == 0, "\(run)")
            #expect(
                run.stdout.contains("by writing the file again") && !run.stdout.contains("did not fit")
                    && run.stdout.contains("a bundle's metadata lies between its header and its tile index"), "\(run.stdout)")
        }
    }
}
