import Foundation
import TilepackCore
import TilepackStorage

/// A refresh staged beside the store: what it downloads is kept in tables of its own until
/// ``MBTilesTileStore/publishRefresh()`` moves it into `tiles` in one transaction.
extension MBTilesTileStore {
    /// A refresh staged in the store: the area it is for and the source's version when it began.
    package struct StagedRefresh: Hashable, Sendable {
        /// The refreshed request's key (as ``region(key:request:status:commit:)`` takes it).
        package var key: String
        /// The source's version when the refresh began (`nil`: the source names none).
        package var version: String?
    }

    /// The tables of a refresh under way: what it downloaded, kept out of `tiles` until
    /// ``publishRefresh()`` moves it there in one transaction (readers never see them).
    static let refreshSchema = """
        CREATE TABLE IF NOT EXISTS tilepack_refresh (name TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS tilepack_refresh_tiles (
            zoom_level INTEGER NOT NULL, tile_column INTEGER NOT NULL, tile_row INTEGER NOT NULL,
            outcome INTEGER NOT NULL, http_status INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0,
            bytes INTEGER NOT NULL DEFAULT 0, etag TEXT, last_modified TEXT, message TEXT,
            fetched REAL NOT NULL, last_used REAL NOT NULL, tile_data BLOB,
            PRIMARY KEY (zoom_level, tile_column, tile_row));
        """

    /// The refresh staged in the store (one a kill or a failure interrupted), if any.
    package func stagedRefresh() throws(TileArchiveError) -> StagedRefresh? {
        try withState { state throws(TileArchiveError) in
            let connection = try state.open(path: path)
            guard try connection.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'tilepack_refresh'") ?? 0 > 0 else {
                return nil
            }
            var values: [String: String] = [:]
            let read = try connection.prepare("SELECT name, value FROM tilepack_refresh")
            while try read.step() { if let name = read.text(0) { values[name] = read.text(1) } }
            guard let key = values["key"] else { return nil }
            return StagedRefresh(key: key, version: values["version"])
        }
    }

    /// Starts staging a refresh of `key` at `version`. A staged refresh of the same key and
    /// version is kept (it resumes: its tiles are not asked again); any other is discarded.
    /// Returns whether one was resumed. Committed at once.
    @discardableResult
    package func beginRefresh(key: String, version: String?) throws(TileArchiveError) -> Bool {
        let wanted = StagedRefresh(key: key, version: version)
        let staged = try stagedRefresh()
        if staged == wanted { return true }
        if staged != nil { try discardRefresh() }
        try withWritableState { state throws(TileArchiveError) in
            try state.commit(path: path)
            let connection = try state.open(path: path)
            try connection.inTransaction(.immediate) { () throws(TileArchiveError) in
                try connection.execute(Self.refreshSchema)
                try connection.insertNameValues(into: "tilepack_refresh", [("key", key), ("version", version)], replacing: true)
            }
            state.stageTile = nil
            state.findStaged = nil
        }
        return false
    }

    /// Stages what a refresh found for one tile (its bytes for a stored outcome): kept out of
    /// `tiles` until ``publishRefresh()``. Committed with its batch.
    package func stage(_ record: TileStateRecord, data: Data?) throws(TileArchiveError) {
        try withWritableState { state throws(TileArchiveError) in
            try state.beginIfNeeded(path: path)
            let connection = try state.open(path: path)
            if state.stageTile == nil {
                state.stageTile = try connection.prepare(
                    """
                    INSERT OR REPLACE INTO tilepack_refresh_tiles (zoom_level, tile_column, tile_row, outcome, http_status, attempts,
                        bytes, etag, last_modified, message, fetched, last_used, tile_data)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                    """)
            }
            guard let insert = state.stageTile else { return }
            insert.bindTile(record.tile)
            insert.bind(4, record.outcome.rawValue)
            insert.bind(5, record.httpStatus)
            insert.bind(6, record.attempts)
            insert.bind(7, record.outcome == .stored ? data?.count ?? record.bytes : 0)
            Self.bind(insert, 8, record.etag)
            Self.bind(insert, 9, record.lastModified)
            Self.bind(insert, 10, record.message)
            insert.bind(11, double: record.fetchedAt)
            insert.bind(12, double: record.lastUsed)
            let result = (data ?? Data()).withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Result<Void, TileArchiveError> in
                defer { insert.reset() }
                return Result { () throws(TileArchiveError) in
                    if data != nil, record.outcome == .stored { try insert.bind(13, blobNoCopy: bytes) } else { insert.bindNull(13) }
                    _ = try insert.step()
                }
            }
            try result.get()
            try state.countWrite(bytes: data?.count ?? 0, batchBytes: batchBytes, batchSeconds: batchSeconds)
        }
    }

    /// Whether the staged refresh already holds `tile` (a resumed refresh does not ask again).
    package func isStaged(_ tile: TileCoordinate) throws(TileArchiveError) -> Bool {
        try withState { state throws(TileArchiveError) in
            if state.findStaged == nil {
                state.findStaged = try state.open(path: path).prepare(
                    "SELECT 1 FROM tilepack_refresh_tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3")
            }
            guard let find = state.findStaged else { return false }
            find.bindTile(tile)
            defer { find.reset() }
            return try find.step()
        }
    }

    /// Moves the staged refresh into `tiles` and the bookkeeping: stored tiles replace the old
    /// ones, tiles now absent at the source are deleted, and the staging tables are dropped.
    /// Everything goes into the open transaction, left open (the caller adds the metadata and
    /// the region's status, then ``commit()``): a reader sees the store before or after, and a
    /// kill before the commit leaves the old store and the staged refresh as they were.
    /// Returns the tiles replaced or added and those deleted.
    @discardableResult
    package func publishRefresh() throws(TileArchiveError) -> (written: Int, deleted: Int) {
        try withWritableState { state throws(TileArchiveError) in
            // What was staged so far is committed (still staged), then one transaction switches.
            try state.commit(path: path)
            try state.beginIfNeeded(path: path)
            let connection = try state.open(path: path)
            state.stageTile = nil
            state.findStaged = nil
            let stored = TileFetchOutcome.stored.rawValue, absent = TileFetchOutcome.absent.rawValue
            try connection.execute(
                """
                INSERT OR REPLACE INTO tiles (zoom_level, tile_column, tile_row, tile_data)
                    SELECT zoom_level, tile_column, tile_row, tile_data FROM tilepack_refresh_tiles WHERE outcome = \(stored);
                """)
            let written = Int(connection.changes)
            try connection.execute(
                """
                DELETE FROM tiles WHERE (zoom_level, tile_column, tile_row) IN
                    (SELECT zoom_level, tile_column, tile_row FROM tilepack_refresh_tiles WHERE outcome = \(absent));
                """)
            let deleted = Int(connection.changes)
            try connection.execute(
                """
                INSERT INTO tilepack_tile_state (zoom_level, tile_column, tile_row, outcome, http_status, attempts, bytes,
                    etag, last_modified, message, fetched, last_used)
                SELECT zoom_level, tile_column, tile_row, outcome, http_status, attempts, bytes, etag, last_modified, message,
                    fetched, last_used FROM tilepack_refresh_tiles WHERE true
                ON CONFLICT (zoom_level, tile_column, tile_row) DO UPDATE SET outcome = excluded.outcome,
                    http_status = excluded.http_status, attempts = attempts + excluded.attempts, bytes = excluded.bytes,
                    etag = excluded.etag, last_modified = excluded.last_modified, message = excluded.message,
                    fetched = excluded.fetched, last_used = excluded.last_used;
                DROP TABLE tilepack_refresh_tiles;
                DROP TABLE tilepack_refresh;
                """)
            state.totalBytes = Int(try connection.scalarInt("SELECT total(length(tile_data)) FROM tiles") ?? 0)
            state.tileCount = Int(try connection.scalarInt("SELECT count(*) FROM tiles") ?? 0)
            return (written, deleted)
        }
    }

    /// Drops a staged refresh (the source's version changed under it): the store keeps what it
    /// held before. Committed at once.
    package func discardRefresh() throws(TileArchiveError) {
        try withWritableState { state throws(TileArchiveError) in
            try state.commit(path: path)
            state.stageTile = nil
            state.findStaged = nil
            let connection = try state.open(path: path)
            try connection.inTransaction(.immediate) { () throws(TileArchiveError) in
                try connection.execute("DROP TABLE IF EXISTS tilepack_refresh_tiles; DROP TABLE IF EXISTS tilepack_refresh;")
            }
        }
    }
}
