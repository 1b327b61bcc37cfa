import ArgumentParser
import TilepackCore
import TilepackOperations
import TilepackStorage

struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write an archive's tiles back as a directory tree, with a metadata.json.",
        discussion: "Files are named by the tiles' own format. Nothing is written outside the folder.")

    @Argument(help: "The archive (\(TileArchiveFormat.extensions()); recognised by its bytes).")
    var archive: String

    @Argument(help: "The folder to write into (created if missing).")
    var folder: String

    @Option(help: "Folder layout: zxy (z/x/y.ext) or zyx (z/y/x.ext).")
    var layout: TileTreeLayout = .zxy

    @Option(help: "Rows counted from the north (xyz) or the south (tms).")
    var scheme: TileScheme = .xyz

    @Flag(help: "Write into a folder that already holds files (existing tiles are replaced, never written through).")
    var force = false

    @OptionGroup var output: OutputOptions

    func run() throws {
        let input = try ArchiveLocation.open(archive)
        var options = ExportOptions()
        options.layout = layout
        options.scheme = scheme
        options.overwrite = force
        let bar = ProgressBar.start(label: "export", quiet: output.quiet)
        defer { bar?.finish() }
        let report = try TileExporter.run(archive: input, to: folder, options: options, progress: bar?.handler)
        bar?.finish()
        if output.json {
            try printJSON(report)
        } else {
            print("exported \(report.exported) tiles (\(report.bytes) bytes) to \(folder) in \(String(format: "%.2f", report.seconds)) s")
        }
    }
}

struct ConvertCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "convert",
        abstract: "Convert between archive formats (\(TileArchiveFormat.extensions("and"))), and MBTiles flat <-> deduplicated.",
        discussion:
            "The output's extension chooses its format. Tile bytes and metadata are kept, so agg_tiles_hash is unchanged, unless --encode stores raw pixels."
    )

    @Argument(help: "The input archive.")
    var input: String

    @Argument(help: "The output (\(TileArchiveFormat.extensions())).")
    var output: String

    @OptionGroup var aggregateHash: AggregateHashOption

    @Flag(help: "MBTiles output: store identical tiles once (map + images schema).")
    var dedup = false

    @Option(help: "Bundle output: store raw pixels: \(RawEncoding.allValueStrings.joined(separator: ", ")).")
    var encode: RawEncoding?

    @Flag(help: "Overwrite an existing output.")
    var force = false

    @OptionGroup var outputOptions: OutputOptions

    @OptionGroup var upload: UploadOptions

    func run() throws {
        var options = ConvertOptions()
        options.overwrite = force
        options.deduplicate = dedup
        options.encode = encode?.pixelFormat
        options.aggregateTilesHash = aggregateHash.enabled
        let bar = ProgressBar.start(label: "convert", quiet: outputOptions.quiet)
        defer { bar?.finish() }
        let report = try RemoteOutput.write(to: output, overwrite: force, temporaryFolder: upload.tmpdir) { local in
            try ArchiveConverter.run(source: input, destination: local, options: options, progress: bar?.handler)
        }
        bar?.finish()
        if outputOptions.json {
            try printJSON(report)
        } else {
            for note in report.notes { printError("note: \(note)") }
            print(
                "converted \(report.tiles) tiles (\(report.bytesIn) -> \(report.bytesOut) bytes) into \(output) in \(String(format: "%.2f", report.seconds)) s"
            )
        }
    }
}
