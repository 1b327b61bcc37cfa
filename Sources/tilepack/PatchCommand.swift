import ArgumentParser
import TilepackUpdate

struct PatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "patch",
        abstract: "Apply a patch (tilepack's, or an MBTiles patch of tilepack's or martin's) to an archive.",
        discussion:
            "The base must be the version the patch was made from (its content identity), and the result is checked against the version the patch makes before it becomes visible. An MBTiles base is patched in place in one transaction; a bundle or PMTiles is written beside and renamed over it (or written to OUT), byte-identical to `tilepack convert NEW` into its format (whichever patch layout, .tppatch or MBTiles). An archive that is already the version the patch makes is said so (exit 0, nothing written); one whose tiles match but whose metadata differs is refused naming the keys."
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
        } else if report.alreadyApplied {
            print("\(report.base): already at the version this patch makes (\(report.after ?? "")): nothing written")
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
