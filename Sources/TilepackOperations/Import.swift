import Foundation
import TilepackCore
import TilepackImaging
@_spi(TilepackInternal) import TilepackStorage

/// Options of ``TileImporter``.
package struct ImportOptions: Sendable {
    /// How the output is written (`--force`, `--agg-tiles-hash`, `--keep-mixed-compression`, `--index`).
    package var writing = ArchiveWriteOptions()
    /// The folder layout; `nil` takes it from the tree's `metadata.json`, else zxy.
    package var layout: TileTreeLayout?
    /// The row scheme; `nil` takes it from the tree's description files, else XYZ.
    package var scheme: TileScheme?
    package var minZoom: Int?
    package var maxZoom: Int?
    package var bounds: GeoBoundingBox?
    /// Import a tree whose tiles are of more than one format (the archive's `format` is the first).
    package var allowMixedFormats = false
    /// Metadata given by the user (name, attribution, description, type); wins over the tree's.
    package var metadata: [String: String] = [:]
    /// Add to an existing archive instead of creating one.
    package var append = false
    /// For a bundle: decode every image and store raw pixels in this format.
    package var encode: PixelFormat?
    /// For MBTiles: store identical tiles once (`map` + `images`).
    package var deduplicate = false
    /// Import only this part of the tree (see ``TreeShards``); `nil` for the whole tree.
    package var shard: ShardSpec?
    /// Files read at once.
    package var threads = max(1, ProcessInfo.processInfo.activeProcessorCount)
    /// Where to write the report of skipped files (JSON lines, see ``ImportReportFile``): checked
    /// before the import starts, written however it ends.
    package var reportPath: String?

    package init() {}
}

/// What an import did.
package struct ImportReport: Sendable, Codable {
    package var source: String
    package var destination: String
    package var format: String?
    package var scheme: TileScheme
    package var layout: TileTreeLayout
    package var imported = 0
    package var bytes = 0
    /// Tiles per zoom level.
    package var zooms: [Int: Int] = [:]
    /// Everything found in the tree and not imported, with the reason.
    package var skipped: [SkippedFile] = []
    /// Tiles left out by the zoom or box filters.
    package var filtered = 0
    /// What the importer read from the tree and decided.
    package var notes: [String] = []
    package var seconds = 0.0
}

/// Imports a directory tree of tile files into an archive.
package enum TileImporter {
    /// Tiles read and checked per batch, at most; fewer when tiles are large (see ``batchBytes``).
    static let batchSize = 512
    /// The bytes a batch should hold: batches are sized from the mean tile size seen so far, so
    /// the four batches an import holds (three read ahead, one being written) stay near 16 MiB
    /// whether tiles are 1 KiB or 100 KiB.
    static let batchBytes = 4 << 20
    /// The first batch's size, before any tile size is known.
    static let firstBatchSize = 64

    /// Runs an import.
    /// - Throws: ``OperationError`` for anything that stops the import; the destination is then
    ///   left as it was. Files that cannot be imported are not errors: they are in the report.
    package static func run(
        source: String, destination: String, options: ImportOptions,
        progress: ProgressHandler? = nil
    ) throws(OperationError) -> ImportReport {
        let reportFile = try options.reportPath.map { path throws(OperationError) in try ImportReportFile(path: path) }
        var report = ImportReport(source: source, destination: destination, scheme: options.scheme ?? .xyz, layout: options.layout ?? .zxy)
        do {
            try WorkerPool.with(threads: options.threads) { pool throws(OperationError) in
                try run(source: source, destination: destination, options: options, progress: progress, pool: pool, report: &report)
            }
        } catch {
            let failure = OperationError.wrapping(error, path: source)
            try reportFile?.write(report, error: failure)
            throw failure
        }
        try reportFile?.write(report, error: nil)
        return report
    }

    private static func run(
        source: String, destination: String, options: ImportOptions,
        progress: ProgressHandler?, pool: WorkerPool, report: inout ImportReport
    ) throws(OperationError) {
        let start = DispatchTime.now().uptimeNanoseconds
        try checkIsFolder(source)
        let evidence = try TreeEvidence.read(root: source)
        var walker = try walker(of: source, evidence: evidence, options: options, report: &report)
        let total = progress == nil ? nil : countFiles(source)
        let metadata = initialMetadata(evidence: evidence, source: source, options: options)
        let format = try ArchiveOutput.format(of: destination)
        // MBTiles: tiles in agg_tiles_hash's order, so the writer hashes (when asked) and counts
        // them as they come.
        if format == .mbtiles { walker.rowOrder = .tms }
        var sinkOptions = options.writing.sinkOptions(carriesHash: false)
        (sinkOptions.append, sinkOptions.deduplicate) = (options.append, options.deduplicate)
        let sink = try ArchiveOutput.open(destination, format: format, metadata: metadata, encode: options.encode, options: sinkOptions)
        var tally = ImportTally(
            boundsCheck: evidence.bounds.map { DeclaredBoundsCheck(bounds: $0, layout: walker.layout, scheme: walker.scheme) })
        var lastReport = start

        // The tree is walked and each batch started on the workers by a thread of its own, up to
        // three batches ahead of this one, which writes them.
        let prepare = sink.prepare, usesCRC = sink.usesCRC
        let shelf = TileFileReader.ScratchShelf()
        let feeder = BatchFeeder(walker: walker, depth: 3) { files in
            TileFileReader.start(files, options: options, usesCRC: usesCRC, prepare: prepare, pool: pool, shelf: shelf)
        }
        defer { feeder.stop() }
        defer { tally.recordZooms(in: &report) }
        // What the walk and the reads set aside, in path order, for the report however the import ends.
        @discardableResult
        func setAside() -> (skipped: [SkippedFile], filtered: Int, filteredExtent: FilteredExtent) {
            let walk = feeder.stop()
            report.filtered = walk.filtered
            report.skipped = (walk.skipped + tally.readFailures).sorted { $0.path < $1.path }
            return walk
        }
        do throws(OperationError) {
            while let batch = feeder.next() {
                batch.wait()
                try tally.take(batch, into: sink, options: options, destination: destination, report: &report)
                // Stops a wrong --layout or --scheme before the whole tree is read.
                if let note = try tally.boundsCheck?.check() { report.notes.append(note) }
                if tally.tilesSeen > 0 { feeder.meanTileBytes = tally.bytesSeen / tally.tilesSeen }
                // The batch's tile bytes were allocated by the workers: let a worker free them too
                // (a free into another thread's heap is slower, and this thread is the busy one).
                pool.submit { [batch] in withExtendedLifetime(batch) {} }
                let now = DispatchTime.now().uptimeNanoseconds
                if let progress, now - lastReport > 200_000_000 {
                    lastReport = now
                    progress(OperationProgress(done: tally.done, total: total, bytes: report.bytes, elapsed: Double(now - start) / 1e9))
                }
            }
        } catch {
            setAside()
            throw error
        }
        // Every file not imported, whether the walk or the reading found it, in path order.
        let walk = setAside()
        try finish(
            sink, metadata: metadata, tally: tally, evidence: evidence, filtered: walk.filteredExtent, source: source,
            destination: destination, options: options, report: &report)
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        progress?(OperationProgress(done: tally.done, total: total, bytes: report.bytes, elapsed: report.seconds))
    }

    /// The walker of the tree at `source`, its scheme and layout taken from the flags or the tree's
    /// evidence (which the report notes), its zooms, box and shard from the options.
    private static func walker(
        of source: String, evidence: TreeEvidence, options: ImportOptions, report: inout ImportReport
    ) throws(OperationError) -> TileTreeWalker {
        let scheme = try evidence.resolveScheme(flag: options.scheme)
        let layout = try evidence.resolveLayout(flag: options.layout)
        report.scheme = scheme
        report.layout = layout
        report.notes = evidence.notes
        if options.scheme == nil, let from = evidence.schemeSource {
            report.notes.append("using \(scheme) rows as \(from) says")
        }
        // A --bbox beside the bounds the tree declares: the check extract makes of an archive's.
        if let box = options.bounds, let declared = evidence.bounds,
            let mistake = BoxBesideBounds.mistake(box: box, bounds: declared.readings, declaredBy: declared.source)
        {
            throw OperationError(path: source, fault: .badInput(mistake + " Nothing was written."))
        }
        var walker = TileTreeWalker(
            root: source, layout: layout, scheme: scheme,
            minZoom: options.minZoom, maxZoom: options.maxZoom, bounds: options.bounds)
        if let shard = options.shard {
            walker.columns = TreeShards.selection(root: source, shard: shard)
            report.notes.append("shard \(shard): \(walker.columns?.count ?? 0) column folders of the tree")
        }
        return walker
    }

    /// The tree's metadata with the user's over it, named after the folder when unnamed, without
    /// a format: the tiles decide it (a declared one is compared with them at the end).
    private static func initialMetadata(evidence: TreeEvidence, source: String, options: ImportOptions) -> TileMetadata {
        var metadata = TileMetadata(evidence.metadata)
        for (key, value) in options.metadata { metadata[key] = value }
        if metadata.name == nil {
            // The folder's name as text (bytes that are not UTF-8 shown as U+FFFD).
            let folderName = URL(fileURLWithPath: source).standardizedFileURL.lastPathComponent
            metadata.name = String(decoding: PathBytes.bytes(of: folderName), as: UTF8.self)
        }
        metadata[TileMetadata.Key.format] = nil
        return metadata
    }

    /// Sets the format the tiles have, refuses an import that wrote nothing, widens the metadata
    /// to the tiles, and finishes the archive.
    private static func finish(
        _ sink: TileSink, metadata: TileMetadata, tally: ImportTally, evidence: TreeEvidence, filtered: FilteredExtent,
        source: String, destination: String, options: ImportOptions, report: inout ImportReport
    ) throws(OperationError) {
        var metadata = metadata
        if let archiveFormat = tally.archiveFormat {
            report.format = archiveFormat.metadataValue
            if let declared = evidence.format, declared != archiveFormat {
                report.notes.append(
                    "the tree's description says \(declared), the tiles are \(archiveFormat): format set to \(archiveFormat)")
            }
            metadata.setFormat(archiveFormat)
        }
        if report.imported == 0 {
            throw OperationError(path: source, fault: .badInput(nothingImported(report, filtered: filtered, options: options)))
        }
        // Tiles beyond what the metadata declares (a tree exported, then given deeper tiles):
        // the metadata is widened to them, and the import says so once.
        let zooms = tally.zoomCounts.indices.filter { tally.zoomCounts[$0] > 0 }
        if let lowest = zooms.first, let highest = zooms.last,
            let note = Self.widen(
                &metadata, toZooms: lowest...highest, deepest: tally.deepest,
                declaredBy: evidence.metadata.isEmpty ? "the metadata" : "the tree's metadata")
        {
            report.notes.append(note)
        }
        do {
            try sink.finish(metadata: metadata)
        } catch {
            throw OperationError.wrapping(error, path: destination)
        }
    }

    /// Widens `metadata`'s `minzoom`, `maxzoom` and `bounds` where the tiles go beyond them (the
    /// deepest zoom's tiles outside the tiles that cover the bounds); never narrows them.
    /// - Returns: the one note that says what changed, or `nil` when nothing did.
    static func widen(_ metadata: inout TileMetadata, toZooms zooms: ClosedRange<Int>, deepest: TileExtent?, declaredBy: String) -> String?
    {
        var changes: [String] = []
        if let declared = (try? metadata.minZoom) ?? nil, declared > zooms.lowerBound {
            metadata.setMinZoom(zooms.lowerBound)
            changes.append("minzoom \(declared) to \(zooms.lowerBound)")
        }
        if let declared = (try? metadata.maxZoom) ?? nil, declared < zooms.upperBound {
            metadata.setMaxZoom(zooms.upperBound)
            changes.append("maxzoom \(declared) to \(zooms.upperBound)")
        }
        if let declared = (try? metadata.bounds) ?? nil, declared.west <= declared.east, let deepest,
            let ranges = try? declared.tileRanges(atZoom: deepest.zoom), ranges.count == 1, let cover = ranges.first
        {
            let northWest = WebMercator.boundingBox(of: deepest.tile(x: deepest.columns.lowerBound, y: deepest.rows.lowerBound))
            let southEast = WebMercator.boundingBox(of: deepest.tile(x: deepest.columns.upperBound, y: deepest.rows.upperBound))
            var box = declared
            if deepest.columns.lowerBound < cover.columns.lowerBound { box.west = northWest.west }
            if deepest.columns.upperBound > cover.columns.upperBound { box.east = southEast.east }
            if deepest.rows.lowerBound < cover.rows.lowerBound { box.north = northWest.north }
            if deepest.rows.upperBound > cover.rows.upperBound { box.south = southEast.south }
            if box != declared {
                metadata.setBounds(box)
                changes.append("bounds \(declared) to \(metadata[TileMetadata.Key.bounds] ?? "\(box)")")
            }
        }
        guard !changes.isEmpty else { return nil }
        return
            "the tiles go beyond what \(declaredBy) declares: widened \(changes.joined(separator: ", ")) (zooms \(zooms.lowerBound)-\(zooms.upperBound) hold tiles)"
    }

    /// An import's source must be a folder; given an archive, say so and name the command for it.
    static func checkIsFolder(_ source: String) throws(OperationError) {
        guard let info = FileSystem.stat(source) else {
            throw OperationError(path: source, fault: .badInput("no such folder"))
        }
        if (info.st_mode & S_IFMT) == S_IFDIR { return }
        let what: String
        do {
            let format = try TileArchiveFormat.detect(path: source)
            what =
                "an \(format) archive, not a folder of tiles: to change its format use `tilepack convert`, to take a part of it `tilepack extract`"
        } catch {
            if case .notAnArchive(let detected) = error.fault {
                what = "\(detected), not a folder of tiles"
            } else {
                what = "not a folder of tiles"
            }
        }
        throw OperationError(path: source, fault: .badInput(what))
    }

    /// Why an import found nothing to write: the filters left nothing (with what the tree
    /// holds), every file was skipped, or the tree holds no tile files.
    static func nothingImported(_ report: ImportReport, filtered: FilteredExtent, options: ImportOptions) -> String {
        if report.filtered > 0 {
            var filters: [String] = []
            if let minZoom = options.minZoom { filters.append("--min-zoom \(minZoom)") }
            if let maxZoom = options.maxZoom { filters.append("--max-zoom \(maxZoom)") }
            if let box = options.bounds { filters.append("--bbox \(box)") }
            var holds = ["zooms \(filtered.zoomText)"]
            if options.bounds != nil, let box = filtered.boundingBox { holds.append("tiles within \(box)") }
            return
                "no tile of the tree passes \(filters.joined(separator: " and ")); the tree holds \(holds.joined(separator: ", ")). Nothing was written."
        }
        if let first = report.skipped.first {
            return "no file of the tree could be imported (\(report.skipped.count) skipped; the first: \(first)). Nothing was written."
        }
        return "the folder holds no tile files (z/x/y.ext, or z/y/x.ext with --layout zyx). Nothing was written."
    }

    /// Files below `root`, counted from folder listings alone (for the progress bar's ETA).
    static func countFiles(_ root: String) -> Int {
        var count = 0
        var stack = [(root, 0)]
        while let (path, level) = stack.popLast() {
            guard let names = FileSystem.entries(path)?.map(\.name) else { continue }
            if level == 2 {
                count += names.count
                continue
            }
            for name in names where name.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
                stack.append((path + "/" + name, level + 1))
            }
        }
        return count
    }
}

/// What an import has taken from its batches so far: the tiles' format and raw size, the files
/// read and those that failed, the tiles per zoom, the deepest zoom's extent, and the check of
/// the bounds the tree declares.
struct ImportTally {
    var archiveFormat: TileFormat?
    var rawSize: Int?
    /// Files taken, imported or not.
    var done = 0
    var readFailures: [SkippedFile] = []
    /// Tiles per zoom (an array indexed by zoom: a dictionary update per tile costs a hash).
    var zoomCounts = [Int](repeating: 0, count: TileCoordinate.maximumZoom + 1)
    var bytesSeen = 0
    var tilesSeen = 0
    /// The columns and rows of the deepest zoom's tiles: what the metadata's bounds must cover.
    var deepest: TileExtent?
    var boundsCheck: DeclaredBoundsCheck?

    init(boundsCheck: DeclaredBoundsCheck?) {
        self.boundsCheck = boundsCheck
    }

    /// Writes a batch's tiles into `sink` (begun with the first tile's content), setting aside
    /// the files that failed to read or whose raw size differs from the first's.
    mutating func take(
        _ batch: TileFileReader.Batch, into sink: TileSink, options: ImportOptions, destination: String,
        report: inout ImportReport
    ) throws(OperationError) {
        // By index, the file's tile read in place: a copy of each `TileFile` would retain its
        // folder, an object the walker and the workers retain and release too.
        for index in batch.inputs.indices {
            done += 1
            let tile = batch.inputs[index].tile
            switch batch[index] {
            case .failure(let failure):
                readFailures.append(SkippedFile(path: batch.inputs[index].path, reason: failure.reason))
            case .success(let read):
                if let archiveFormat, read.format != archiveFormat, !options.allowMixedFormats {
                    throw OperationError(
                        path: batch.inputs[index].path,
                        fault: .badInput(
                            "this tile is \(read.format) but earlier tiles are \(archiveFormat): the tree mixes formats (use --allow-mixed-formats to import it anyway)"
                        ))
                }
                if let size = read.rawSize {
                    if let rawSize, rawSize != size {
                        readFailures.append(
                            SkippedFile(
                                path: batch.inputs[index].path,
                                reason: "\(size)x\(size) pixels, but earlier tiles are \(rawSize)x\(rawSize)"))
                        continue
                    }
                    rawSize = size
                }
                do {
                    if archiveFormat == nil {
                        archiveFormat = read.format
                        try sink.begin(
                            content: read.rawSize.map {
                                .rawBitmap(RawBitmapLayout(pixelFormat: options.encode ?? .rgba8888, width: $0, height: $0))
                            } ?? .encoded(read.format))
                    }
                    try sink.add(tile, prepared: read.prepared)
                } catch {
                    throw OperationError.wrapping(error, path: destination)
                }
                report.imported += 1
                report.bytes += read.byteCount
                bytesSeen += read.byteCount
                tilesSeen += 1
                zoomCounts[tile.zoom] += 1
                deepest = TileExtent.adding(tile, to: deepest)
                boundsCheck?.add(tile)
            }
        }
    }

    /// The tiles per zoom, into the report.
    func recordZooms(in report: inout ImportReport) {
        for (zoom, count) in zoomCounts.enumerated() where count > 0 { report.zooms[zoom] = count }
    }
}

/// Walks a tile tree on a thread of its own and turns it into batches of files, each started (on
/// the worker pool, by `start`) as soon as it is walked, keeping at most `depth` batches ahead of
/// the consumer. Skipped and filtered entries are kept for the report.
final class BatchFeeder: @unchecked Sendable {
    typealias Batch = TileFileReader.Batch

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var ready: [Batch] = []
    private var walked = false
    private var stopping = false
    private var threadDone = false
    private var skipped: [SkippedFile] = []
    private var filtered = 0
    private var filteredExtent = FilteredExtent()

    private let depth: Int
    private let sizing = Locked(0)

    /// The mean size of the tiles read so far (0 before any), which sizes the next batches.
    var meanTileBytes: Int {
        get { sizing.withLock { $0 } }
        set { sizing.withLock { $0 = newValue } }
    }

    /// How many files the next batch takes.
    private var nextBatchSize: Int {
        let mean = meanTileBytes
        guard mean > 0 else { return TileImporter.firstBatchSize }
        return min(TileImporter.batchSize, max(8, TileImporter.batchBytes / mean))
    }

    init(walker: TileTreeWalker, depth: Int, start: @escaping @Sendable ([TileFile]) -> Batch) {
        self.depth = max(1, depth)
        let thread = Thread { [self] in walk(walker, start: start) }
        thread.name = "tilepack-walk"
        thread.start()
    }

    /// The next batch in walk order (already started), or nil when the tree is done.
    func next() -> Batch? {
        condition.lock()
        defer { condition.unlock() }
        while ready.isEmpty && !walked { condition.wait() }
        guard !ready.isEmpty else { return nil }
        let batch = ready.removeFirst()
        condition.broadcast()
        return batch
    }

    /// Stops the walk (if it is still going), waits for its thread, and returns what it set aside.
    @discardableResult
    func stop() -> (skipped: [SkippedFile], filtered: Int, filteredExtent: FilteredExtent) {
        condition.lock()
        defer { condition.unlock() }
        stopping = true
        condition.broadcast()
        while !threadDone { condition.wait() }
        ready.removeAll()
        return (skipped, filtered, filteredExtent)
    }

    private func walk(_ walker: TileTreeWalker, start: @Sendable ([TileFile]) -> Batch) {
        var iterator = walker.makeIterator()
        var skippedHere: [SkippedFile] = []
        var filteredHere = 0
        var extentHere = FilteredExtent()
        var files: [TileFile] = []
        var size = nextBatchSize
        files.reserveCapacity(TileImporter.batchSize)
        func publish(_ batch: Batch?) -> Bool {
            condition.lock()
            defer { condition.unlock() }
            if let batch { ready.append(batch) }
            condition.broadcast()
            while ready.count >= depth && !stopping { condition.wait() }
            return !stopping
        }
        var going = true
        while going, let entry = iterator.next() {
            switch entry {
            case .tile(let file):
                files.append(file)
                if files.count >= size {
                    going = publish(start(files))
                    files.removeAll(keepingCapacity: true)
                    size = nextBatchSize
                }
            case .skipped(let entry): skippedHere.append(entry)
            case .filtered(let file):
                filteredHere += 1
                extentHere.add(file.tile)
            }
        }
        if going, !files.isEmpty { _ = publish(start(files)) }
        condition.lock()
        skipped = skippedHere
        filtered = filteredHere
        filteredExtent = extentHere
        walked = true
        threadDone = true
        condition.broadcast()
        condition.unlock()
    }
}

/// Where the tiles a filter left out are: their zooms, and their extent at the deepest zoom, so
/// that a filter that selects nothing can say what the tree holds.
struct FilteredExtent: Sendable {
    private(set) var zooms: ClosedRange<Int>?
    private var deepest: TileRange?

    mutating func add(_ tile: TileCoordinate) {
        zooms = zooms.map { min($0.lowerBound, tile.zoom)...max($0.upperBound, tile.zoom) } ?? tile.zoom...tile.zoom
        if let range = deepest, range.zoom == tile.zoom {
            deepest = try? TileRange(
                zoom: tile.zoom, columns: min(range.columns.lowerBound, tile.x)...max(range.columns.upperBound, tile.x),
                rows: min(range.rows.lowerBound, tile.y)...max(range.rows.upperBound, tile.y))
        } else if deepest.map({ $0.zoom < tile.zoom }) ?? true {
            deepest = TileRange(tile: tile)
        }
    }

    var zoomText: String {
        guard let zooms else { return "none" }
        return zooms.lowerBound == zooms.upperBound ? "\(zooms.lowerBound)" : "\(zooms.lowerBound)-\(zooms.upperBound)"
    }

    /// The extent of the tiles at the deepest zoom.
    var boundingBox: GeoBoundingBox? { deepest?.boundingBox }
}
