import Foundation
import TilepackCore

/// A new file written beside its destination and renamed into place only when complete.
///
/// The temporary file is `.<name>.tmp-<random>` in the destination's directory (the name cut to
/// fit NAME_MAX, ``FileSystem/temporaryPrefix(for:marker:)``), so the final
/// `rename(2)` is atomic on one file system. It is created (empty) at init and held with an
/// exclusive `flock(2)` until it is committed or discarded. ``commit()`` fsyncs the file, renames
/// it over the destination and fsyncs the directory; dropping the value without committing removes
/// the temporary file. A crash or kill before `commit()` leaves the destination as it was (absent
/// or the previous file) and a stray `.tmp-` file, whose lock died with the process: the next
/// `AtomicFile` for the same destination removes every such temporary file nobody holds.
///
/// A file made `deferred` (a ``TileSink``'s: the sink, not its writer, says when the archive is in
/// place) commits in two steps: ``commit()`` (its writer's) only flushes it to disk, complete
/// beside the destination, and ``publish()`` (the sink's) renames it over the destination.
package final class AtomicFile: @unchecked Sendable {
    /// Where the file will be once committed.
    package let destination: String
    /// Where the file is written until then.
    package let temporaryPath: String
    private var finished = false
    /// Whether ``commit()`` leaves the rename to ``publish()``.
    private let deferred: Bool
    /// A deferred file flushed by ``commit()``, waiting for ``publish()``.
    private var sealed = false

    /// Creates the temporary file beside `destination` (after removing stale ones of earlier,
    /// killed writers).
    /// - Parameter overwrite: when `false`, throws ``TileArchiveError/Fault/alreadyExists`` if
    ///   the destination exists (checked now and again at commit).
    /// - Parameter deferred: ``commit()`` flushes the file and ``publish()`` renames it.
    /// - Throws: `alreadyExists`; `io` naming why the folder takes no new file (a read-only file
    ///   system, no permission, no such folder, a full disk), with its errno.
    package init(destination: String, overwrite: Bool, deferred: Bool = false) throws(TileArchiveError) {
        let (directory, name) = FileSystem.split(destination)
        let prefix = FileSystem.temporaryPrefix(for: name)
        self.destination = destination
        self.temporaryPath = FileSystem.temporaryPath(beside: destination)
        self.overwrite = overwrite
        self.deferred = deferred
        if !overwrite && FileSystem.stat(destination) != nil {
            throw TileArchiveError(path: destination, fault: .alreadyExists)
        }
        Self.removeStaleTemporaries(directory: directory, prefix: prefix)
        let fd = FileSystem.open(temporaryPath, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            let code = errno
            throw TileArchiveError(
                path: destination,
                fault: .io(
                    errno: code,
                    reason:
                        "cannot create a file in \(directory.isEmpty ? "." : directory): \(Self.describe(errno: code))"))
        }
        _ = flock(fd, LOCK_EX | LOCK_NB)
        lockDescriptor = fd
    }

    /// strerror, with what it means for writing a file: "Read-only file system (the folder is on
    /// a read-only file system)", "Permission denied (no permission ...)", a full disk.
    package static func describe(errno code: Int32) -> String {
        let text = String(cString: strerror(code))
        switch code {
        case EROFS: return "\(text) (the folder is on a read-only file system)"
        case EACCES, EPERM: return "\(text) (no permission to write in the folder)"
        case ENOSPC: return "\(text) (the disk is full)"
        case EDQUOT: return "\(text) (the disk quota is used up)"
        default: return text
        }
    }

    /// Removes `.<name>.tmp-*` files in `directory` that no live writer holds (their `flock` is
    /// free: the process that made them is gone), with SQLite's side files beside them.
    static func removeStaleTemporaries(directory: String, prefix: String) {
        var stale: [String] = []
        for (name, _) in FileSystem.entries(directory) ?? [] {
            guard name.hasPrefix(prefix), !name.hasSuffix(".spool"),
                !["-journal", "-wal", "-shm"].contains(where: { name.hasSuffix($0) })
            else { continue }
            stale.append(name)
        }
        for name in stale {
            let path = directory + "/" + name
            let fd = FileSystem.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { continue }
            var info = stat()
            // Held by a live writer: flock fails. Free: the writer died without cleaning up.
            if fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, flock(fd, LOCK_EX | LOCK_NB) == 0 {
                for suffix in ["", "-journal", "-wal", "-shm"] { _ = FileSystem.unlink(path + suffix) }
            }
            close(fd)
        }
    }

    private let overwrite: Bool
    /// The temporary file, open and `flock`ed while this value owns it; -1 once released.
    private var lockDescriptor: Int32 = -1
    /// Background flushes (``flushInBackground()``), one at a time.
    private let flushes = DispatchQueue(label: "tilepack.atomic-file.flush")
    private let flushing = Locked(false)

    /// Starts writing what the temporary file holds so far to disk, on a background queue, so
    /// that ``commit()``'s fsync finds little left to write. Returns at once; does nothing while
    /// the previous background flush is still running. On Linux the flush only starts the writes
    /// (`sync_file_range`, `SYNC_FILE_RANGE_WRITE`) and does not wait for them, so the next one
    /// starts those of the pages written since at once: the disk is kept busy (one `fdatasync`
    /// at a time left it idle while the writer's next megabytes were only in memory).
    package func flushInBackground() {
        guard
            flushing.withLock({ running in
                if running { return false }
                running = true
                return true
            })
        else { return }
        let path = temporaryPath
        flushes.async { [flushing] in
            let fd = FileSystem.open(path, O_RDONLY | O_CLOEXEC)
            if fd >= 0 {
                #if os(Linux)
                if let startWriteback = Self.syncFileRange {
                    _ = startWriteback(fd, 0, 0, Self.syncFileRangeWrite)
                } else {
                    _ = fdatasync(fd)
                }
                #else
                _ = Foundation.fsync(fd)
                #endif
                close(fd)
            }
            flushing.withLock { $0 = false }
        }
    }

    #if os(Linux)
    /// glibc's `sync_file_range`, looked up at run time: Swift's Glibc module does not declare it
    /// (a GNU extension), and `SYNC_FILE_RANGE_WRITE`, its flag that starts the writes of a range's
    /// dirty pages without waiting for them (offset 0, length 0: the whole file).
    private static let syncFileRange: SyncFileRange? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sync_file_range") else { return nil }
        return unsafeBitCast(symbol, to: SyncFileRange.self)
    }()
    private typealias SyncFileRange = @convention(c) (Int32, off_t, off_t, UInt32) -> Int32
    private static let syncFileRangeWrite: UInt32 = 2
    #endif

    /// Flushes the temporary file to disk and renames it over the destination (a `deferred` file:
    /// only flushes it, complete, for ``publish()`` to rename).
    package func commit() throws(TileArchiveError) {
        precondition(!finished && !sealed, "AtomicFile committed twice")
        flushes.sync {}
        try Self.fsync(path: temporaryPath, destination: destination)
        sealed = true
        if !deferred { try publish() }
    }

    /// Renames a file ``commit()`` flushed over the destination, and makes the rename durable.
    package func publish() throws(TileArchiveError) {
        precondition(sealed && !finished, "AtomicFile published before its commit, or twice")
        if !overwrite && FileSystem.stat(destination) != nil {
            discard()
            throw TileArchiveError(path: destination, fault: .alreadyExists)
        }
        if FileSystem.rename(temporaryPath, destination) != 0 {
            let code = errno
            discard()
            throw TileArchiveError(path: destination, fault: .io(errno: code, reason: "rename: \(String(cString: strerror(code)))"))
        }
        finished = true
        releaseLock()
        // Make the rename itself durable; a failure here leaves a complete file in place.
        try? Self.fsync(path: FileSystem.split(destination).folder, destination: destination)
    }

    /// Removes the temporary file (and any SQLite side files next to it).
    package func discard() {
        guard !finished else {
            releaseLock()
            return
        }
        finished = true
        for suffix in ["", "-journal", "-wal", "-shm"] {
            _ = FileSystem.unlink(temporaryPath + suffix)
        }
        releaseLock()
    }

    private func releaseLock() {
        if lockDescriptor >= 0 { close(lockDescriptor) }
        lockDescriptor = -1
    }

    deinit { discard() }

    fileprivate static func fsync(path: String, destination: String) throws(TileArchiveError) {
        let fd = FileSystem.open(path, O_RDONLY)
        guard fd >= 0 else {
            let code = errno
            throw TileArchiveError(
                path: destination, fault: .io(errno: code, reason: "open \(path) for fsync: \(String(cString: strerror(code)))"))
        }
        defer { close(fd) }
        #if canImport(Darwin)
        let result = fcntl(fd, F_FULLFSYNC)
        #else
        let result = Foundation.fsync(fd)
        #endif
        if result != 0 {
            let code = errno
            throw TileArchiveError(path: destination, fault: .io(errno: code, reason: "fsync: \(String(cString: strerror(code)))"))
        }
    }
}

/// A new folder (a tile tree) written beside its destination and renamed into place when complete:
/// `.<name>.tmp-<random>` in the destination's folder, removed with what it holds when dropped
/// before ``publish()``. A folder cannot be renamed over another: an existing destination (with
/// `overwrite`) is renamed aside first and removed once the new folder is in place. The files in
/// it are not fsynced one by one (a tree holds thousands of tiles); the rename is made durable by
/// an fsync of the destination's folder.
package final class StagedFolder: @unchecked Sendable {
    package let destination: String
    package let temporaryPath: String
    private let overwrite: Bool
    private var finished = false

    /// Creates the folder beside `destination`.
    /// - Throws: `alreadyExists` when `destination` exists and `overwrite` is false; `io` naming
    ///   why the folder takes no new folder.
    package init(destination: String, overwrite: Bool) throws(TileArchiveError) {
        self.destination = destination
        self.overwrite = overwrite
        temporaryPath = FileSystem.temporaryPath(beside: destination)
        if !overwrite && FileSystem.lstat(destination) != nil { throw TileArchiveError(path: destination, fault: .alreadyExists) }
        guard FileSystem.mkdir(temporaryPath, 0o755) == 0 else {
            finished = true
            throw Self.failure(destination, "cannot create a folder beside it")
        }
    }

    /// Renames the folder over the destination (the old one, if any, removed).
    package func publish() throws(TileArchiveError) {
        precondition(!finished, "StagedFolder published twice")
        if FileSystem.lstat(destination) != nil {
            guard overwrite else {
                discard()
                throw TileArchiveError(path: destination, fault: .alreadyExists)
            }
            let old = temporaryPath + ".old"
            guard FileSystem.rename(destination, old) == 0 else {
                let error = Self.failure(destination, "cannot move the old one aside")
                discard()
                throw error
            }
            guard FileSystem.rename(temporaryPath, destination) == 0 else {
                let error = Self.failure(destination, "rename")
                _ = FileSystem.rename(old, destination)
                discard()
                throw error
            }
            try? FileManager.default.removeItem(atPath: old)
        } else if FileSystem.rename(temporaryPath, destination) != 0 {
            let error = Self.failure(destination, "rename")
            discard()
            throw error
        }
        finished = true
        try? AtomicFile.fsync(path: FileSystem.split(destination).folder, destination: destination)
    }

    /// Removes the folder and what it holds.
    package func discard() {
        guard !finished else { return }
        finished = true
        try? FileManager.default.removeItem(atPath: temporaryPath)
    }

    deinit { discard() }

    private static func failure(_ destination: String, _ what: String) -> TileArchiveError {
        let code = errno
        return TileArchiveError(path: destination, fault: .io(errno: code, reason: "\(what): \(AtomicFile.describe(errno: code))"))
    }
}
