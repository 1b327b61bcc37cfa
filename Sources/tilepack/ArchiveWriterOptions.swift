import ArgumentParser
import TilepackOperations
import TilepackStorage

/// The options of every command that writes a new archive (convert, extract, merge, import): how
/// the archive is written, `--force`, `-q`/`--json`, and `--tmpdir` for an `s3://` output.
struct ArchiveWriterOptions: ParsableArguments {
    @OptionGroup var archive: ArchiveOutputOptions

    @Flag(help: "\(SharedHelp.force).")
    var force = false

    @OptionGroup var output: OutputOptions

    @OptionGroup var upload: UploadOptions

    /// How the operation writes its output.
    var writing: ArchiveWriteOptions {
        var writing = ArchiveWriteOptions()
        writing.overwrite = force
        writing.aggregateTilesHash = archive.aggregateTilesHash
        writing.keepsMixedTileCompression = archive.keepsMixedTileCompression
        writing.tileIndex = archive.tileIndex
        return writing
    }

    /// Runs `build`, which writes the archive at its first argument: `destination`, or its local
    /// copy for an `s3://` one, uploaded once it is complete. A progress bar labelled `label`
    /// (unless `-q`) follows it, and `--sign` signs it (the key read before anything is written).
    func write<R>(to destination: String, label: String, _ build: (String, ProgressHandler?) throws -> R) throws -> R {
        let bar = ProgressBar.start(label: label, quiet: output.quiet)
        defer { bar?.finish() }
        let key = try archive.signing.key()
        let result = try RemoteOutput.write(to: destination, overwrite: force, temporaryFolder: upload.tmpdir) { local in
            try archive.signing.signed(local, key: key, as: destination) { try build(local, bar?.handler) }
        }
        bar?.finish()
        return result
    }
}

/// What a command that writes a new archive may add to it.
struct ArchiveOutputOptions: ParsableArguments {
    @Flag(
        name: .customLong("agg-tiles-hash"),
        help: "MBTiles output: compute and store agg_tiles_hash (an MD5 of every tile; kept anyway when the input carries one).")
    var aggregateTilesHash = false

    @Flag(
        name: .customLong("keep-mixed-compression"),
        help:
            "PMTiles output of vector tiles some gzipped and some not: keep every tile's bytes and write compression 'unknown', which MapLibre Native cannot read (default: gzip the plain ones)."
    )
    var keepsMixedTileCompression = false

    @Flag(
        name: .customLong("index"),
        help:
            "A .tilepack or .pmtiles output: also write its tile hash index beside it (ARCHIVE.tpindex, as `tilepack index` does), to publish with it for `tilepack sync`. An .mbtiles output stores its content identity instead, so that its first `tilepack patch` reads only the tiles it changes."
    )
    var tileIndex = false

    @OptionGroup var signing: SigningOptions
}

/// `--max-tiles N`: the most tiles a command writes one by one (``TileCountLimit``).
struct TileLimitOptions: ParsableArguments {
    @Option(
        name: .customLong("max-tiles"),
        help: ArgumentHelp(
            "Refuse, before writing anything, to write more than N tiles one by one (a PMTiles run stores billions of tiles once; convert from PMTiles to PMTiles keeps runs and is not limited).",
            valueName: "N"))
    var maxTiles: Int = TileCountLimit.defaultMaximum

    func validate() throws {
        if maxTiles < 0 { throw ValidationError("--max-tiles is a count of tiles, not \(maxTiles)") }
    }
}

/// Where an `s3://` output is built before it is uploaded.
struct UploadOptions: ParsableArguments {
    @Option(help: "An s3:// output: the folder it is built in before the upload (default: the system's temporary folder).")
    var tmpdir: String?
}
