internal import CTilepackSQLite
import Foundation
import TilepackCore

/// SQLite's "copy the value now" destructor (`SQLITE_TRANSIENT`, a macro Swift cannot import).
nonisolated(unsafe) private let transientDestructor = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One SQLite connection, owned by this object and closed in `deinit`.
///
/// Not thread-safe: a connection (and every statement prepared on it) is used by one thread at a
/// time. Connections are opened with `SQLITE_OPEN_NOMUTEX`, so SQLite takes no lock of its own.
/// Errors are ``TileArchiveError`` values naming `archivePath` (the archive, not a temporary file).
package final class SQLiteConnection {
    let handle: OpaquePointer
    /// The path reported in errors.
    let archivePath: String
    /// The query limits' state, read by SQLite's progress handler; `nil` without limits.
    let watchdog: UnsafeMutablePointer<Watchdog>?

    /// The bounds on the queries of a hostile file (a `tiles` view over an endless recursive
    /// query must not hang the reader, whether it yields no row or rows without end): one step
    /// may run at most `limit` seconds, and one query (from its first step to its reset, all
    /// steps together) at most `workLimit` virtual-machine instructions.
    struct Watchdog {
        var limit: Double
        /// When the current step's first progress callback ran; 0 = not yet (reset by every step).
        var startedAt: Double
        var workLimit: Int
        /// Instructions of the query now stepping (saved in and restored from its statement).
        var work: Int
        /// What stopped the last interrupted step.
        var tripped: Trip
    }

    enum Trip { case none, time, work }

    /// Instructions between two calls of the progress handler.
    static let progressInterval: Int32 = 100_000

    /// Opens `filename` (a plain path, or a `file:` URI when `uri` is true).
    /// - Parameters:
    ///   - stepTimeLimit: seconds one `sqlite3_step` may run before it is interrupted.
    ///   - workLimit: virtual-machine instructions one query may run (with `stepTimeLimit`).
    package init(
        filename: String, archivePath: String, readOnly: Bool, uri: Bool, create: Bool = false,
        stepTimeLimit: Double? = nil, workLimit: Int = .max
    ) throws(TileArchiveError) {
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_PRIVATECACHE
        flags |= readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if create { flags |= SQLITE_OPEN_CREATE }
        if uri { flags |= SQLITE_OPEN_URI }
        var db: OpaquePointer?
        let rc = FileSystem.withPath(filename) { sqlite3_open_v2($0, &db, flags, nil) }
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            let systemErrno = db.map { sqlite3_system_errno($0) } ?? 0
            if let db { sqlite3_close_v2(db) }
            throw Self.error(code: rc, message: message, systemErrno: systemErrno, path: archivePath, context: "open")
        }
        handle = db
        self.archivePath = archivePath
        if let stepTimeLimit {
            let watchdog = UnsafeMutablePointer<Watchdog>.allocate(capacity: 1)
            watchdog.initialize(to: Watchdog(limit: stepTimeLimit, startedAt: 0, workLimit: workLimit, work: 0, tripped: .none))
            self.watchdog = watchdog
            sqlite3_progress_handler(
                db, Self.progressInterval,
                { context in
                    guard let watchdog = context?.assumingMemoryBound(to: Watchdog.self) else { return 0 }
                    watchdog.pointee.work &+= Int(SQLiteConnection.progressInterval)
                    if watchdog.pointee.work > watchdog.pointee.workLimit {
                        watchdog.pointee.tripped = .work
                        return 1
                    }
                    var ts = timespec()
                    clock_gettime(CLOCK_MONOTONIC, &ts)
                    let now = Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
                    if watchdog.pointee.startedAt == 0 {
                        watchdog.pointee.startedAt = now
                        return 0
                    }
                    if now - watchdog.pointee.startedAt > watchdog.pointee.limit {
                        watchdog.pointee.tripped = .time
                        return 1
                    }
                    return 0
                }, UnsafeMutableRawPointer(watchdog))
        } else {
            watchdog = nil
        }
        sqlite3_extended_result_codes(db, 1)
        // A file that is locked by a writer makes us wait a bounded time, never forever.
        sqlite3_busy_timeout(db, 5000)
        // A hostile file's schema (views, triggers) may not call functions with side effects.
        sqlite3_exec(db, "PRAGMA trusted_schema = OFF", nil, nil, nil)
    }

    deinit {
        sqlite3_close_v2(handle)
        watchdog?.deallocate()
    }

    package func prepare(_ sql: String) throws(TileArchiveError) -> SQLiteStatement {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            if let statement { sqlite3_finalize(statement) }
            throw error(code: rc, context: "prepare")
        }
        return SQLiteStatement(handle: statement, connection: self)
    }

    /// Runs SQL that returns no rows (one or more statements).
    package func execute(_ sql: String) throws(TileArchiveError) {
        if let watchdog {
            watchdog.pointee.startedAt = 0
            watchdog.pointee.work = 0
            watchdog.pointee.tripped = .none
        }
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(code: rc, context: sql.prefix(60).description) }
    }

    /// Runs a query and returns its first column of its first row as text (pragmas).
    func scalarText(_ sql: String) throws(TileArchiveError) -> String? {
        let statement = try prepare(sql)
        guard try statement.step() else { return nil }
        return statement.text(0)
    }

    package func scalarInt(_ sql: String) throws(TileArchiveError) -> Int64? {
        let statement = try prepare(sql)
        guard try statement.step() else { return nil }
        return statement.type(0) == .null ? nil : statement.int64(0)
    }

    package var changes: Int { Int(sqlite3_changes64(handle)) }

    func error(code: Int32, context: String) -> TileArchiveError {
        if code & 0xFF == SQLITE_INTERRUPT, let watchdog {
            let what =
                switch watchdog.pointee.tripped {
                case .work:
                    "a query ran over its work limit of \(watchdog.pointee.workLimit) SQLite instructions (10^9 + 64 per byte of the file)"
                case .time, .none: "one step of a query ran over its time limit of \(Int(watchdog.pointee.limit)) s"
                }
            return TileArchiveError(
                path: archivePath,
                fault: .database(
                    code: code,
                    message: "stopped: \(what) (during \(context)); the file's schema may be hostile (an endless view or trigger)"))
        }
        return Self.error(
            code: code, message: String(cString: sqlite3_errmsg(handle)), systemErrno: sqlite3_system_errno(handle),
            path: archivePath, context: context)
    }

    /// Maps an SQLite result code to the archive fault that describes it.
    static func error(code: Int32, message: String, systemErrno: Int32, path: String, context: String) -> TileArchiveError {
        let primary = code & 0xFF
        let fault: TileArchiveError.Fault
        switch primary {
        case SQLITE_CORRUPT:
            fault = .corrupt("SQLite reports \(message) (code \(code), during \(context))")
        case SQLITE_NOTADB:
            fault = .notAnArchive(detected: "not an SQLite database (\(message))")
        case SQLITE_CANTOPEN:
            fault = .cannotOpen(errno: systemErrno, reason: systemErrno != 0 ? String(cString: strerror(systemErrno)) : message)
        case SQLITE_IOERR:
            let reason = systemErrno != 0 ? "\(message): \(String(cString: strerror(systemErrno)))" : message
            fault = .io(errno: systemErrno, reason: "\(reason) (SQLite code \(code), during \(context))")
        case SQLITE_INTERRUPT:
            fault = .database(
                code: code,
                message: "stopped: one step of a query ran over its time limit (during \(context)); the file's schema may be hostile")
        case SQLITE_FULL:
            fault = .io(errno: ENOSPC, reason: "\(message) (during \(context))")
        default:
            fault = .database(code: code, message: "\(message) (during \(context))")
        }
        return TileArchiveError(path: path, fault: fault)
    }
}

/// The storage class of an SQLite value.
package enum SQLiteStorageClass: String, Hashable, Sendable, CustomStringConvertible {
    case integer, real, text, blob, null
    package var description: String { rawValue }
}

/// A prepared statement, finalized in `deinit`; used by one thread at a time, like its connection.
package final class SQLiteStatement {
    let handle: OpaquePointer
    let connection: SQLiteConnection
    /// Instructions this statement has run since its last reset (see ``SQLiteConnection/Watchdog``).
    private var work = 0

    init(handle: OpaquePointer, connection: SQLiteConnection) {
        self.handle = handle
        self.connection = connection
    }

    deinit { sqlite3_finalize(handle) }

    @inline(__always)
    package func bind(_ index: Int32, _ value: Int) {
        sqlite3_bind_int64(handle, index, sqlite3_int64(value))
    }

    package func bind(_ index: Int32, text: String) {
        sqlite3_bind_text(handle, index, text, -1, transientDestructor)
    }

    package func bindNull(_ index: Int32) {
        sqlite3_bind_null(handle, index)
    }

    package func bind(_ index: Int32, double value: Double) {
        sqlite3_bind_double(handle, index, value)
    }

    /// Binds bytes without copying: they must stay valid until the statement is stepped and reset.
    @inline(__always)
    package func bind(_ index: Int32, blobNoCopy bytes: UnsafeRawBufferPointer) throws(TileArchiveError) {
        guard bytes.count <= Int(Int32.max) else {
            throw TileArchiveError(
                path: connection.archivePath, fault: .invalidRow("a blob of \(bytes.count) bytes is larger than SQLite stores"))
        }
        // A zero-length blob needs a non-NULL pointer, or SQLite stores NULL.
        let pointer = bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)
        sqlite3_bind_blob(handle, index, pointer, Int32(bytes.count), nil)
    }

    /// Steps once: `true` when a row is available, `false` when done.
    @inline(__always)
    package func step() throws(TileArchiveError) -> Bool {
        let watchdog = connection.watchdog
        if let watchdog {
            watchdog.pointee.startedAt = 0
            watchdog.pointee.work = work
            watchdog.pointee.tripped = .none
        }
        let rc = sqlite3_step(handle)
        if let watchdog { work = watchdog.pointee.work }
        if rc == SQLITE_ROW { return true }
        work = 0
        if rc == SQLITE_DONE { return false }
        let error = connection.error(code: rc, context: "step")
        sqlite3_reset(handle)
        throw error
    }

    /// Resets for the next execution and releases bound no-copy blobs.
    @inline(__always)
    package func reset() {
        work = 0
        sqlite3_reset(handle)
    }

    /// How many times the statement has been run (stepped, then reset): SQLite's
    /// `SQLITE_STMTSTATUS_RUN`, for tests that check which query answered.
    package var runCount: Int { Int(sqlite3_stmt_status(handle, SQLITE_STMTSTATUS_RUN, 0)) }

    func clearBindings() {
        sqlite3_clear_bindings(handle)
    }

    @inline(__always)
    package func type(_ column: Int32) -> SQLiteStorageClass {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER: .integer
        case SQLITE_FLOAT: .real
        case SQLITE_TEXT: .text
        case SQLITE_BLOB: .blob
        default: .null
        }
    }

    @inline(__always)
    package func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    package func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    /// The column as text (invalid UTF-8 repaired), or `nil` when NULL.
    package func text(_ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    /// The column as text only when it is valid UTF-8; `nil` for NULL or invalid bytes.
    func validatedText(_ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(validating: UnsafeRawBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    /// The column's bytes without copying: valid until the next step, reset or column call.
    /// An empty buffer for a zero-length value; `nil` only for NULL.
    @inline(__always)
    package func bytes(_ column: Int32) -> UnsafeRawBufferPointer? {
        let pointer = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        if pointer == nil {
            return sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : UnsafeRawBufferPointer(start: nil, count: 0)
        }
        return UnsafeRawBufferPointer(start: pointer, count: count)
    }
}
