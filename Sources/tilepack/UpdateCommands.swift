import ArgumentParser
import TilepackOperations
import TilepackRemote
import TilepackUpdate

struct DiffCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract: "Write the patch that turns one archive into another of the same tile type, in any formats.",
        discussion:
            "PATCH ending in .mbtiles is martin's flat patch layout (NULL tile_data for deleted tiles, NULL values for deleted metadata keys, agg_tiles_hash_before_apply/after_apply), which martin's `mbtiles apply-patch` applies; any other name gets tilepack's own compressed patch file (Specs/updates.md). Either carries the content identities of OLD and NEW."
    )

    @Argument(help: "The old version.")
    var old: String

    @Argument(help: "The new version.")
    var new: String

    @Argument(help: "The patch to write (.mbtiles: martin's layout; anything else: tilepack's patch file).")
    var patch: String

    @Flag(help: "\(SharedHelp.force) (the patch).")
    var force = false

    @OptionGroup var limit: TileLimitOptions

    @Flag(help: "\(SharedHelp.json): the counts and identities.")
    var json = false

    func run() throws {
        let report = try ArchiveDiff.run(
            old: old, new: new, patch: patch, overwrite: force, maximumTiles: limit.maxTiles, open: { (location) throws(OperationError) in
                try ArchiveLocation.open(location)
            })
        if json {
            try printJSON(report)
        } else {
            print(
                "\(patch): \(report.added) added, \(report.changed) changed, \(report.deleted) deleted tiles, \(report.metadataChanges) metadata changes; \(report.patchBytes) bytes (tiles \(report.tileBytes))"
            )
            print("  before \(report.before)")
            print("  after  \(report.after)")
        }
    }
}

struct PatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "patch",
        abstract: "Apply a patch (tilepack's, or an MBTiles patch of tilepack's or martin's) to an archive.",
        discussion:
            "The base must be the version the patch was made from (its content identity), and the result is checked against the version the patch makes before it becomes visible. An MBTiles base is patched in place in one transaction; a bundle or PMTiles is written beside and renamed over it (or written to OUT), byte-identical to `tilepack convert NEW` into its format."
    )

    @Argument(help: "The archive to patch.")
    var base: String

    @Argument(help: "The patch.")
    var patch: String

    @Argument(help: "Write the result here instead of replacing BASE (its extension chooses the format).")
    var output: String?

    @Flag(help: "\(SharedHelp.force) (OUT).")
    var force = false

    @Flag(
        name: .customLong("index"),
        help:
            "A bundle or PMTiles result: write its tile hash index beside it (OUT.tpindex) even when BASE had none beside it (with one, it is always written, updated from BASE's and the changed tiles)."
    )
    var tileIndex = false

    @Flag(help: "\(SharedHelp.json): what was done.")
    var json = false

    func run() throws {
        let report = try ArchivePatcher.run(base: base, patch: patch, output: output, overwrite: force, writesIndex: tileIndex)
        for warning in report.warnings { printError("warning: \(patch): \(warning)") }
        if json {
            try printJSON(report)
        } else {
            print(
                "patched \(report.output)\(report.inPlace ? " in place" : ""): \(report.tilesWritten) tiles written, \(report.tilesDeleted) deleted, \(report.metadataChanges) metadata changes in \(String(format: "%.2f", report.seconds)) s"
            )
            if let before = report.before { print("  was \(before)") }
            if let after = report.after { print("  now \(after) (checked)") }
            if let index = report.index { print("  index \(index)") }
        }
    }
}

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

struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Bring a local archive to the version published at an http(s):// or s3:// URL, downloading only the tiles that differ.",
        discussion:
            "With the tile hash index published beside the archive (URL.tpindex, written by `tilepack index`), only the tiles whose bytes LOCAL lacks are fetched, several ranges a request where the server answers them, pinned by the object's ETag and staged in LOCAL.tpsync (an interrupted sync resumes from it); the result's content identity is checked against the index's before it is renamed over LOCAL. Without an index the archive is downloaded whole, and the report says so. LOCAL keeps its format (by its extension); it need not exist yet. An s3://BUCKET/KEY object and its index (KEY.tpindex) are read with signed requests, configured as other s3:// inputs (AWS_* variables, the credential chain)."
    )

    @Argument(help: "The local archive to bring up to date (created when missing).")
    var local: String

    @Argument(help: "The http(s):// or s3://BUCKET/KEY URL of the published bundle or PMTiles archive.")
    var url: String

    @Flag(help: "\(SharedHelp.json): what was done.")
    var json = false

    func run() throws {
        let report = try ArchiveSync.run(local: local, url: url)
        if json {
            try printJSON(report)
            return
        }
        if let reason = report.fullReason { printError("note: \(reason)") }
        for note in report.notes { printError("note: \(note)") }
        let ranges =
            report.multipleRanges.map { $0 ? ", several ranges a request" : ", one range a request (the server answers no more)" } ?? ""
        print(
            "synced \(local) from \(url): \(report.tiles) tiles, \(report.tilesFetched) fetched (\(report.fetchedTileBytes) bytes of tiles), \(report.tilesReused) kept; \(report.bytesReceived) bytes received in \(report.requests) requests\(ranges)\(report.resumedBytes > 0 ? ", \(report.resumedBytes) bytes resumed" : "") in \(String(format: "%.2f", report.seconds)) s"
        )
        if let identity = report.identity { print("  now \(identity) (checked)") }
    }
}
