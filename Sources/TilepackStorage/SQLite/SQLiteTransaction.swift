internal import CTilepackSQLite
import TilepackCore

/// How a transaction takes its lock: SQLite's `BEGIN` (at the first write) or `BEGIN IMMEDIATE`
/// (at once, so that a writer finds out it is not alone before it reads what it will change).
package enum SQLiteTransactionKind: String, Sendable {
    case deferred = "BEGIN"
    case immediate = "BEGIN IMMEDIATE"
}

extension SQLiteConnection {
    /// Runs `body` in one transaction: committed when it returns, rolled back when it (or the
    /// commit) throws, as GRDB's `inTransaction`. Every transaction tilepack opens on SQLite goes
    /// through here, so none is left open on an error path.
    package func inTransaction<Result>(
        _ kind: SQLiteTransactionKind = .deferred, _ body: () throws(TileArchiveError) -> Result
    ) throws(TileArchiveError) -> Result {
        try execute(kind.rawValue)
        do throws(TileArchiveError) {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            // Nothing to roll back when SQLite already did (a failed COMMIT on a full disk, for one).
            if sqlite3_get_autocommit(handle) == 0 { try? execute("ROLLBACK") }
            throw error
        }
    }

    /// Inserts `(name, value)` rows into a two-column table (`metadata`, a patch's or a store's
    /// bookkeeping) with one prepared statement; rows whose value is `nil` are skipped.
    package func insertNameValues(
        into table: String, _ rows: some Sequence<(name: String, value: String?)>, replacing: Bool = false
    ) throws(TileArchiveError) {
        let insert = try prepare("INSERT\(replacing ? " OR REPLACE" : "") INTO \(table) (name, value) VALUES (?1, ?2)")
        for (name, value) in rows {
            guard let value else { continue }
            insert.bind(1, text: name)
            insert.bind(2, text: value)
            _ = try insert.step()
            insert.reset()
        }
    }
}
