import Foundation
import TilepackCore

/// The idle read connections, and how many connections keep a read transaction.
struct ReaderPool {
    var idle: [MBTilesReader]
    /// Connections, idle or in use, that keep a read transaction open.
    var kept = 0
    /// Set by ``MBTilesArchive/endReadTransactions()`` while connections in use keep one: none
    /// begins another until they are all ended.
    var draining = false
}

/// One pooled read connection with its prepared point-lookup statements.
///
/// `@unchecked Sendable`: a reader moves between threads only through the archive's pool and is
/// used by exactly one thread while checked out.
final class MBTilesReader: @unchecked Sendable {
    let connection: SQLiteConnection
    let lookup: SQLiteStatement
    let exists: SQLiteStatement
    /// The read of a tile by rowid (``MBTilesRowidIndex``), with its coordinates to check; `nil`
    /// when the archive has no rowid index.
    let byRowid: SQLiteStatement?
    /// The read transaction it keeps open between tiles (``MBTilesOpenOptions/keepsReadTransactions``),
    /// made on first use.
    private var readTransaction: SQLiteBatchTransaction?
    /// Whether it keeps a read transaction open.
    var inTransaction: Bool { readTransaction?.isOpen ?? false }

    /// Begins a read transaction (deferred: SQLite takes its shared lock at the first read and
    /// keeps it until ``endTransaction()``).
    func beginTransaction() throws(TileArchiveError) {
        if readTransaction == nil { readTransaction = try SQLiteBatchTransaction(connection) }
        try readTransaction?.open()
    }

    /// Ends the read transaction; a connection whose transaction does not end (none should
    /// fail: it wrote nothing) is rolled back.
    func endTransaction() {
        try? readTransaction?.close()
    }

    init(connection: SQLiteConnection, memoryMapSize: Int, readsByRowid: Bool = false) throws(TileArchiveError) {
        self.connection = connection
        if memoryMapSize > 0 { try connection.execute("PRAGMA mmap_size = \(memoryMapSize)") }
        lookup = try connection.prepare(
            "SELECT tile_data FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3 LIMIT 1")
        exists = try connection.prepare(
            "SELECT 1 FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3 LIMIT 1")
        byRowid =
            readsByRowid ? try connection.prepare("SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles WHERE rowid = ?1") : nil
    }
}
