import Foundation
import TilepackCore
import TilepackRemote
import TilepackStorage

/// Options of ``ArchiveVerifier``.
package struct VerifyOptions: Sendable {
    /// Skip decoding every tile (container, schema, metadata and hashes are still checked).
    package var quick = false
    /// Worker threads for the per-tile checks.
    package var threads = max(1, ProcessInfo.processInfo.activeProcessorCount)
    package init() {}
}

/// One thing `verify` found.
package struct VerifyFinding: Sendable, Codable, Hashable, CustomStringConvertible {
    package enum Severity: String, Sendable, Codable { case error, warning }

    package var severity: Severity
    /// What was checked: `container`, `schema`, `metadata`, `tile`, `hash`.
    package var check: String
    package var message: String
    /// The tile concerned: `z/x/y` in XYZ rows, with the stored TMS row for MBTiles.
    package var tile: TileReference?
    /// The metadata key concerned.
    package var key: String?

    package init(_ severity: Severity, _ check: String, _ message: String, tile: TileReference? = nil, key: String? = nil) {
        self.severity = severity
        self.check = check
        self.message = message
        self.tile = tile
        self.key = key
    }

    package var description: String {
        var text = "\(severity): [\(check)] "
        if let tile { text += "tile \(tile): " }
        if let key { text += "'\(key)': " }
        return text + message
    }
}

extension TileReference {
    /// An MBTiles row as stored, when its three values are whole numbers.
    init?(_ zoom: MBTilesRawValue, _ column: MBTilesRawValue, _ row: MBTilesRawValue) {
        guard let z = zoom.integerValue, let x = column.integerValue, let row = row.integerValue else { return nil }
        self.init(zoom: z, column: x, tmsRow: row)
    }
}

/// What `verify` concluded about one file.
package struct VerifyReport: Sendable, Codable {
    package var path: String
    /// `mbtiles`, `bundle`, or `nil` when the file is not an archive tilepack reads.
    package var format: TileArchiveFormat?
    /// The storage layout (MBTiles schema, or the bundle's content).
    package var layout: String?
    /// Whether the file is an archive at all; `false` means exit status 2.
    package var usable = true
    package var tiles = 0
    /// Tiles whose content was decoded (0 with `--quick`).
    package var decodedTiles = 0
    package var findings: [VerifyFinding] = []
    package var seconds = 0.0

    package var errorCount: Int { findings.filter { $0.severity == .error }.count }
    package var warningCount: Int { findings.filter { $0.severity == .warning }.count }

    /// The exit status of every command given a file that is not an archive tilepack reads.
    package static let notAnArchiveStatus: Int32 = 2

    /// 0 when there is no error (warnings allowed unless `strict`), 1 when errors were found,
    /// 2 when the file is not a usable archive.
    package func exitCode(strict: Bool) -> Int32 {
        if !usable { return Self.notAnArchiveStatus }
        if errorCount > 0 || (strict && warningCount > 0) { return 1 }
        return 0
    }

    /// The one-word result the command prints, agreeing with ``exitCode(strict:)``: with
    /// `strict`, warnings make it FAILED.
    package func verdict(strict: Bool) -> String {
        switch exitCode(strict: strict) {
        case 0: "OK"
        case 2: "not a usable archive"
        default: "FAILED"
        }
    }
}

/// The deep check behind `tilepack verify`, for MBTiles and bundles.
package enum ArchiveVerifier {
    /// Tiles handed to the workers at once.
    static let batchSize = 256
    /// Findings of one kind listed before the rest are only counted.
    static let maximumListed = 200

    package static func run(
        path: String, options: VerifyOptions = VerifyOptions(),
        progress: ProgressHandler? = nil
    ) -> VerifyReport {
        WorkerPool.with(threads: options.threads) { pool in run(path: path, options: options, progress: progress, pool: pool) }
    }

    private static func run(path: String, options: VerifyOptions, progress: ProgressHandler?, pool: WorkerPool) -> VerifyReport {
        let start = DispatchTime.now().uptimeNanoseconds
        var report = VerifyReport(path: path)
        let format: TileArchiveFormat
        // A URL is opened once, by range requests (PMTiles or a bundle; the opener names anything else).
        var remote: (any TileArchive)?
        do {
            if ArchiveLocation.isRemote(path) {
                let archive = try RemoteArchive.open(path)
                remote = archive
                format = archive is BundleArchive ? .bundle : .pmtiles
            } else {
                format = try TileArchiveFormat.detect(path: path)
            }
        } catch {
            report.usable = false
            report.findings.append(VerifyFinding(.error, "container", error.fault.description))
            return report
        }
        report.format = format
        var collector = Collector(report: report)
        switch format {
        case .mbtiles: verifyMBTiles(path: path, options: options, pool: pool, collector: &collector, progress: progress, start: start)
        case .bundle:
            verifyBundle(
                path: path, opened: remote as? BundleArchive, options: options, pool: pool, collector: &collector, progress: progress,
                start: start)
        case .pmtiles:
            verifyPMTiles(
                path: path, opened: remote as? PMTilesArchive, options: options, pool: pool, collector: &collector, progress: progress,
                start: start)
        }
        verifyStoredIdentity(path: path, opened: remote, collector: &collector)
        // A remote object nothing pins: its header and root directory read again, as a replacement
        // during the read would make every finding above one of a mix of two versions.
        do { try remote?.confirmUnchanged() } catch {
            collector.report.usable = false
            collector.add(VerifyFinding(.error, "container", (error as? TileArchiveError)?.fault.description ?? "\(error)"))
        }
        collector.finishCounting()
        report = collector.report
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    // MARK: Bundle

    /// - Parameter opened: the archive when it is already open (a remote one), else it is opened from `path`.
    static func verifyBundle(
        path: String, opened: BundleArchive?, options: VerifyOptions, pool: WorkerPool, collector: inout Collector,
        progress: ProgressHandler?, start: UInt64
    ) {
        let archive: BundleArchive
        do throws(TileArchiveError) {
            if let opened {
                archive = opened
            } else {
                archive = try BundleArchive(path: path, options: BundleArchive.Options(access: .positionalReads))
            }
        } catch {
            collector.add(VerifyFinding(.error, "container", error.fault.description))
            return
        }
        collector.report.layout = archive.content.map { "\($0)" } ?? "empty"
        let raw: RawBitmapLayout? = if case .rawBitmap(let layout) = archive.content { layout } else { nil }
        // Encoded tiles: the layout is checked here, and each payload's CRC and LZ4 block by the
        // worker that reads the tile to decode it. Raw pixels have nothing to decode: everything
        // is checked here.
        let checksumsHere = raw != nil || options.quick
        do {
            _ = try archive.verify(checksums: checksumsHere)
        } catch {
            collector.add(VerifyFinding(.error, "container", error.fault.description))
            return
        }
        var checker = ContentChecker(options: options, pool: pool, progress: progress, start: start, bundle: checksumsHere ? nil : archive)
        if progress != nil { checker.total = try? archive.tileCount() }
        do {
            if let raw {
                try archive.forEachTile { tile, bytes in
                    collector.report.tiles += 1
                    checker.count(tile)
                    // Raw pixels have nothing to decode: their size is the check.
                    if bytes.count != raw.byteCount {
                        collector.add(
                            VerifyFinding(
                                .error, "tile", "\(bytes.count) bytes, a \(raw) tile has \(raw.byteCount ?? -1)", tile: TileReference(tile))
                        )
                    }
                }
            } else if options.quick {
                try archive.forEachTile { tile, bytes in
                    collector.report.tiles += 1
                    checker.add(tile: tile, label: TileReference(tile), bytes: bytes, collector: &collector)
                }
            } else {
                try archive.forEachTileCoordinate { tile in
                    collector.report.tiles += 1
                    checker.add(tile: tile, label: TileReference(tile), collector: &collector)
                }
            }
        } catch {
            collector.add(VerifyFinding(.error, "container", "reading the tiles failed: \(error)"))
        }
        checker.finish(collector: &collector)
        let metadata: TileMetadata
        do {
            metadata = try archive.metadata()
        } catch {
            collector.add(VerifyFinding(.error, "metadata", "cannot read the metadata: \(error)"))
            return
        }
        let levels = checker.levels.keys.sorted().compactMap { checker.levels[$0] }
        var summary = TileContentSummary(levels: levels, format: raw == nil ? (try? metadata.format) ?? nil : nil)
        summary.sniffedFormat = checker.formats.keys.sorted { checker.formats[$0]! > checker.formats[$1]! }.first
        checkMetadata(metadata, summary: summary, checker: checker, collector: &collector, raw: raw != nil)
    }

    // MARK: Metadata

    /// Metadata against the spec and the content: missing or inconsistent metadata is a warning.
    static func checkMetadata(
        _ metadata: TileMetadata, summary: TileContentSummary?, checker: ContentChecker,
        collector: inout Collector, raw: Bool = false
    ) {
        for issue in MBTilesMetadataValidator.validate(metadata, content: summary) {
            if raw && issue.key == TileMetadata.Key.format { continue }
            collector.add(VerifyFinding(.warning, "metadata", issue.message, key: issue.key))
        }
        if !raw, let declared = try? metadata.format, let (sniffed, count) = checker.formats.max(by: { $0.value < $1.value }),
            declared != sniffed
        {
            collector.add(
                VerifyFinding(
                    .warning, "metadata", "format says \(declared), but \(count) tiles are \(sniffed)", key: TileMetadata.Key.format))
        }
        if checker.formats.count > 1 {
            let mix = checker.formats.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            collector.add(VerifyFinding(.warning, "tile", "the tiles mix formats: \(mix)"))
        }
    }
}

/// Findings with a cap on how many of one kind are listed.
struct Collector {
    var report: VerifyReport
    private var counts: [String: Int] = [:]
    private var unlisted: [String: (VerifyFinding, Int)] = [:]

    init(report: VerifyReport) { self.report = report }

    mutating func add(_ finding: VerifyFinding) {
        let kind = "\(finding.severity)/\(finding.check)"
        counts[kind, default: 0] += 1
        if counts[kind]! <= ArchiveVerifier.maximumListed {
            report.findings.append(finding)
        } else {
            unlisted[kind, default: (finding, 0)].1 += 1
        }
    }

    /// Adds one line per kind whose findings were only counted.
    mutating func finishCounting() {
        for (_, (sample, extra)) in unlisted.sorted(by: { $0.key < $1.key }) {
            report.findings.append(VerifyFinding(sample.severity, sample.check, "... and \(extra) more like the above (not listed)"))
        }
        unlisted = [:]
    }
}

/// Decodes tiles on worker threads in batches, while the caller reads the next tiles.
struct ContentChecker {
    let options: VerifyOptions
    let pool: WorkerPool
    let progress: ProgressHandler?
    let start: UInt64
    /// The tiles to check in all, for the progress bar's percentage and ETA.
    var total: Int?
    private var batch: [Item] = []
    /// A tile handed to the workers: its bytes copied out of the reader's transient buffer, or
    /// `nil` when the worker reads the tile from ``bundle`` itself.
    typealias Item = (tile: TileCoordinate, label: TileReference, bytes: [UInt8]?)
    /// The bundle the workers read tiles from (checking CRCs and LZ4 blocks as they go).
    let bundle: BundleArchive?
    private typealias Batch = ParallelBatch<Item, Result<TileContentCheck.Outcome, CheckFailure>, [UInt8]>
    private var running: Batch?
    /// Tile counts per zoom with their extents.
    private(set) var levels: [Int: TileContentSummary.Level] = [:]
    /// Tiles per detected format.
    private(set) var formats: [TileFormat: Int] = [:]
    /// The first image size seen, that every other image must have.
    private var imageSize: (width: Int, height: Int, label: TileReference)?
    private var done = 0
    private var lastReport: UInt64 = 0

    init(options: VerifyOptions, pool: WorkerPool, progress: ProgressHandler?, start: UInt64, bundle: BundleArchive? = nil) {
        self.bundle = bundle
        self.options = options
        self.pool = pool
        self.progress = progress
        self.start = start
    }

    mutating func add(tile: TileCoordinate, label: TileReference, bytes: UnsafeRawBufferPointer, collector: inout Collector) {
        count(tile)
        if options.quick {
            guard let format = TileFormat.sniff(bytes) else {
                collector.add(
                    VerifyFinding(
                        .error, "tile",
                        bytes.isEmpty ? "empty tile" : "bytes of no known tile format (first bytes \(TileContentCheck.hexPrefix(bytes)))",
                        tile: label))
                return
            }
            formats[format, default: 0] += 1
            return
        }
        batch.append((tile, label, Array(bytes)))
        if batch.count >= ArchiveVerifier.batchSize { flush(collector: &collector) }
    }

    /// Adds a tile of ``bundle`` that a worker reads and checks.
    mutating func add(tile: TileCoordinate, label: TileReference, collector: inout Collector) {
        count(tile)
        batch.append((tile, label, nil))
        if batch.count >= ArchiveVerifier.batchSize { flush(collector: &collector) }
    }

    /// Counts the tiles of `range` into ``levels`` at once (a run's tiles, never visited one by one).
    mutating func count(_ range: TileRange) {
        var level =
            levels[range.zoom]
            ?? TileContentSummary.Level(
                zoom: range.zoom, tileCount: 0, minX: range.columns.lowerBound, maxX: range.columns.upperBound,
                minY: range.rows.lowerBound, maxY: range.rows.upperBound)
        level.tileCount += range.count
        level.minX = min(level.minX, range.columns.lowerBound)
        level.maxX = max(level.maxX, range.columns.upperBound)
        level.minY = min(level.minY, range.rows.lowerBound)
        level.maxY = max(level.maxY, range.rows.upperBound)
        levels[range.zoom] = level
    }

    /// Counts a tile into ``levels`` (``add`` does it for the tiles it checks).
    mutating func count(_ tile: TileCoordinate) {
        if var level = levels[tile.zoom] {
            level.tileCount += 1
            level.minX = min(level.minX, tile.x)
            level.maxX = max(level.maxX, tile.x)
            level.minY = min(level.minY, tile.y)
            level.maxY = max(level.maxY, tile.y)
            levels[tile.zoom] = level
        } else {
            levels[tile.zoom] = TileContentSummary.Level(
                zoom: tile.zoom, tileCount: 1, minX: tile.x, maxX: tile.x, minY: tile.y, maxY: tile.y)
        }
    }

    mutating func finish(collector: inout Collector) {
        flush(collector: &collector)
        if let running { absorb(running, collector: &collector) }
        running = nil
        // The last count, so that a progress bar ends at its total.
        if let progress, done > 0 {
            let now = DispatchTime.now().uptimeNanoseconds
            progress(OperationProgress(done: done, total: total, bytes: 0, elapsed: Double(now - start) / 1e9))
        }
    }

    /// Starts the full batch on the workers, then takes in the results of the previous one.
    private mutating func flush(collector: inout Collector) {
        guard !batch.isEmpty else { return }
        let next = Batch(batch)
        batch.removeAll(keepingCapacity: true)
        let bundle = self.bundle
        next.start(on: pool, makeState: { [UInt8]() }) { scratch, item in
            if let bytes = item.bytes { return bytes.withUnsafeBytes { TileContentCheck.check($0, scratch: &scratch) } }
            guard let bundle else { return .failure(CheckFailure(reason: "no bytes to check")) }
            do {
                return try bundle.withTileBytes(at: item.tile) { TileContentCheck.check($0, scratch: &scratch) }
                    ?? .failure(CheckFailure(reason: "listed in the index but not found", check: "container"))
            } catch let error as TileArchiveError {
                return .failure(CheckFailure(reason: error.fault.description, check: "container"))
            } catch {
                return .failure(CheckFailure(reason: "\(error)", check: "container"))
            }
        }
        if let running { absorb(running, collector: &collector) }
        running = next
    }

    private mutating func absorb(_ pending: Batch, collector: inout Collector) {
        pending.wait()
        for (index, item) in pending.inputs.enumerated() {
            done += 1
            switch pending[index] {
            case .failure(let failure):
                collector.add(VerifyFinding(.error, failure.check, failure.reason, tile: item.label))
            case .success(let outcome):
                collector.report.decodedTiles += 1
                formats[outcome.format, default: 0] += 1
                guard let width = outcome.width, let height = outcome.height else { continue }
                if width != height || !TileSize.isValid(width) {
                    collector.add(
                        VerifyFinding(
                            .error, "tile", "image is \(width)x\(height): a tile must be a square whose side is \(TileSize.rule)",
                            tile: item.label))
                } else if let imageSize {
                    if imageSize.width != width || imageSize.height != height {
                        collector.add(
                            VerifyFinding(
                                .error, "tile",
                                "image is \(width)x\(height), but tile \(imageSize.label) is \(imageSize.width)x\(imageSize.height)",
                                tile: item.label))
                    }
                } else {
                    imageSize = (width, height, item.label)
                }
            }
        }
        let now = DispatchTime.now().uptimeNanoseconds
        if let progress, now - lastReport > 200_000_000 {
            lastReport = now
            progress(OperationProgress(done: done, total: total, bytes: 0, elapsed: Double(now - start) / 1e9))
        }
    }
}
