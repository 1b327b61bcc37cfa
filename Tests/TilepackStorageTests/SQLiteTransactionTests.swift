import Testing
import TilepackCore

@testable import TilepackStorage

/// SQLiteTransaction.swift: every transaction tilepack opens on SQLite commits what its body
/// wrote, or leaves nothing of it and no transaction open, whatever ended it: a thrown error of
/// any type, or a COMMIT that SQLite refuses (a deferred foreign key still broken at the commit).
@Suite struct SQLiteTransactionTests {
    struct Foreign: Error, Equatable {}

    /// An in-memory database with a table `t`, and `child` whose foreign key into `t` is checked
    /// at the commit (deferred): a row of it naming no `t` row makes the COMMIT fail.
    private func database() throws -> SQLiteConnection {
        let db = try SQLiteConnection(filename: ":memory:", archivePath: "memory", readOnly: false, uri: false, create: true)
        try db.execute(
            """
            PRAGMA foreign_keys = ON;
            CREATE TABLE t (id INTEGER PRIMARY KEY);
            CREATE TABLE child (parent INTEGER REFERENCES t (id) DEFERRABLE INITIALLY DEFERRED);
            """)
        return db
    }

    private func rows(_ db: SQLiteConnection, _ table: String = "t") throws -> Int {
        Int(try db.scalarInt("SELECT count(*) FROM \(table)") ?? -1)
    }

    /// Whether a transaction is open: BEGIN fails inside one.
    private func transactionIsOpen(_ db: SQLiteConnection) -> Bool {
        guard (try? db.execute("BEGIN")) != nil else { return true }
        try? db.execute("ROLLBACK")
        return false
    }

    @Test func aBodyThatReturnsIsCommitted() throws {
        let db = try database()
        let value = try db.inTransaction(.immediate) { () throws(TileArchiveError) in
            try db.execute("INSERT INTO t VALUES (1)")
            return 7
        }
        #expect(value == 7)
        #expect(try rows(db) == 1)
        #expect(!transactionIsOpen(db))
    }

    @Test func anErrorOfAnotherTypeRollsBackAndIsRethrownAsItIs() throws {
        let db = try database()
        #expect(throws: Foreign()) {
            try db.inTransaction(throwing: {
                try db.execute("INSERT INTO t VALUES (1)")
                throw Foreign()
            })
        }
        #expect(try rows(db) == 0)
        #expect(!transactionIsOpen(db))
    }

    @Test func aRefusedCommitLeavesNoTransactionOpen() throws {
        let db = try database()
        #expect(throws: TileArchiveError.self) {
            try db.inTransaction { () throws(TileArchiveError) in
                try db.execute("INSERT INTO t VALUES (1); INSERT INTO child VALUES (99)")
            }
        }
        #expect(!transactionIsOpen(db))
        #expect(try rows(db) == 0)
    }

    @Test func aBatchTransactionKeepsEachCommittedBatchAndDropsTheOpenOne() throws {
        let db = try database()
        let transaction = try SQLiteBatchTransaction(db, .immediate)
        #expect(!transaction.isOpen)
        try transaction.open()
        try db.execute("INSERT INTO t VALUES (1)")
        try transaction.commitBatch()
        #expect(transaction.isOpen)
        try db.execute("INSERT INTO t VALUES (2)")
        transaction.rollBack()
        #expect(!transaction.isOpen)
        #expect(!transactionIsOpen(db))
        #expect(try rows(db) == 1)
        // Begun again: its statements are reused.
        try transaction.open()
        try db.execute("INSERT INTO t VALUES (3)")
        try transaction.close()
        #expect(try rows(db) == 2)
        #expect(!transactionIsOpen(db))
    }

    @Test func aBatchWhoseCommitIsRefusedIsRolledBack() throws {
        let db = try database()
        let transaction = try SQLiteBatchTransaction(db)
        try transaction.open()
        try db.execute("INSERT INTO t VALUES (1); INSERT INTO child VALUES (99)")
        #expect(throws: TileArchiveError.self) { try transaction.close() }
        #expect(!transaction.isOpen)
        #expect(!transactionIsOpen(db))
        #expect(try rows(db) == 0)
        #expect(try rows(db, "child") == 0)
    }
}
