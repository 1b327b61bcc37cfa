import ArgumentParser
import TilepackOperations
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
