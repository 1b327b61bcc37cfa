import ArgumentParser
import Foundation
import TilepackCore
import TilepackOperations
import TilepackStorage

struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import a directory tree of tiles (z/x/y.ext) into an archive (\(TileArchiveFormat.extensions())).",
        discussion: """
            The output's extension chooses the format: \(TileArchiveFormat.extensions()). Tile formats (png, jpg, \
            webp, pbf) are detected from the bytes. A tilemapresource.xml (gdal2tiles) or metadata.json \
            (mbutil, or tilepack export) at the tree's root is read and its scheme and layout used; a \
            --scheme or --layout that contradicts it is an error, and so are tiles that fall outside \
            the bounds it declares (the usual sign of a wrong --layout or --scheme).

            Exit status: 0 when every tile file was imported, 3 when the archive was written but some \
            files were skipped (listed with --report), 1 when nothing was written.
            """
    )

    @Argument(help: "The folder holding the tiles.")
    var tree: String

    @Argument(help: "The archive to write (\(TileArchiveFormat.extensions())).")
    var archive: String

    @Option(help: "Folder layout: zxy (z/x/y.ext) or zyx (z/y/x.ext). Default: what metadata.json says, else zxy.")
    var layout: TileTreeLayout?

    @Option(help: "Rows counted from the north (xyz) or the south (tms). Default: what the tree says, else xyz.")
    var scheme: TileScheme?

    @Option(name: .customLong("min-zoom"), help: "\(SharedHelp.minZoom) to import.")
    var minZoom: Int?

    @Option(name: .customLong("max-zoom"), help: "\(SharedHelp.maxZoom) to import.")
    var maxZoom: Int?

    @Option(help: ArgumentHelp(SharedHelp.bbox, valueName: SharedHelp.bboxValue), transform: BoundingBoxArgument.parse)
    var bbox: BoundingBoxArgument?

    @Option(help: "Metadata: the tileset's name (default: the folder's name).")
    var name: String?

    @Option(help: "Metadata: attribution.")
    var attribution: String?

    @Option(help: "Metadata: description.")
    var description: String?

    @Option(help: "Metadata: overlay or baselayer.")
    var type: String?

    @Option(help: "Store raw pixels in a bundle: \(RawEncoding.allValueStrings.joined(separator: ", ")).")
    var encode: RawEncoding?

    @Flag(help: "MBTiles: store identical tiles once (map + images schema).")
    var dedup = false

    @OptionGroup var writer: ArchiveWriterOptions

    @Flag(name: .customLong("allow-mixed-formats"), help: "Import a tree whose tiles are of more than one format.")
    var allowMixedFormats = false

    @Flag(help: "Add to an existing archive; a tile already there is replaced.")
    var append = false

    @Option(
        help:
            "Write the skipped files and a summary to this file as JSON lines (checked before importing, written however the import ends).")
    var report: String?

    @Option(help: "Import only part K of N of the tree (K counted from 0; merge the parts with `tilepack merge`).")
    var shard: ShardArgument?

    @OptionGroup var threading: ThreadOptions

    func validate() throws {
        try checkZooms(minZoom: minZoom, maxZoom: maxZoom)
        if let type, TileMetadata.LayerType(rawValue: type) == nil {
            throw ValidationError("--type must be overlay or baselayer")
        }
        if append && writer.force { throw ValidationError("--append and --force exclude each other") }
        if append && archive.lowercased().hasPrefix("s3://") { throw ValidationError("--append cannot add to an object in S3") }
        if encode != nil && TileArchiveFormat.named(by: archive)?.storesRawPixels != true {
            throw ValidationError("--encode stores raw pixels, which only a .tilepack bundle can hold")
        }
    }

    func run() throws {
        var options = ImportOptions()
        options.layout = layout
        options.scheme = scheme
        options.minZoom = minZoom
        options.maxZoom = maxZoom
        options.bounds = bbox?.box
        options.allowMixedFormats = allowMixedFormats
        options.append = append
        options.encode = encode?.pixelFormat
        options.deduplicate = dedup
        options.writing = writer.writing
        options.shard = shard?.spec
        if let threads = threading.threads { options.threads = threads }
        options.reportPath = report
        for (key, value) in [("name", name), ("attribution", attribution), ("description", description), ("type", type)] {
            if let value { options.metadata[key] = value }
        }
        let result = try writer.write(to: archive, label: "import") { local, progress in
            try TileImporter.run(source: tree, destination: local, options: options, progress: progress)
        }
        if writer.output.json {
            try printJSON(result)
        } else {
            for note in result.notes { printError("note: \(note)") }
            // Per file: -q leaves them to --report (the summary counts them).
            if !writer.output.quiet {
                for skipped in result.skipped.prefix(20) { printError("skipped: \(skipped)") }
                if result.skipped.count > 20 { printError("... and \(result.skipped.count - 20) more skipped (see --report)") }
            }
            let zooms = result.zooms.keys.sorted()
            let zoomText = zooms.isEmpty ? "no zooms" : "z\(zooms.first!)-\(zooms.last!)"
            print(
                "imported \(result.imported) tiles (\(result.format ?? "no tiles"), \(zoomText), \(result.bytes) bytes) into \(archive) in \(String(format: "%.2f", result.seconds)) s; skipped \(result.skipped.count), filtered \(result.filtered)"
            )
        }
        if !result.skipped.isEmpty { throw ExitCode(3) }
    }
}

/// Prints a JSON report on standard output, as every command's `--json` does.
func printJSON<T: Encodable>(_ value: T) throws {
    print(String(decoding: try JSONReport.encode(value), as: UTF8.self))
}
