import Foundation
import TilepackCore

/// A new file written beside its destination and renamed into place only when complete.
///
/// The temporary file is `.<name>.tmp-<random>` in the destination's directory, so the final
/// `rename(2)` is atomic on one file system. ``commit()`` fsyncs the file, renames it over the
/// destination and fsyncs the directory; dropping the value without committing removes the
/// temporary file. A crash or kill before `commit()` leaves the destination as it was (absent or
/// the previous file) and at worst a stray `.tmp-` file.
public final class AtomicFile: @unchecked Sendable {
    /// Where the file will be once committed.
    public let destination: String
    /// Where the file is written until then.
    public let temporaryPath: String
    private var finished = false

    /// Prepares a temporary path beside `destination`.
    /// - Parameter overwrite: when `false`, throws ``TileArchiveError/Fault/alreadyExists`` if
    ///   the destination exists (checked now and again at commit).
    public init(destination: String, overwrite: Bool) throws(TileArchiveError) {
        let url = URL(fileURLWithPath: destination)
        let directory = url.deletingLastPathComponent().path
        self.destination = destination
        self.temporaryPath = directory + "/." + url.lastPathComponent + ".tmp-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        self.overwrite = overwrite
        if !overwrite && FileManager.default.fileExists(atPath: destination) {
            throw TileArchiveError(path: destination, fault: .alreadyExists)
        }
    }

    private let overwrite: Bool
    /// Background flushes (``flushInBackground()``), one at a time.
    private let flushes = DispatchQueue(label: "tilepack.atomic-file.flush")
    private let flushing = Locked(false)

    /// Starts writing what the temporary file holds so far to disk, on a background queue, so
    /// that ``commit()``'s fsync finds little left to write. Returns at once; does nothing while
    /// the previous background flush is still running.
    public func flushInBackground() {
        guard flushing.withLock({ running in
            if running { return false }
            running = true
            return true
        }) else { return }
        let path = temporaryPath
        flushes.async { [flushing] in
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            if fd >= 0 {
                #if os(Linux)
                _ = fdatasync(fd)
                #else
                _ = Foundation.fsync(fd)
                #endif
                close(fd)
            }
            flushing.withLock { $0 = false }
        }
    }

    /// Flushes the temporary file to disk and renames it over the destination.
    public func commit() throws(TileArchiveError) {
        precondition(!finished, "AtomicFile committed twice")
        flushes.sync {}
        try Self.fsync(path: temporaryPath, destination: destination)
        if !overwrite && FileManager.default.fileExists(atPath: destination) {
            discard()
            throw TileArchiveError(path: destination, fault: .alreadyExists)
        }
        if rename(temporaryPath, destination) != 0 {
            let code = errno
            discard()
            throw TileArchiveError(path: destination, fault: .io(errno: code, reason: "rename: \(String(cString: strerror(code)))"))
        }
        finished = true
        // Make the rename itself durable; a failure here leaves a complete file in place.
        try? Self.fsync(path: URL(fileURLWithPath: destination).deletingLastPathComponent().path, destination: destination)
    }

    /// Removes the temporary file (and any SQLite side files next to it).
    public func discard() {
        guard !finished else { return }
        finished = true
        for suffix in ["", "-journal", "-wal", "-shm"] {
            unlink(temporaryPath + suffix)
        }
    }

    deinit { discard() }

    private static func fsync(path: String, destination: String) throws(TileArchiveError) {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else {
            let code = errno
            throw TileArchiveError(path: destination, fault: .io(errno: code, reason: "open \(path) for fsync: \(String(cString: strerror(code)))"))
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
