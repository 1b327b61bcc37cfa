import Foundation
import TilepackCore

/// What `fstat` says identifies one version of a file: device, inode, size, and the modification
/// and status-change times to the nanosecond. Any write to a file changes its mtime and ctime
/// (and a replacement changes the inode), so two equal identities of one open file taken at two
/// moments mean the file was not written in between, as far as the file system's clock can tell
/// (the check `make` and `rsync` rely on, with nanoseconds and ctime as well).
@_spi(TilepackInternal) public struct FileVersion: Sendable, Hashable {
    public let device: UInt64
    public let inode: UInt64
    public let size: Int64
    public let modifiedSeconds: Int64
    public let modifiedNanoseconds: Int64
    public let changedSeconds: Int64
    public let changedNanoseconds: Int64

    public init(_ info: stat) {
        // Darwin's dev_t is a signed Int32 (a negative one kept as its bit pattern), Glibc's a UInt64.
        device = UInt64(truncatingIfNeeded: info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        #if canImport(Darwin)
        modifiedSeconds = Int64(info.st_mtimespec.tv_sec)
        modifiedNanoseconds = Int64(info.st_mtimespec.tv_nsec)
        changedSeconds = Int64(info.st_ctimespec.tv_sec)
        changedNanoseconds = Int64(info.st_ctimespec.tv_nsec)
        #else
        modifiedSeconds = Int64(info.st_mtim.tv_sec)
        modifiedNanoseconds = Int64(info.st_mtim.tv_nsec)
        changedSeconds = Int64(info.st_ctim.tv_sec)
        changedNanoseconds = Int64(info.st_ctim.tv_nsec)
        #endif
    }

    /// Whether the file's last change (ctime) is at least `seconds` before now. A file changed
    /// within the file system clock's last tick can change again with the same times (and
    /// size): only a version older than that is known by its identity (git's "racy" files).
    public func changed(atLeast seconds: Int64) -> Bool {
        var now = timespec()
        guard clock_gettime(CLOCK_REALTIME, &now) == 0 else { return false }
        return (changedSeconds + seconds, changedNanoseconds) < (Int64(now.tv_sec), Int64(now.tv_nsec))
    }

    /// The identity of the open file `fd`, or nil when `fstat` fails or it is not a regular file.
    public static func of(descriptor fd: Int32) -> FileVersion? {
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return FileVersion(info)
    }
}

/// A file whose whole content is a tile's bytes, as it was when they were read: a writer may copy
/// the bytes from it later instead of keeping them (a bundle copies large stored payloads from
/// the tree's own files, file to file in the kernel), after checking that it is still the same.
/// A class: an import passes an optional one with every tile, and a reference keeps that one word
/// (as an 80-byte struct it cost a 50,000-small-tile bundle import 2,544M instructions instead of
/// 2,488M, callgrind; main: 2,475M).
package final class SourceFile: Sendable {
    package let path: String
    package let identity: FileVersion

    package init(path: String, identity: FileVersion) {
        self.path = path
        self.identity = identity
    }

    /// Opens the file again (by path: a writer holds no descriptor per tile) and checks that it is
    /// the same version; the caller closes the descriptor.
    /// - Throws: `io`, naming the file, when it cannot be opened or is no longer what was read.
    func openUnchanged() throws(TileArchiveError) -> Int32 {
        let fd = FileSystem.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            throw TileArchiveError(
                path: path, fault: .io(errno: code, reason: "cannot open it again to copy its bytes: \(String(cString: strerror(code)))"))
        }
        do throws(TileArchiveError) {
            try checkUnchanged(fd)
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// Checks that the open file `fd` is still the version that was read.
    /// - Throws: `io`, naming the file, when it changed.
    func checkUnchanged(_ fd: Int32) throws(TileArchiveError) {
        guard let now = FileVersion.of(descriptor: fd) else {
            throw TileArchiveError(
                path: path, fault: .io(errno: 0, reason: "is no longer a regular file: it changed after it was read, while the import ran"))
        }
        guard now == identity else {
            let what =
                now.inode != identity.inode || now.device != identity.device
                ? "was replaced"
                : now.size != identity.size ? "changed size (\(identity.size) -> \(now.size) bytes)" : "was written to"
            throw TileArchiveError(
                path: path,
                fault: .io(errno: 0, reason: "\(what) after it was read, while the import ran: its bytes are no longer the ones checked"))
        }
    }
}
