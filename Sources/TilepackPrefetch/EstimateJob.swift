import Foundation
import TilepackCore
import TilepackStorage

/// One estimate: the exact count of the area's tiles and of those missing from the store, and
/// the bytes of the missing ones from a sample per zoom.
///
/// The sample at each zoom is ``PrefetchConfiguration/samplesPerZoom`` tiles spread evenly over
/// the zoom's tiles (in iteration order, the middle of each of n equal slices). A sample tile
/// already in the store counts with its stored size (no request); otherwise it is downloaded
/// (checked like a fetched tile, never stored); an absent tile (404/204) counts as 0 bytes; a
/// failed one is left out. A zoom's estimate is its mean size times its missing tiles, with a
/// 95% margin `1.96 * s / sqrt(n) * missing * sqrt((N - n) / (N - 1))` (finite population); a
/// zoom with a single sample gets a margin of 100%, a zoom with none borrows the mean of the
/// nearest zoom that has one, with a margin of 100%. Margins add in quadrature.
final class EstimateJob: RequestJob, @unchecked Sendable {
    unowned let prefetcher: MapDataPrefetcher
    let store: MBTilesTileStore?
    let request: PrefetchRequest
    let cover: PrefetchCover
    private let id = Locked(-1)
    private let result = Locked<PrefetchEstimate?>(nil)

    init(prefetcher: MapDataPrefetcher, store: MBTilesTileStore?, request: PrefetchRequest, cover: PrefetchCover) {
        self.prefetcher = prefetcher
        self.store = store
        self.request = request
        self.cover = cover
    }

    var finalReport: PrefetchReport? { nil }
    var finalEstimate: PrefetchEstimate? { result.withLock { $0 } }

    func start(id: Int) {
        self.id.withLock { $0 = id }
    }

    func cancel() {}

    struct Level {
        var zoom: Int
        var tiles: Int
        var missing: Int
        var sizes: [Double] = []
    }

    func run() async {
        let requestId = id.withLock { $0 }
        var estimate = PrefetchEstimate(
            requestId: requestId, tiles: cover.count, missing: 0, bytes: 0, margin: 0, kilobytes: 0,
            success: false, sampled: 0, sampledPresent: 0, error: nil)
        do {
            var levels = try countLevels()
            estimate.missing = levels.reduce(0) { $0 + $1.missing }
            let sizes = await measure(samples(of: levels))
            for (level, size) in sizes {
                estimate.sampled += 1
                if let size {
                    levels[level].sizes.append(size)
                    if size > 0 { estimate.sampledPresent += 1 }
                }
            }
            let measured = levels.filter { !$0.sizes.isEmpty }
            if estimate.missing == 0 {
                estimate.success = true
            } else if measured.isEmpty {
                estimate.error = sizes.isEmpty ? "no tile to sample" : "no sample tile could be downloaded"
            } else {
                var bytes = 0.0
                var variance = 0.0
                for level in levels where level.missing > 0 {
                    let (mean, margin) = Self.levelEstimate(level, measured: measured)
                    bytes += mean
                    variance += margin * margin
                }
                estimate.bytes = Int(bytes.rounded())
                estimate.margin = Int(variance.squareRoot().rounded(.up))
                estimate.success = true
            }
        } catch {
            estimate.error = "reading the store failed: \(error)"
        }
        if estimate.success {
            estimate.kilobytes = (estimate.bytes + 1023) / 1024
        } else {
            estimate.bytes = 0
            estimate.margin = 0
        }
        result.withLock { $0 = estimate }
        prefetcher.hub.emit(.estimate(estimate), from: prefetcher)
    }

    /// Each zoom of the cover with its tiles and those of them missing from the store.
    private func countLevels() throws(TileArchiveError) -> [Level] {
        var levels: [Level] = []
        for zoom in cover.zooms {
            let tiles = cover.count(atZoom: zoom)
            var stored = 0
            if let store {
                for range in cover.levels[zoom - cover.zooms.lowerBound] {
                    stored += try store.countTiles(in: range)
                }
            }
            levels.append(Level(zoom: zoom, tiles: tiles, missing: tiles - stored))
        }
        return levels
    }

    /// The sample tiles of each zoom with missing tiles (the index of its level, the tile): the
    /// middle of each of n equal slices of the zoom's tiles.
    private func samples(of levels: [Level]) -> [(level: Int, tile: TileCoordinate)] {
        let perZoom = prefetcher.configuration.samplesPerZoom
        var samples: [(level: Int, tile: TileCoordinate)] = []
        for (index, level) in levels.enumerated() where level.missing > 0 {
            let n = min(perZoom, level.tiles)
            for i in 0..<n {
                let position = (2 * i + 1) * level.tiles / (2 * n)
                if let tile = cover.tile(atZoom: level.zoom, index: position) { samples.append((index, tile)) }
            }
        }
        return samples
    }

    /// The size of each sample (its level's index, its bytes; nil when it failed): stored, or
    /// downloaded, samples of all zooms at once, at most connectionsPerHost in flight.
    private func measure(_ samples: [(level: Int, tile: TileCoordinate)]) async -> [(Int, Double?)] {
        let storedFormat = (try? store?.metadata().format) ?? nil
        let downloader = TileDownloader(
            clients: prefetcher.clients, source: prefetcher.source,
            configuration: prefetcher.configuration, storedFormat: storedFormat)
        let urls = TemplateURLs(source: prefetcher.source)
        return await withTaskGroup(of: (Int, Double?).self) { group -> [(Int, Double?)] in
            var results: [(Int, Double?)] = []
            var next = 0
            let width = max(1, prefetcher.configuration.connectionsPerHost)
            func add() {
                guard next < samples.count else { return }
                let (level, tile) = samples[next]
                next += 1
                group.addTask { [store] in
                    if let size = try? store?.storedSize(of: tile) { return (level, Double(size)) }
                    guard let url = urls.url(for: tile) else { return (level, nil) }
                    var attempts = 0
                    switch await downloader.download(url, maximumAttempts: 2, attempts: &attempts) {
                    case .tile(let data, _, _, _): return (level, Double(data.count))
                    case .absent: return (level, 0)
                    case .notModified, .failed, .cancelled: return (level, nil)
                    }
                }
            }
            for _ in 0..<width { add() }
            while let finished = await group.next() {
                results.append(finished)
                add()
            }
            return results
        }
    }

    /// A zoom's bytes and 95% margin.
    static func levelEstimate(_ level: Level, measured: [Level]) -> (bytes: Double, margin: Double) {
        let missing = Double(level.missing)
        guard !level.sizes.isEmpty else {
            // The nearest measured zoom's mean, with a margin of 100%.
            let nearest = measured.min { abs($0.zoom - level.zoom) < abs($1.zoom - level.zoom) }
            let mean = nearest.map { $0.sizes.reduce(0, +) / Double($0.sizes.count) } ?? 0
            return (mean * missing, mean * missing)
        }
        let n = Double(level.sizes.count)
        let mean = level.sizes.reduce(0, +) / n
        guard level.sizes.count > 1 else { return (mean * missing, mean * missing) }
        let variance = level.sizes.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / (n - 1)
        let population = Double(level.tiles)
        let correction = population > 1 ? max(0, (population - n) / (population - 1)).squareRoot() : 0
        return (mean * missing, 1.96 * variance.squareRoot() / n.squareRoot() * missing * correction)
    }
}
