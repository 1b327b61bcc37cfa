import Foundation
import TilepackCore

/// Writes an MBTiles 1.3 file, or updates one in place.
///
/// **New file** (``init(creating:metadata:options:)``): written to a temporary file beside the
/// destination with bulk-load settings (no journal, no syncs, exclusive lock, a 16 MiB cache,
/// one prepared INSERT, `tilesPerTransaction` rows per transaction), then given the settings a
/// reader wants (rollback journal, no WAL), fsynced and renamed into place by ``finish()``. Until
/// then the destination is untouched; ``cancel()``, a thrown error or a kill leaves no new file.
///
/// **Update** (``init(updating:options:)``): the whole session is one SQLite transaction,
/// committed by ``finish()``: a kill or ``cancel()`` leaves the file as it was.
///
/// Tiles are addressed in XYZ; the writer stores TMS `tile_row`s. Writing a tile twice keeps the
/// last bytes. Not thread-safe: one writer is used from one thread (or task) at a time.
public final class MBTilesWriter {
    /// The destination.
    public let path: String
    /// The metadata to write; may be changed until ``finish()``.
    public var metadata: TileMetadata
    public let options: MBTilesWriterOptions
    /// The schema kind of the file being written.
    package let schemaKind: MBTilesSchemaKind

    private(set) var connection: SQLiteConnection?
    private(set) var atomicFile: AtomicFile?
    private var insertTile: SQLiteStatement?
    /// `INSERT` of `rowsPerStatement` rows at once (flat schema), made on first use.
    private var insertRows: SQLiteStatement?
    private var insertMap: SQLiteStatement?
    private var insertImage: SQLiteStatement?
    private var findImage: SQLiteStatement?
    /// `SELECT tile_data` of one tile, made on first use (``withStoredTile(at:_:)``).
    private var findStored: SQLiteStatement?
    /// `DELETE` of one tile, made on first use (``removeTile(at:)``).
    private var deleteTile: SQLiteStatement?
    /// The write transaction: a new file's committed every so many tiles (``countWritten(_:bytes:)``),
    /// an update's once, by ``finish()``.
    private var transaction: SQLiteBatchTransaction?
    private var pending = 0
    /// Tile bytes written in the open transaction of a bulk load.
    private var pendingBytes = 0
    /// Whether tile counts must count a tile stored in several rows once (no unique index).
    private(set) var countsDistinct = false
    /// Whether the content summary of an updated file is taken by seeks along its index (a flat
    /// `tiles` with an index in coordinate order): a patch that changes a few tiles then costs no
    /// pass over every row.
    private(set) var summarizesByColumns = false
    private(set) var failure: TileArchiveError?
    var finished = false
    var isUpdate: Bool { atomicFile == nil }
    /// `agg_tiles_hash` computed while writing a new file, as long as tiles arrive in the hash's
    /// own order (zoom, column, TMS row strictly ascending, as `import` sends them); `nil` once
    /// they do not, and then ``finish()`` reads every tile again to compute it. The MD5 runs on a
    /// thread of its own.
    var runningHash: BackgroundMD5?
    /// Whether `finish()` stores `agg_tiles_hash` (for an update: asked, or the file had one).
    private(set) var storesHash: Bool
    /// Whether every tile so far came in the hash's order (a new file, none removed).
    private(set) var inOrder: Bool
    private var lastKey: (zoom: Int, x: Int, row: Int)?
    /// Per zoom, the tiles written, kept while ``inOrder`` (tiles strictly ascending, none
    /// removed, a new file): then it is exactly what a query of the table would give.
    private(set) var writtenLevels: [TileContentSummary.Level] = []
    /// The dedup blob id before collision suffixes: upper-case hex MD5 (replaceable in tests to
    /// force hash collisions).
    var blobID: (UnsafeRawBufferPointer) -> String = MBTilesAggregateHash.md5Hex
    /// The content identity ``finish()`` stores (`tilepack_content_identity`): set by a patch,
    /// which checks it in ``beforeCommit``, or summed by a new file's writes
    /// (``MBTilesWriterOptions/contentIdentity``); every other update drops a stored one, which
    /// it would make stale.
    package var contentIdentity: ContentIdentity?
    /// The file's change counter when the current transaction began (``MBTilesIdentityStamp``):
    /// `nil` in WAL mode. A stored identity is trusted only while it is the stamp stored with it.
    package private(set) var counterAtBegin: UInt32?
    /// A new file's tiles summed as they are written (count and hash sum; the metadata's hash is
    /// taken in ``finish()``); `nil` when not asked for, or once a tile is removed.
    private(set) var runningIdentity: ContentIdentity?
    private let identityHasher = ContentIdentity.TileHasher()
    /// `agg_tiles_hash` known without reading every tile (a patch's after-apply hash, checked by
    /// its identity), stored instead of computing it.
    package var knownAggregateTilesHash: String?
    /// Whether ``finish()`` derives metadata from the tiles and checks the metadata against them
    /// (zooms, bounds, format), which reads every zoom's columns of the table: work in proportion
    /// to the archive. A patch whose identities prove the result is its "after" version (tiles and
    /// metadata) turns it off; the metadata's own values are checked either way.
    package var checksMetadataAgainstTiles = true
    /// Runs inside the transaction after the metadata is written, before the commit; an error
    /// rolls everything back.
    package var beforeCommit: ((SQLiteConnection) throws(TileArchiveError) -> Void)?
    /// The tiles the committed file holds, when ``beforeCommit`` has proven it (a patch's checked
    /// "after" identity counts them): ``finish()`` then reports it without counting the table.
    package var provenTileCount: Int?
    /// The updated file as the writer's own checks opened it, before its transaction began: what
    /// an update needs to know of the file as it was (its content, its identity) without opening
    /// it again.
    package private(set) var original: MBTilesArchive?

    // MARK: Opening

    /// Starts a new archive at `path`.
    /// - Throws: `alreadyExists` when `path` exists and `overwrite` is off; `invalidMetadata` when
    ///   `metadata` already breaks a rule that no tile can fix (no name, malformed values, pbf
    ///   without `json` vector_layers).
    public convenience init(creating path: String, metadata: TileMetadata, options: MBTilesWriterOptions = MBTilesWriterOptions())
        throws(TileArchiveError)
    {
        try self.init(creating: path, metadata: metadata, options: options) { () throws(TileArchiveError) in
            try AtomicFile(destination: path, overwrite: options.overwrite)
        }
    }

    /// Starts a new archive in the file `staging` makes (a ``TileSink``'s: the sink puts it in place).
    package init(
        creating path: String, metadata: TileMetadata, options: MBTilesWriterOptions, staging: () throws(TileArchiveError) -> AtomicFile
    ) throws(TileArchiveError) {
        self.path = path
        self.metadata = metadata
        self.options = options
        self.schemaKind = options.schema == .flat ? .flat : .normalized
        self.storesHash = options.aggregateTilesHash
        self.inOrder = true
        let early = MBTilesMetadataValidator.validate(metadata).filter { issue in
            issue.severity == .error && !(issue.kind == .missing && issue.key == TileMetadata.Key.format && options.derivation != .none)
        }
        if !early.isEmpty { throw Self.metadataError(path: path, early) }
        let atomicFile = try staging()
        self.atomicFile = atomicFile
        let connection = try SQLiteConnection(
            filename: atomicFile.temporaryPath, archivePath: path, readOnly: false, uri: false, create: true)
        self.connection = connection
        let pageSize = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536].contains(options.pageSize) ? options.pageSize : 8192
        try connection.execute(
            """
            PRAGMA page_size = \(pageSize);
            PRAGMA journal_mode = OFF;
            PRAGMA synchronous = OFF;
            PRAGMA locking_mode = EXCLUSIVE;
            PRAGMA temp_store = MEMORY;
            PRAGMA cache_size = -16384;
            PRAGMA application_id = \(MBTilesSchema.mbtilesApplicationID);
            CREATE TABLE metadata (name TEXT NOT NULL, value TEXT);
            CREATE UNIQUE INDEX name ON metadata (name);
            """)
        // Until finish() rewrites the metadata, the file says it is unfinished: a temporary file
        // left by a kill is refused by every reader, never taken for an archive.
        let marker = try connection.prepare("INSERT INTO metadata (name, value) VALUES (?1, ?2)")
        marker.bind(1, text: MBTilesArchive.unfinishedKey)
        marker.bind(2, text: "this file is the temporary file of an unfinished tilepack write")
        _ = try marker.step()
        switch options.schema {
        case .flat:
            try connection.execute(
                """
                CREATE TABLE tiles (zoom_level INTEGER NOT NULL, tile_column INTEGER NOT NULL, tile_row INTEGER NOT NULL, tile_data BLOB);
                CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row);
                """)
        case .deduplicated:
            try connection.execute(
                """
                CREATE TABLE map (zoom_level INTEGER NOT NULL, tile_column INTEGER NOT NULL, tile_row INTEGER NOT NULL, tile_id TEXT);
                CREATE UNIQUE INDEX map_index ON map (zoom_level, tile_column, tile_row);
                CREATE TABLE images (tile_data BLOB, tile_id TEXT NOT NULL);
                CREATE UNIQUE INDEX images_id ON images (tile_id);
                CREATE VIEW tiles AS SELECT map.zoom_level AS zoom_level, map.tile_column AS tile_column,
                    map.tile_row AS tile_row, images.tile_data AS tile_data
                    FROM map JOIN images ON images.tile_id = map.tile_id;
                """)
        }
        try prepareStatements(connection, transaction: .deferred)
        try beginTransaction()
        if storesHash { runningHash = BackgroundMD5() }
        if options.contentIdentity { runningIdentity = ContentIdentity() }
    }

    /// Opens an existing archive to add, replace or remove tiles and change its metadata, all in
    /// one transaction committed by ``finish()``.
    /// - Throws: the reader's errors for a file that is not MBTiles; `unsupportedVersion` for a
    ///   `tiles` view over tables tilepack does not know how to write.
    public init(updating path: String, options: MBTilesWriterOptions = MBTilesWriterOptions()) throws(TileArchiveError) {
        self.path = path
        self.options = options
        self.storesHash = options.aggregateTilesHash
        self.inOrder = false
        // The reader's checks first (it also rolls back a journal left by an interrupted write and
        // refuses an unfinished temporary file); the file is hostile until shown otherwise.
        try MBTilesFileCheck.refuseForeignJournal(path: path)
        let reader = try MBTilesArchive(path: path, options: MBTilesOpenOptions(maximumIdleConnections: 1))
        original = reader
        let connection = try SQLiteConnection(
            filename: path, archivePath: path, readOnly: false, uri: false,
            stepTimeLimit: reader.options.stepTimeLimit, workLimit: reader.workLimit)
        self.connection = connection
        let schema = try MBTilesSchema.detect(connection, path: path)
        guard schema.kind != .otherView else {
            throw TileArchiveError(path: path, fault: .unsupportedVersion("its 'tiles' view is over tables tilepack cannot write"))
        }
        guard schema.triggers.isEmpty else {
            throw TileArchiveError(
                path: path,
                fault: .refusesWrites(
                    "it has triggers (\(schema.triggers.joined(separator: ", "))), which can change or drop the rows written (drop the triggers, or import into a new file)"
                ))
        }
        schemaKind = schema.kind
        countsDistinct = !schema.tilesAreUnique
        summarizesByColumns = schema.kind == .flat && schema.hasIndexInCoordinateOrder && schema.tilesAreUnique
        metadata = TileMetadata()
        try prepareStatements(connection, transaction: .immediate)
        try beginTransaction()
        if !schema.hasMetadataTable {
            try connection.execute("CREATE TABLE metadata (name TEXT NOT NULL, value TEXT); CREATE UNIQUE INDEX name ON metadata (name);")
        }
        metadata = TileMetadata(try MBTilesArchive.readMetadataRows(connection, path: path, strict: false))
        // A file that carries a hash keeps carrying a true one.
        if metadata[TileMetadata.Key.aggregateTilesHash] != nil { storesHash = true }
    }

    deinit {
        if !finished { cancel() }
    }

    private func prepareStatements(_ connection: SQLiteConnection, transaction kind: SQLiteTransactionKind) throws(TileArchiveError) {
        transaction = try SQLiteBatchTransaction(connection, kind)
        switch schemaKind {
        case .flat:
            insertTile = try connection.prepare(
                "INSERT OR REPLACE INTO tiles (zoom_level, tile_column, tile_row, tile_data) VALUES (?1, ?2, ?3, ?4)")
        case .flatWithHash:
            insertTile = try connection.prepare(
                "INSERT OR REPLACE INTO tiles_with_hash (zoom_level, tile_column, tile_row, tile_data, tile_hash) VALUES (?1, ?2, ?3, ?4, ?5)"
            )
        case .normalized:
            insertMap = try connection.prepare(
                "INSERT OR REPLACE INTO map (zoom_level, tile_column, tile_row, tile_id) VALUES (?1, ?2, ?3, ?4)")
            insertImage = try connection.prepare("INSERT INTO images (tile_id, tile_data) VALUES (?1, ?2)")
            findImage = try connection.prepare("SELECT tile_data FROM images WHERE tile_id = ?1")
        case .otherView:
            break
        }
    }

    // MARK: Writing

    /// Adds (or replaces) one tile.
    public func write(_ bytes: UnsafeRawBufferPointer, at tile: TileCoordinate) throws(TileArchiveError) {
        if let failure { throw failure }
        guard !finished else { throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "the writer is already finished")) }
        do {
            let row = tile.row(in: .tms)
            switch schemaKind {
            case .flat, .flatWithHash:
                guard let insert = insertTile else { break }
                insert.bind(1, tile.zoom)
                insert.bind(2, tile.x)
                insert.bind(3, row)
                try insert.bind(4, blobNoCopy: bytes)
                if schemaKind == .flatWithHash { insert.bind(5, text: MBTilesAggregateHash.md5Hex(bytes)) }
                defer { insert.reset() }
                _ = try insert.step()
            case .normalized:
                let id = try storeImage(bytes)
                guard let insert = insertMap else { break }
                insert.bind(1, tile.zoom)
                insert.bind(2, tile.x)
                insert.bind(3, row)
                insert.bind(4, text: id)
                defer { insert.reset() }
                _ = try insert.step()
            case .otherView:
                break
            }
            if inOrder, noteKey(zoom: tile.zoom, x: tile.x, row: row), bytes.count > 0 { runningHash?.update(bytes) }
            runningIdentity?.add(tile, bytes, using: identityHasher)
            try countWritten(1, bytes: bytes.count)
        } catch {
            failure = error
            throw error
        }
    }

    /// Rows per statement of ``write(_:)``.
    static let rowsPerStatement = 32

    /// Adds (or replaces) tiles, in the order given. Into a flat table they go
    /// `rowsPerStatement` rows per `INSERT`, which costs SQLite about a quarter less than as
    /// many one-row statements (measured with a C loop: 0.13 s instead of 0.17 s for 50,000 rows).
    public func write(_ tiles: [(tile: TileCoordinate, bytes: [UInt8])]) throws(TileArchiveError) {
        var start = 0
        if schemaKind == .flat {
            while tiles.count - start >= Self.rowsPerStatement {
                try writeRows(tiles[start..<(start + Self.rowsPerStatement)])
                start += Self.rowsPerStatement
            }
        }
        for (tile, bytes) in tiles[start...] { try write(bytes, at: tile) }
    }

    /// One `INSERT` of exactly `rowsPerStatement` rows into a flat table.
    private func writeRows(_ rows: ArraySlice<(tile: TileCoordinate, bytes: [UInt8])>) throws(TileArchiveError) {
        if let failure { throw failure }
        guard !finished, let connection else {
            throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "the writer is already finished"))
        }
        do {
            if insertRows == nil {
                let values = Array(repeating: "(?, ?, ?, ?)", count: Self.rowsPerStatement).joined(separator: ", ")
                insertRows = try connection.prepare(
                    "INSERT OR REPLACE INTO tiles (zoom_level, tile_column, tile_row, tile_data) VALUES \(values)")
            }
            guard let insert = insertRows else { return }
            var bytes = 0
            for (i, row) in rows.enumerated() {
                let column = Int32(4 * i)
                insert.bind(column + 1, row.tile.zoom)
                insert.bind(column + 2, row.tile.x)
                insert.bind(column + 3, row.tile.row(in: .tms))
                bytes += row.bytes.count
            }
            try bindBlobsAndStep(insert, rows, from: rows.startIndex)
            if runningIdentity != nil {
                for row in rows { row.bytes.withUnsafeBytes { runningIdentity?.add(row.tile, $0, using: identityHasher) } }
            }
            for row in rows where inOrder {
                if noteKey(zoom: row.tile.zoom, x: row.tile.x, row: row.tile.row(in: .tms)), !row.bytes.isEmpty {
                    runningHash?.update(sharing: row.bytes)
                }
            }
            try countWritten(rows.count, bytes: bytes)
        } catch {
            failure = error
            throw error
        }
    }

    /// Binds the blobs of `rows` from `index` on where they lie, each inside its array's
    /// `withUnsafeBytes` (so no copy is made, and every pointer is valid while SQLite reads it),
    /// then runs the statement.
    private func bindBlobsAndStep(
        _ insert: SQLiteStatement, _ rows: ArraySlice<(tile: TileCoordinate, bytes: [UInt8])>,
        from index: Int
    ) throws(TileArchiveError) {
        guard index < rows.endIndex else {
            defer { insert.reset() }
            _ = try insert.step()
            return
        }
        try rows[index].bytes.withUnsafeBytes { bytes in
            Result { () throws(TileArchiveError) in
                try insert.bind(Int32(4 * (index - rows.startIndex) + 4), blobNoCopy: bytes)
                try bindBlobsAndStep(insert, rows, from: index + 1)
            }
        }.get()
    }

    /// A bulk load also commits once this many tile bytes are in the open transaction, so that
    /// large tiles (100 KB aerial imagery: 10,000 of them are a gigabyte) reach the disk in the
    /// background while the load goes on, not all in ``finish()``'s fsync.
    static let bytesPerTransaction = 32 << 20

    /// Counts written rows; a bulk load commits every ``MBTilesWriterOptions/tilesPerTransaction``
    /// rows or ``bytesPerTransaction`` bytes.
    private func countWritten(_ rows: Int, bytes: Int) throws(TileArchiveError) {
        pending += rows
        pendingBytes += bytes
        if !isUpdate, pending >= options.tilesPerTransaction || pendingBytes >= Self.bytesPerTransaction {
            try commitTransaction()
            try beginTransaction()
            // Let the disk take what is written while the next tiles come.
            atomicFile?.flushInBackground()
        }
    }

    /// Counts a tile in ``writtenLevels`` and feeds the running `agg_tiles_hash` (if any) its key
    /// (the tile's bytes are the caller's to feed next), and returns true; or, when the tile is
    /// out of the hash's order, gives both up (``finish()`` then asks the table).
    private func noteKey(zoom: Int, x: Int, row: Int) -> Bool {
        let key = (zoom: zoom, x: x, row: row)
        guard !isUpdate, lastKey.map({ ($0.zoom, $0.x, $0.row) < (key.zoom, key.x, key.row) }) ?? true else {
            dropRunningHash()
            return false
        }
        lastKey = key
        let y = TileScheme.tms.flipIfTMS(row: row, zoom: zoom)
        if let last = writtenLevels.last, last.zoom == zoom {
            let i = writtenLevels.count - 1
            writtenLevels[i].tileCount += 1
            writtenLevels[i].minX = min(last.minX, x)
            writtenLevels[i].maxX = max(last.maxX, x)
            writtenLevels[i].minY = min(last.minY, y)
            writtenLevels[i].maxY = max(last.maxY, y)
        } else {
            writtenLevels.append(TileContentSummary.Level(zoom: zoom, tileCount: 1, minX: x, maxX: x, minY: y, maxY: y))
        }
        guard runningHash != nil else { return true }
        // The three numbers as decimal text, as SQLite's CAST(... AS TEXT) gives them.
        // A tile's numbers are 0 ..< 2^30: at most 10 digits each, 30 bytes in all.
        var digits: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { text in
            var count = 0
            func put(_ number: Int) {
                var value = number
                var divisor = 1
                while divisor <= value / 10 { divisor *= 10 }
                while divisor > 0 {
                    text[count] = UInt8(ascii: "0") + UInt8(value / divisor)
                    count += 1
                    value %= divisor
                    divisor /= 10
                }
            }
            put(zoom)
            put(x)
            put(row)
            runningHash?.update(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(text)[0..<count]))
        }
        return true
    }

    private func dropRunningHash() {
        inOrder = false
        runningHash?.cancel()
        runningHash = nil
    }

    /// Adds (or replaces) one tile.
    public func write<Bytes: ContiguousBytes>(_ bytes: Bytes, at tile: TileCoordinate) throws(TileArchiveError) {
        var thrown: TileArchiveError?
        bytes.withUnsafeBytes { buffer in
            do throws(TileArchiveError) { try write(buffer, at: tile) } catch { thrown = error }
        }
        if let thrown { throw thrown }
    }

    /// Removes a tile; returns whether there was one.
    @discardableResult
    public func removeTile(at tile: TileCoordinate) throws(TileArchiveError) -> Bool {
        if let failure { throw failure }
        dropRunningHash()
        runningIdentity = nil
        guard let connection else { return false }
        if deleteTile == nil {
            let table =
                switch schemaKind {
                case .flat, .otherView: "tiles"
                case .flatWithHash: "tiles_with_hash"
                case .normalized: "map"
                }
            deleteTile = try connection.prepare("DELETE FROM \(table) WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3")
        }
        guard let statement = deleteTile else { return false }
        statement.bindTile(tile)
        defer { statement.reset() }
        _ = try statement.step()
        return connection.changes > 0
    }

    /// Runs `body` with the stored bytes of `tile` as the open transaction sees them (`nil` when
    /// there is none): what an update replaces, read before it does.
    package func withStoredTile<R>(at tile: TileCoordinate, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        guard let connection else { throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "writer closed")) }
        if findStored == nil {
            findStored = try connection.prepare("SELECT tile_data FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3")
        }
        guard let find = findStored else { return nil }
        find.bindTile(tile)
        defer { find.reset() }
        guard try find.step() else { return nil }
        return try body(find.bytes(0) ?? UnsafeRawBufferPointer(start: nil, count: 0))
    }

    /// The tiles the open transaction sees (a tile stored in several rows counted once).
    package func storedTileCount() throws(TileArchiveError) -> Int {
        try withConnection { (connection) throws(TileArchiveError) in
            Int(
                try connection.scalarInt(
                    countsDistinct
                        ? "SELECT COUNT(*) FROM (SELECT DISTINCT zoom_level, tile_column, tile_row FROM tiles)"
                        : "SELECT COUNT(*) FROM tiles")
                    ?? 0)
        }
    }

    /// Runs `body` on the connection, inside the open transaction.
    package func withConnection<R>(_ body: (SQLiteConnection) throws(TileArchiveError) -> R) throws(TileArchiveError) -> R {
        guard let connection else { throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "writer closed")) }
        return try body(connection)
    }

    /// Stores a blob once: its id is the upper-case hex MD5; on a hash hit the bytes are
    /// compared, and a different blob with the same hash gets the id `<md5>-1`, `-2`, ...
    private func storeImage(_ bytes: UnsafeRawBufferPointer) throws(TileArchiveError) -> String {
        guard let findImage, let insertImage else { throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "writer closed")) }
        let hash = blobID(bytes)
        var suffix = 0
        while true {
            let id = suffix == 0 ? hash : "\(hash)-\(suffix)"
            findImage.bind(1, text: id)
            let found = try findImage.step()
            let same =
                found
                && findImage.bytes(0).map { stored in
                    stored.count == bytes.count && (bytes.count == 0 || memcmp(stored.baseAddress!, bytes.baseAddress!, bytes.count) == 0)
                } == true
            findImage.reset()
            if same { return id }
            if !found {
                insertImage.bind(1, text: id)
                try insertImage.bind(2, blobNoCopy: bytes)
                defer { insertImage.reset() }
                _ = try insertImage.step()
                return id
            }
            suffix += 1
        }
    }

    private func beginTransaction() throws(TileArchiveError) {
        try transaction?.open()
        counterAtBegin = connection?.fileChangeCounter()
    }

    func commitTransaction() throws(TileArchiveError) {
        try transaction?.close()
        pending = 0
        pendingBytes = 0
    }

    /// Abandons the write: a new file is deleted, an update rolled back.
    public func cancel() {
        dropRunningHash()
        runningIdentity = nil
        guard !finished else { return }
        finished = true
        if isUpdate { transaction?.rollBack() }
        close()
        atomicFile?.discard()
    }

    func close() {
        insertTile = nil
        insertRows = nil
        insertMap = nil
        insertImage = nil
        findImage = nil
        findStored = nil
        deleteTile = nil
        transaction = nil
        connection = nil
        original = nil
    }

    static func metadataError(path: String, _ issues: [MBTilesMetadataIssue]) -> TileArchiveError {
        TileArchiveError(path: path, fault: .invalidMetadata(issues.map(\.message).joined(separator: "; ")))
    }
}
