import ArgumentParser
import Foundation
import TilepackOperations
import TilepackStorage

struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check archives deeply: container, schema, metadata, every tile, hashes.",
        discussion: """
            Errors: a damaged container; a tile that is NULL, out of range, of unknown format or does \
            not decode; a hash that does not match. Warnings: spec metadata missing or inconsistent \
            with the content, a missing unique index, extra tables.

            Exit status: 0 no errors (warnings allowed unless --strict), 1 errors found, 2 not a \
            usable archive (not SQLite, no tiles table, a PMTiles or other file); with several \
            archives, the highest of theirs. --json prints one report, or an array of them for \
            several archives.

            --key also checks each archive's signature: every tile, the tree, the signed root; for an \
            extract made with `extract --key`, every tile against the proof its .tpsig holds \
            (Specs/signing.md).
            """)

    @Argument(help: "The archives (\(TileArchiveFormat.extensions()); recognised by their bytes).")
    var archives: [String]

    @Flag(help: "Skip decoding every tile.")
    var quick = false

    @Flag(help: "Count warnings as errors.")
    var strict = false

    @OptionGroup var publisher: PublisherKeyOptions

    @OptionGroup var threading: ThreadOptions

    @OptionGroup var output: OutputOptions

    /// One archive's report as `--json` prints it.
    struct Output: Encodable {
        var report: VerifyReport
        var errors: Int
        var warnings: Int
        var exitCode: Int32
        var verdict: String
        var signature: SignatureCheck?
    }

    func run() throws {
        var options = VerifyOptions()
        options.quick = quick
        if let threads = threading.threads { options.threads = threads }
        var outputs: [Output] = []
        for archive in archives {
            let bar = ProgressBar.start(label: "verify \(archive)", quiet: output.quiet)
            let report = ArchiveVerifier.run(path: archive, options: options, progress: bar?.handler)
            bar?.finish()
            var result = Output(
                report: report, errors: report.errorCount, warnings: report.warningCount,
                exitCode: report.exitCode(strict: strict), verdict: report.verdict(strict: strict))
            if let key = publisher.key, result.exitCode != 2 {
                result.signature = SignatureCheck.run(archive: archive, keyFile: key, minimumRelease: publisher.lowestRelease)
                if result.signature?.verified == false { result.exitCode = max(result.exitCode, 1) }
            }
            outputs.append(result)
            if !output.json {
                print(Self.text(result))
                if let signature = result.signature { print(signature.text) }
            }
        }
        if output.json {
            if outputs.count == 1 { try printJSON(outputs[0]) } else { try printJSON(outputs) }
        }
        let code = outputs.map(\.exitCode).max() ?? 0
        if code != 0 { throw ExitCode(code) }
    }

    /// The findings, one a line, then the verdict.
    static func text(_ output: Output) -> String {
        let report = output.report
        let what = [report.format?.description, report.layout].compactMap { $0 }.joined(separator: ", ")
        let lines =
            report.findings.map(\.description) + [
                "\(report.path): \(output.verdict)\(what.isEmpty ? "" : " (\(what))"): \(report.tiles) tiles, \(report.decodedTiles) decoded, \(report.errorCount) errors, \(report.warningCount) warnings in \(String(format: "%.2f", report.seconds)) s"
            ]
        return lines.joined(separator: "\n")
    }
}

struct InfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show archives' format, schema, metadata, zoom levels and sizes.",
        discussion: """
            --json prints one object, or an array for several archives; bounds and the metadata's \
            bounds, center and zooms are numbers, its json key an object. Exit status 2 when an \
            input is not an archive (the others are still shown).

            --key also shows each archive's signed root (with --json, only the signed roots), checked: \
            the signature, the release and the stored hashes, not the tiles (`verify --key` checks \
            every tile).
            """)

    @Argument(help: "The archives (\(TileArchiveFormat.extensions()); recognised by their bytes).")
    var archives: [String]

    @Flag(help: "\(SharedHelp.json) (one object, or an array for several archives).")
    var json = false

    @OptionGroup var publisher: PublisherKeyOptions

    func run() throws {
        // With --key and --json, the signed roots are the output.
        if !(json && publisher.key != nil) { try showInfo() }
        if let key = try publisher.verifier() {
            try SignedRoots.show(archives: archives, key: key, minimumRelease: publisher.lowestRelease, json: json)
        }
    }

    func showInfo() throws {
        var infos: [ArchiveInfo] = []
        var failure: OperationError?
        for archive in archives {
            do {
                let info = try ArchiveInspector.run(path: archive)
                infos.append(info)
                if !json { print(Self.text(info)) }
            } catch {
                // The other archives are still shown; the first failure decides the exit status.
                if archives.count == 1 { throw error }
                printError("Error: \(error)")
                failure = failure ?? error
            }
        }
        if json {
            if archives.count == 1, let info = infos.first { try printJSON(info) } else { try printJSON(infos) }
        }
        if let failure { throw ExitCode(CommandLineArguments.exitStatus(for: failure) ?? 1) }
    }

    static func text(_ info: ArchiveInfo) -> String {
        var lines = [info.path]
        lines.append("  format     \(info.format) (\(info.layout))")
        lines.append("  content    \(info.content ?? "none")")
        lines.append("  file size  \(info.fileSize) bytes")
        lines.append(
            "  tiles      \(info.tiles) (\(info.tileBytes) bytes, \(info.distinctTiles) distinct, dedup ratio \(String(format: "%.2f", info.dedupRatio)))"
        )
        if let bounds = info.bounds { lines.append("  extent     \(bounds) (at the highest zoom)") }
        if let version = info.metadata["version"] { lines.append("  version    \(version)") }
        if let identity = info.identity { lines.append("  identity   \(identity)") }
        lines.append("  zoom levels")
        for level in info.levels {
            lines.append(
                "    z\(level.zoom)\tx \(level.minX)-\(level.maxX)\ty \(level.minY)-\(level.maxY)\t\(level.tiles) tiles\t\(level.bytes) bytes"
            )
        }
        lines.append("  metadata")
        for key in info.metadata.keys.sorted() {
            let value = info.metadata[key] ?? ""
            lines.append("    \(key) = \(value.count > 100 ? String(value.prefix(100)) + "... (\(value.count) chars)" : value)")
        }
        return lines.joined(separator: "\n")
    }
}
