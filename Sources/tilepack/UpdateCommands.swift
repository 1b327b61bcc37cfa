import ArgumentParser
import TilepackOperations

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

    @Flag(help: "Overwrite an existing patch.")
    var force = false

    @Flag(help: "Print the counts and identities as JSON on standard output.")
    var json = false

    func run() throws {
        let report = try ArchiveDiff.run(old: old, new: new, patch: patch, overwrite: force)
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

    @Flag(help: "Overwrite an existing OUT.")
    var force = false

    @Flag(help: "Print what was done as JSON on standard output.")
    var json = false

    func run() throws {
        let report = try ArchivePatcher.run(base: base, patch: patch, output: output, overwrite: force)
        for warning in report.warnings { printError("warning: \(patch): \(warning)") }
        if json {
            try printJSON(report)
        } else {
            print(
                "patched \(report.output)\(report.inPlace ? " in place" : ""): \(report.tilesWritten) tiles written, \(report.tilesDeleted) deleted, \(report.metadataChanges) metadata changes in \(String(format: "%.2f", report.seconds)) s"
            )
            if let before = report.before { print("  was \(before)") }
            if let after = report.after { print("  now \(after) (checked)") }
        }
    }
}
