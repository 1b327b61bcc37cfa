import ArgumentParser
import Foundation
import TilepackCore
import TilepackImaging
import TilepackOperations
import TilepackStorage

struct ExportCommand: AsyncParsableCommand {
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

    @Flag(
        help:
            "\(SharedHelp.force): write into a folder that already holds files (existing tiles are replaced, never written through), or over an offline database."
    )
    var force = false

    @Flag(
        name: .customLong("maplibre-offline"),
        help: "Write a MapLibre Native offline database (the second argument is its file) instead of a tree (Specs/maplibre-offline.md).")
    var mapLibreOffline = false

    @Option(name: .customLong("style-url"), help: "With --maplibre-offline: the style URL the app opens; the style is stored under it.")
    var styleURL: String?

    @Option(help: "With --maplibre-offline: the style to store (JSON); default: a raster style for the archive.")
    var style: String?

    @Option(
        help: ArgumentHelp(
            "With --maplibre-offline and --style: read the style's glyphs from local files instead of its glyphs URL.",
            valueName: "fonts/{fontstack}/{range}.pbf"))
    var glyphs: String?

    @Option(
        help: ArgumentHelp(
            "With --maplibre-offline and --style: read the style's sprite from local files (PATH.json, PATH.png, PATH@2x...) instead of its URL.",
            valueName: "PATH"))
    var sprite: String?

    @Option(help: "With --maplibre-offline: the style's source the archive fills.")
    var source = "tilepack"

    @Option(name: .customLong("pixel-ratio"), help: "With --maplibre-offline: the pixel ratio (1, 2 or 3).")
    var pixelRatio = 1

    /// With --maplibre-offline: the box or the region.
    @OptionGroup var area: AreaOptions

    @Option(name: .customLong("min-zoom"), help: "\(SharedHelp.minZoom) to write (with --maplibre-offline).")
    var minZoom: Int?

    @Option(name: .customLong("max-zoom"), help: "\(SharedHelp.maxZoom) to write (with --maplibre-offline).")
    var maxZoom: Int?

    @OptionGroup var limit: TileLimitOptions

    @OptionGroup var output: OutputOptions

    func validate() throws {
        try checkZooms(minZoom: minZoom, maxZoom: maxZoom)
        if mapLibreOffline && styleURL == nil { throw ValidationError("--maplibre-offline needs --style-url URL") }
        let offlineOnly = styleURL != nil || style != nil || area.bbox != nil || area.region != nil || minZoom != nil || maxZoom != nil
        if !mapLibreOffline && offlineOnly {
            throw ValidationError("--style-url, --style, --bbox, --region and the zooms go with --maplibre-offline")
        }
        if (glyphs != nil || sprite != nil) && style == nil { throw ValidationError("--glyphs and --sprite go with --style FILE") }
        if let glyphs, !glyphs.contains("{fontstack}") || !glyphs.contains("{range}") {
            throw ValidationError("--glyphs needs {fontstack} and {range} in its path, e.g. fonts/{fontstack}/{range}.pbf")
        }
    }

    func run() async throws {
        if mapLibreOffline { return try await runOffline() }
        let input = try ArchiveLocation.open(archive)
        var options = ExportOptions()
        options.layout = layout
        options.scheme = scheme
        options.overwrite = force
        options.maximumTiles = limit.maxTiles
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

    private func runOffline() async throws {
        var options = MapLibreOfflineOptions(styleURL: styleURL ?? "")
        if let style {
            guard let data = FileManager.default.contents(atPath: style) else {
                throw CommandFailure(
                    style, FileManager.default.fileExists(atPath: style) ? "cannot read the style" : "no such file (the style)")
            }
            options.style = data
            // Its glyphs and sprites, as MapLibre's own offline download takes them.
            if let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] {
                let (assets, warnings) = MapLibreStyleResources.list(style: object, pixelRatio: pixelRatio)
                for warning in warnings { printError("warning: \(style): \(warning)") }
                options.styleAssets = try await MapLibreStyleResources.load(
                    assets, files: MapLibreAssetFiles(glyphs: glyphs, sprite: sprite))
            }
        }
        options.sourceName = source
        options.pixelRatio = pixelRatio
        options.bounds = area.bbox?.box
        options.region = area.region?.region
        options.minZoom = minZoom
        options.maxZoom = maxZoom
        options.overwrite = force
        options.maximumTiles = limit.maxTiles
        let report = try MapLibreOfflineExporter.run(source: archive, destination: folder, options: options)
        if output.json {
            try printJSON(report)
        } else {
            print(
                "wrote \(report.tiles) tiles (\(report.bytes) bytes) as \(report.tileURLTemplate) into the MapLibre offline database \(folder) in \(String(format: "%.2f", report.seconds)) s"
            )
            if report.glyphRanges + report.spriteFiles + report.missingGlyphRanges > 0 {
                print(
                    "with \(report.glyphRanges) glyph ranges and \(report.spriteFiles) sprite files"
                        + (report.missingGlyphRanges > 0 ? " (\(report.missingGlyphRanges) glyph ranges the fonts lack were left out)" : "")
                )
            }
        }
    }
}

struct ConvertCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "convert",
        abstract: "Convert between archive formats (\(TileArchiveFormat.extensions("and"))), and MBTiles flat <-> deduplicated.",
        discussion:
            """
            The output's extension chooses its format. Tile bytes and metadata are kept, so agg_tiles_hash is unchanged, \
            unless --encode stores raw pixels or --format re-encodes the images.

            --format re-encodes every raster tile and prints, for each zoom, the bytes before and after and the PSNR \
            of the new tiles against the originals. Examples:
              tilepack convert aerial.mbtiles small.mbtiles --format webp --quality 80
              tilepack convert aerial.mbtiles app.pmtiles --format webp --quality 0-12:85,13-16:70,17-:55
              tilepack convert map.tilepack map-lossless.tilepack --format webp --lossless
            """
    )

    @Argument(help: "The input archive.")
    var input: String

    @Argument(help: "The output (\(TileArchiveFormat.extensions())).")
    var output: String

    @Flag(help: "MBTiles output: store identical tiles once (map + images schema).")
    var dedup = false

    @Option(help: "Bundle output: store raw pixels: \(RawEncoding.allValueStrings.joined(separator: ", ")).")
    var encode: RawEncoding?

    @Option(help: "Re-encode every raster tile: png, jpeg or webp.")
    var format: String?

    @Option(help: "With --format jpeg or webp: quality 1-100, or per zoom range: 0-12:85,13-16:70,17-:55 (default 85).")
    var quality: String?

    @Flag(help: "With --format webp: lossless.")
    var lossless = false

    @OptionGroup var writer: ArchiveWriterOptions

    @OptionGroup var limit: TileLimitOptions

    /// The re-encoding asked for (`--format`, `--quality`, `--lossless`), or `nil`.
    /// - Throws: `ValidationError`, a usage error: `validate()` calls it first.
    func encoding() throws -> TileEncoding? {
        guard let format else {
            if quality != nil || lossless { throw ValidationError("--quality and --lossless go with --format") }
            return nil
        }
        guard let tileFormat = TileFormat(rawValue: format == "jpg" ? "jpeg" : format.lowercased()) else {
            throw ValidationError("--format is png, jpeg or webp, not '\(format)'")
        }
        do {
            return try TileEncoding(format: tileFormat, quality: quality, lossless: lossless)
        } catch {
            throw ValidationError("\(error)")
        }
    }

    func validate() throws { _ = try encoding() }

    func run() throws {
        var options = ConvertOptions()
        options.maximumTiles = limit.maxTiles
        options.format = try encoding()
        options.deduplicate = dedup
        options.encode = encode?.pixelFormat
        options.writing = writer.writing
        let report = try writer.write(to: output, label: "convert") { local, progress in
            try ArchiveConverter.run(source: input, destination: local, options: options, progress: progress)
        }
        if writer.output.json {
            try printJSON(report)
        } else {
            for note in report.notes { printError("note: \(note)") }
            for warning in report.warnings { printError("warning: \(warning)") }
            if let zooms = report.reencoded {
                print("zoom  tiles  bytes before  bytes after  ratio  median PSNR  lowest PSNR")
                for z in zooms {
                    let ratio = z.bytesBefore > 0 ? Double(z.bytesAfter) / Double(z.bytesBefore) : 0
                    func db(_ value: Double?) -> String { value.map { String(format: "%.1f dB", $0) } ?? "-" }
                    print(
                        String(format: "%4d %6d %13d %12d %6.2f", z.zoom, z.tiles, z.bytesBefore, z.bytesAfter, ratio)
                            + "  \(db(z.medianPSNR).padding(toLength: 11, withPad: " ", startingAt: 0))  \(db(z.lowestPSNR))")
                }
            }
            print(
                "converted \(report.tiles) tiles (\(report.bytesIn) -> \(report.bytesOut) bytes) into \(output) in \(String(format: "%.2f", report.seconds)) s"
            )
        }
    }
}
