import Foundation
import TilepackCore
import TilepackStorage

/// The kinds of archive tilepack reads, recognised from a file's first bytes (never its name).
public enum ArchiveKind: String, Hashable, Sendable, CustomStringConvertible {
    /// An MBTiles file: an SQLite database (`SQLite format 3\0`).
    case mbtiles
    /// A tilepack bundle (`89 54 50 4B 0D 0A 1A 0A`).
    case bundle

    public var description: String {
        switch self {
        case .mbtiles: "MBTiles"
        case .bundle: ".tilepack bundle"
        }
    }

    /// The kind of archive `bytes` (a file's first bytes, at least 16 for MBTiles) start like,
    /// or `nil` when they are neither.
    public static func detect(_ bytes: UnsafeRawBufferPointer) -> ArchiveKind? {
        if bytes.starts(with: BundleFormat.magic) { return .bundle }
        if bytes.starts(with: Array("SQLite format 3".utf8) + [0]) { return .mbtiles }
        return nil
    }

    /// The kind of the file at `path`, from its first 16 bytes.
    /// - Throws: ``TileArchiveError`` naming the file when it cannot be opened or read, is empty,
    ///   or is of no kind tilepack reads (a PMTiles archive and images are named as such).
    public static func detect(path: String) throws(TileArchiveError) -> ArchiveKind {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            throw TileArchiveError(path: path, fault: .cannotOpen(errno: code, reason: String(cString: strerror(code))))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            throw TileArchiveError(path: path, fault: .cannotOpen(errno: code, reason: String(cString: strerror(code))))
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw TileArchiveError(path: path, fault: .notAnArchive(detected: "not a regular file"))
        }
        var header = [UInt8](repeating: 0, count: 16)
        var filled = 0
        while filled < header.count {
            let n = header.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if n < 0 {
                if errno == EINTR { continue }
                let code = errno
                throw TileArchiveError(path: path, fault: .io(errno: code, reason: "read: \(String(cString: strerror(code)))"))
            }
            if n == 0 { break }
            filled += n
        }
        let bytes = Array(header.prefix(filled))
        if let kind = bytes.withUnsafeBytes({ detect($0) }) { return kind }
        throw TileArchiveError(path: path, fault: .notAnArchive(detected: describe(bytes)))
    }

    /// What a file that is no archive looks like, for the error message.
    static func describe(_ bytes: [UInt8]) -> String {
        if bytes.isEmpty { return "an empty file (0 bytes), neither MBTiles nor a .tilepack bundle" }
        if bytes.starts(with: Array("PMTiles".utf8)) {
            return "a PMTiles archive; tilepack reads MBTiles and .tilepack bundles"
        }
        if BundleFormat.magic.starts(with: bytes) || (Array("SQLite format 3".utf8) + [0]).starts(with: bytes) {
            return "a file of \(bytes.count) bytes, cut off inside the archive's signature"
        }
        if let format = bytes.withUnsafeBytes({ TileFormat.sniff($0) }) {
            return "a \(format) file, not an archive (MBTiles or .tilepack bundle)"
        }
        return "neither an MBTiles (SQLite) file nor a .tilepack bundle (no known signature in the first bytes)"
    }
}

/// Opening any archive tilepack reads.
public enum TileArchives {
    /// Opens the MBTiles file or bundle at `path`, whichever its first bytes say it is.
    ///
    /// MBTiles files are opened read-only (`immutable` when `immutable` is true: the caller
    /// promises nobody writes the file while it is open, as for an archive shipped in an app).
    /// - Throws: ``TileArchiveError`` naming the file and the fault.
    public static func open(path: String, immutable: Bool = false) throws(TileArchiveError) -> any TileArchive {
        switch try ArchiveKind.detect(path: path) {
        case .mbtiles: return try MBTilesArchive(path: path, options: MBTilesOpenOptions(immutable: immutable))
        case .bundle: return try BundleArchive(path: path)
        }
    }
}
