import TilepackCore

/// Where each tile's row of a flat `tiles` table is (its rowid), held in memory, so that a tile is
/// read by its rowid: one walk of the table's B-tree instead of a walk of the coordinate index and
/// then one of the table (issue 47: the server's MBTiles lookups, a third of their SQLite time).
///
/// Only a hint: a read by rowid checks that the row it finds holds the tile's coordinates, and
/// anything else (no entry, no row, another tile's row: the file was changed in place since the
/// index was built) falls back to the lookup by coordinates. With the unique coordinate index the
/// index is built only beside, a row with the tile's coordinates is the tile, so every answer is
/// the one SQL by coordinates gives on the same transaction, whatever was written meanwhile.
///
/// Two sorted arrays (a key from the coordinates, the rowid): 16 bytes a tile, built once per
/// opened archive from the coordinate index (a covering scan), up to a tile count its caller sets.
struct MBTilesRowidIndex: Sendable {
    private let keys: [UInt64]
    private let rowids: [Int64]

    /// Tiles indexed.
    var count: Int { keys.count }

    /// A number per tile, unique over all zooms and increasing in (zoom, column, TMS row) order:
    /// the tiles of lower zooms, then `x * 2^zoom + row`. Fits 64 bits for zooms up to 31.
    @inline(__always)
    static func key(zoom: Int, x: Int, row: Int) -> UInt64 {
        let z = UInt64(truncatingIfNeeded: zoom)
        return ((1 << (2 * z)) - 1) / 3 &+ (UInt64(truncatingIfNeeded: x) << z) &+ UInt64(truncatingIfNeeded: row)
    }

    /// The rowid of the tile at `zoom`/`x`/`row` (TMS), or `nil` when it is not indexed.
    @inline(__always)
    func rowid(zoom: Int, x: Int, row: Int) -> Int64? {
        let key = Self.key(zoom: zoom, x: x, row: row)
        return keys.withUnsafeBufferPointer { keys -> Int64? in
            var low = 0
            var high = keys.count
            while low < high {
                let middle = (low + high) >> 1
                if keys[middle] < key { low = middle + 1 } else { high = middle }
            }
            guard low < keys.count, keys[low] == key else { return nil }
            return rowids[low]
        }
    }

    private init(keys: [UInt64], rowids: [Int64]) {
        self.keys = keys
        self.rowids = rowids
    }

    /// Reads the rowid of every tile of the `tiles` table on `connection` (in its current
    /// transaction). `nil` when there are more than `limit` rows, when the table has no rowid
    /// (`WITHOUT ROWID`, or a view), or when two rows hold one tile; rows whose coordinates are
    /// not whole numbers of a tile are left out (their lookups go by coordinates).
    static func build(_ connection: SQLiteConnection, limit: Int) throws(TileArchiveError) -> MBTilesRowidIndex? {
        guard limit > 0, let statement = try? connection.prepare("SELECT zoom_level, tile_column, tile_row, rowid FROM tiles") else {
            return nil
        }
        var keys: [UInt64] = []
        var rowids: [Int64] = []
        var sorted = true
        while try statement.step() {
            guard keys.count < limit else { return nil }
            guard statement.type(0) == .integer, statement.type(1) == .integer, statement.type(2) == .integer else { continue }
            let zoom = statement.int64(0)
            let x = statement.int64(1)
            let row = statement.int64(2)
            guard (0...Int64(TileCoordinate.maximumZoom)).contains(zoom), (0..<(1 << zoom)).contains(x), (0..<(1 << zoom)).contains(row)
            else { continue }
            let key = key(zoom: Int(zoom), x: Int(x), row: Int(row))
            if let last = keys.last, last >= key { sorted = false }
            keys.append(key)
            rowids.append(statement.int64(3))
        }
        if !sorted {
            let order = keys.indices.sorted { keys[$0] < keys[$1] }
            keys = order.map { keys[$0] }
            rowids = order.map { rowids[$0] }
        }
        // Two rows of one tile (no unique index): which is the tile is SQL's to say.
        for index in keys.indices.dropFirst() where keys[index - 1] == keys[index] { return nil }
        return MBTilesRowidIndex(keys: keys, rowids: rowids)
    }
}

extension MBTilesArchive {
    /// Reads the tile by its rowid when ``rowidIndex`` has it and the row there still holds it:
    /// `body`'s result, or `nil` when the caller must look the tile up by its coordinates.
    @inline(__always)
    func withIndexedTileBytes<R>(
        reader: MBTilesReader, at tile: TileCoordinate, row: Int, _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R? {
        guard let statement = reader.byRowid, let rowid = rowidIndex?.rowid(zoom: tile.zoom, x: tile.x, row: row) else { return nil }
        statement.bind(1, Int(truncatingIfNeeded: rowid))
        defer { statement.reset() }
        guard try statement.step(), statement.type(0) == .integer, statement.int64(0) == tile.zoom, statement.type(1) == .integer,
            statement.int64(1) == tile.x, statement.type(2) == .integer, statement.int64(2) == row
        else { return nil }
        return try body(try tileBytes(statement, column: 3, tile: tile))
    }
}
