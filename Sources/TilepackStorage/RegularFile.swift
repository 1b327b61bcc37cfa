import Foundation
import TilepackCore

/// Opening a file that must be a regular file (an archive, a tile, a description file) without
/// ever blocking on a FIFO, and naming what the file is when it is something else.
package enum RegularFile {
    /// Opens `path` read-only. The open itself is non-blocking (opening a FIFO without a writer
    /// would wait forever); once `fstat` says the file is regular, the descriptor is switched back
    /// to blocking reads. The caller closes the descriptor.
    /// - Throws: `cannotOpen` (missing, no permission: the system's reason), or
    ///   `notAnArchive` naming what the path is (a folder, a FIFO, a device, a socket).
    package static func openForReading(_ path: String) throws(TileArchiveError) -> (fd: Int32, info: stat) {
        let fd = FileSystem.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            throw TileArchiveError(path: path, fault: .cannotOpen(errno: code, reason: String(cString: strerror(code))))
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            close(fd)
            throw TileArchiveError(path: path, fault: .cannotOpen(errno: code, reason: "fstat: \(String(cString: strerror(code)))"))
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw TileArchiveError(path: path, fault: .notAnArchive(detected: "\(describe(mode: info.st_mode)), not a regular file"))
        }
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
        return (fd, info)
    }

    /// What a file of this `st_mode` is, in words: "a folder", "a FIFO (named pipe)", ...
    package static func describe(mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFREG: "a regular file"
        case S_IFDIR: "a folder"
        case S_IFIFO: "a FIFO (named pipe)"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFSOCK: "a socket"
        case S_IFLNK: "a symbolic link"
        default: "a special file"
        }
    }

    /// The whole file, at most `limit` bytes, read as a regular file (see ``openForReading(_:)``).
    /// - Throws: as ``openForReading(_:)``; `io` for a read error; `corrupt("... over the limit
    ///   ...")` when the file is larger than `limit`.
    /// - Parameter prefix: read only the first `prefix` bytes (then `limit` is not checked).
    package static func read(_ path: String, limit: Int, prefix: Int? = nil) throws(TileArchiveError) -> [UInt8] {
        let (fd, info) = try openForReading(path)
        defer { close(fd) }
        let size = min(Int(info.st_size), prefix ?? Int.max)
        guard prefix != nil || size <= limit else {
            throw TileArchiveError(path: path, fault: .corrupt("the file is \(size) bytes, over the limit of \(limit) bytes"))
        }
        var bytes = [UInt8](repeating: 0, count: size)
        var done = 0
        while done < size {
            let n = bytes.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress! + done, size - done) }
            if n < 0 {
                if errno == EINTR { continue }
                let code = errno
                throw TileArchiveError(path: path, fault: .io(errno: code, reason: "read: \(String(cString: strerror(code)))"))
            }
            if n == 0 { break }
            done += n
        }
        return Array(bytes[0..<done])
    }
}
