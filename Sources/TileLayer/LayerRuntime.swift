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
    }

    struct Failure {
        var count: Int
        var retryAt: Double
    }

    struct State {
        var loaded: [TileCoordinate: Loaded] = [:]
        var inFlight: Set<TileCoordinate> = []
        var failures: [TileCoordinate: Failure] = [:]
        var absent: Set<TileCoordinate> = []
        var firstShown: [TileCoordinate: Double] = [:]
        var useCounter: UInt64 = 0
        var detached = false
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

    /// Marks `tile` in flight and returns true when it should be requested now: not loaded, not
    /// loading, known to exist, and past its retry time if it failed.
    func shouldRequest(_ tile: TileCoordinate, now: Double) -> Bool {
        state.withLock { s in
            guard !s.detached, s.loaded[tile] == nil, !s.inFlight.contains(tile), !s.absent.contains(tile) else { return false }
            if let failure = s.failures[tile], failure.retryAt > now { return false }
            s.inFlight.insert(tile)
            return true
        }
    }

    /// Records the end of a load.
    func finish(_ tile: TileCoordinate, result: Result<Bitmap, StringError>, now: Double, layer: MapTileLayer) {
        let failed: (String, Int, Double)? = state.withLock { s in
            guard !s.detached else { return nil }
            s.inFlight.remove(tile)
            switch result {
            case .success(let bitmap):
                s.useCounter += 1
                s.loaded[tile] = Loaded(bitmap: bitmap, lastUsed: s.useCounter)
                s.failures[tile] = nil
                return nil
            case .failure(let reason):
                let count = (s.failures[tile]?.count ?? 0) + 1
                let delay = min(HeadlessMapView.maximumRetryDelay,
                                HeadlessMapView.initialRetryDelay * pow(2, Double(min(count - 1, 30))))
                s.failures[tile] = Failure(count: count, retryAt: now + delay)
                return (reason.description, count, delay)
            }
        }
        if let (reason, count, delay) = failed {
            layer.record(TileLayerDiagnostic(kind: .tileFailed, tile: tile,
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

    /// The nearest loaded ancestor's sub-square covering `tile`, scaled to `tileSize`, and the
    /// ancestor's zoom; `nil` when no ancestor is loaded.
    func fallback(for tile: TileCoordinate, tileZoom: Int, tileSize: Int) -> (Bitmap, Int)? {
        for zoom in stride(from: tileZoom - 1, through: 0, by: -1) {
            guard let square = tile.subsquare(inAncestorAtZoom: zoom),
                  let ancestor = state.withLock({ $0.loaded[square.ancestor]?.bitmap }) else { continue }
            if let bitmap = try? ancestor.subSquare(levelsDown: square.levelsDown, column: square.column,
                                                    row: square.row, outputSize: tileSize) {
                return (bitmap, zoom)
            }
        }
        return nil
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
        state.withLock {
            $0.detached = true
            $0.loaded.removeAll()
            $0.inFlight.removeAll()
        }
    }
}
