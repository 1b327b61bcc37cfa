import ArgumentParser
import TilepackRemote
import TilepackStorage

struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Bring a local archive to the version published at an http(s):// or s3:// URL, downloading only the tiles that differ.",
        discussion:
            "With the tile hash index published beside the archive (URL.tpindex, written by `tilepack index`), only the tiles whose bytes LOCAL lacks are fetched, their ranges joined into the sync plan's transfer units (at most 8 MiB each, at most 1.15 times the tiles' bytes; Specs/updates.md §8.1), several units a request where the server answers them, pinned by the object's ETag and staged in LOCAL.tpsync (an interrupted sync resumes from it); the result's content identity is checked against the index's before it is renamed over LOCAL. Without an index the archive is downloaded whole, and the report says so. LOCAL keeps its format (by its extension); it need not exist yet. An s3://BUCKET/KEY object and its index (KEY.tpindex) are read with signed requests, configured as other s3:// inputs (AWS_* variables, the credential chain). With --key, URL.tpsig (the publisher's signature, read the same way) must be signed by the key, of a release no older than LOCAL.tpsig's (a replayed older version is refused) nor than --min-release, and every tile of the result is checked against its signed tree before it replaces LOCAL; LOCAL.tpsig is then replaced with it. A refusal changes nothing."
    )

    @Argument(help: "The local archive to bring up to date (created when missing).")
    var local: String

    @Argument(help: "The http(s):// or s3://BUCKET/KEY URL of the published bundle or PMTiles archive.")
    var url: String

    @OptionGroup var publisher: PublisherKeyOptions

    @Flag(help: "\(SharedHelp.json): what was done.")
    var json = false

    func run() throws {
        let trust = try publisher.verifier().map { SyncKey(key: $0, minimumRelease: publisher.lowestRelease) }
        let report = try ArchiveSync.run(local: local, url: url, key: trust)
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
        if report.planUnits > 0 {
            print(
                "  sync plan: \(report.planUnits) transfer unit\(report.planUnits == 1 ? "" : "s"), \(report.planBytes) bytes (\(report.planTileBytes) of them the tiles' stored bytes)"
            )
        }
        if let identity = report.identity { print("  now \(identity) (checked)") }
        if let signed = report.signed {
            print(
                "  signed: \(signed.origin) release \(signed.release) (\(signed.time)) by \(signed.key), every tile checked; \(local).tpsig replaced"
            )
        }
    }
}
