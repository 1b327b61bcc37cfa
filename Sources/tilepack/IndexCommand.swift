import ArgumentParser
import TilepackUpdate

struct IndexCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "index",
        abstract: "Write an archive's tile hash index beside it (ARCHIVE.tpindex), for `tilepack sync`.",
        discussion:
            "The index holds a 64-bit hash of every tile's bytes and the archive's length and content identity (Specs/updates.md). It also says whether the archive is canonical, what tilepack's writer makes of its tiles (checked here), so that a `tilepack patch` of it copies its unchanged payloads without reading them. Publish it beside the archive, after it: a client's `tilepack sync` then fetches only the tiles whose bytes it lacks."
    )

    @Argument(help: "A bundle or PMTiles file (any archive tilepack reads).")
    var archive: String

    @Option(name: .shortAndLong, help: "Where to write the index (default: ARCHIVE.tpindex).")
    var output: String?

    @Flag(help: "\(SharedHelp.json): what was written.")
    var json = false

    func run() throws {
        let report = try ArchiveIndexer.run(archive: archive, output: output)
        if json {
            try printJSON(report)
        } else {
            // Canonical: the archive is what tilepack's writer makes of its tiles (a patch copies it unchecked).
            print(
                "\(report.index): \(report.tiles) tiles, \(report.indexBytes) bytes, \(report.identity)\(report.canonical ? ", canonical" : "")"
            )
        }
    }
}
