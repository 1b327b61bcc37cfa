import Foundation
import TilepackCore

/// An MBTiles archive opened read-only: the ``TileArchive`` read API over an MBTiles (SQLite) file.
///
/// Opens the file with `mode=ro` (and `immutable=1` when the options say so), so no journal,
/// WAL or lock file is ever created beside it. Reads from many threads run in parallel: each
/// read checks a connection with its own prepared statements out of a small pool (a lock is held
/// only to pop or push the pool's array, never while SQLite works), and no statement is ever
/// shared between threads.
///
/// Rows are stored in TMS order (`tile_row` 0 at the south); every method here takes and gives
/// XYZ coordinates, converting with ``TileScheme/tms``.
public final class MBTilesArchive: TileArchive {
    public let path: String
    /// The payload format: the `format` metadata when it parses, otherwise sniffed from a tile.
    public let content: TileContent?
    /// What schema detection found (kind, unique index, extra tables, ...).
    package let schema: MBTilesSchema
    public let options: MBTilesOpenOptions

    /// What opening found beside the file and did about it (a hot journal rolled back, a WAL
    /// checkpointed; see `MBTilesRecovery`), for the user; `nil` when there was nothing.
    public let recovery: String?
    /// The work limit of every query (see ``MBTilesOpenOptions/workLimit``).
    public let workLimit: Int
    /// The rowid of every tile, when the options ask for it and the file allows it
    /// (``MBTilesOpenOptions/rowidIndexLimit``).
    let rowidIndex: MBTilesRowidIndex?

    private let uri: String
    private let pool: Locked<ReaderPool>
    /// Whether readers keep their read transactions (``MBTilesOpenOptions/keepsReadTransactions``
    /// on a file that is not immutable).
    private let keepsTransactions: Bool

    /// The `metadata` row by which tilepack's writers mark a file they have not finished: a
    /// temporary file left by a killed import is refused, never read as an archive.
    public static let unfinishedKey = "tilepack:unfinished"

    /// Opens `path` read-only.
    ///
    /// A rollback journal or WAL left beside the file by an interrupted write is recovered first
    /// when the file and its folder are writable (see ``recovery``), or reported.
    /// - Throws: ``TileArchiveError`` naming the file: `cannotOpen` (missing, unreadable, a
    ///   journal that cannot be rolled back here), `notAnArchive` (empty, PMTiles, not SQLite, a
    ///   FIFO), `truncated` (also: a temporary file of an unfinished tilepack write), `corrupt`,
    ///   `missingTable`.
    public init(path: String, options: MBTilesOpenOptions = MBTilesOpenOptions()) throws(TileArchiveError) {
        self.path = path
        self.options = options
        var size = 0
        if let opened = try? RegularFile.openForReading(path) {
            size = Int(opened.info.st_size)
            close(opened.fd)
        }
        let workLimit = options.stepTimeLimit == nil ? Int.max : options.workLimit ?? MBTilesOpenOptions.defaultWorkLimit(fileSize: size)
        self.workLimit = workLimit
        let foreignJournal = MBTilesRecovery.foreignJournal(path: path)
        if let foreignJournal {
            recovery = foreignJournal
        } else {
            recovery = try MBTilesRecovery.recoverIfNeeded(path: path, workLimit: workLimit, stepTimeLimit: options.stepTimeLimit)
        }
        _ = try MBTilesFileCheck.check(path: path)
        // A journal that is not SQLite's would make a read-only connection fail ("attempt to
        // write a readonly database"): read past it.
        let immutable = options.immutable || foreignJournal != nil
        let uri = MBTilesFileCheck.uri(path: path, parameters: immutable ? ["mode=ro", "immutable=1"] : ["mode=ro"])
        self.uri = uri
        let connection = try SQLiteConnection(
            filename: uri, archivePath: path, readOnly: true, uri: true, stepTimeLimit: options.stepTimeLimit, workLimit: workLimit)
        let schema = try MBTilesSchema.detect(connection, path: path)
        self.schema = schema
        if schema.hasMetadataTable {
            let unfinished = try connection.prepare("SELECT 1 FROM metadata WHERE name = ?1 LIMIT 1")
            unfinished.bind(1, text: Self.unfinishedKey)
            if try unfinished.step() {
                throw TileArchiveError(
                    path: path,
                    fault: .truncated(
                        "an unfinished write: the temporary file of a tilepack import, append or convert that was killed or failed before it completed, not an archive"
                    ))
            }
        }
        keepsTransactions = options.keepsReadTransactions && !immutable
        rowidIndex =
            schema.kind == .flat && schema.tilesAreUnique ? try MBTilesRowidIndex.build(connection, limit: options.rowidIndexLimit) : nil
        let reader = try MBTilesReader(
            connection: connection, memoryMapSize: options.effectiveMemoryMapSize, readsByRowid: rowidIndex != nil)
        self.content = try Self.detectContent(reader: reader, schema: schema)
        self.pool = Locked(ReaderPool(idle: [reader]))
    }

    // MARK: TileArchive

    public func metadata() throws -> TileMetadata {
        try readMetadata()
    }

    /// The `metadata` table as ``TileMetadata`` (rows with a NULL name or value are skipped; for
    /// a repeated name the first row wins).
    /// - Throws: `missingTable` when there is no `metadata` table; `invalidMetadata` when a value
    ///   is not UTF-8 text.
    public func readMetadata() throws(TileArchiveError) -> TileMetadata {
        guard schema.hasMetadataTable else {
            throw TileArchiveError(path: path, fault: .missingTable("'metadata' table"))
        }
        return try withReader { reader throws(TileArchiveError) in
            TileMetadata(try Self.readMetadataRows(reader.connection, path: path, strict: true))
        }
    }

    public func containsTile(at tile: TileCoordinate) throws -> Bool {
        try withReader { reader throws(TileArchiveError) in
            let statement = reader.exists
            statement.bind(1, tile.zoom)
            statement.bind(2, tile.x)
            statement.bind(3, tile.row(in: .tms))
            defer { statement.reset() }
            return try statement.step()
        }
    }

    /// Calls `body` with the tile's bytes straight from SQLite's buffer (no copy).
    /// - Throws: `nullTile` when the row exists but `tile_data` is NULL; `invalidRow` when
    ///   `tile_data` is a number rather than a blob or text.
    public func withTileBytes<R>(at tile: TileCoordinate, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        let reader = try checkout()
        defer { checkin(reader) }
        let row = tile.row(in: .tms)
        if let result = try withIndexedTileBytes(reader: reader, at: tile, row: row, body) { return result }
        let statement = reader.lookup
        statement.bind(1, tile.zoom)
        statement.bind(2, tile.x)
        statement.bind(3, row)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        let bytes = try tileBytes(statement, column: 0, tile: tile)
        return try body(bytes)
    }

    public func zoomLevels() throws -> [ZoomLevelSummary] {
        try withReader { reader throws(TileArchiveError) in
            // Without unique indexes a tile may be stored (or its image joined) twice: distinct tiles are counted.
            let statement = try reader.connection.prepare(
                schema.tilesAreUnique
                    ? "SELECT zoom_level, COUNT(*) FROM tiles GROUP BY zoom_level ORDER BY zoom_level"
                    : "SELECT zoom_level, COUNT(*) FROM (SELECT DISTINCT zoom_level, tile_column, tile_row FROM tiles) GROUP BY zoom_level ORDER BY zoom_level"
            )
            var levels: [ZoomLevelSummary] = []
            while try statement.step() {
                guard let zoom = Self.integer(statement, 0), (0...TileCoordinate.maximumZoom).contains(zoom) else {
                    throw TileArchiveError(
                        path: path,
                        fault: .invalidRow(
                            "zoom_level \(Self.describe(statement, 0)) (\(statement.int64(1)) rows) is not a zoom in 0...\(TileCoordinate.maximumZoom)"
                        ))
                }
                levels.append(ZoomLevelSummary(zoom: zoom, tileCount: Int(statement.int64(1))))
            }
            return levels
        }
    }

    /// Streams every tile in (zoom, x, y) XYZ order.
    ///
    /// With a unique index the rows come straight off the index, one column at a time read
    /// backwards (TMS rows descending = XYZ rows ascending), so nothing is sorted or held in
    /// memory. Without one SQLite sorts, spilling to temporary files beyond its cache, and a tile
    /// stored in several rows is given once (the first row of the sort; `duplicateTiles(limit:)`
    /// lists them).
    /// - Throws: `invalidRow` for a row whose coordinates are not a tile (the raw scan
    ///   `forEachRawRow(_:)` reports those instead), `nullTile` for NULL `tile_data`.
    public func forEachTile(_ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws {
        let reader = try checkout()
        defer { checkin(reader) }
        let connection = reader.connection
        if schema.tilesAreUnique {
            let columns = try connection.prepare(
                "SELECT DISTINCT zoom_level, tile_column FROM tiles ORDER BY zoom_level, tile_column")
            let rows = try connection.prepare(
                "SELECT tile_row, tile_data FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 ORDER BY tile_row DESC")
            while try columns.step() {
                guard let zoom = Self.integer(columns, 0), let x = Self.integer(columns, 1) else {
                    throw TileArchiveError(
                        path: path,
                        fault: .invalidRow(
                            "zoom_level \(Self.describe(columns, 0)), tile_column \(Self.describe(columns, 1)) are not whole numbers"))
                }
                rows.bind(1, zoom)
                rows.bind(2, x)
                defer { rows.reset() }
                while try rows.step() {
                    let tile = try coordinate(zoom: zoom, x: x, rowStatement: rows, rowColumn: 0)
                    try body(tile, try tileBytes(rows, column: 1, tile: tile))
                }
            }
        } else {
            let rows = try connection.prepare(
                "SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles ORDER BY zoom_level, tile_column, tile_row DESC")
            var previous: TileCoordinate?
            while try rows.step() {
                guard let zoom = Self.integer(rows, 0), let x = Self.integer(rows, 1) else {
                    throw TileArchiveError(
                        path: path,
                        fault: .invalidRow(
                            "zoom_level \(Self.describe(rows, 0)), tile_column \(Self.describe(rows, 1)) are not whole numbers"))
                }
                let tile = try coordinate(zoom: zoom, x: x, rowStatement: rows, rowColumn: 2)
                if tile == previous { continue }
                previous = tile
                try body(tile, try tileBytes(rows, column: 3, tile: tile))
            }
        }
    }

    // MARK: What verify needs

    /// martin's `agg_tiles_hash` of the `tiles` rows (see `MBTilesAggregateHash`).
    public func aggregateTilesHash() throws(TileArchiveError) -> String {
        try withReader { reader throws(TileArchiveError) in try MBTilesAggregateHash.compute(reader.connection) }
    }

    /// Calls `body` for every row of `tiles` as stored, in storage order, including rows that
    /// are not tiles (NULL or out-of-range coordinates, NULL or numeric `tile_data`), so that a
    /// verifier can report them. For ``MBTilesSchemaKind/flatWithHash`` the row carries its
    /// stored `tile_hash`.
    package func forEachRawRow(_ body: (MBTilesRawRow) throws -> Void) throws {
        let reader = try checkout()
        defer { checkin(reader) }
        let withHash = schema.kind == .flatWithHash
        let statement = try reader.connection.prepare(
            withHash
                ? "SELECT zoom_level, tile_column, tile_row, tile_data, tile_hash FROM \(Self.quoted(schema.coordinateTable))"
                : "SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles")
        while try statement.step() {
            let row = MBTilesRawRow(
                zoomLevel: MBTilesRawValue(statement, 0), tileColumn: MBTilesRawValue(statement, 1),
                tileRow: MBTilesRawValue(statement, 2), tileDataStorage: statement.type(3),
                tileData: statement.bytes(3), tileHash: withHash ? statement.text(4) : nil)
            try body(row)
        }
    }

    /// For ``MBTilesSchemaKind/flatWithHash``: checks every stored `tile_hash` against the MD5 of
    /// its `tile_data` (case-insensitively; NULL data must have a NULL hash) and calls
    /// `mismatch` for each that differs. Returns how many rows were checked (0 for other schemas).
    @discardableResult
    package func checkTileHashes(_ mismatch: (MBTilesTileHashMismatch) throws -> Void) throws -> Int {
        guard schema.kind == .flatWithHash else { return 0 }
        var checked = 0
        try forEachRawRow { row in
            checked += 1
            let computed = row.tileData.map { MBTilesAggregateHash.md5Hex($0) }
            if computed?.uppercased() != row.tileHash?.uppercased() {
                try mismatch(
                    MBTilesTileHashMismatch(
                        zoomLevel: row.zoomLevel, tileColumn: row.tileColumn, tileRow: row.tileRow,
                        declared: row.tileHash, computed: computed))
            }
        }
        return checked
    }

    /// Tiles the `tiles` view gives in more than one row (possible only without unique indexes on
    /// the coordinates and, for the normalized schema, on `images.tile_id`; empty with them),
    /// at most `limit` of them, each with how many rows hold it.
    package func duplicateTiles(limit: Int = 1000) throws(TileArchiveError) -> [MBTilesDuplicateTile] {
        guard !schema.tilesAreUnique else { return [] }
        return try withReader { reader throws(TileArchiveError) in
            let statement = try reader.connection.prepare(
                """
                SELECT zoom_level, tile_column, tile_row, COUNT(*) FROM tiles
                GROUP BY zoom_level, tile_column, tile_row HAVING COUNT(*) > 1 LIMIT \(max(1, limit))
                """)
            var found: [MBTilesDuplicateTile] = []
            while try statement.step() {
                found.append(
                    MBTilesDuplicateTile(
                        zoomLevel: MBTilesRawValue(statement, 0), tileColumn: MBTilesRawValue(statement, 1),
                        tileRow: MBTilesRawValue(statement, 2), rowCount: Int(statement.int64(3))))
            }
            return found
        }
    }

    /// For the normalized (`map` + `images`) schema: `map` rows that name no image, so the tiles
    /// vanish from the `tiles` view: a `tile_id` no `images` row has, or a NULL `tile_id` on a row
    /// that holds no UTFGrid either (no `grid_id`); at most `limit`; empty for other schemas.
    package func orphanedMapRows(limit: Int = 1000) throws(TileArchiveError) -> [MBTilesOrphanedMapRow] {
        guard schema.kind == .normalized else { return [] }
        return try withReader { reader throws(TileArchiveError) in
            let hasGrid = try reader.connection.scalarInt("SELECT COUNT(*) FROM pragma_table_info('map') WHERE name = 'grid_id'") ?? 0 > 0
            let statement = try reader.connection.prepare(
                """
                SELECT map.zoom_level, map.tile_column, map.tile_row, map.tile_id FROM map
                LEFT JOIN images ON images.tile_id = map.tile_id
                WHERE images.tile_id IS NULL AND (map.tile_id IS NOT NULL\(hasGrid ? " OR map.grid_id IS NULL" : " OR 1"))
                LIMIT \(max(1, limit))
                """)
            var found: [MBTilesOrphanedMapRow] = []
            while try statement.step() {
                found.append(
                    MBTilesOrphanedMapRow(
                        zoomLevel: MBTilesRawValue(statement, 0), tileColumn: MBTilesRawValue(statement, 1),
                        tileRow: MBTilesRawValue(statement, 2), tileID: MBTilesRawValue(statement, 3)))
            }
            return found
        }
    }

    /// `PRAGMA integrity_check`: an empty array when SQLite finds the file sound, otherwise its
    /// messages (at most `maximumErrors`).
    public func integrityCheck(maximumErrors: Int = 100) throws(TileArchiveError) -> [String] {
        try withReader { reader throws(TileArchiveError) in
            let statement = try reader.connection.prepare("PRAGMA integrity_check(\(max(1, maximumErrors)))")
            var messages: [String] = []
            while try statement.step() { messages.append(statement.text(0) ?? "") }
            return messages == ["ok"] ? [] : messages
        }
    }

    /// Per zoom level: the tile count and the XYZ column/row ranges (one index scan), for
    /// deriving and checking bounds and zooms. Rows whose coordinates are not tiles are left out.
    package func contentSummary() throws(TileArchiveError) -> TileContentSummary {
        try withReader { reader throws(TileArchiveError) in
            var summary = try TileContentSummary.query(reader.connection, distinct: !schema.tilesAreUnique)
            summary.format = content.flatMap { if case .encoded(let f) = $0 { f } else { nil } }
            if let format = try? Self.sniffFirstTile(reader: reader) { summary.sniffedFormat = format }
            return summary
        }
    }

    /// The rows of `metadata` (NULL names and values skipped, the first of a repeated name
    /// kept), read within ``MetadataLimits``: past them, an `invalidMetadata` error, before the
    /// rows are held in memory. `strict`: a value that is not UTF-8 is an error (else repaired).
    package static func readMetadataRows(_ connection: SQLiteConnection, path: String, strict: Bool) throws(TileArchiveError) -> [String: String] {
        let statement = try connection.prepare("SELECT name, value FROM metadata")
        var entries: [String: String] = [:]
        var rows = 0
        var bytes = 4
        while try statement.step() {
            rows += 1
            bytes += MetadataLimits.entryBytes(keyCount: statement.bytes(0)?.count ?? 0, valueCount: statement.bytes(1)?.count ?? 0)
            guard rows <= MetadataLimits.maximumEntries, bytes <= MetadataLimits.maximumBytes else {
                throw TileArchiveError(
                    path: path,
                    fault: .invalidMetadata(
                        rows > MetadataLimits.maximumEntries
                            ? "the metadata table has more than \(MetadataLimits.maximumEntries) rows, tilepack's limit"
                            : "the metadata table holds more than \(MetadataLimits.maximumBytes) bytes (16 MiB), tilepack's limit"))
            }
            guard let name = statement.validatedText(0) else { continue }
            if statement.type(1) == .null || entries[name] != nil { continue }
            guard let value = strict ? statement.validatedText(1) : statement.text(1) else {
                throw TileArchiveError(path: path, fault: .invalidMetadata("the value of '\(name)' is not UTF-8 text"))
            }
            entries[name] = value
        }
        return entries
    }

    // MARK: Connections

    private func makeReader() throws(TileArchiveError) -> MBTilesReader {
        try MBTilesReader(
            connection: SQLiteConnection(
                filename: uri, archivePath: path, readOnly: true, uri: true, stepTimeLimit: options.stepTimeLimit, workLimit: workLimit),
            memoryMapSize: options.effectiveMemoryMapSize, readsByRowid: rowidIndex != nil)
    }

    @inline(__always)
    func checkout() throws(TileArchiveError) -> MBTilesReader {
        guard keepsTransactions else {
            if let reader = pool.withLock({ $0.idle.popLast() }) { return reader }
            return try makeReader()
        }
        let (popped, keep) = pool.withLock { pool in (pool.idle.popLast(), !pool.draining) }
        let reader: MBTilesReader
        if let popped { reader = popped } else { reader = try makeReader() }
        if keep, !reader.inTransaction {
            do throws(TileArchiveError) {
                try reader.beginTransaction()
            } catch {
                checkin(reader)
                throw error
            }
            pool.withLock { $0.kept += 1 }
        }
        return reader
    }

    @inline(__always)
    func checkin(_ reader: MBTilesReader) {
        // One lock a read: a lock the event loops share is where one waits for another.
        let limit = options.maximumIdleConnections
        var pushed = pool.withLock { pool in
            guard !(pool.draining && reader.inTransaction), pool.idle.count < limit else { return false }
            pool.idle.append(reader)
            return true
        }
        guard !pushed else { return }
        if reader.inTransaction { end([reader]) }
        pushed = pool.withLock { pool in
            guard pool.idle.count < limit else { return false }
            pool.idle.append(reader)
            return true
        }
        _ = pushed  // a surplus connection is closed here, outside the lock
    }

    /// Ends the read transactions the pooled connections keep (``MBTilesOpenOptions/keepsReadTransactions``):
    /// those of idle connections now, those of connections in use when they are handed back; until
    /// then no connection begins another, so that the process holds no lock on the file for a
    /// moment and a writer waiting for one gets it. Reads see what changed in the file from then
    /// on. Call it periodically (the server calls it at every look for a replaced file).
    public func endReadTransactions() {
        guard keepsTransactions else { return }
        let idle = pool.withLock { pool in
            let (kept, others) = (pool.idle.filter(\.inTransaction), pool.idle.filter { !$0.inTransaction })
            pool.idle = others
            pool.draining = pool.kept > 0
            return kept
        }
        end(idle)
        pool.withLock { $0.idle.append(contentsOf: idle) }
    }

    /// Ends the kept transactions of `readers` (none in the pool while this runs).
    private func end(_ readers: [MBTilesReader]) {
        guard !readers.isEmpty else { return }
        for reader in readers { reader.endTransaction() }
        pool.withLock { pool in
            pool.kept -= readers.count
            if pool.kept <= 0 {
                pool.kept = 0
                pool.draining = false
            }
        }
    }

    private func withReader<R>(_ body: (MBTilesReader) throws(TileArchiveError) -> R) throws(TileArchiveError) -> R {
        let reader = try checkout()
        defer { checkin(reader) }
        return try body(reader)
    }

    // MARK: Helpers

    @inline(__always)
    func tileBytes(_ statement: SQLiteStatement, column: Int32, tile: TileCoordinate) throws(TileArchiveError)
        -> UnsafeRawBufferPointer
    {
        switch statement.type(column) {
        case .blob, .text:
            return statement.bytes(column) ?? UnsafeRawBufferPointer(start: nil, count: 0)
        case .null:
            throw TileArchiveError(path: path, fault: .nullTile(tile))
        case .integer, .real:
            throw TileArchiveError(
                path: path,
                fault: .invalidRow("tile_data of \(tile) is \(statement.type(column)) \(Self.describe(statement, column)), not a blob"))
        }
    }

    private func coordinate(zoom: Int, x: Int, rowStatement: SQLiteStatement, rowColumn: Int32) throws(TileArchiveError) -> TileCoordinate {
        guard let row = Self.integer(rowStatement, rowColumn) else {
            throw TileArchiveError(
                path: path,
                fault: .invalidRow(
                    "zoom_level \(zoom), tile_column \(x), tile_row \(Self.describe(rowStatement, rowColumn)): tile_row is not a whole number"
                ))
        }
        do {
            return try TileCoordinate(zoom: zoom, x: x, row: row, scheme: .tms)
        } catch {
            throw TileArchiveError(path: path, fault: .invalidRow("zoom_level \(zoom), tile_column \(x), tile_row \(row) (TMS): \(error)"))
        }
    }

    /// An INTEGER value, or a REAL that is a whole number; `nil` otherwise.
    static func integer(_ statement: SQLiteStatement, _ column: Int32) -> Int? {
        switch statement.type(column) {
        case .integer:
            return Int(truncatingIfNeeded: statement.int64(column))
        case .real:
            let value = statement.double(column)
            return value.rounded() == value && abs(value) < 1e15 ? Int(value) : nil
        default:
            return nil
        }
    }

    static func describe(_ statement: SQLiteStatement, _ column: Int32) -> String {
        MBTilesRawValue(statement, column).description
    }

    static func quoted(_ identifier: String) -> String {
        "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    private static func detectContent(reader: MBTilesReader, schema: MBTilesSchema) throws(TileArchiveError) -> TileContent? {
        if schema.hasMetadataTable {
            let statement = try reader.connection.prepare("SELECT value FROM metadata WHERE name = 'format' LIMIT 1")
            if try statement.step(), let text = statement.validatedText(0), let format = TileFormat(metadataValue: text) {
                return .encoded(format)
            }
        }
        return try sniffFirstTile(reader: reader).map { .encoded($0) }
    }

    private static func sniffFirstTile(reader: MBTilesReader) throws(TileArchiveError) -> TileFormat? {
        let statement = try reader.connection.prepare("SELECT tile_data FROM tiles WHERE tile_data IS NOT NULL LIMIT 1")
        guard try statement.step(), let bytes = statement.bytes(0) else { return nil }
        return TileFormat.sniff(bytes)
    }
}
