import Foundation
import TilepackCore
import TilepackImaging

/// What `tilepack tile` is asked to do.
package struct TileOptions: Sendable {
    package var input: String
    package var output: String
    /// nil: from the raster's resolution, as gdal2tiles.
    package var zooms: ClosedRange<Int>?
    /// With `zooms` nil: one end given (`--min-zoom` or `--max-zoom`), the other from the raster.
    package var minZoom: Int?
    package var maxZoom: Int?
    package var bounds: GeoBoundingBox?
    package var resampling = Resampling.default
    package var tileSize = 256
    package var encoding: TileEncoding
    package var keepBlank = false
    /// Non-8-bit samples: the values drawn from black (MIN) to white (MAX).
    package var range: ClosedRange<Double>?
    /// A DEM's band 1 as elevations in colours (terrain tiles), in a lossless format.
    package var elevation: ElevationEncoding?
    package var overwrite = false
    /// A bundle or PMTiles output: also write its tile hash index beside it (`ARCHIVE.tpindex`,
    /// as `tilepack index` does), to publish with it for `tilepack sync`; an MBTiles output
    /// stores its content identity instead (for `tilepack patch`).
    package var tileIndex = false
    package var threads = ProcessInfo.processInfo.activeProcessorCount

    package init(input: String, output: String, encoding: TileEncoding) {
        self.input = input
        self.output = output
        self.encoding = encoding
    }
}

/// What a run made.
package struct TileReport: Sendable {
    package var tiles = 0
    package var blank = 0
    package var bytes = 0
    package var zooms: ClosedRange<Int> = 0...0
    package var seconds = 0.0
    package var bytesPerZoom: [Int: Int] = [:]
}

/// Progress: tiles done (blank included) of at most `total`.
package typealias TileProgress = @Sendable (_ done: Int, _ total: Int, _ elapsed: Double) -> Void

/// Cuts a georeferenced raster into a tile pyramid in an archive (see `Specs/tile.md`).
///
/// The deepest zoom is warped from the source tile by tile by GDAL (each worker thread with its
/// own handles); every shallower tile is made from its four children, already in memory, by
/// ``Resampling``. Work is split into subtrees rooted at one zoom (enough of them to keep every
/// core busy, few enough that their roots fit in 256 MiB), each walked depth first by one worker,
/// so memory holds a few tiles per zoom per worker, whatever the raster's size; GDAL's block
/// cache is bounded too. Tiles are encoded on the workers and handed to the one writer in turn.
package enum Tiler {
    package static func run(_ options: TileOptions, progress: TileProgress? = nil, cancelled: @escaping @Sendable () -> Bool = { false })
        throws(TilerError) -> TileReport
    {
        let start = Date()
        guard TileSize.isValid(options.tileSize), options.tileSize == 256 || options.tileSize == 512 else {
            throw .badOption("--tile-size is 256 or 512, not \(options.tileSize)")
        }
        if let elevation = options.elevation {
            guard options.encoding.format == .png || (options.encoding.format == .webp && options.encoding.lossless) else {
                throw .badOption(
                    "--encoding \(elevation.rawValue) needs a lossless format (png, or webp with --lossless): the colours are the elevations, and \(options.encoding) would change them"
                )
            }
            guard options.range == nil else {
                throw .badOption("--range draws samples as grey; --encoding writes them as elevations: give one")
            }
        }
        let raster = try TileWarper.describe(path: options.input, range: options.range, elevation: options.elevation != nil)
        let clip = options.bounds.map(TilePlan.mercator)
        let plan = try TilePlan(
            extent: raster.extent, pixelSize: raster.pixelSize, width: raster.warpedWidth, height: raster.warpedHeight,
            tileSize: options.tileSize, zooms: options.zooms, minZoom: options.minZoom, maxZoom: options.maxZoom, clip: clip)

        var metadata = TileMetadata()
        metadata.entries[TileMetadata.Key.name] = URL(fileURLWithPath: options.input).deletingPathExtension().lastPathComponent
        metadata.entries[TileMetadata.Key.format] = options.encoding.format.metadataValue
        metadata.entries[TileMetadata.Key.type] = "baselayer"
        metadata.entries[TileMetadata.Key.minZoom] = "\(plan.zooms.lowerBound)"
        metadata.entries[TileMetadata.Key.maxZoom] = "\(plan.zooms.upperBound)"
        let b = plan.bounds
        metadata.entries[TileMetadata.Key.bounds] = "\(b.west),\(b.south),\(b.east),\(b.north)"
        metadata.entries[TileMetadata.Key.center] = "\((b.west + b.east) / 2),\((b.south + b.north) / 2),\(plan.zooms.lowerBound)"
        metadata.entries[TileMetadata.Key.description] =
            "\(URL(fileURLWithPath: options.input).lastPathComponent) cut by tilepack tile (\(options.resampling.rawValue), \(options.encoding))"
        if options.tileSize != 256 { metadata.entries["tileSize"] = "\(options.tileSize)" }
        if let elevation = options.elevation { metadata.entries["encoding"] = elevation.rawValue }

        let output = try TileOutput(
            destination: options.output, format: options.encoding.format, metadata: metadata, overwrite: options.overwrite,
            tileIndex: options.tileIndex)
        let state = TilerState(output: output, total: plan.tileCounts.values.reduce(0, +), progress: progress, start: start)

        // The zoom whose tiles root the workers' subtrees.
        let keep = (256 << 20) / (options.tileSize * options.tileSize * 4)
        var split = plan.zooms.lowerBound
        for zoom in plan.zooms {
            let count = plan.tileCounts[zoom]!
            if count > keep { break }
            split = zoom
            if count >= 8 * options.threads { break }
        }
        let root = split
        let jobs: [(x: Int, y: Int)] = {
            let r = plan.range(atZoom: root)
            return r.rows.flatMap { y in r.columns.map { x in (x, y) } }
        }()
        let roots = Locked<[TileKey: TilePixels]>([:])
        let next = Locked(0)
        let failure = Locked<TilerError?>(nil)
        let threads = max(1, min(options.threads, jobs.count))
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            do throws(TilerError) {
                let warper = try TileWarper(
                    path: options.input, tileSize: options.tileSize, resampling: options.resampling, range: options.range,
                    elevation: options.elevation != nil)
                let worker = Worker(plan: plan, options: options, warper: warper, state: state, cancelled: cancelled)
                while failure.withLock({ $0 == nil }), !cancelled() {
                    let index = next.withLock { n -> Int in
                        defer { n += 1 }
                        return n
                    }
                    guard index < jobs.count else { break }
                    let job = jobs[index]
                    if let pixels = try worker.build(zoom: root, x: job.x, y: job.y) {
                        roots.withLock { $0[TileKey(zoom: root, x: job.x, y: job.y)] = pixels }
                    }
                }
            } catch {
                failure.withLock { if $0 == nil { $0 = error } }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        if cancelled() { throw .output("cancelled: \(options.output) was not written") }

        // The zooms above the split, from the roots, on this thread.
        var level = roots.withLock { $0 }
        if split > plan.zooms.lowerBound {
            for zoom in stride(from: split - 1, through: plan.zooms.lowerBound, by: -1) {
                var upper: [TileKey: TilePixels] = [:]
                let r = plan.range(atZoom: zoom)
                for y in r.rows {
                    for x in r.columns {
                        let children = [(0, 0), (1, 0), (0, 1), (1, 1)].map {
                            level[TileKey(zoom: zoom + 1, x: 2 * x + $0.0, y: 2 * y + $0.1)]
                        }
                        let pixels = TilePixels.parent(of: children, resampling: options.resampling, side: options.tileSize)
                        try state.emit(
                            TileCoordinate(validatingZoom: zoom, x: x, y: y)!, pixels: pixels, options: options)
                        if let pixels { upper[TileKey(zoom: zoom, x: x, y: y)] = pixels }
                    }
                }
                level = upper
            }
        }
        var report = state.report
        report.zooms = plan.zooms
        guard report.tiles > 0 else {
            throw .nothingToTile("every tile of \(options.input) at zooms \(plan.zooms) is blank (no data): nothing was written")
        }
        try state.finish(metadata: metadata)
        report.seconds = Date().timeIntervalSince(start)
        return report
    }
}

/// A tile's pixels while the pyramid is made: colours (straight RGBA), or elevations (NaN: no data).
enum TilePixels: Sendable {
    case colour([UInt8])
    case elevation([Float])

    /// The parent of four children (nil: nothing there), nil when they all are.
    static func parent(of children: [TilePixels?], resampling: Resampling, side: Int) -> TilePixels? {
        guard let first = children.first(where: { $0 != nil }) ?? nil else { return nil }
        switch first {
        case .colour:
            return .colour(resampling.parent(of: children.map { if case .colour(let p) = $0 { p } else { nil } }, side: side))
        case .elevation:
            let values = resampling.parent(ofElevations: children.map { if case .elevation(let v) = $0 { v } else { nil } }, side: side)
            return values.contains { !$0.isNaN } ? .elevation(values) : nil
        }
    }
}

struct TileKey: Hashable, Sendable {
    var zoom: Int
    var x: Int
    var y: Int
}

/// A value behind a lock, for the state the workers share.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// The writer and the counts, shared by the workers; the writer is used by one at a time.
final class TilerState: @unchecked Sendable {
    private let lock = NSLock()
    private let output: TileOutput
    private let total: Int
    private let progress: TileProgress?
    private let start: Date
    private var lastReport = Date.distantPast
    private var done = 0
    private(set) var report = TileReport()

    init(output: TileOutput, total: Int, progress: TileProgress?, start: Date) {
        self.output = output
        self.total = total
        self.progress = progress
        self.start = start
    }

    /// Encodes `pixels` (nil: blank) and writes the tile, unless it is blank and blanks are skipped.
    func emit(_ tile: TileCoordinate, pixels tilePixels: TilePixels?, options: TileOptions) throws(TilerError) {
        var encoded: Data?
        let pixels: [UInt8]? =
            switch tilePixels {
            case .colour(let rgba): rgba
            case .elevation(let values): options.elevation!.rgba(values)
            case nil: nil
            }
        let blank = pixels.map { TileEncoding.everyAlpha(of: $0, is: 0) } ?? true
        if !blank || options.keepBlank {
            let bitmap = Bitmap(
                width: options.tileSize, height: options.tileSize, pixelFormat: .rgba8888,
                pixels: pixels ?? [UInt8](repeating: 0, count: options.tileSize * options.tileSize * 4))!
            do {
                encoded = try options.encoding.encode(bitmap, zoom: tile.zoom)
            } catch {
                throw .output("\(options.output): encoding tile \(tile): \(error)")
            }
        }
        lock.lock()
        defer { lock.unlock() }
        done += 1
        if let encoded {
            try output.add(tile, bytes: encoded)
            report.tiles += 1
            report.bytes += encoded.count
            report.bytesPerZoom[tile.zoom, default: 0] += encoded.count
        } else {
            report.blank += 1
        }
        let now = Date()
        if let progress, now.timeIntervalSince(lastReport) > 0.2 {
            lastReport = now
            progress(done, total, now.timeIntervalSince(start))
        }
    }

    func finish(metadata: TileMetadata) throws(TilerError) {
        try output.finish(metadata: metadata)
        progress?(total, total, Date().timeIntervalSince(start))
    }
}

/// One worker thread: its GDAL handles and a depth-first walk of a subtree.
final class Worker {
    let plan: TilePlan
    let options: TileOptions
    let warper: TileWarper
    let state: TilerState
    let cancelled: @Sendable () -> Bool
    private var scratch: [UInt8]
    private var values: [Float]

    init(plan: TilePlan, options: TileOptions, warper: TileWarper, state: TilerState, cancelled: @escaping @Sendable () -> Bool) {
        self.plan = plan
        self.options = options
        self.warper = warper
        self.state = state
        self.cancelled = cancelled
        scratch = [UInt8](repeating: 0, count: options.tileSize * options.tileSize * 4)
        values = [Float](repeating: .nan, count: options.elevation == nil ? 0 : options.tileSize * options.tileSize)
    }

    /// The tile (z, x, y) and, below it, every tile of its subtree, written; its pixels returned
    /// (nil when blank or outside the raster).
    func build(zoom: Int, x: Int, y: Int) throws(TilerError) -> TilePixels? {
        guard !cancelled() else { return nil }
        let deepest = plan.zooms.upperBound
        let range = plan.range(atZoom: zoom)
        guard range.columns.contains(x), range.rows.contains(y) else { return nil }
        var pixels: TilePixels?
        if zoom == deepest, warper.elevation {
            try warper.warp(geoTransform: plan.geoTransform(column: x, row: y), into: &values)
            pixels = values.contains { !$0.isNaN } ? .elevation(values) : nil
        } else if zoom == deepest {
            try warper.warp(geoTransform: plan.geoTransform(column: x, row: y), into: &scratch)
            pixels = TileEncoding.everyAlpha(of: scratch, is: 0) ? nil : .colour(scratch)
        } else {
            var children: [TilePixels?] = []
            for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                children.append(try build(zoom: zoom + 1, x: 2 * x + dx, y: 2 * y + dy))
            }
            pixels = TilePixels.parent(of: children, resampling: options.resampling, side: options.tileSize)
        }
        if zoom >= plan.zooms.lowerBound {
            try state.emit(TileCoordinate(validatingZoom: zoom, x: x, y: y)!, pixels: pixels, options: options)
        }
        return pixels
    }
}
