import Foundation
import TilepackCore

/// Read-only bytes of a whole file, memory-mapped where the platform allows it, or bytes held in
/// memory. Immutable after init, so sharing it between threads is safe (hence `@unchecked Sendable`:
/// the raw pointer is the only non-Sendable member and nothing ever writes through it).
final class MappedBytes: @unchecked Sendable {
    let base: UnsafeRawPointer?
    let count: Int
    private let release: Release

    private enum Release {
        case none
        case unmap
        case deallocate
    }

    var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Maps `path` read-only.
    init(mapping path: String) throws(TileArchiveError) {
        #if canImport(Darwin) || canImport(Glibc) || canImport(Musl)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            throw TileArchiveError(path: path, fault: .cannotOpen(errno: code, reason: String(cString: strerror(code))))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            throw TileArchiveError(path: path, fault: .io(errno: code, reason: "fstat: \(String(cString: strerror(code)))"))
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw TileArchiveError(path: path, fault: .cannotOpen(errno: EISDIR, reason: "not a regular file"))
        }
        let size = Int(info.st_size)
        guard size > 0 else {
            base = nil
            count = 0
            release = .none
            return
        }
        let address = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0)
        guard let address, address != MAP_FAILED else {
            let code = errno
            throw TileArchiveError(path: path, fault: .io(errno: code, reason: "mmap: \(String(cString: strerror(code)))"))
        }
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
        guard count > 0 else {
            base = nil
            release = .none
            return
        }
        let memory = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 16)
        data.copyBytes(to: memory.bindMemory(to: UInt8.self, capacity: count), count: count)
        base = UnsafeRawPointer(memory)
        release = .deallocate
    }

    deinit {
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
