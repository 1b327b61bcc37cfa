import TilepackCore

/// A chosen set of tiles that fits a byte budget: every tile of the area at the lowest zoom, and
/// deeper tiles, never one without its parent (`Specs/plan.md`). Made by ``TilePlanner``.
public struct TilePlan: Sendable, Encodable {
    /// One zoom of the plan.
    public struct Level: Sendable, Encodable, Hashable {
        public var zoom: Int
        /// The tiles the source holds in the area at this zoom, and their bytes.
        public var available: Int
        public var availableBytes: Int
        /// The tiles taken, and their bytes (as a copy writes them).
        public var taken: Int
        public var takenBytes: Int
        /// Where the taken tiles are: the box around them, west, south, east, north (`nil` when none is taken).
        public var extent: [Double]?
    }

    /// The budget: the most bytes the output file may have.
    public var budget: Int
    /// The output format the sizes are predicted for.
    public var format: PlanOutputFormat
    public var levels: [Level]
    /// The taken tiles' bytes, as `extract` counts them.
    public var tileBytes: Int
    public var tiles: Int
    /// The output file's predicted size (for an estimate, its expected size).
    public var predictedSize: Int
    /// For an estimate, the half-width of the predicted size's interval at ``confidence``; 0 when exact.
    public var margin: Int
    public var confidence: Double?
    /// Whether the sizes were read from the source's index (true) or estimated from a sample.
    public var exact: Bool
    /// The deepest zoom every tile of the area is taken at.
    public var completeZoom: Int?
    /// The deepest zoom any tile is taken at.
    public var deepestZoom: Int?
    /// The focus the plan prefers, as `[longitude, latitude]` points.
    public var focus: [[Double]]?
    /// For an estimate, the tiles measured (downloaded, or stored already) of the area's tiles.
    public var sampledTiles: Int?
    public var areaTiles: Int?

    /// The taken tiles of each zoom, `x << 32 | y` ascending, indexed by `zoom - zooms.lowerBound`.
    var chosen: [[UInt64]]
    var lowestZoom: Int

    enum CodingKeys: String, CodingKey {
        case budget, format, levels, tileBytes, tiles, predictedSize, margin, confidence, exact, completeZoom, deepestZoom, focus
        case sampledTiles, areaTiles
    }

    init(budget: Int, format: PlanOutputFormat, levels: [Level], chosen: [[UInt64]], lowestZoom: Int) {
        self.budget = budget
        self.format = format
        self.levels = levels
        self.chosen = chosen
        self.lowestZoom = lowestZoom
        tileBytes = levels.reduce(0) { $0 + $1.takenBytes }
        tiles = levels.reduce(0) { $0 + $1.taken }
        predictedSize = 0
        margin = 0
        exact = true
        for level in levels {
            guard level.taken == level.available else { break }
            completeZoom = level.zoom
        }
        deepestZoom = levels.last { $0.taken > 0 }?.zoom
    }

    /// The box around every taken tile (`nil` when none is taken): what a copy of the plan reads.
    public var extent: GeoBoundingBox? {
        let boxes = levels.compactMap(\.extent)
        guard !boxes.isEmpty else { return nil }
        return GeoBoundingBox(
            west: boxes.map { $0[0] }.min()!, south: boxes.map { $0[1] }.min()!, east: boxes.map { $0[2] }.max()!,
            north: boxes.map { $0[3] }.max()!)
    }

    /// Whether the plan takes `tile`.
    public func contains(_ tile: TileCoordinate) -> Bool {
        let index = tile.zoom - lowestZoom
        guard chosen.indices.contains(index) else { return false }
        let key = UInt64(tile.x) << 32 | UInt64(tile.y)
        let keys = chosen[index]
        var low = 0, high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if keys[middle] < key { low = middle + 1 } else { high = middle }
        }
        return low < keys.count && keys[low] == key
    }

    /// The taken tiles in the order the format's writer lays them best: (zoom, x, TMS row) for
    /// MBTiles, so that SQLite fills its pages in order, as the prediction assumes; (zoom, x, y) otherwise.
    public var tilesInWriteOrder: [TileCoordinate] {
        var result: [TileCoordinate] = []
        result.reserveCapacity(tiles)
        for (index, keys) in chosen.enumerated() {
            let zoom = lowestZoom + index
            var column: [TileCoordinate] = []
            for key in keys {
                let tile = TileCoordinate(uncheckedZoom: zoom, x: Int(key >> 32), y: Int(key & 0xFFFF_FFFF))
                if format == .mbtiles, let last = column.last, last.x != tile.x {
                    result += column.reversed()
                    column.removeAll(keepingCapacity: true)
                }
                column.append(tile)
            }
            result += format == .mbtiles ? column.reversed() : column
        }
        return result
    }
}
