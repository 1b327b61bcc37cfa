import Foundation
import TilepackCore
import TilepackImaging

/// What a view knows about one of its layers' tiles: loaded bitmaps, loads in flight, failures
/// with their retry time, tiles that `hasTile` said do not exist, when each tile was first shown.
/// Lives as long as the layer is in the view.
final class LayerRuntime: Sendable {
    struct Loaded {
        var bitmap: Bitmap
        var lastUsed: UInt64
        /// The layer's content generation its load started in; an older one is drawn until its
        /// reload arrives.
        var generation = 0
    }

    struct Failure {
        var count: Int
        var retryAt: Double
    }

    struct State {
        var loaded: [TileCoordinate: Loaded] = [:]
        /// Loads running, with the task to cancel when the tile leaves the view.
        var inFlight: [TileCoordinate: Task<Void, Never>] = [:]
        /// Loads cancelled and not finished yet: their failure is no failure.
        var cancelled: Set<TileCoordinate> = []
        /// Loads of stand-ins for tiles loading or failing: a failure is not diagnosed (the tile
        /// they stand in for is).
        var quiet: Set<TileCoordinate> = []
        var failures: [TileCoordinate: Failure] = [:]
        var absent: Set<TileCoordinate> = []
        var firstShown: [TileCoordinate: Double] = [:]
        var useCounter: UInt64 = 0
        var detached = false
        /// The layer's content generation (``MapTileLayer/reloadTiles()``), and the generation
        /// each running load started in.
        var generation = 0
        var loadGeneration: [TileCoordinate: Int] = [:]
    }

    /// The most `hasTile == false` answers remembered; past it the set restarts (tiles are asked again).
    static let absentLimit = 1 << 16

    private let state = Locked(State())

    /// Whether `tile` exists: false when `hasTile` said so before (never asked again), otherwise
    /// the data source's answer, remembered when false. No data source: false.
    func hasTile(_ tile: TileCoordinate, layer: MapTileLayer, source: (any MapTileLayerDataSource)?) -> Bool {
        guard let source else { return false }
        if state.withLock({ $0.absent.contains(tile) }) { return false }
        let exists = source.mapTileLayer(layer, hasTileAt: tile)
        if !exists {
            state.withLock {
                if $0.absent.count >= Self.absentLimit { $0.absent.removeAll() }
                $0.absent.insert(tile)
            }
        }
        return exists
    }

    /// Takes the layer's content generation: when it moved on, what `hasTile` said and what
    /// failed is forgotten, and every loaded tile is stale (drawn until its reload arrives).
    func follow(generation: Int) {
        state.withLock { s in
            guard generation != s.generation else { return }
            s.generation = generation
            s.absent.removeAll()
            s.failures.removeAll()
        }
    }

    /// Drops the stale loaded tiles not in `keeping`: after a reload, a tile that no longer
    /// exists (or left the view) is not drawn from the old content.
    func dropStale(keeping: Set<TileCoordinate>) {
        state.withLock { s in
            for (tile, entry) in s.loaded where entry.generation != s.generation && !keeping.contains(tile) {
                s.loaded[tile] = nil
                s.firstShown[tile] = nil
            }
        }
    }

    /// Starts the load of `tile` (the task `load` makes) when it should be requested now: not
    /// loaded (or loaded before the last reload), not loading, known to exist, and past its
    /// retry time if it failed. Returns whether it started.
    func startIfNeeded(_ tile: TileCoordinate, now: Double, quiet: Bool = false, load: () -> Task<Void, Never>) -> Bool {
        state.withLock { s in
            guard !s.detached, s.loaded[tile].map({ $0.generation != s.generation }) ?? true, s.inFlight[tile] == nil,
                !s.absent.contains(tile)
            else { return false }
            if let failure = s.failures[tile], failure.retryAt > now { return false }
            if quiet { s.quiet.insert(tile) } else { s.quiet.remove(tile) }
            // The task records its end under this lock, so it cannot finish before it is registered.
            s.loadGeneration[tile] = s.generation
            s.inFlight[tile] = load()
            return true
        }
    }

    /// Cancels the loads of tiles not in `keeping` (they left the view). Returns how many.
    @discardableResult
    func cancelLoads(keeping: Set<TileCoordinate>) -> Int {
        let tasks = state.withLock { s -> [Task<Void, Never>] in
            var tasks: [Task<Void, Never>] = []
            for (tile, task) in s.inFlight where !keeping.contains(tile) && !s.cancelled.contains(tile) {
                s.cancelled.insert(tile)
                tasks.append(task)
            }
            return tasks
        }
        for task in tasks { task.cancel() }
        return tasks.count
    }

    /// Whether the load of `tile` is running.
    func isLoading(_ tile: TileCoordinate) -> Bool { state.withLock { $0.inFlight[tile] != nil } }

    /// Whether `tile` failed at its last attempt (and is waiting for its retry).
    func isFailing(_ tile: TileCoordinate) -> Bool { state.withLock { $0.failures[tile] != nil } }

    /// Whether `tile` is loaded.
    func isLoaded(_ tile: TileCoordinate) -> Bool { state.withLock { $0.loaded[tile] != nil } }

    /// Records the end of a load. A cancelled load that failed leaves no failure behind.
    func finish(_ tile: TileCoordinate, result: TileLoadResult, now: Double, layer: MapTileLayer) {
        let failed: (String, Int, Double)? = state.withLock { s in
            guard !s.detached else { return nil }
            s.inFlight[tile] = nil
            let generation = s.loadGeneration.removeValue(forKey: tile) ?? s.generation
            let wasCancelled = s.cancelled.remove(tile) != nil
            let isQuiet = s.quiet.remove(tile) != nil
            switch result {
            case .loaded(let bitmap):
                s.useCounter += 1
                s.loaded[tile] = Loaded(bitmap: bitmap, lastUsed: s.useCounter, generation: generation)
                s.failures[tile] = nil
                return nil
            case .cancelled:
                return nil
            case .failed where wasCancelled:
                return nil
            case .failed(let reason):
                let count = (s.failures[tile]?.count ?? 0) + 1
                let delay = min(
                    HeadlessMapView.maximumRetryDelay,
                    HeadlessMapView.initialRetryDelay * pow(2, Double(min(count - 1, 30))))
                s.failures[tile] = Failure(count: count, retryAt: now + delay)
                return isQuiet ? nil : (reason, count, delay)
            }
        }
        if let (reason, count, delay) = failed {
            layer.record(
                TileLayerDiagnostic(
                    kind: .tileFailed, tile: tile,
                    message: "\(reason) (failure \(count); asked again in \(delay) s)"))
        }
    }

    /// The loaded bitmap of `tile`, marking it recently used.
    func loaded(_ tile: TileCoordinate) -> Bitmap? {
        state.withLock { s in
            guard var entry = s.loaded[tile] else { return nil }
            s.useCounter += 1
            entry.lastUsed = s.useCounter
            s.loaded[tile] = entry
            return entry.bitmap
        }
    }

    /// When `tile` was first drawn as a real tile (now, if this is the first time).
    func firstShown(_ tile: TileCoordinate, now: Double) -> Double {
        state.withLock { s in
            if let time = s.firstShown[tile] { return time }
            s.firstShown[tile] = now
            return now
        }
    }

    /// The nearest loaded ancestor's sub-square covering `tile`, scaled to `outputSize` pixels
    /// (the size it is drawn at), and the ancestor's zoom; `nil` when no ancestor is loaded.
    func fallback(for tile: TileCoordinate, tileZoom: Int, outputSize: Int) -> (Bitmap, Int)? {
        for zoom in stride(from: tileZoom - 1, through: 0, by: -1) {
            guard let square = tile.subsquare(inAncestorAtZoom: zoom),
                let ancestor = state.withLock({ $0.loaded[square.ancestor]?.bitmap })
            else { continue }
            if let bitmap = try? ancestor.subSquare(
                levelsDown: square.levelsDown, column: square.column,
                row: square.row, outputSize: max(1, outputSize))
            {
                return (bitmap, zoom)
            }
        }
        return nil
    }

    /// Whether an ancestor of `tile` at most `levels` zooms up is loaded.
    func hasLoadedAncestor(of tile: TileCoordinate, within levels: Int) -> Bool {
        state.withLock { s in
            var current = tile
            for _ in 0..<levels {
                guard let parent = current.parent else { return false }
                if s.loaded[parent] != nil { return true }
                current = parent
            }
            return false
        }
    }

    /// Drops the least recently used loaded tiles not in `keeping` while more than `limit` are held.
    func trim(keeping: Set<TileCoordinate>, limit: Int) {
        state.withLock { s in
            guard s.loaded.count > limit + keeping.count else { return }
            let candidates = s.loaded.filter { !keeping.contains($0.key) }.sorted { $0.value.lastUsed < $1.value.lastUsed }
            for (tile, _) in candidates.prefix(s.loaded.count - limit - keeping.count) {
                s.loaded[tile] = nil
                s.firstShown[tile] = nil
            }
        }
    }

    /// The layer left the view: results still arriving are dropped.
    func detach() {
        let tasks = state.withLock { s -> [Task<Void, Never>] in
            s.detached = true
            s.loaded.removeAll()
            defer { s.inFlight.removeAll() }
            return Array(s.inFlight.values)
        }
        for task in tasks { task.cancel() }
    }
}
