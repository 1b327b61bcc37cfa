import Foundation
import TilepackCore

/// Read-only bytes of a whole file: memory-mapped, held in memory, or a prefix held in memory with
/// the rest read on demand, by `pread` (``init(reading:residentLength:)``) or from a
/// ``ByteSource`` such as an HTTP object (``init(source:residentLength:)``). Immutable after init, so
/// sharing it between threads is safe (hence `@unchecked Sendable`: the raw pointer is the only
/// non-Sendable member, nothing ever writes through it, and `pread` keeps no file position).
final class MappedBytes: @unchecked Sendable {
    /// The bytes held in memory (or mapped): the whole file, or its first `count` bytes in read mode.
    let base: UnsafeRawPointer?
    let count: Int
    /// The file's length when it was opened (equal to `count` unless the rest is read on demand).
    let fileSize: Int
    /// The open file for on-demand reads, or -1.
    private let descriptor: Int32
    /// The source of on-demand reads when they do not come from a file.
    private let source: (any ByteSource)?
    private let release: Release

    private enum Release {
        case none
        case unmap
        case deallocate
    }

    var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Whether bytes past ``count`` are read from the file (or source) on demand.
    var readsOnDemand: Bool { descriptor >= 0 || source != nil }

    /// Tells a source the ranges about to be read (a remote one fetches neighbours together).
    func willRead(_ ranges: [Range<Int>]) throws(TileArchiveError) {
        guard let source, !ranges.isEmpty else { return }
        do { try source.willRead(ranges) } catch { throw Self.archiveError(error, name: source.name) }
    }

    /// Asks the source whether its object is still the one read (``ByteSource/confirmUnchanged()``).
    func confirmUnchanged() throws(TileArchiveError) {
        try source?.confirmUnchanged()
    }

    static func archiveError(_ error: any Error, name: String) -> TileArchiveError {
        error as? TileArchiveError ?? TileArchiveError(path: name, fault: .io(errno: 0, reason: "\(error)"))
    }

    /// The most bytes one read of a source adds to the resident prefix: memory grows with the
    /// bytes received, never ahead of them from a length the source (a server's `Content-Range`)
    /// or the file claims.
    static let residentChunk = 8 << 20

    /// Reads through `source`: the first `residentLength(head, size)` bytes (given the first up to
    /// 128 bytes and the size) are copied into memory now, in reads of at most ``residentChunk``
    /// bytes (one request for a remote object of an ordinary index, none when its first request
    /// already holds them), the rest when asked for.
    init(source: any ByteSource, residentLength: (UnsafeRawBufferPointer, Int) -> Int) throws(TileArchiveError) {
        let size = source.count
        descriptor = -1
        self.source = source
        fileSize = size
        var resident: [UInt8] = []
        do {
            let head = try source.bytes(offset: 0, length: min(size, 128))
            let length = head.withUnsafeBytes { max($0.count, min(size, residentLength($0, size))) }
            resident.reserveCapacity(min(length, Self.residentChunk))
            while resident.count < length {
                let chunk = min(Self.residentChunk, length - resident.count)
                try source.withBytes(offset: resident.count, length: chunk) { resident.append(contentsOf: $0) }
            }
        } catch {
            throw Self.archiveError(error, name: source.name)
        }
        count = resident.count
        let memory: UnsafeMutableRawPointer?
        (memory, release) = Self.allocate(count)
        base = UnsafeRawPointer(memory)
        guard let memory else { return }
        resident.withUnsafeBytes { memory.copyMemory(from: $0.baseAddress!, byteCount: count) }
    }

    /// Opens `path` for `pread` access: the first `residentLength(head, fileSize)` bytes (given the
    /// first up to 128 bytes and the size) are read into memory now, the rest when asked for. A
    /// file another process truncates meanwhile then gives a short read, never a SIGBUS.
    init(reading path: String, residentLength: (UnsafeRawBufferPointer, Int) -> Int) throws(TileArchiveError) {
        let (fd, info) = try RegularFile.openForReading(path)
        let size = Int(info.st_size)
        let head = UnsafeMutableRawBufferPointer.allocate(byteCount: min(size, 128), alignment: 16)
        defer { head.deallocate() }
        let length: Int
        do throws(TileArchiveError) {
            try Self.readFully(fd, into: head, at: 0, path: path)
            length = max(head.count, min(size, residentLength(UnsafeRawBufferPointer(head), size)))
        } catch {
            close(fd)
            throw error
        }
        descriptor = fd
        source = nil
        fileSize = size
        count = length
        let memory: UnsafeMutableRawPointer?
        (memory, release) = Self.allocate(length)
        base = UnsafeRawPointer(memory)
        guard let memory else { return }
        try Self.readFully(fd, into: UnsafeMutableRawBufferPointer(start: memory, count: length), at: 0, path: path)
    }

    /// Reads exactly `buffer.count` bytes at `offset`; a short read means the file was cut
    /// (another process truncated it after it was opened).
    static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int, path: String) throws(TileArchiveError) {
        var done = 0
        while done < buffer.count {
            let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            if n < 0 {
                if errno == EINTR { continue }
                let code = errno
                throw TileArchiveError(path: path, fault: .io(errno: code, reason: "read: \(String(cString: strerror(code)))"))
            }
            if n == 0 {
                var info = stat()
                let now = fstat(fd, &info) == 0 ? " (it now has \(info.st_size) bytes)" : ""
                throw TileArchiveError(
                    path: path,
                    fault: .truncated(
                        "the file ended at byte \(offset + done) while \(offset + buffer.count) bytes were expected: it was cut while being read\(now)"
                    ))
            }
            done += n
        }
    }

    /// `length` bytes at `offset` (which the caller has checked lie inside ``fileSize``): a slice of
    /// the memory when they are resident, else read into `scratch` (grown as needed), valid until
    /// `scratch` is used again.
    func bytes(at offset: Int, length: Int, scratch: inout UnsafeMutableRawBufferPointer?, path: String) throws(TileArchiveError)
        -> UnsafeRawBufferPointer
    {
        if offset + length <= count { return UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + length)]) }
        if scratch == nil || scratch!.count < length {
            scratch?.deallocate()
            scratch = .allocate(byteCount: max(length, 64 << 10), alignment: 16)
        }
        let target = UnsafeMutableRawBufferPointer(rebasing: scratch![0..<length])
        guard length > 0 else { return UnsafeRawBufferPointer(target) }
        if let source {
            do {
                try source.withBytes(offset: offset, length: length) {
                    target.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: length)
                }
            } catch {
                throw Self.archiveError(error, name: source.name)
            }
        } else {
            try Self.readFully(descriptor, into: target, at: offset, path: path)
        }
        return UnsafeRawBufferPointer(target)
    }

    /// Maps `path` read-only; `nil` when the map itself fails (an iOS app's address space may hold
    /// no map of a multi-GB bundle: ENOMEM), for the caller to read the file instead. A file that
    /// cannot be opened or read is an error.
    init?(mapping path: String) throws(TileArchiveError) {
        #if canImport(Darwin) || canImport(Glibc) || canImport(Musl)
        let (fd, info) = try RegularFile.openForReading(path)
        defer { close(fd) }
        let size = Int(info.st_size)
        descriptor = -1
        source = nil
        fileSize = size
        guard size > 0 else {
            base = nil
            count = 0
            release = .none
            return
        }
        let address = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0)
        guard let address, address != MAP_FAILED else { return nil }
        base = UnsafeRawPointer(address)
        count = size
        release = .unmap
        #else
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
        } catch {
            throw TileArchiveError(path: path, fault: .cannotOpen(errno: 0, reason: "\(error)"))
        }
        self.init(copying: data)
        #endif
    }

    /// Holds a copy of `data` (for bundles that are not files, such as a fuzzer's input).
    init(copying data: Data) {
        count = data.count
        fileSize = data.count
        descriptor = -1
        source = nil
        let memory: UnsafeMutableRawPointer?
        (memory, release) = Self.allocate(count)
        base = UnsafeRawPointer(memory)
        guard let memory else { return }
        data.copyBytes(to: memory.bindMemory(to: UInt8.self, capacity: count), count: count)
    }

    /// Memory for `length` resident bytes, freed by `deinit` (none for an empty file).
    private static func allocate(_ length: Int) -> (UnsafeMutableRawPointer?, Release) {
        guard length > 0 else { return (nil, .none) }
        return (UnsafeMutableRawPointer.allocate(byteCount: length, alignment: 16), .deallocate)
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
        switch release {
        case .none: break
        case .unmap:
            #if canImport(Darwin) || canImport(Glibc) || canImport(Musl)
            munmap(UnsafeMutableRawPointer(mutating: base), count)
            #endif
        case .deallocate:
            UnsafeMutableRawPointer(mutating: base)?.deallocate()
        }
    }
}
