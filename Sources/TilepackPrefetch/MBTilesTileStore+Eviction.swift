import Foundation
import TilepackCore
import TilepackStorage

/// Making room in the store: the least recently used tiles evicted down to a capacity, or every
/// tile no kept region pins purged.
extension MBTilesTileStore {
    /// Deletes the least recently used tiles (and bookkeeping rows) that `isPinned` does not
    /// keep, until the tiles' bytes are at most `capacity`. Tiles of the file that have no
    /// bookkeeping row count as the oldest.
    package func evict(toCapacity capacity: Int, isPinned: (TileCoordinate) -> Bool) throws(TileArchiveError) -> TileStorePurge {
        try withWritableState { state throws(TileArchiveError) in
            guard state.totalBytes > capacity else { return TileStorePurge() }
            try state.commit(path: path)
            let connection = try state.open(path: path)
            // Candidates oldest first: tiles without a row, then rows by last use.
            let scan = try connection.prepare(
                """
                SELECT t.zoom_level, t.tile_column, t.tile_row, length(t.tile_data), coalesce(s.last_used, 0) AS used
                FROM tiles t LEFT JOIN tilepack_tile_state s
                  ON s.zoom_level = t.zoom_level AND s.tile_column = t.tile_column AND s.tile_row = t.tile_row
                ORDER BY used
                """)
            var victims: [(TileCoordinate, Int)] = []
            var excess = state.totalBytes - capacity
            while excess > 0, try scan.step() {
                guard let tile = Self.tile(scan, 0), !isPinned(tile) else { continue }
                let size = Int(scan.int64(3))
                victims.append((tile, size))
                excess -= size
            }
            scan.reset()
            return try Self.delete(victims, state: state, path: path)
        }
    }

    /// Deletes every tile and bookkeeping row that `isPinned` does not keep (HERE's NMAMapDataPrefetcher's
    /// `clearCache`: unused map data).
    package func purge(isPinned: (TileCoordinate) -> Bool) throws(TileArchiveError) -> TileStorePurge {
        try withWritableState { state throws(TileArchiveError) in
            try state.commit(path: path)
            let connection = try state.open(path: path)
            var victims: [(TileCoordinate, Int)] = []
            let tiles = try connection.prepare("SELECT zoom_level, tile_column, tile_row, length(tile_data) FROM tiles")
            while try tiles.step() {
                guard let tile = Self.tile(tiles, 0), !isPinned(tile) else { continue }
                victims.append((tile, Int(tiles.int64(3))))
            }
            tiles.reset()
            var result = try Self.delete(victims, state: state, path: path)
            var records: [TileCoordinate] = []
            let rows = try connection.prepare("SELECT zoom_level, tile_column, tile_row FROM tilepack_tile_state WHERE outcome != 1")
            while try rows.step() {
                guard let tile = Self.tile(rows, 0), !isPinned(tile) else { continue }
                records.append(tile)
            }
            rows.reset()
            try state.beginIfNeeded(path: path)
            for tile in records {
                guard let delete = state.deleteState else { break }
                delete.bindTile(tile)
                defer { delete.reset() }
                _ = try delete.step()
            }
            try state.commit(path: path)
            result.records = records.count
            return result
        }
    }

    private static func delete(_ victims: [(TileCoordinate, Int)], state: State, path: String) throws(TileArchiveError) -> TileStorePurge {
        var result = TileStorePurge()
        guard !victims.isEmpty else { return result }
        try state.beginIfNeeded(path: path)
        for (tile, size) in victims {
            guard let deleteTile = state.deleteTile, let deleteState = state.deleteState else { break }
            deleteTile.bindTile(tile)
            _ = try deleteTile.step()
            deleteTile.reset()
            deleteState.bindTile(tile)
            _ = try deleteState.step()
            deleteState.reset()
            result.tiles += 1
            result.bytes += size
        }
        state.totalBytes -= result.bytes
        state.tileCount -= result.tiles
        try state.commit(path: path)
        return result
    }
}
