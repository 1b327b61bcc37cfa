import TilepackCore

/// One tile's size as an archive's index or directory tells it, without reading the tile.
public struct TileSizeRecord: Hashable, Sendable {
    public var tile: TileCoordinate
    /// The bytes ``TileArchive/withTileBytes(at:_:)`` yields for the tile (what a copy writes).
    public var length: Int
    /// The bytes the archive stores for it (a bundle's LZ4 payload; `length` elsewhere).
    public var storedLength: Int
    /// Tiles of one archive with the same `content` have the same bytes (a PMTiles offset, a
    /// bundle's payload number, a deduplicated MBTiles' `tile_id`); `nil` when the archive does
    /// not say (a flat MBTiles), and then no two tiles are known to share bytes.
    public var content: UInt64?

    public init(tile: TileCoordinate, length: Int, storedLength: Int? = nil, content: UInt64? = nil) {
        self.tile = tile
        self.length = length
        self.storedLength = storedLength ?? length
        self.content = content
    }
}

/// An archive that tells the sizes of its tiles from its index alone: an MBTiles file
/// (`length(tile_data)`, which SQLite answers from the row's header without reading the blob's
/// overflow pages), a PMTiles archive (its directories: only the leaves whose tiles meet the
/// ranges) and a bundle (its index and payload records). The budget planner reads sizes through it.
public protocol TileSizeReading: TileArchive {
    /// Calls `body` for every tile the archive holds inside `ranges` (disjoint rectangles of any
    /// zooms), in no promised order.
    func forEachTileSize(in ranges: [TileRange], _ body: (TileSizeRecord) throws -> Void) throws

    /// The lowest and deepest zoom of the archive's tiles, from what it reads first (a PMTiles
    /// header, a bundle's zoom table, the MBTiles index's ends), never a walk of its directories;
    /// `nil` when it holds no tile.
    func zoomRange() throws -> ClosedRange<Int>?
}

/// One column of an area's tiles at one zoom: what the planner asks an MBTiles index for, one
/// seek each (`tile_column = x AND tile_row BETWEEN ...`), so that SQLite reads exactly the area's
/// rows and no test per row is left.
package struct TileColumnSpan: Hashable, Sendable {
    package var x: Int
    /// XYZ rows.
    package var rows: ClosedRange<Int>

    package init(x: Int, rows: ClosedRange<Int>) {
        self.x = x
        self.rows = rows
    }
}

/// Tiles and their sizes as columns of numbers, one entry a tile (no record per tile).
package struct TileLengthColumns: Sendable {
    /// `x << 32 | y`, ascending when the spans were and the index gave each column's rows in order.
    package var keys: [UInt64] = []
    package var lengths: [Int] = []
    /// The content of each tile when the archive knows it (a deduplicated MBTiles' `images` row).
    package var contents: [UInt64]?

    package init() {}
}
