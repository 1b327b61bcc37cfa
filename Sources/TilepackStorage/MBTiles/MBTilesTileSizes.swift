import TilepackCore

extension MBTilesArchive: TileSizeReading {
    /// `MIN(zoom_level)` and `MAX(zoom_level)`: the two ends of the tile index.
    public func zoomRange() throws -> ClosedRange<Int>? {
        let table = schema.kind == .normalized ? "map" : "tiles"
        let reader = try checkout()
        defer { checkin(reader) }
        let statement = try reader.connection.prepare("SELECT MIN(zoom_level), MAX(zoom_level) FROM \(table)")
        defer { statement.reset() }
        guard try statement.step(), statement.type(0) != .null else { return nil }
        guard let lowest = Self.integer(statement, 0), let deepest = Self.integer(statement, 1), 0 <= lowest, lowest <= deepest,
            deepest <= TileCoordinate.maximumZoom
        else {
            throw TileArchiveError(path: path, fault: .invalidRow("a zoom_level is not a zoom of 0...\(TileCoordinate.maximumZoom)"))
        }
        return lowest...deepest
    }

    /// One query per range on the `(zoom_level, tile_column, tile_row)` index, reading
    /// `length(tile_data)` (SQLite takes a blob's length from the row's header, never reading its
    /// overflow pages): the floor of `tools/bench-plan` is the same query with the length alone. A
    /// deduplicated file gives its `images` row as the tile's content, so shared tiles are known.
    public func forEachTileSize(in ranges: [TileRange], _ body: (TileSizeRecord) throws -> Void) throws {
        let normalized = schema.kind == .normalized
        let sql =
            normalized
            ? """
            SELECT map.tile_column, map.tile_row, length(images.tile_data), images.rowid FROM map JOIN images ON images.tile_id = map.tile_id
            WHERE map.zoom_level = ?1 AND map.tile_column BETWEEN ?2 AND ?3 AND map.tile_row BETWEEN ?4 AND ?5
            """
            : """
            SELECT tile_column, tile_row, length(tile_data) FROM tiles
            WHERE zoom_level = ?1 AND tile_column BETWEEN ?2 AND ?3 AND tile_row BETWEEN ?4 AND ?5
            """
        let reader = try checkout()
        defer { checkin(reader) }
        let statement = try reader.connection.prepare(sql)
        for range in ranges {
            let last = (1 << range.zoom) - 1
            statement.bind(tileRange: range)
            defer { statement.reset() }
            while try statement.step() {
                guard let x = Self.integer(statement, 0), let row = Self.integer(statement, 1) else {
                    throw TileArchiveError(
                        path: path, fault: .invalidRow("zoom_level \(range.zoom): a tile_column or tile_row is not a whole number"))
                }
                let tile = TileCoordinate(uncheckedZoom: range.zoom, x: x, y: last - row)
                guard statement.type(2) != .null else { throw TileArchiveError(path: path, fault: .nullTile(tile)) }
                let length = Int(statement.int64(2))
                let content = normalized ? UInt64(bitPattern: statement.int64(3)) : nil
                try body(TileSizeRecord(tile: tile, length: length, content: content))
            }
        }
    }
}

extension MBTilesArchive {
    /// The tiles of `spans` (columns of `zoom`) with their `length(tile_data)`, one indexed query
    /// a span reading the TMS row and the length (the column is the span's). The index gives a
    /// column's rows south to north; each span's run is reversed, so ascending spans give
    /// ascending keys (the caller checks, as an index-less file may answer in any order).
    package func tileLengths(zoom: Int, spans: [TileColumnSpan]) throws -> TileLengthColumns {
        let normalized = schema.kind == .normalized
        let sql =
            normalized
            ? """
            SELECT map.tile_row, length(images.tile_data), images.rowid FROM map JOIN images ON images.tile_id = map.tile_id
            WHERE map.zoom_level = ?1 AND map.tile_column = ?2 AND map.tile_row BETWEEN ?3 AND ?4
            """
            : "SELECT tile_row, length(tile_data) FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row BETWEEN ?3 AND ?4"
        let reader = try checkout()
        defer { checkin(reader) }
        let statement = try reader.connection.prepare(sql)
        var result = TileLengthColumns()
        var contents: [UInt64] = []
        // The spans' tiles, what a complete archive holds (bounded as the planner bounds a cover).
        let expected = min(spans.reduce(0) { $0 + $1.rows.count }, 1 << 24)
        result.keys.reserveCapacity(expected)
        result.lengths.reserveCapacity(expected)
        if normalized { contents.reserveCapacity(expected) }
        let last = (1 << zoom) - 1
        for span in spans {
            statement.bind(1, zoom)
            statement.bind(2, span.x)
            statement.bind(3, last - span.rows.upperBound)
            statement.bind(4, last - span.rows.lowerBound)
            defer { statement.reset() }
            let start = result.keys.count
            while try statement.step() {
                let row = statement.type(0) == .integer ? Int(truncatingIfNeeded: statement.int64(0)) : Self.integer(statement, 0)
                guard let row else {
                    throw TileArchiveError(path: path, fault: .invalidRow("zoom_level \(zoom): a tile_row is not a whole number"))
                }
                guard statement.type(1) != .null else {
                    throw TileArchiveError(path: path, fault: .nullTile(TileCoordinate(uncheckedZoom: zoom, x: span.x, y: last - row)))
                }
                result.keys.append(UInt64(span.x) << 32 | UInt64(last - row))
                result.lengths.append(Int(statement.int64(1)))
                if normalized { contents.append(UInt64(bitPattern: statement.int64(2))) }
            }
            result.keys[start...].reverse()
            result.lengths[start...].reverse()
            if normalized { contents[start...].reverse() }
        }
        if normalized { result.contents = contents }
        return result
    }
}

extension SQLiteStatement {
    /// Binds `?1` to `?5` of `zoom_level = ?1 AND tile_column BETWEEN ?2 AND ?3 AND tile_row
    /// BETWEEN ?4 AND ?5` to the range (its XYZ rows as TMS rows).
    package func bind(tileRange range: TileRange) {
        let last = (1 << range.zoom) - 1
        bind(1, range.zoom)
        bind(2, range.columns.lowerBound)
        bind(3, range.columns.upperBound)
        bind(4, last - range.rows.upperBound)
        bind(5, last - range.rows.lowerBound)
    }
}
