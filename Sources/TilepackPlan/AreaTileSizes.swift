import TilepackCore
import TilepackStorage

/// The tiles of an area zoom by zoom, each with its size: what a plan chooses from. Read exactly
/// from an archive's index (``read(from:area:zooms:)``), or estimated for a tile server.
public struct AreaTileSizes: Sendable {
    /// One zoom's tiles, sorted by (x, y).
    public struct Level: Sendable {
        public let zoom: Int
        /// `x << 32 | y` of each tile, ascending.
        var keys: [UInt64] = []
        /// What ``TileArchive/withTileBytes(at:_:)`` yields for the tile.
        var lengths: [Int] = []
        /// What the archive stores (a bundle's LZ4 block); the bundle output's payload.
        var stored: [Int] = []
        /// Equal contents have equal bytes; a content with bit 63 set is known to no other tile.
        var contents: [UInt64] = []

        public var count: Int { keys.count }
        public var bytes: Int { lengths.reduce(0, +) }

        static func key(x: Int, y: Int) -> UInt64 { UInt64(x) << 32 | UInt64(y) }

        /// Appends a tile; `content` nil (or with bit 63 set): a content known to no other tile.
        mutating func append(key: UInt64, length: Int, stored: Int, content: UInt64?) {
            keys.append(key)
            lengths.append(length)
            self.stored.append(stored)
            // Unknown contents: bit 63, the zoom and the tile's place in its level, unique.
            contents.append(content.flatMap { $0 < 1 << 63 ? $0 : nil } ?? (1 << 63 | UInt64(zoom) << 56 | UInt64(keys.count)))
        }

        /// Takes the tiles read as columns (the level was empty), each content as ``append`` keeps it.
        mutating func adopt(_ read: TileLengthColumns) {
            keys = read.keys
            lengths = read.lengths
            stored = read.lengths
            let zoom = UInt64(zoom)
            contents = read.keys.indices.map { i in
                if let content = read.contents?[i], content < 1 << 63 { return content }
                return 1 << 63 | zoom << 56 | UInt64(i + 1)
            }
        }

        mutating func reserve(_ count: Int) {
            keys.reserveCapacity(count)
            lengths.reserveCapacity(count)
            stored.reserveCapacity(count)
            contents.reserveCapacity(count)
        }

        func tile(_ index: Int) -> TileCoordinate {
            TileCoordinate(uncheckedZoom: zoom, x: Int(keys[index] >> 32), y: Int(keys[index] & 0xFFFF_FFFF))
        }

        mutating func sort() {
            guard zip(keys, keys.dropFirst()).contains(where: { $0 >= $1 }) else { return }
            // An MBTiles index gives each column's tiles south to north (TMS rows ascending): its
            // descending runs reversed in place, the level is usually in order without a sort.
            var start = 0
            while start < keys.count {
                var end = start + 1
                while end < keys.count, keys[end] < keys[end - 1] { end += 1 }
                if end - start > 1 {
                    keys[start..<end].reverse()
                    lengths[start..<end].reverse()
                    stored[start..<end].reverse()
                    contents[start..<end].reverse()
                }
                start = end
            }
            guard zip(keys, keys.dropFirst()).contains(where: { $0 >= $1 }) else { return }
            let order = keys.indices.sorted { keys[$0] < keys[$1] }
            keys = order.map { keys[$0] }
            lengths = order.map { lengths[$0] }
            stored = order.map { stored[$0] }
            contents = order.map { contents[$0] }
        }
    }

    /// The zooms asked for, lowest first; ``levels`` holds one level for each.
    public let zooms: ClosedRange<Int>
    public internal(set) var levels: [Level]
    /// `nil` for sizes read from an index; for an estimate, the half-width of its interval around
    /// the bytes of any set of tiles, as a fraction of those bytes, at ``confidence``.
    public var relativeMargin: Double?
    public var confidence: Double?

    init(zooms: ClosedRange<Int>) {
        self.zooms = zooms
        levels = zooms.map { Level(zoom: $0) }
    }

    /// The level of `zoom`, or `nil` outside ``zooms``.
    func level(_ zoom: Int) -> Level? { zooms.contains(zoom) ? levels[zoom - zooms.lowerBound] : nil }

    /// Every tile the archive holds in the area at the zooms, with its size, read from its index
    /// where it has one (``TileSizeReading``: MBTiles, PMTiles, bundle), else by reading each tile.
    /// - Throws: ``GeometryError`` for an invalid area, the archive's errors naming it.
    public static func read(from archive: any TileArchive, area: PlanArea, zooms: ClosedRange<Int>) throws -> AreaTileSizes {
        var sizes = AreaTileSizes(zooms: zooms)
        let covers = try zooms.map { zoom throws(GeometryError) in try area.cover(atZoom: zoom) }
        for (index, cover) in covers.enumerated() { sizes.levels[index].reserve(min(cover.count, 1 << 24)) }
        // One access to `sizes` a tile: each access to a variable a closure captures is checked
        // at run time (Swift's exclusivity), which cost more than SQLite's step did.
        func add(_ record: TileSizeRecord) {
            let index = record.tile.zoom - zooms.lowerBound
            guard covers.indices.contains(index), covers[index].contains(x: record.tile.x, y: record.tile.y) else { return }
            sizes.levels[index].append(
                key: Level.key(x: record.tile.x, y: record.tile.y), length: record.length, stored: record.storedLength,
                content: record.content)
        }
        if let mbtiles = archive as? MBTilesArchive {
            // Exactly the area's tiles, a column a query, read as columns of numbers.
            for (index, cover) in covers.enumerated() {
                sizes.levels[index].adopt(try mbtiles.tileLengths(zoom: cover.zoom, spans: cover.columnSpans))
            }
        } else if let reader = archive as? any TileSizeReading {
            try reader.forEachTileSize(in: covers.flatMap(\.frame), add)
        } else {
            for cover in covers {
                try cover.forEach { x, y in
                    let tile = TileCoordinate(uncheckedZoom: cover.zoom, x: x, y: y)
                    if let length = try archive.withTileBytes(at: tile, { $0.count }) { add(TileSizeRecord(tile: tile, length: length)) }
                }
            }
        }
        for i in sizes.levels.indices { sizes.levels[i].sort() }
        return sizes
    }
}

extension AreaTileSizes {
    /// Every tile of the area at the zooms with the size `size` gives it (a tile server's tiles,
    /// from a sample's means), each its own content; `relativeMargin` at `confidence` is the
    /// estimate's uncertainty, which a plan keeps within the budget.
    /// - Throws: ``GeometryError`` for an invalid area.
    public static func estimated(
        area: PlanArea, zooms: ClosedRange<Int>, relativeMargin: Double? = nil, confidence: Double? = nil,
        size: (TileCoordinate) -> Int
    ) throws(GeometryError) -> AreaTileSizes {
        var sizes = AreaTileSizes(zooms: zooms)
        sizes.relativeMargin = relativeMargin
        sizes.confidence = confidence
        var content: UInt64 = 1 << 63
        for (index, zoom) in zooms.enumerated() {
            let cover = try area.cover(atZoom: zoom)
            cover.forEach { x, y in
                let length = size(TileCoordinate(uncheckedZoom: zoom, x: x, y: y))
                sizes.levels[index].keys.append(Level.key(x: x, y: y))
                sizes.levels[index].lengths.append(length)
                sizes.levels[index].stored.append(length)
                sizes.levels[index].contents.append(content)
                content += 1
            }
            sizes.levels[index].sort()
        }
        return sizes
    }
}

extension AreaTileSizes {
    /// The sizes the tiles would have re-encoded: each length (and stored length) times its zoom's
    /// ratio of bytes after to bytes before (1 for a zoom without one), the contents as they are
    /// (equal tiles stay equal), with the estimate's relative margin at `confidence`.
    public func scaled(by ratios: [Int: Double], relativeMargin: Double, confidence: Double) -> AreaTileSizes {
        var result = self
        for index in result.levels.indices {
            let ratio = ratios[result.levels[index].zoom] ?? 1
            result.levels[index].lengths = result.levels[index].lengths.map { Int((Double($0) * ratio).rounded()) }
            result.levels[index].stored = result.levels[index].lengths
        }
        result.relativeMargin = relativeMargin
        result.confidence = confidence
        return result
    }
}
