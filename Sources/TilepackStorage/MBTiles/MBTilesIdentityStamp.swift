internal import CTilepackSQLite
import Foundation
import TilepackCore

/// When an MBTiles file's stored content identity (`tilepack_content_identity`) may be trusted
/// without reading its tiles (Specs/updates.md §1.1): only while the file is provably the one the
/// identity was stored in. SQLite's file change counter (the database header's 4 bytes at offset
/// 24, "incremented whenever the database file is unlocked after having been modified": SQLite's
/// "Database File Format", §1.3.8) says so: the transaction that stores the identity stores
/// beside it, in `tilepack_content_identity_counter`, the counter that transaction leaves (the
/// one it began with, plus one); any later write by any tool (an `UPDATE` of a tile) moves the
/// counter past it. A file in WAL mode (header bytes 18-19 equal to 2) does not move its counter
/// on each commit, so its stored identity is never trusted: it is computed again.
package enum MBTilesIdentityStamp {
    /// The metadata key that holds the counter (a derived key: left out of the metadata hash).
    package static let key = "tilepack_content_identity_counter"

    /// The stamp a transaction that began when the counter was `counterAtBegin` stores: `nil` (no
    /// stamp) when the file was in WAL mode or its header could not be read.
    package static func stamp(counterAtBegin: UInt32?) -> String? {
        counterAtBegin.map { String($0 &+ 1) }
    }

    /// Whether `stamp` (the stored value) proves the file unchanged since it was stored, given the
    /// counter read at the start of the current transaction (`nil`: WAL mode, or unreadable).
    package static func proves(_ stamp: String?, counterNow: UInt32?) -> Bool {
        guard let stamp, let counterNow, let stored = UInt32(stamp) else { return false }
        return stored == counterNow
    }
}

extension SQLiteConnection {
    /// The main database file's change counter as it lies on disk, read from its header; `nil`
    /// in WAL mode (whose commits do not move it), for a file shorter than its header that is not
    /// empty, or when the file cannot be read. A new, empty file counts 0. Read it when a
    /// transaction begins, before the transaction writes page 1.
    package func fileChangeCounter() -> UInt32? {
        guard let name = sqlite3_db_filename(handle, "main"), name.pointee != 0 else { return nil }
        let fd = FileSystem.open(String(cString: name), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var header = [UInt8](repeating: 0, count: 28)
        let count = header.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 28, 0) }
        if count == 0 { return 0 }
        guard count == 28, header[18] != 2, header[19] != 2 else { return nil }
        return header[24..<28].reduce(0) { $0 << 8 | UInt32($1) }
    }
}
