import Foundation

/// Reads whole small files with plain POSIX calls: one open, one fstat, one read, no Foundation
/// objects per file (the import's hot loop reads tens of thousands of them).
enum FileReading {
    /// The largest tile file tilepack reads: 32 MiB. Real tiles are kilobytes; a larger file is
    /// not a tile, and refusing it bounds memory.
    static let maximumTileFileSize = 32 << 20

    enum Failure: Error, CustomStringConvertible {
        case open(Int32)
        case read(Int32)
        case tooLarge(Int)
        case notAFile

        var description: String {
            switch self {
            case .open(let code): "cannot open: \(String(cString: strerror(code)))"
            case .read(let code): "cannot read: \(String(cString: strerror(code)))"
            case .tooLarge(let size): "\(size) bytes, over the \(FileReading.maximumTileFileSize >> 20) MiB a tile may have"
            case .notAFile: "not a regular file"
            }
        }
    }

    /// The file's bytes.
    static func read(_ path: String) throws(Failure) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .open(errno) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .read(errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw .notAFile }
        let size = Int(info.st_size)
        guard size <= maximumTileFileSize else { throw .tooLarge(size) }
        var bytes = [UInt8](repeating: 0, count: size)
        var done = 0
        let failure: Int32? = bytes.withUnsafeMutableBytes { buffer in
            while done < size {
                let n = Foundation.read(fd, buffer.baseAddress! + done, size - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                if n == 0 { break }
                done += n
            }
            return nil
        }
        if let failure { throw .read(failure) }
        // A file that shrank while we read it gives what was there.
        if done < size { bytes.removeLast(size - done) }
        return bytes
    }
}
