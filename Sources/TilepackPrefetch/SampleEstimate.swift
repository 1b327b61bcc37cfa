import Foundation
import TilepackCore
import TilepackPlan

extension PrefetchArea {
    /// The same area as the budget planner takes it (Core's covers decide the tiles either way).
    public var planArea: PlanArea {
        switch self {
        case .boundingBox(let box): .boundingBox(box)
        case .route(let points, let radius): .route(points, radius: radius)
        case .region(let region): .region(region)
        }
    }
}

extension PrefetchRequest {
    /// The seed of a request's sample when none is given: FNV-1a of the request's canonical text,
    /// so that the same request draws the same tiles and gets the same estimate.
    func sampleSeed(source: PrefetchSource) -> UInt64 {
        key(source: source).utf8.reduce(0xcbf2_9ce4_8422_2325 as UInt64) { ($0 ^ UInt64($1)) &* 0x0100_0000_01b3 }
    }
}

extension MapDataPrefetcher {
    /// The budget planner's stratified sample of the request's tiles (`Specs/plan.md` §4),
    /// measured: 2% of the area's tiles and at least ``PrefetchConfiguration/samplesPerZoom`` a
    /// zoom, stratified by zoom and area, drawn from `seed` (else the configuration's
    /// ``PrefetchConfiguration/sampleSeed``, else one from the request). A tile already in the
    /// store counts with its stored size; the others are downloaded as a fetch downloads them
    /// (the same rate limit, connections, retries with back-off, `Retry-After`, body checks) and
    /// never stored; an absent tile (404/204) counts 0 bytes; a failed one is left out.
    /// - Throws: ``GeometryError`` for an invalid area.
    public func sampleSizes(for request: PrefetchRequest, seed: UInt64? = nil) async throws(GeometryError) -> SampledSizes {
        var sample = try SampledSizes(
            area: request.area.planArea, zooms: request.zooms, fraction: SampledSizes.maximumFraction,
            minimumPerZoom: configuration.samplesPerZoom,
            seed: seed ?? configuration.sampleSeed ?? request.sampleSeed(source: source))
        let sizes = await measure(sample.picks)
        var next = 0
        for index in sample.strata.indices {
            let count = sample.strata[index].picks.count
            sample.strata[index].sizes = sizes[next..<(next + count)].compactMap { $0 }
            next += count
        }
        return sample
    }

    /// The plan of the request's tiles within `budget` bytes of a `format` output, from
    /// ``sampleSizes(for:seed:)``: an estimate, whose expected size plus its margin (95%) stays
    /// within the budget (`Specs/plan.md` §4).
    /// - Throws: ``GeometryError`` for an invalid area.
    public func plan(
        _ request: PrefetchRequest, budget: Int, format: PlanOutputFormat = .mbtiles, focus: PlanFocus? = nil, seed: UInt64? = nil
    ) async throws(GeometryError) -> TilePlan {
        let sample = try await sampleSizes(for: request, seed: seed)
        var plan = TilePlanner.plan(try sample.areaTileSizes(), budget: budget, format: format, focus: focus)
        plan.sampledTiles = sample.strata.reduce(0) { $0 + $1.sizes.count }
        plan.areaTiles = sample.population
        return plan
    }

    /// The size of each tile (nil when it failed): stored, or downloaded, at most
    /// connectionsPerHost in flight.
    func measure(_ tiles: [TileCoordinate]) async -> [Int?] {
        let storedFormat = (try? store?.metadata().format) ?? nil
        let downloader = TileDownloader(clients: clients, source: source, configuration: configuration, storedFormat: storedFormat)
        let urls = TemplateURLs(source: source)
        let store = store
        return await withTaskGroup(of: (Int, Int?).self) { group -> [Int?] in
            var results = [Int?](repeating: nil, count: tiles.count)
            var next = 0
            func add() {
                guard next < tiles.count else { return }
                let (index, tile) = (next, tiles[next])
                next += 1
                group.addTask {
                    if let size = try? store?.storedSize(of: tile) { return (index, size) }
                    guard let url = urls.url(for: tile) else { return (index, nil) }
                    var attempts = 0
                    switch await downloader.download(url, maximumAttempts: 2, attempts: &attempts) {
                    case .tile(let data, _, _, _): return (index, data.count)
                    case .absent: return (index, 0)
                    case .notModified, .failed, .cancelled: return (index, nil)
                    }
                }
            }
            for _ in 0..<max(1, configuration.connectionsPerHost) { add() }
            while let (index, size) = await group.next() {
                results[index] = size
                add()
            }
            return results
        }
    }
}

extension PrefetchArea {
    /// The planner's area as the prefetcher takes it.
    public init(_ area: PlanArea) {
        switch area {
        case .boundingBox(let box): self = .boundingBox(box)
        case .route(let points, let radius): self = .route(points, radius: radius)
        case .region(let region): self = .region(region)
        }
    }
}
