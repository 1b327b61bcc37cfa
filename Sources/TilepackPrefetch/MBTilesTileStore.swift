import Foundation
import TilepackCore
import TilepackStorage

/// A persistent, read-write MBTiles archive that tiles are added to one at a time as they
/// arrive, with per-tile bookkeeping: the store of the offline prefetcher.
///
/// The file is flat MBTiles 1.3 (`metadata`, `tiles` with its unique index), readable by every
/// MBTiles reader while it grows, plus two tables of its own (``bookkeepingTables``), which
/// ``MBTilesSchema`` tells apart from foreign tables (`verify` does not warn about them).
/// No `agg_tiles_hash` is written: the content changes as tiles are fetched and evicted.
///
/// Crash safety: writes go into transactions of at most ``batchBytes`` of tile data (or
/// ``batchSeconds``), committed under SQLite's rollback journal (`journal_mode = DELETE`,
/// `synchronous = NORMAL`). A kill loses at most the uncommitted batch; the next read-write open
/// rolls a hot journal back, so a tile and its bookkeeping row are always written together.
///
/// `Sendable`: one connection behind a lock; every method runs under it.
///
/// Its parts: opening, reading, writing and closing (this file), eviction and purges
/// (`MBTilesTileStore+Eviction.swift`), regions (`MBTilesTileStore+Regions.swift`) and staged
/// refreshes (`MBTilesTileStore+StagedRefresh.swift`); its rows as values are in `TileStoreRecords.swift`.
package final class MBTilesTileStore: @unchecked Sendable {
    /// The store's own tables besides MBTiles' (lower case, as SQLite compares names).
    package static var bookkeepingTables: Set<String> { MBTilesSchema.prefetchBookkeepingTables }

    /// The archive's path.
    package let path: String
    /// Whether the file could only be opened for reading: every write throws.
    package let isReadOnly: Bool
    /// Bytes of tile data per transaction: commits then overlap a long download and the last one
    /// is short; fewer bytes would cost more syncs than they save (Specs/prefetch.md).
    package var batchBytes: Int { 4 << 20 }
    /// Seconds an open transaction may stay uncommitted before the next write commits it.
    package var batchSeconds: Double { 1 }

    private let state: Locked<State>

    final class State {
        var connection: SQLiteConnection?
        /// The write transaction, committed in batches (``countWrite(bytes:batchBytes:batchSeconds:)``).
        var transaction: SQLiteBatchTransaction?
        var inTransaction: Bool { transaction?.isOpen ?? false }
        var pending = 0
        var transactionStarted = 0.0
        /// Bytes of tile data in `tiles`, kept current by every write and delete.
        var totalBytes = 0
        var tileCount = 0
        var upsertTile: SQLiteStatement?
        /// Whether `tiles` has an index on (zoom_level, tile_column, tile_row), in this order: the
        /// content summary is then taken by seeks (``TileContentSummary/queryByColumns(_:)``).
        var indexInCoordinateOrder = false
        var insertNewTile: SQLiteStatement?
        var upsertState: SQLiteStatement?
        var findState: SQLiteStatement?
        var findBytes: SQLiteStatement?
        var deleteTile: SQLiteStatement?
        var deleteState: SQLiteStatement?
        var touchState: SQLiteStatement?
        /// Made on first use (the staging tables exist only during a refresh).
        var stageTile: SQLiteStatement?
        var findStaged: SQLiteStatement?
    }

    static let bookkeepingSchema = """
        CREATE TABLE IF NOT EXISTS tilepack_regions (
            id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, request TEXT NOT NULL,
            kept INTEGER NOT NULL DEFAULT 1, status TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL);
        CREATE TABLE IF NOT EXISTS tilepack_tile_state (
            zoom_level INTEGER NOT NULL, tile_column INTEGER NOT NULL, tile_row INTEGER NOT NULL,
            outcome INTEGER NOT NULL, http_status INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0,
            bytes INTEGER NOT NULL DEFAULT 0, etag TEXT, last_modified TEXT, message TEXT,
            fetched REAL NOT NULL, last_used REAL NOT NULL,
            PRIMARY KEY (zoom_level, tile_column, tile_row)) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS tilepack_tile_state_lru ON tilepack_tile_state (last_used);
        """

    /// Opens the store at `path`, creating it (atomically: a complete empty archive is renamed
    /// into place) when it does not exist and `create` is true. A file that cannot be written, or
    /// any file when `readOnly` is set (an archive in an app bundle), is opened read-only
    /// (``isReadOnly``): every write then throws.
    /// - Parameter metadata: written when the file is created (`name` at least); an existing
    ///   file keeps its own.
    /// - Throws: ``TileArchiveError`` naming the path: not an MBTiles file, a `tiles` that is not
    ///   a flat table (tiles are only added to the flat schema), SQLite or I/O faults.
    package init(path: String, create: Bool = true, readOnly: Bool = false, metadata: TileMetadata = TileMetadata())
        throws(TileArchiveError)
    {
        self.path = path
        let exists = FileManager.default.fileExists(atPath: path)
        if !exists {
            guard create, !readOnly else { throw TileArchiveError(path: path, fault: .cannotOpen(errno: ENOENT, reason: "no such file")) }
            try Self.createEmpty(path: path, metadata: metadata)
        } else if !readOnly {
            try MBTilesFileCheck.refuseForeignJournal(path: path)
        }
        _ = try MBTilesFileCheck.check(path: path)
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        // SQLite writes a journal beside the file: both the file and its folder must be writable.
        let writable = !readOnly && access(path, W_OK) == 0 && access(directory.isEmpty ? "." : directory, W_OK) == 0
        isReadOnly = !writable
        let connection = try SQLiteConnection(filename: path, archivePath: path, readOnly: !writable, uri: false)
        let schema = try MBTilesSchema.detect(connection, path: path)
        guard schema.kind == .flat else {
            throw TileArchiveError(
                path: path,
                fault: .unsupportedVersion(
                    "tiles are fetched into flat MBTiles only; this file's schema is \(schema.kind)"))
        }
        let state = State()
        state.connection = connection
        state.indexInCoordinateOrder = schema.hasIndexInCoordinateOrder
        if writable {
            // A batch's pages stay in memory until its commit (up to ``batchBytes``; SQLite's
            // default 2 MB cache would spill them to the file, with a journal sync, mid-batch).
            try connection.execute("PRAGMA journal_mode = DELETE; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -49152;")
            try connection.execute(Self.bookkeepingSchema)
            if !schema.hasMetadataTable {
                try connection.execute(
                    "CREATE TABLE metadata (name TEXT NOT NULL, value TEXT); CREATE UNIQUE INDEX name ON metadata (name);")
            } else {
                // A content identity stored by tilepack's writers would not hold once tiles come and go.
                try connection.execute("DELETE FROM metadata WHERE name = '\(ContentIdentity.metadataKey)'")
            }
            state.upsertTile = try connection.prepare(
                "INSERT OR REPLACE INTO tiles (zoom_level, tile_column, tile_row, tile_data) VALUES (?1, ?2, ?3, ?4)")
            // A tile new to the file (the common case in a fetch) is inserted without first
            // looking up the size of one it replaces: only when this changes nothing is there one.
            // (A `tiles` without its unique index takes every row: as INSERT OR REPLACE does.)
            state.insertNewTile = try connection.prepare(
                "INSERT OR IGNORE INTO tiles (zoom_level, tile_column, tile_row, tile_data) VALUES (?1, ?2, ?3, ?4)")
            state.upsertState = try connection.prepare(
                """
                INSERT INTO tilepack_tile_state (zoom_level, tile_column, tile_row, outcome, http_status, attempts, bytes,
                    etag, last_modified, message, fetched, last_used)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                ON CONFLICT (zoom_level, tile_column, tile_row) DO UPDATE SET outcome = excluded.outcome,
                    http_status = excluded.http_status, attempts = attempts + excluded.attempts, bytes = excluded.bytes,
                    etag = excluded.etag, last_modified = excluded.last_modified, message = excluded.message,
                    fetched = excluded.fetched, last_used = excluded.last_used
                """)
            state.deleteTile = try connection.prepare("DELETE FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3")
            state.deleteState = try connection.prepare(
                "DELETE FROM tilepack_tile_state WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3")
            state.touchState = try connection.prepare(
                "UPDATE tilepack_tile_state SET last_used = ?4, fetched = ?5, attempts = attempts + ?6 WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3"
            )
        }
        let hasState = try connection.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'tilepack_tile_state'") ?? 0
        if hasState > 0 {
            state.findState = try connection.prepare(
                """
                SELECT outcome, http_status, attempts, bytes, etag, last_modified, message, fetched, last_used
                FROM tilepack_tile_state WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3
                """)
        }
        state.findBytes = try connection.prepare(
            "SELECT length(tile_data) FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3")
        state.totalBytes = Int(try connection.scalarInt("SELECT total(length(tile_data)) FROM tiles") ?? 0)
        state.tileCount = Int(try connection.scalarInt("SELECT count(*) FROM tiles") ?? 0)
        self.state = Locked(state)
    }

    deinit {
        try? close()
    }

    /// Writes an empty flat archive at a temporary path and renames it to `path`.
    private static func createEmpty(path: String, metadata: TileMetadata) throws(TileArchiveError) {
        let file = try AtomicFile(destination: path, overwrite: false)
        do {
            let connection = try SQLiteConnection(
                filename: file.temporaryPath, archivePath: path, readOnly: false, uri: false, create: true)
            // No journal and no syncs while the empty file is made: it is a temporary file until
            // AtomicFile syncs it and renames it into place, and discarded if anything fails first.
            try connection.execute(
                """
                PRAGMA journal_mode = OFF;
                PRAGMA synchronous = OFF;
                PRAGMA page_size = 8192;
                PRAGMA application_id = \(MBTilesSchema.mbtilesApplicationID);
                """)
            try connection.inTransaction { () throws(TileArchiveError) in
                try connection.execute(
                    """
                    CREATE TABLE metadata (name TEXT NOT NULL, value TEXT);
                    CREATE UNIQUE INDEX name ON metadata (name);
                    CREATE TABLE tiles (zoom_level INTEGER NOT NULL, tile_column INTEGER NOT NULL, tile_row INTEGER NOT NULL, tile_data BLOB);
                    CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row);
                    """)
                try connection.execute(bookkeepingSchema)
                try connection.replaceMetadata(metadata)
            }
        }
        try file.commit()
    }

    // MARK: Reading

    /// Whether the store holds nothing at `zoom`: no tile and no bookkeeping row. A fetch skips
    /// looking its tiles up one by one at such a zoom.
    package func isEmpty(atZoom zoom: Int) throws(TileArchiveError) -> Bool {
        try withState { state throws(TileArchiveError) in
            let connection = try state.open(path: path)
            let tiles = try connection.scalarInt("SELECT EXISTS (SELECT 1 FROM tiles WHERE zoom_level = \(zoom))") ?? 1
            guard tiles == 0 else { return false }
            guard state.findState != nil else { return true }
            return try connection.scalarInt("SELECT EXISTS (SELECT 1 FROM tilepack_tile_state WHERE zoom_level = \(zoom))") == 0
        }
    }

    /// Bytes of tile data in the archive.
    package var totalBytes: Int { state.withLock { $0.totalBytes } }

    /// Tiles in the archive.
    package var tileCount: Int { state.withLock { $0.tileCount } }

    /// The bookkeeping row of `tile`, or `nil` when it was never fetched into this store.
    package func record(of tile: TileCoordinate) throws(TileArchiveError) -> TileStateRecord? {
        try withState { state throws(TileArchiveError) in
            guard let find = state.findState else { return nil }
            find.bindTile(tile)
            defer { find.reset() }
            guard try find.step() else { return nil }
            guard let outcome = TileFetchOutcome(rawValue: Int(find.int64(0))) else { return nil }
            return TileStateRecord(
                tile: tile, outcome: outcome, httpStatus: Int(find.int64(1)), attempts: Int(find.int64(2)),
                bytes: Int(find.int64(3)), etag: find.text(4), lastModified: find.text(5), message: find.text(6),
                fetchedAt: find.double(7), lastUsed: find.double(8))
        }
    }

    /// Whether `tiles` holds `tile` (stored by this store or found in the file before).
    package func containsTile(_ tile: TileCoordinate) throws(TileArchiveError) -> Bool {
        try storedSize(of: tile) != nil
    }

    /// The size of the stored tile, or `nil` when there is none.
    package func storedSize(of tile: TileCoordinate) throws(TileArchiveError) -> Int? {
        try withState { state throws(TileArchiveError) in
            guard let find = state.findBytes else { return nil }
            find.bindTile(tile)
            defer { find.reset() }
            guard try find.step() else { return nil }
            return find.type(0) == .null ? 0 : Int(find.int64(0))
        }
    }

    /// The number of stored tiles inside `range` (one index range scan).
    package func countTiles(in range: TileRange) throws(TileArchiveError) -> Int {
        try storedTiles(in: range).tiles
    }

    /// The stored tiles inside `range` (absent ones included) and their bytes (one index range scan).
    package func storedTiles(in range: TileRange) throws(TileArchiveError) -> (tiles: Int, bytes: Int) {
        try withState { state throws(TileArchiveError) in
            let statement = try state.open(path: path).prepare(
                "SELECT count(*), total(length(tile_data)) FROM tiles WHERE zoom_level = ?1 AND tile_column BETWEEN ?2 AND ?3 AND tile_row BETWEEN ?4 AND ?5"
            )
            statement.bind(tileRange: range)
            guard try statement.step() else { return (0, 0) }
            return (Int(statement.int64(0)), Int(statement.double(1)))
        }
    }

    /// The stored tile's bytes, or `nil`.
    package func tileData(_ tile: TileCoordinate) throws(TileArchiveError) -> Data? {
        try withState { state throws(TileArchiveError) in
            let connection = try state.open(path: path)
            let statement = try connection.prepare(
                "SELECT tile_data FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3")
            statement.bindTile(tile)
            guard try statement.step(), let bytes = statement.bytes(0) else { return nil }
            return Data(bytes)
        }
    }

    /// Every bookkeeping row with `outcome`, in key order.
    package func records(withOutcome outcome: TileFetchOutcome) throws(TileArchiveError) -> [TileStateRecord] {
        try withState { state throws(TileArchiveError) in
            guard state.findState != nil else { return [] }
            let connection = try state.open(path: path)
            let statement = try connection.prepare(
                """
                SELECT zoom_level, tile_column, tile_row, http_status, attempts, bytes, etag, last_modified, message, fetched, last_used
                FROM tilepack_tile_state WHERE outcome = ?1 ORDER BY zoom_level, tile_column, tile_row
                """)
            statement.bind(1, outcome.rawValue)
            var result: [TileStateRecord] = []
            while try statement.step() {
                guard let tile = Self.tile(statement, 0) else { continue }
                result.append(
                    TileStateRecord(
                        tile: tile, outcome: outcome, httpStatus: Int(statement.int64(3)), attempts: Int(statement.int64(4)),
                        bytes: Int(statement.int64(5)), etag: statement.text(6), lastModified: statement.text(7),
                        message: statement.text(8), fetchedAt: statement.double(9), lastUsed: statement.double(10)))
            }
            return result
        }
    }

    /// The archive's metadata.
    package func metadata() throws(TileArchiveError) -> TileMetadata {
        try withState { state throws(TileArchiveError) in
            let statement = try state.open(path: path).prepare("SELECT name, value FROM metadata")
            var entries: [String: String] = [:]
            while try statement.step() {
                if let name = statement.text(0), let value = statement.text(1), entries[name] == nil { entries[name] = value }
            }
            return TileMetadata(entries)
        }
    }

    // MARK: Writing

    /// Records a fetched tile: its bytes into `tiles` when `data` is given (outcome `stored`),
    /// and its bookkeeping row. `attempts` is added to the tile's count. Committed with its batch.
    package func record(_ record: TileStateRecord, data: Data?) throws(TileArchiveError) {
        try withWritableState { state throws(TileArchiveError) in
            try state.beginIfNeeded(path: path)
            var storedBytes = record.bytes
            if let data, record.outcome == .stored {
                guard let insert = state.insertNewTile, let upsert = state.upsertTile else { return }
                var previous: Int?
                if try !Self.write(data, of: record.tile, with: insert, changes: state.open(path: path)) {
                    previous = try Self.storedSize(state, record.tile)
                    _ = try Self.write(data, of: record.tile, with: upsert, changes: nil)
                }
                storedBytes = data.count
                state.totalBytes += data.count - (previous ?? 0)
                if previous == nil { state.tileCount += 1 }
            }
            guard let upsert = state.upsertState else { return }
            upsert.bindTile(record.tile)
            upsert.bind(4, record.outcome.rawValue)
            upsert.bind(5, record.httpStatus)
            upsert.bind(6, record.attempts)
            upsert.bind(7, record.outcome == .stored ? storedBytes : 0)
            Self.bind(upsert, 8, record.etag)
            Self.bind(upsert, 9, record.lastModified)
            Self.bind(upsert, 10, record.message)
            upsert.bind(11, double: record.fetchedAt)
            upsert.bind(12, double: record.lastUsed)
            defer { upsert.reset() }
            _ = try upsert.step()
            try state.countWrite(bytes: data?.count ?? 0, batchBytes: batchBytes, batchSeconds: batchSeconds)
        }
    }

    /// Marks `tile` as used now (a revalidation that found it unchanged, or a read by the app):
    /// the tile's bytes are not rewritten. `attempts` requests are added to its count.
    /// Returns false when the tile has no bookkeeping row.
    @discardableResult
    package func touch(_ tile: TileCoordinate, attempts: Int = 0, at time: Double = Date().timeIntervalSince1970) throws(TileArchiveError)
        -> Bool
    {
        try withWritableState { state throws(TileArchiveError) in
            try state.beginIfNeeded(path: path)
            guard let touch = state.touchState else { return false }
            touch.bindTile(tile)
            touch.bind(4, double: time)
            touch.bind(5, double: time)
            touch.bind(6, attempts)
            defer { touch.reset() }
            _ = try touch.step()
            let changed = try state.open(path: path).changes > 0
            try state.countWrite(bytes: 0, batchBytes: batchBytes, batchSeconds: batchSeconds)
            return changed
        }
    }

    /// Commits the open batch, if any.
    package func commit() throws(TileArchiveError) {
        try withWritableState { state throws(TileArchiveError) in try state.commit(path: path) }
    }

    /// Replaces the metadata keys derived from the tiles (format, zooms, bounds, center) by what
    /// the tiles say now, and sets `extra` keys; then commits, unless `commit` is `false`.
    package func refreshMetadata(_ extra: TileMetadata = TileMetadata(), commit: Bool = true) throws(TileArchiveError) {
        try withWritableState { state throws(TileArchiveError) in
            try state.beginIfNeeded(path: path)
            let connection = try state.open(path: path)
            var metadata = TileMetadata()
            let read = try connection.prepare("SELECT name, value FROM metadata")
            while try read.step() {
                if let name = read.text(0), let value = read.text(1), metadata[name] == nil { metadata[name] = value }
            }
            for key in extra.keys { metadata[key] = extra[key] }
            var content =
                try state.indexInCoordinateOrder ? TileContentSummary.queryByColumns(connection) : TileContentSummary.query(connection)
            let sniff = try connection.prepare("SELECT tile_data FROM tiles WHERE tile_data IS NOT NULL LIMIT 1")
            if try sniff.step(), let bytes = sniff.bytes(0) { content.sniffedFormat = TileFormat.sniff(bytes) }
            sniff.reset()
            if content.levels.isEmpty {
                for key in [TileMetadata.Key.minZoom, TileMetadata.Key.maxZoom, TileMetadata.Key.bounds, TileMetadata.Key.center] {
                    metadata[key] = nil
                }
            }
            content.derive(into: &metadata, mode: .replace)
            // The content changes as tiles come and go: a stored hash would soon be wrong.
            metadata[TileMetadata.Key.aggregateTilesHash] = nil
            try connection.replaceMetadata(metadata)
            if commit { try state.commit(path: path) }
        }
    }

    // MARK: Closing

    /// Commits and closes; later calls throw. Safe to call twice.
    package func close() throws(TileArchiveError) {
        try state.withLock { (state: inout sending State) throws(TileArchiveError) in
            guard state.connection != nil else { return }
            defer {
                state.upsertTile = nil
                state.insertNewTile = nil
                state.upsertState = nil
                state.findState = nil
                state.findBytes = nil
                state.deleteTile = nil
                state.deleteState = nil
                state.touchState = nil
                state.stageTile = nil
                state.findStaged = nil
                state.transaction = nil
                state.connection = nil
            }
            if state.inTransaction { try state.commit(path: path) }
        }
    }

    // MARK: Helpers

    func withState<R: Sendable>(_ body: (State) throws(TileArchiveError) -> R) throws(TileArchiveError) -> R {
        try state.withLock { (state: inout sending State) throws(TileArchiveError) -> sending R in
            _ = try state.open(path: path)
            return try body(state)
        }
    }

    func withWritableState<R: Sendable>(_ body: (State) throws(TileArchiveError) -> R) throws(TileArchiveError) -> R {
        guard !isReadOnly else {
            throw TileArchiveError(path: path, fault: .io(errno: EACCES, reason: "the archive is read-only"))
        }
        return try withState(body)
    }

    /// Runs an insert of `data` as `tile`'s bytes; returns whether it added a row (always true
    /// without `changes`, the connection to ask).
    private static func write(
        _ data: Data, of tile: TileCoordinate, with statement: SQLiteStatement,
        changes connection: SQLiteConnection?
    ) throws(TileArchiveError) -> Bool {
        statement.bindTile(tile)
        let written = data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Result<Void, TileArchiveError> in
            defer { statement.reset() }
            return Result { () throws(TileArchiveError) in
                try statement.bind(4, blobNoCopy: bytes)
                _ = try statement.step()
            }
        }
        try written.get()
        return connection.map { $0.changes > 0 } ?? true
    }

    private static func storedSize(_ state: State, _ tile: TileCoordinate) throws(TileArchiveError) -> Int? {
        guard let find = state.findBytes else { return nil }
        find.bindTile(tile)
        defer { find.reset() }
        guard try find.step() else { return nil }
        return find.type(0) == .null ? 0 : Int(find.int64(0))
    }

    static func bind(_ statement: SQLiteStatement, _ index: Int32, _ text: String?) {
        if let text { statement.bind(index, text: text) } else { statement.bindNull(index) }
    }

    /// The XYZ tile of the TMS coordinates in columns `first...first + 2`, when they make one.
    static func tile(_ statement: SQLiteStatement, _ first: Int32) -> TileCoordinate? {
        let zoom = Int(statement.int64(first))
        guard (0...TileCoordinate.maximumZoom).contains(zoom) else { return nil }
        let row = Int(statement.int64(first + 2))
        guard (0..<(1 << zoom)).contains(row) else { return nil }
        return TileCoordinate(validatingZoom: zoom, x: Int(statement.int64(first + 1)), y: TileScheme.tms.flipIfTMS(row: row, zoom: zoom))
    }
}

extension MBTilesTileStore.State {
    func open(path: String) throws(TileArchiveError) -> SQLiteConnection {
        guard let connection else { throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "the store is closed")) }
        return connection
    }

    func beginIfNeeded(path: String) throws(TileArchiveError) {
        guard !inTransaction else { return }
        if transaction == nil { transaction = try SQLiteBatchTransaction(try open(path: path), .immediate) }
        try transaction?.open()
        pending = 0
        transactionStarted = Date().timeIntervalSince1970
    }

    func countWrite(bytes: Int, batchBytes: Int, batchSeconds: Double) throws(TileArchiveError) {
        pending += bytes
        if pending >= batchBytes || Date().timeIntervalSince1970 - transactionStarted >= batchSeconds {
            guard connection != nil else { return }
            try transaction?.close()
        }
    }

    func commit(path: String) throws(TileArchiveError) {
        guard inTransaction else { return }
        _ = try open(path: path)
        try transaction?.close()
    }
}
