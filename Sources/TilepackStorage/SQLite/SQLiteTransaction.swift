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
            rollBackIfOpen()
            throw error
        }
    }

    /// ``inTransaction(_:_:)`` for a body that throws errors of other kinds too (a tile source's
    /// as it is read, a command's own), which it rethrows as they are.
    package func inTransaction<Result>(_ kind: SQLiteTransactionKind = .deferred, throwing body: () throws -> Result) throws -> Result {
        try execute(kind.rawValue)
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            rollBackIfOpen()
            throw error
        }
    }

    /// Rolls back the open transaction, if any: there is nothing to roll back when SQLite already
    /// did (a failed COMMIT on a full disk, for one).
    func rollBackIfOpen() {
        if sqlite3_get_autocommit(handle) == 0 { try? execute("ROLLBACK") }
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

/// A transaction held open across calls and committed in batches, where a closure cannot hold
/// it: a bulk load that commits every so many tiles and begins again, an update committed by its
/// writer's `finish`, a reader's read transaction kept between tiles. Its `BEGIN` and `COMMIT`
/// are statements prepared once (a bulk load steps them thousands of times); ``rollBack()`` ends
/// it without keeping anything, as ``SQLiteConnection/inTransaction(_:_:)`` does on a throw.
///
/// Not `Sendable`: used by the one thread that holds its connection.
package final class SQLiteBatchTransaction {
    private let connection: SQLiteConnection
    private let begin: SQLiteStatement
    private let commit: SQLiteStatement
    /// Whether a transaction this object began is open.
    package private(set) var isOpen = false

    /// Prepares the statements; begins nothing.
    package init(_ connection: SQLiteConnection, _ kind: SQLiteTransactionKind = .deferred) throws(TileArchiveError) {
        self.connection = connection
        begin = try connection.prepare(kind.rawValue)
        commit = try connection.prepare("COMMIT")
    }

    /// Begins a transaction.
    package func open() throws(TileArchiveError) {
        defer { begin.reset() }
        _ = try begin.step()
        isOpen = true
    }

    /// Commits the open transaction (nothing when none is open); one that fails to commit is
    /// rolled back and the error thrown.
    package func close() throws(TileArchiveError) {
        guard isOpen else { return }
        defer { commit.reset() }
        do throws(TileArchiveError) {
            _ = try commit.step()
            isOpen = false
        } catch {
            rollBack()
            throw error
        }
    }

    /// Commits the batch and begins the next.
    package func commitBatch() throws(TileArchiveError) {
        try close()
        try open()
    }

    /// Ends the open transaction, keeping nothing it wrote.
    package func rollBack() {
        isOpen = false
        connection.rollBackIfOpen()
    }
}
