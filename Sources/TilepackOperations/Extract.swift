import Foundation
import TilepackCore
import TilepackPlan
import TilepackStorage

/// Options of ``TileExtractor``.
package struct ExtractOptions: Sendable {
    /// How the output is written (`--force`, `--agg-tiles-hash`, `--keep-mixed-compression`, `--index`).
    package var writing = ArchiveWriteOptions()
    /// The region; `nil` for the whole archive.
    package var bounds: GeoBoundingBox?
    /// An area of polygons instead of a box (`--region`): the tiles sharing area with it.
    package var region: GeoRegion?
    package var minZoom: Int?
    package var maxZoom: Int?
    /// The most tiles written (`--max-tiles`, default 500,000,000): a PMTiles selection of more
    /// (counted from its runs) is refused before anything is written. Extract cuts tiles out of
    /// runs (a box is squares of them, not runs), so a .pmtiles output is written tile by tile too.
    package var maximumTiles = TileCountLimit.defaultMaximum
    /// `--budget`: only the tiles of this plan (``ArchivePlanning``), written in the order its
    /// size prediction assumes.
    package var plan: TilePlan?
    /// `--key`: each tile checked against the source's signed root, the output's `.tpsig` written.
    package var verification: ExtractVerification?
    package init() {}
}

/// What an extract did.
package struct ExtractReport: Sendable, Codable {
    package var source: String
    package var destination: String
    package var tiles = 0
    package var bytes = 0
    package var seconds = 0.0
    /// Metadata values the output's format cannot hold, each mapped or dropped (see ``MetadataMapping``).
    package var warnings: [String] = []
}

/// Copies a region of any archive (local or remote) into a new archive of any format, reading only
/// the tiles it needs: a PMTiles source lists its directories and reads the chosen tiles in file
/// order (a remote source fetches neighbours in one request); other archives look the region's
/// tiles up one by one when the region is small against the archive, else read every tile once
/// and keep those inside.
package enum TileExtractor {
    package static func run(
        source: String, destination: String, options: ExtractOptions,
        progress: ProgressHandler? = nil
    ) throws(OperationError) -> ExtractReport {
        let input = try ArchiveLocation.open(source)
        return try run(archive: input, destination: destination, options: options, progress: progress)
    }

    package static func run(
        archive input: any TileArchive, destination: String, options: ExtractOptions,
        progress: ProgressHandler? = nil
    ) throws(OperationError) -> ExtractReport {
        let start = DispatchTime.now().uptimeNanoseconds
        let source = input.path
        try OutputIsInput.refuse(output: destination, inputs: [source])
        if let minZoom = options.minZoom, let maxZoom = options.maxZoom, minZoom > maxZoom {
            throw OperationError(path: "", fault: .badInput("--min-zoom \(minZoom) is above --max-zoom \(maxZoom)"))
        }
        let format = try ArchiveOutput.format(of: destination)
        let options = try Self.boxOfRegion(options)
        let (read, levels) = try Self.metadataAndLevels(input, path: source)
        if case .rawBitmap = input.content, !format.storesRawPixels {
            throw OperationError(
                path: destination, fault: .badInput("raw-bitmap tiles can only be extracted into a .tilepack bundle (convert them first)"))
        }
        let subset = SubsetMetadata(read, source: source, format: format, options: options)
        // The zooms and box as ranges: a PMTiles run of billions of tiles costs only the tiles it
        // shares with them, counted before anything is written.
        let selection = TileSelection(
            zooms: (options.minZoom ?? 0)...max(options.minZoom ?? 0, options.maxZoom ?? TileCoordinate.maximumZoom),
            bounds: options.bounds)
        if let count = try TileCountLimit.count(of: input, zooms: selection.zooms, bounds: selection.bounds) {
            try TileCountLimit.check(count, limit: options.maximumTiles, source: source, writing: "extract into \(destination)")
        }
        let sink = try ArchiveOutput.open(
            destination, format: format, metadata: subset.metadata,
            options: options.writing.sinkOptions(carriesHash: subset.carriesHash, inputs: [input]))
        let zooms = levels.map(\.zoom).filter { zoom in
            (options.minZoom.map { zoom >= $0 } ?? true) && (options.maxZoom.map { zoom <= $0 } ?? true)
        }
        let covers = try regionCovers(options.region, zooms: zooms)
        let writer = ExtractWriter(
            sink: sink, content: input.content, watchedBounds: subset.besideBounds != nil ? subset.declared : nil,
            verification: options.verification, progress: progress, start: start)
        writer.report = ExtractReport(source: source, destination: destination)
        writer.report.warnings = subset.warnings
        do {
            try copy(
                from: input, into: writer, format: format, options: options, selection: selection,
                zooms: zooms, levels: levels, covers: covers)
        } catch {
            throw OperationError.wrapping(error, path: destination)
        }
        // A selection that holds no tile of the archive (a box with latitude and longitude
        // swapped, zooms it does not have) is a mistake, as in `import`: the sink is dropped
        // unfinished, so nothing is written.
        if let besideBounds = subset.besideBounds {
            guard writer.tileOutsideBounds else {
                throw OperationError(path: source, fault: .badInput(besideBounds + " Nothing was written."))
            }
            writer.report.warnings.append(
                "the box lies outside the bounds the archive's metadata declares (\(subset.declared.map { "\($0)" } ?? "")), but the archive holds tiles there: its bounds are wrong"
            )
        }
        if writer.report.tiles == 0, options.bounds != nil || options.minZoom != nil || options.maxZoom != nil, !levels.isEmpty {
            throw OperationError(
                path: source, fault: .badInput(Self.nothingSelected(options: options, levels: levels, declared: subset.declared)))
        }
        do {
            if !writer.began, let content = input.content { try sink.begin(content: content) }
            try options.verification?.finish(writingBeside: destination)
            try sink.finish(metadata: subset.metadata)
        } catch {
            options.verification?.discard()
            throw OperationError.wrapping(error, path: destination)
        }
        writer.report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return writer.report
    }

    /// Each zoom's cover of the region (`--region`), or nil without one.
    static func regionCovers(_ region: GeoRegion?, zooms: [Int]) throws(OperationError) -> [Int: RegionCover]? {
        guard let region else { return nil }
        do {
            return try Dictionary(uniqueKeysWithValues: zooms.map { ($0, try RegionCover(region: region, zoom: $0)) })
        } catch {
            throw OperationError(path: "", fault: .badInput("\(error)"))
        }
    }

    /// Reads the selected tiles into `writer` the cheapest way the input allows: a plan's tiles in
    /// the order its size was predicted for, a selective reader's ranges, the region's tiles looked
    /// up one by one when they are few, or every tile read once and those inside kept.
    private static func copy(
        from input: any TileArchive, into writer: ExtractWriter, format: TileArchiveFormat, options: ExtractOptions,
        selection: TileSelection, zooms: [Int], levels: [ZoomLevelSummary], covers: [Int: RegionCover]?
    ) throws {
        let wanted: @Sendable (TileCoordinate) -> Bool = { tile in
            if let minZoom = options.minZoom, tile.zoom < minZoom { return false }
            if let maxZoom = options.maxZoom, tile.zoom > maxZoom { return false }
            if let box = options.bounds, (try? box.intersects(tile)) != true { return false }
            if let covers, covers[tile.zoom]?.contains(tile) != true { return false }
            if let plan = options.plan, !plan.contains(tile) { return false }
            return true
        }
        if let plan = options.plan, format == .mbtiles || !(input is any SelectiveTileReading) {
            // An MBTiles output in its index's order: the order its size was predicted for.
            for tile in plan.tilesInWriteOrder {
                try input.withTileBytes(at: tile) { try writer.add(tile, $0) }
            }
        } else if let selective = input as? any SelectiveTileReading {
            try selective.forEachTile(in: selection, where: wanted, writer.add)
        } else if let candidates = try candidates(zooms: zooms, levels: levels, bounds: options.bounds, covers: covers) {
            for tile in candidates {
                try input.withTileBytes(at: tile) { try writer.add(tile, $0) }
            }
        } else {
            try input.forEachTile { tile, bytes in
                if wanted(tile) { try writer.add(tile, bytes) }
            }
        }
    }

    /// The metadata and zoom levels of an archive being read; a fault names the archive.
    static func metadataAndLevels(_ input: any TileArchive, path: String) throws(OperationError) -> (TileMetadata, [ZoomLevelSummary]) {
        do {
            return (try input.metadata(), try input.zoomLevels())
        } catch {
            throw OperationError.wrapping(error, path: path)
        }
    }

    /// With a region, its box as the bounds: the box selects, the region's cover decides.
    static func boxOfRegion(_ options: ExtractOptions) throws(OperationError) -> ExtractOptions {
        guard let region = options.region else { return options }
        if options.bounds != nil {
            throw OperationError(path: "", fault: .badInput("give a box (--bbox) or a region (--region), not both"))
        }
        var boxed = options
        boxed.bounds = region.boundingBox
        return boxed
    }

    /// Why an extract found nothing to copy: the filters, and where the archive's tiles are.
    static func nothingSelected(options: ExtractOptions, levels: [ZoomLevelSummary], declared: GeoBoundingBox?) -> String {
        var filters: [String] = []
        if options.region != nil {
            filters.append("the region")
        } else if let box = options.bounds {
            filters.append("the box \(box) (west,south,east,north)")
        }
        if let minZoom = options.minZoom { filters.append("--min-zoom \(minZoom)") }
        if let maxZoom = options.maxZoom { filters.append("--max-zoom \(maxZoom)") }
        let zooms = levels.map(\.zoom)
        var holds = ["zooms \(zooms.min() ?? 0)-\(zooms.max() ?? 0)"]
        if let declared { holds.append("bounds \(declared)") }
        var text = "no tile of the archive lies in \(filters.joined(separator: " and ")); it holds \(holds.joined(separator: ", "))."
        if options.region == nil, let box = options.bounds, let declared,
            let hint = BoxBesideBounds.swappedHint(box: box, bounds: [declared])
        {
            text += hint
        }
        return text + " Nothing was written."
    }

    /// The tiles of the region, in (zoom, x, y) order, when looking each up costs less than reading
    /// the archive: at most as many as the archive holds at those zooms. `nil` otherwise.
    static func candidates(zooms: [Int], levels: [ZoomLevelSummary], bounds: GeoBoundingBox?, covers: [Int: RegionCover]? = nil) throws
        -> [TileCoordinate]?
    {
        guard let bounds else { return nil }
        let held = levels.filter { zooms.contains($0.zoom) }.reduce(0) { $0 + $1.tileCount }
        var ranges: [TileRange] = []
        var count = 0
        for zoom in zooms {
            for range in try covers?[zoom]?.ranges ?? bounds.tileRanges(atZoom: zoom) {
                count += range.count
                if count > held { return nil }
                ranges.append(range)
            }
        }
        return ranges.flatMap { Array($0) }.sorted()
    }

}

/// The subset's metadata: named after its source when unnamed, fitted to the output's format,
/// without the source's extent and hash (the writers derive zooms and center again, and an MBTiles
/// writer the hash when the source carried one or when asked), its bounds the box's part of them.
private struct SubsetMetadata {
    var metadata: TileMetadata
    /// Values the output's format cannot hold, each mapped or dropped.
    let warnings: [String]
    /// Whether the output carries `agg_tiles_hash`.
    let carriesHash: Bool
    /// The bounds the source's metadata declares.
    let declared: GeoBoundingBox?
    /// A box beside the archive's bounds is a mistake even when the world tiles of the low zooms
    /// touch it and would make it look like a success: refused before the output is finished,
    /// unless a tile wholly outside the bounds is copied (the bounds then are what is wrong, not
    /// the box). The refusal's text, when the box lies beside them.
    let besideBounds: String?

    init(_ read: TileMetadata, source: String, format: TileArchiveFormat, options: ExtractOptions) {
        var metadata = read
        if metadata.name?.isEmpty ?? true { metadata.name = ArchiveLocation.baseName(source) }
        let fitted = MetadataMapping.fitted(metadata, for: format)
        metadata = fitted.metadata
        warnings = fitted.notes
        carriesHash = options.writing.aggregateTilesHash || metadata[TileMetadata.Key.aggregateTilesHash] != nil
        for key in [TileMetadata.Key.aggregateTilesHash, TileMetadata.Key.minZoom, TileMetadata.Key.maxZoom, TileMetadata.Key.center] {
            metadata[key] = nil
        }
        let declared = (try? metadata.bounds) ?? nil
        var besideBounds: String?
        if let box = options.bounds {
            if options.region == nil, let declared {
                besideBounds = BoxBesideBounds.mistake(box: box, bounds: [declared], declaredBy: "the archive's metadata")
            }
            metadata.setBounds(declared.flatMap { BoxBesideBounds.intersection($0, box) } ?? box)
        }
        self.metadata = metadata
        self.declared = declared
        self.besideBounds = besideBounds
    }
}

/// Writes an extract's tiles into its sink, begun with the first tile's content, counting them,
/// noting a tile wholly outside the watched bounds, and reporting progress.
private final class ExtractWriter {
    let sink: TileSink
    let content: TileContent?
    /// The declared bounds, when a tile outside them would show them wrong.
    let watchedBounds: GeoBoundingBox?
    /// `--key`: each tile checked against the source's signed root before it is written.
    let verification: ExtractVerification?
    let progress: ProgressHandler?
    let start: UInt64
    var lastReport: UInt64
    var report = ExtractReport(source: "", destination: "")
    var began = false
    var tileOutsideBounds = false

    init(
        sink: TileSink, content: TileContent?, watchedBounds: GeoBoundingBox?, verification: ExtractVerification?,
        progress: ProgressHandler?, start: UInt64
    ) {
        self.sink = sink
        self.content = content
        self.watchedBounds = watchedBounds
        self.verification = verification
        self.progress = progress
        self.start = start
        lastReport = start
    }

    func add(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer) throws {
        if !began {
            try sink.begin(content: content ?? TileFormat.sniff(bytes).map { .encoded($0) } ?? .encoded(.png))
            began = true
        }
        try verification?.check(tile, bytes)
        try sink.add(tile, bytes: bytes)
        if !tileOutsideBounds, let watchedBounds, (try? watchedBounds.intersects(tile)) != true {
            tileOutsideBounds = true
        }
        report.tiles += 1
        report.bytes += bytes.count
        let now = DispatchTime.now().uptimeNanoseconds
        if let progress, now - lastReport > 200_000_000 {
            lastReport = now
            progress(OperationProgress(done: report.tiles, total: nil, bytes: report.bytes, elapsed: Double(now - start) / 1e9))
        }
    }
}
