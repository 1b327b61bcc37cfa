import ArgumentParser
import Foundation
import TilepackCore
import TilepackOperations

struct MetaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "meta",
        abstract: "List, read and change an archive's metadata, in every format.",
        discussion: """
            meta ARCHIVE lists every key; meta get prints one value; meta set and meta delete change the \
            archive itself (MBTiles in a transaction; a PMTiles in place when the new metadata fits the room the \
            old had; a bundle, whose metadata lies between its header and its tile index, and any other PMTiles \
            rewritten beside itself and renamed over it, the tiles copied as they are). Values are checked \
            as import checks them (bounds, center, minzoom, maxzoom, format, type, json).
            """,
        subcommands: [MetaList.self, MetaGet.self, MetaSet.self, MetaDelete.self],
        defaultSubcommand: MetaList.self
    )
}

struct MetaList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "Every key and its value, one per line.")

    @Argument(help: "The archive (a file or an http(s) URL).")
    var archive: String

    @Flag(help: "\(SharedHelp.json): the metadata as one object.")
    var json = false

    func run() throws {
        let metadata = try MetadataEditor.read(archive)
        if json {
            try printJSON(metadata.entries)
        } else {
            for key in metadata.keys { print("\(key)\t\(metadata[key]!)") }
        }
    }
}

struct MetaGet: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "One key's value (exit 1 when absent).")

    @Argument(help: "The archive (a file or an http(s) URL).")
    var archive: String

    @Argument(help: "The key.")
    var key: String

    func run() throws {
        guard let value = try MetadataEditor.read(archive)[key] else {
            printError("Error: \(archive) has no metadata key '\(key)'")
            throw ExitCode(1)
        }
        print(value)
    }
}

struct MetaSet: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Set keys: meta set ARCHIVE KEY VALUE [KEY VALUE ...], or --from FILE.json.")

    @Argument(help: "The archive file.")
    var archive: String

    /// Values may start with a minus (`minzoom -3` is refused for its value, not taken for an option).
    @Argument(parsing: .allUnrecognized, help: "Keys and values, in turn.")
    var pairs: [String] = []

    @Option(
        help:
            "A JSON object of keys and values: the metadata as it should be, so null deletes a key, and a null for a key the archive lacks is already done."
    )
    var from: String?

    @OptionGroup var outputOptions: OutputOptions

    func validate() throws {
        guard pairs.count % 2 == 0 else {
            throw ValidationError("'\(pairs.last ?? "")' has no value: give KEY VALUE pairs")
        }
        guard !pairs.isEmpty || from != nil else { throw ValidationError("give KEY VALUE pairs or --from FILE.json") }
    }

    func run() throws {
        var set: [String: String] = [:]
        var delete: [String] = []
        if let from {
            guard let data = FileManager.default.contents(atPath: from) else {
                throw CommandFailure(from, FileManager.default.fileExists(atPath: from) ? "cannot read it" : "no such file")
            }
            (set, delete) = try MetadataEditor.pairs(fromJSON: data, path: from)
        }
        for index in stride(from: 0, to: pairs.count, by: 2) { set[pairs[index]] = pairs[index + 1] }
        // A file of the desired state: a key it deletes that is absent already is as it should be.
        let report = try MetadataEditor.edit(path: archive, set: set, delete: delete, absentDeletes: from == nil ? .refuse : .ignore)
        try MetaDelete.print(report, json: outputOptions.json)
    }
}

struct MetaDelete: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Remove keys.")

    @Argument(help: "The archive file.")
    var archive: String

    @Argument(help: "The keys to remove.")
    var keys: [String]

    @OptionGroup var outputOptions: OutputOptions

    func run() throws {
        let report = try MetadataEditor.edit(path: archive, delete: keys)
        try Self.print(report, json: outputOptions.json)
    }

    static func print(_ report: MetadataEditReport, json: Bool) throws {
        if json { return try printJSON(report) }
        let absent = report.alreadyAbsent.isEmpty ? "" : "; \(report.alreadyAbsent.joined(separator: ", ")) already absent"
        guard let method = report.method else {
            Swift.print("nothing to change in \(report.path)\(absent)")
            return
        }
        let how =
            switch method {
            case .transaction: "in a transaction"
            case .inPlace: "in place"
            case .rewrite: "by writing the file again"
            }
        var what: [String] = []
        if !report.set.isEmpty { what.append("set \(report.set.keys.sorted().joined(separator: ", "))") }
        if !report.deleted.isEmpty { what.append("deleted \(report.deleted.joined(separator: ", "))") }
        Swift.print("\(what.joined(separator: "; ")) in \(report.path) \(how)\(report.why.map { ": \($0)" } ?? "")\(absent)")
    }
}
