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
