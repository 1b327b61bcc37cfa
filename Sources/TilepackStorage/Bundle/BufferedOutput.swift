import Foundation
import TilepackCore

/// A write buffer over a file descriptor that can compute a CRC-32 of what passes through it.
final class BufferedOutput {
    let fd: Int32
    let path: String
    private let buffer: UnsafeMutableRawBufferPointer
    private var buffered = 0
    private(set) var position = 0
    var crc: UInt32 = 0
    var computesCRC = false
    private static let capacity = 1 << 20

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
        buffer = .allocate(byteCount: Self.capacity, alignment: 16)
    }

    deinit { buffer.deallocate() }

    func write(_ bytes: UnsafeRawBufferPointer) throws(TileArchiveError) {
        if computesCRC { crc = BundleFormat.crc32(bytes, continuing: crc) }
        position += bytes.count
        if buffered + bytes.count > Self.capacity { try flush() }
        if bytes.count >= Self.capacity {
            try writeAll(bytes)
        } else if let source = bytes.baseAddress {
            (buffer.baseAddress! + buffered).copyMemory(from: source, byteCount: bytes.count)
            buffered += bytes.count
        }
    }

    func write<T: FixedWidthInteger>(littleEndian value: T) throws(TileArchiveError) {
        try withUnsafeBytes(of: value.littleEndian) { raw in Result { () throws(TileArchiveError) in try write(raw) } }.get()
    }

    func write(zeros count: Int) throws(TileArchiveError) {
        var left = count
        while left > 0 {
            let n = min(left, Self.zeros.count)
            try Self.zeros.withUnsafeBytes { raw in
                Result { () throws(TileArchiveError) in try write(UnsafeRawBufferPointer(rebasing: raw[0..<n])) }
            }.get()
            left -= n
        }
    }
    private static let zeros = [UInt8](repeating: 0, count: 4096)

    func write(_ bytes: [UInt8]) throws(TileArchiveError) {
        try bytes.withUnsafeBytes { raw in Result { () throws(TileArchiveError) in try write(raw) } }.get()
    }

    func flush() throws(TileArchiveError) {
        try writeAll(UnsafeRawBufferPointer(rebasing: buffer[0..<buffered]))
        buffered = 0
    }

    /// Appends `length` bytes of file `source` from `offset`, copied by the kernel:
    /// `copy_file_range(2)` (which a file system may do without copying: a reflink, a server-side
    /// copy), else `sendfile(2)`. Returns false, having written nothing, when the kernel cannot copy
    /// between these two files.
    func copy(from source: Int32, at offset: Int, length: Int, what: String) throws(TileArchiveError) -> Bool {
        #if os(Linux)
        precondition(!computesCRC, "a checksummed section is not copied by the kernel")
        try flush()
        var from = off_t(offset)
        var done = 0
        if let copyFileRange = Self.copyFileRange {
            while done < length {
                let n = copyFileRange(source, &from, fd, nil, length - done, 0)
                if n < 0 {
                    let code = errno
                    if code == EINTR || code == EAGAIN { continue }
                    // Not between these files (another file system on an old kernel, say): sendfile.
                    if done == 0, code == EXDEV || code == EINVAL || code == ENOSYS || code == EOPNOTSUPP || code == EBADF { break }
                    throw TileArchiveError(
                        path: path, fault: .io(errno: code, reason: "copy from \(what): \(String(cString: strerror(code)))"))
                }
                guard n > 0 else {
                    throw TileArchiveError(
                        path: path, fault: .io(errno: 0, reason: "copy from \(what): it ended \(length - done) bytes early"))
                }
                done += n
            }
            if done == length {
                position += length
                return true
            }
        }
        while done < length {
            let n = sendfile(fd, source, &from, length - done)
            if n < 0 {
                let code = errno
                if code == EINTR || code == EAGAIN { continue }
                if done == 0, code == EINVAL || code == ENOSYS || code == EOPNOTSUPP { return false }
                throw TileArchiveError(path: path, fault: .io(errno: code, reason: "copy from \(what): \(String(cString: strerror(code)))"))
            }
            guard n > 0 else {
                throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "copy from \(what): it ended \(length - done) bytes early"))
            }
            done += n
        }
        position += length
        return true
        #else
        return false
        #endif
    }

    #if os(Linux)
    /// glibc's `copy_file_range` (2.27 and later), looked up at run time: Swift's Glibc module does
    /// not declare it (it is a GNU extension).
    private static let copyFileRange: CopyFileRange? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "copy_file_range") else { return nil }
        return unsafeBitCast(symbol, to: CopyFileRange.self)
    }()
    private typealias CopyFileRange =
        @convention(c) (Int32, UnsafeMutablePointer<off_t>?, Int32, UnsafeMutablePointer<off_t>?, Int, UInt32) -> Int
    #endif

    private func writeAll(_ bytes: UnsafeRawBufferPointer) throws(TileArchiveError) {
        var done = 0
        while done < bytes.count {
            let n = Foundation.write(fd, bytes.baseAddress?.advanced(by: done), bytes.count - done)
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                let code = errno
                throw TileArchiveError(path: path, fault: .io(errno: code, reason: "write: \(String(cString: strerror(code)))"))
            }
            done += n
        }
    }
}
