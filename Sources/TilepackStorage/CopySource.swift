import Foundation
import TilepackCore

/// An archive file whose byte ranges a writer copies into its output unread (a patch's base: its
/// unchanged payloads), file to file by the kernel where it can. The file is held open from
/// before the archive is read until the writer has copied from it; ``checkUnchanged()`` (called by
/// the writer before and after its copies) refuses a file written or resized meanwhile, so the
/// bytes copied are the bytes the caller read and checked.
package final class CopySource: @unchecked Sendable {
    package let path: String
    /// Read-only; immutable after init.
    let fd: Int32
    /// The file's version when it was opened.
    let identity: FileVersion

    /// Opens `path` for reading. Throws `cannotOpen` or `notAnArchive` (not a regular file), naming it.
    package init(path: String) throws(TileArchiveError) {
        let (fd, info) = try RegularFile.openForReading(path)
        self.path = path
        self.fd = fd
        identity = FileVersion(info)
    }

    deinit { close(fd) }

    /// The file's length when it was opened.
    package var size: Int { Int(identity.size) }

    /// Whether the file at `path` now is the one held open, unwritten (same device, inode, size,
    /// mtime and ctime).
    package func isStill(at path: String) -> Bool {
        FileSystem.stat(path).map { FileVersion($0) == identity } ?? false
    }

    /// - Throws: `io`, naming the file, when it was written or resized since it was opened.
    package func checkUnchanged() throws(TileArchiveError) {
        guard let now = FileVersion.of(descriptor: fd), now == identity else {
            throw TileArchiveError(
                path: path, fault: .io(errno: 0, reason: "it changed while its bytes were being copied (written by another process)"))
        }
    }

    /// Reads `buffer.count` bytes at `offset`.
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(TileArchiveError) {
        try MappedBytes.readFully(fd, into: buffer, at: offset, path: path)
    }
}
