import Foundation
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage

/// Reads whole small files with plain POSIX calls and no Foundation objects per file (the import's
/// hot loop reads tens of thousands of them).
enum FileReading {
    /// The largest tile file tilepack reads: 32 MiB. Real tiles are kilobytes; a larger file is
    /// not a tile, and refusing it bounds memory.
    static let maximumTileFileSize = 32 << 20

    enum Failure: Error, CustomStringConvertible {
        case open(Int32)
        case read(Int32)
        case tooLarge(Int)
        case notAFile(mode_t)

        var description: String {
            switch self {
            case .open(let code): "cannot open: \(String(cString: strerror(code)))"
            case .read(let code): "cannot read: \(String(cString: strerror(code)))"
            case .tooLarge(let size): "\(size) bytes, over the \(FileReading.maximumTileFileSize >> 20) MiB a tile may have"
            case .notAFile(let mode): "\(RegularFile.describe(mode: mode)), not a regular file"
            }
        }
    }

    /// The file's bytes, read through the caller's reusable `scratch` buffer: a file smaller than
    /// the buffer costs one open, one read (a short read from a regular file is its end) and one
    /// close, with no fstat (the tree walk already knows it is a regular file); a larger one is
    /// measured and read whole. Opened non-blocking, so a FIFO swapped in behind the walk's back
    /// cannot hang the reader.
    ///
    /// With `folder` (when it is open) and `name`, the file is opened relative to the folder.
    ///
    /// With `expectLarge` (the caller's last file was large: tiles of a tree are alike), the file
    /// is measured first and read straight into an array of its size, which costs an `fstat`
    /// and saves copying it out of the buffer (a 92 KB aerial tile's copy costs more than the
    /// system call).
    ///
    /// `identity` is set when the file was measured before it was read (the `expectLarge` path,
    /// and files as large as the buffer), was read whole, `fstat` gives the same ``FileVersion``
    /// after the read, and its last change is ``settledSeconds`` old or more (a file changed
    /// within the clock's last tick could change again unseen): the bytes are then that version
    /// of the file, and a writer may copy them from it later (see ``SourceFile``). Otherwise nil.
    static func read(
        _ path: String, folder: TreeFolder? = nil, name: String? = nil, scratch: inout [UInt8],
        expectLarge: Bool = false
    ) throws(Failure) -> [UInt8] {
        var identity: FileVersion?
        return try read(path, folder: folder, name: name, scratch: &scratch, expectLarge: expectLarge, identity: &identity)
    }

    static func read(
        _ path: String, folder: TreeFolder? = nil, name: String? = nil, scratch: inout [UInt8],
        expectLarge: Bool = false, identity: inout FileVersion?
    ) throws(Failure) -> [UInt8] {
        switch try readLending(
            path, folderDescriptor: folder?.descriptor ?? -1, name: name, scratch: &scratch,
            expectLarge: expectLarge, identity: &identity)
        {
        case .inScratch(let count): Array(scratch[0..<count])
        case .array(let bytes): bytes
        }
    }

    /// Where ``readLending(_:folder:name:scratch:expectLarge:identity:)`` left a file's bytes.
    enum Bytes {
        /// The first `count` bytes of the scratch buffer (valid until the buffer is used again).
        case inScratch(count: Int)
        /// An array of their own (a file measured first, or as large as the buffer).
        case array([UInt8])
    }

    /// ``read(_:folder:name:scratch:expectLarge:identity:)`` without the copy out of `scratch` for
    /// a file that fits in it: a caller that makes something else of the bytes (an LZ4 payload)
    /// reads them there, and copies them only to keep them.
    ///
    /// (`path` is made only when the file is opened by it: without an open `folder` and `name`.)
    ///
    /// (`folderDescriptor` is the folder's descriptor, not the ``TreeFolder``: the caller keeps the
    /// folder open, and a worker passing the object would retain and release it, a reference count
    /// the walk and the other workers update too.)
    static func readLending(
        _ path: @autoclosure () -> String, folderDescriptor: Int32 = -1, name: String? = nil, scratch: inout [UInt8],
        expectLarge: Bool = false, identity: inout FileVersion?
    ) throws(Failure) -> Bytes {
        identity = nil
        let flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK
        let fd =
            if folderDescriptor >= 0, let name {
                FileSystem.openat(folderDescriptor, name, flags)
            } else {
                FileSystem.open(path(), flags)
            }
        guard fd >= 0 else { throw .open(errno) }
        defer { close(fd) }
        // (Anything but a regular file goes the usual way, so that it is reported alike.)
        var info = stat()
        if expectLarge, fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
            guard Int(info.st_size) <= maximumTileFileSize else { throw .tooLarge(Int(info.st_size)) }
            return .array(try read(fd: fd, measured: info, identity: &identity))
        }
        if scratch.isEmpty { scratch = [UInt8](repeating: 0, count: 256 << 10) }
        let capacity = scratch.count
        var done = 0
        let failure: Int32? = scratch.withUnsafeMutableBytes { buffer in
            while done < capacity {
                let asked = capacity - done
                let n = Foundation.read(fd, buffer.baseAddress! + done, asked)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                done += n
                // Less than asked: a regular file is at its end (so a small file takes one read;
                // one still growing is read as far as it was).
                if n < asked { return nil }
            }
            return nil
        }
        if let failure { throw .read(failure) }
        if done == 0 {
            // Empty, or not a file at all (a FIFO swapped in behind the walk's back reads as empty).
            var info = stat()
            if fstat(fd, &info) == 0, (info.st_mode & S_IFMT) != S_IFREG { throw .notAFile(info.st_mode) }
        }
        if done < capacity { return .inScratch(count: done) }
        // As large as the buffer: measure the file and read it whole.
        guard fstat(fd, &info) == 0 else { throw .read(errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw .notAFile(info.st_mode) }
        guard Int(info.st_size) <= maximumTileFileSize else { throw .tooLarge(Int(info.st_size)) }
        guard lseek(fd, 0, SEEK_SET) == 0 else { throw .read(errno) }
        return .array(try read(fd: fd, measured: info, identity: &identity))
    }

    /// The file measured by `info`, read whole; `identity` set when it was and did not change.
    private static func read(fd: Int32, measured info: stat, identity: inout FileVersion?) throws(Failure) -> [UInt8] {
        let bytes = try read(fd: fd, size: Int(info.st_size))
        let before = FileVersion(info)
        if bytes.count == Int(info.st_size), FileVersion.of(descriptor: fd) == before,
            before.changed(atLeast: settledSeconds)
        {
            identity = before
        }
        return bytes
    }

    /// How old a file's last change must be for its identity to stand for its bytes.
    static let settledSeconds: Int64 = 2

    /// Files of this size or more are "large" for ``read(_:folder:name:scratch:expectLarge:)``'s hint.
    static let largeFileSize = 32 << 10

    /// `size` bytes from `fd` (fewer if the file shrank meanwhile).
    private static func read(fd: Int32, size: Int) throws(Failure) -> [UInt8] {
        // Uninitialised: the read fills it (zeroing 92 KB first cost 3% of a large-tile import).
        var failure: Int32?
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            var done = 0
            while done < size {
                let n = Foundation.read(fd, buffer.baseAddress! + done, size - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    break
                }
                if n == 0 { break }  // A file that shrank while we read it gives what was there.
                done += n
            }
            count = done
        }
        if let failure { throw .read(failure) }
        return bytes
    }
}
