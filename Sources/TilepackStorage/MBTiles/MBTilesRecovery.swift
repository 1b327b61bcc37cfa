import Foundation
import TilepackCore

/// What a killed or failed write leaves beside an MBTiles file, and bringing the file back.
///
/// An interrupted transaction (a kill during `import --append`, a full disk) leaves a *hot*
/// rollback journal (`<file>-journal`) holding the pages as they were; a WAL-mode file may leave
/// `<file>-wal` holding committed pages not yet copied into the file. Until SQLite rolls the
/// journal back (or checkpoints the WAL), a read-only connection cannot read the file ("attempt
/// to write a readonly database", or pages that are not whole). SQLite does that on the first
/// read by a connection that may write, so when tilepack may write the file and its folder it
/// opens the file read-write once, reads the schema (which rolls a hot journal back) and
/// checkpoints a WAL, then reads it read-only as usual; otherwise it stops with an error that
/// says what is there and what to do.
enum MBTilesRecovery {
    /// The first 8 bytes of a rollback journal that is in use (a zeroed header is not hot).
    static let journalMagic: [UInt8] = [0xD9, 0xD5, 0x05, 0xF9, 0x20, 0xA1, 0x63, 0xD7]

    /// Recovers `path` when a journal or WAL is beside it; returns what was done (for the user),
    /// or `nil` when there was nothing to do.
    /// - Throws: `cannotOpen` saying what is left beside the file and why tilepack cannot roll it
    ///   back here (read-only file system, no permission), and how to.
    static func recoverIfNeeded(path: String, workLimit: Int, stepTimeLimit: Double?) throws(TileArchiveError) -> String? {
        let journal = path + "-journal"
        let wal = path + "-wal"
        let hotJournal = startsWithJournalMagic(journal)
        let walSize = fileSize(wal) ?? 0
        guard hotJournal || walSize > 0 else { return nil }
        guard isSQLite(path) else { return nil }
        let leftover =
            hotJournal
            ? "a rollback journal (\(journal)) left by a write that was interrupted (killed, or a full disk)"
            : "a write-ahead log (\(wal), \(walSize) bytes) of changes not yet copied into the file"
        let action = hotJournal ? "rolled back" : "copied into the file"
        // May we write the file and its folder (SQLite deletes the journal)?
        let folder = FileSystem.split(path).folder
        var denied: Int32 = 0
        if FileSystem.access(path, W_OK) != 0 { denied = errno } else if FileSystem.access(folder, W_OK) != 0 { denied = errno }
        if denied == 0 {
            do throws(TileArchiveError) {
                let connection = try SQLiteConnection(
                    filename: path, archivePath: path, readOnly: false, uri: false,
                    stepTimeLimit: stepTimeLimit, workLimit: workLimit)
                // The first read rolls a hot journal back.
                _ = try connection.scalarInt("SELECT COUNT(*) FROM sqlite_master")
                if walSize > 0 { try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
            } catch {
                throw TileArchiveError(
                    path: path,
                    fault: .cannotOpen(
                        errno: 0,
                        reason:
                            "\(leftover) is beside the file, and rolling it back failed: \(error.fault)"))
            }
            if hotJournal, startsWithJournalMagic(journal) {
                throw TileArchiveError(
                    path: path,
                    fault: .cannotOpen(
                        errno: 0,
                        reason:
                            "\(leftover) is beside the file and is still in use (another process may be writing the file); try again when it is done"
                    ))
            }
            return "\(leftover) was found and \(action): the file holds its last complete state"
        }
        let why = String(cString: strerror(denied))
        throw TileArchiveError(
            path: path,
            fault: .cannotOpen(
                errno: denied,
                reason:
                    "\(leftover) is beside the file; its data is intact once the journal is \(action), which needs write access to the file and its folder, and here there is none (\(why)). "
                    + "Copy the file and \(FileSystem.split(hotJournal ? journal : wal).name) together to a writable folder and open the copy there (tilepack then \(hotJournal ? "rolls it back" : "checkpoints it")), or run tilepack where the folder is writable"
            ))
    }

    /// A `<file>-journal` that SQLite would take for a live journal (its first byte is not zero)
    /// but that is not one (no journal header): SQLite writes the header's magic last, when the
    /// journal is complete, so these bytes come from something else, and the file beside it is as
    /// its last write left it. Returns a note naming the journal when there is one; the file is
    /// then read `immutable` (SQLite does not look at the journal), and the journal left alone.
    static func foreignJournal(path: String) -> String? {
        // SQLite names the journal after the file's real path (it follows links, such as the
        // server's `/dev/fd/N`), so the journal looked at here is that one.
        var resolved = path
        if let real = realpath(path, nil) {
            resolved = String(cString: real)
            free(real)
        }
        let journal = resolved + "-journal"
        guard (fileSize(journal) ?? 0) > 0, !startsWithJournalMagic(journal),
            let first = try? RegularFile.read(journal, limit: Int.max, prefix: 1), first.first != 0, isSQLite(resolved)
        else { return nil }
        return "\(journal) is beside the file but is not a SQLite rollback journal (it has no journal header): "
            + "the file was read as it is, ignoring it; remove \(FileSystem.split(journal).name) unless another program put it there"
    }

    private static func fileSize(_ path: String) -> Int? {
        guard let info = FileSystem.lstat(path), (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int(info.st_size)
    }

    private static func startsWithJournalMagic(_ path: String) -> Bool {
        guard (fileSize(path) ?? 0) >= journalMagic.count,
            let bytes = try? RegularFile.read(path, limit: Int.max, prefix: journalMagic.count)
        else {
            return false
        }
        return bytes == journalMagic
    }

    private static func isSQLite(_ path: String) -> Bool {
        guard let bytes = try? RegularFile.read(path, limit: Int.max, prefix: 16) else { return false }
        return bytes == Array("SQLite format 3\0".utf8)
    }
}
