import ArgumentParser
import Foundation
import TilepackOperations

struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check an archive deeply: container, schema, metadata, every tile, hashes.",
        discussion: """
        Errors: a damaged container; a tile that is NULL, out of range, of unknown format or does \
        not decode; a hash that does not match. Warnings: spec metadata missing or inconsistent \
        with the content, a missing unique index, extra tables.

        Exit status: 0 no errors (warnings allowed unless --strict), 1 errors found, 2 not a \
        usable archive (not SQLite, no tiles table, a PMTiles or other file).
        """)

    @Argument(help: "The archive (.mbtiles or .tilepack; recognised by its bytes).")
    var archive: String

    @Flag(help: "Skip decoding every tile.")
    var quick = false

    @Flag(help: "Count warnings as errors.")
    var strict = false

    @OptionGroup var threading: ThreadOptions

    @OptionGroup var output: OutputOptions

    func run() throws {
        var options = VerifyOptions()
        options.quick = quick
        if let threads = threading.threads { options.threads = threads }
        let report = ArchiveVerifier.run(path: archive, options: options,
                                         progress: ProgressBar.handler(label: "verify", quiet: output.quiet))
        let code = report.exitCode(strict: strict)
        if output.json {
            struct Output: Encodable {
                var report: VerifyReport
                var errors: Int
                var warnings: Int
                var exitCode: Int32
            }
            try printJSON(Output(report: report, errors: report.errorCount, warnings: report.warningCount, exitCode: code))
        } else {
            for finding in report.findings { print(finding) }
            let what = [report.format?.description, report.layout].compactMap { $0 }.joined(separator: ", ")
            let verdict = !report.usable ? "not a usable archive" : report.errorCount == 0 ? "OK" : "FAILED"
            print("\(archive): \(verdict)\(what.isEmpty ? "" : " (\(what))"): \(report.tiles) tiles, \(report.decodedTiles) decoded, \(report.errorCount) errors, \(report.warningCount) warnings in \(String(format: "%.2f", report.seconds)) s")
        }
        if code != 0 { throw ExitCode(code) }
    }
}

struct InfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show an archive's format, schema, metadata, zoom levels and sizes.")

    @Argument(help: "The archive (.mbtiles or .tilepack; recognised by its bytes).")
    var archive: String

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        let info = try ArchiveInspector.run(path: archive)
        if json {
            try printJSON(info)
            return
        }
        print("\(info.path)")
        print("  format     \(info.format) (\(info.layout))")
        print("  content    \(info.content ?? "none")")
        print("  file size  \(info.fileSize) bytes")
        print("  tiles      \(info.tiles) (\(info.tileBytes) bytes, \(info.distinctTiles) distinct, dedup ratio \(String(format: "%.2f", info.dedupRatio)))")
        if let bounds = info.bounds { print("  extent     \(bounds) (at the highest zoom)") }
        print("  zoom levels")
        for level in info.levels {
            print("    z\(level.zoom)\tx \(level.minX)-\(level.maxX)\ty \(level.minY)-\(level.maxY)\t\(level.tiles) tiles\t\(level.bytes) bytes")
        }
        print("  metadata")
        for key in info.metadata.keys.sorted() {
            let value = info.metadata[key] ?? ""
            print("    \(key) = \(value.count > 100 ? String(value.prefix(100)) + "... (\(value.count) chars)" : value)")
        }
    }
}
