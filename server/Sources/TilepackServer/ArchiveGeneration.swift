import Atomics
import Foundation
import TilepackCore
import TilepackRemote
@_spi(TilepackInternal) import TilepackStorage

/// What says a file on disk is still the one that was opened: Storage's ``FileVersion`` (device,
/// inode, size, modification and status-change times). A file replaced by rename has another
/// inode; one rewritten in place has another size or time.
typealias FileIdentity = FileVersion

extension FileVersion {
    /// The identity of the file now at `path`, or the errno that says why there is none.
    static func of(path: String) -> Result<FileVersion, SystemError> {
        var info = stat()
        guard stat(path, &info) == 0 else { return .failure(SystemError(code: errno)) }
        return .success(FileVersion(info))
    }

    /// 64 bits standing for the identity (FNV-1a), for ETags that must change with the file.
    var hash: UInt64 {
        var value: UInt64 = 0xCBF2_9CE4_8422_2325
        let words = [
            device, inode, UInt64(bitPattern: size), UInt64(bitPattern: modifiedSeconds), UInt64(bitPattern: modifiedNanoseconds),
            UInt64(bitPattern: changedSeconds), UInt64(bitPattern: changedNanoseconds),
        ]
        for word in words {
            for shift in stride(from: 0, to: 64, by: 8) {
                value = (value ^ ((word >> UInt64(shift)) & 0xFF)) &* 0x100_0000_01B3
            }
        }
        return value
    }
}

/// What says the version served is still the one at its place: a file's identity, or a remote
/// object's version (its ETag, else its Last-Modified and size).
enum ArchiveIdentity: Hashable, Sendable {
    case file(FileIdentity)
    case object(RemoteObjectVersion)

    /// 64 bits standing for the identity, for ETags that must change with it.
    var hash: UInt64 {
        switch self {
        case .file(let version): return version.hash
        case .object(let version):
            var value: UInt64 = 0xCBF2_9CE4_8422_2325
            for byte in "\(version.size) \(version.etag ?? "") \(version.lastModified ?? "")".utf8 {
                value = (value ^ UInt64(byte)) &* 0x100_0000_01B3
            }
            return value
        }
    }
}

/// An errno.
struct SystemError: Error, Hashable, Sendable, CustomStringConvertible {
    var code: Int32
    var description: String { "errno \(code): \(String(cString: strerror(code)))" }
}

/// One opened version of an archive file or remote object, immutable. Requests take the
/// generation current when they start and finish on it, even when the file is replaced
/// meanwhile: the generation holds the file open (its inode) until the last request using it lets
/// go. A remote generation reads its object pinned by its ETag (``HTTPByteSource``): once the
/// object is replaced, its reads fail rather than mix two versions.
final class ArchiveGeneration: Sendable, AtomicReference {
    /// The name it is served under.
    let name: String
    /// The path given on the command line (what errors and pages show).
    let path: String
    let archive: any TileArchive
    /// The same archive when it is a bundle: ETags come from its payload signatures.
    let bundle: BundleArchive?
    let identity: ArchiveIdentity
    /// The byte source of a remote archive (`nil` for a file).
    let remote: HTTPByteSource?
    let metadata: TileMetadata
    let content: TileContent?
    /// The zooms and box inside which a missing tile is empty (204) rather than absent (404).
    let coverage: TileCover?
    let bounds: GeoBoundingBox
    let zooms: ClosedRange<Int>?
    let tileCount: Int
    /// The file's identity as ETag text: the ETag of every tile whose payload has no signature.
    let identityTag: String
    /// The format tiles go out in (raw bitmaps are encoded as PNG), and the extensions tile URLs
    /// may end with (the first is the canonical one).
    let servedFormat: TileFormat?
    let extensions: [String]
    let isVector: Bool
    /// `Content-Type` of the tiles.
    let tileContentType: String
    /// The descriptor that keeps the opened inode alive (closed when the generation goes); -1 for
    /// a remote archive.
    private let descriptor: Int32

    private init(
        name: String, path: String, archive: any TileArchive, identity: ArchiveIdentity, descriptor: Int32,
        remote: HTTPByteSource? = nil
    ) throws {
        self.name = name
        self.path = path
        self.archive = archive
        self.bundle = archive as? BundleArchive
        self.identity = identity
        self.remote = remote
        self.descriptor = descriptor
        self.content = archive.content
        self.servedFormat = Self.servedFormat(of: archive.content)
        self.extensions = Self.extensions(of: servedFormat)
        self.isVector = servedFormat == .pbf
        self.tileContentType = servedFormat?.mimeType ?? "application/octet-stream"
        // An archive without metadata (an MBTiles file with no metadata table) is still served.
        let metadata = (try? archive.metadata()) ?? TileMetadata()
        self.metadata = metadata
        let levels = try archive.zoomLevels()
        self.tileCount = levels.reduce(0) { $0 + $1.tileCount }
        // The metadata's zooms and bounds when they parse, else the zooms that hold tiles and the world.
        var zooms: ClosedRange<Int>?
        if let low = try? metadata.minZoom, let high = try? metadata.maxZoom, low <= high {
            zooms = low...high
        } else if let low = levels.first?.zoom, let high = levels.last?.zoom {
            zooms = low...high
        }
        self.zooms = zooms
        let bounds = (try? metadata.bounds) ?? .world
        self.bounds = bounds
        self.coverage = zooms.flatMap { try? TileCover(boundingBox: bounds, zooms: $0) }
        self.identityTag = String(identity.hash, radix: 16)
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// Opens the remote archive at `location` as it is now: its first bytes fetched and the
    /// object pinned by the version they came with, as much of its ranges kept as `settings` say.
    static func open(name: String, remote location: RemoteLocation, settings: RemoteSettings) throws(TileServerError) -> ArchiveGeneration {
        do {
            let source = try location.open(settings)
            var archive = try openTileArchive(source: source)
            if let signature = settings.signature {
                archive = try signature.verified(archive, sidecar: try location.openSidecar(settings))
            }
            return try ArchiveGeneration(
                name: name, path: location.text, archive: archive, identity: .object(source.version), descriptor: -1, remote: source)
        } catch let error as TileArchiveError {
            throw TileServerError("\(location.text): \(error.fault)")
        } catch {
            throw TileServerError("\(location.text): \(error)")
        }
    }

    /// Opens the file at `path` as it is now. The file is opened once and the archive reads that
    /// very inode (through `/proc/self/fd` or `/dev/fd`), so a rename between looking and opening
    /// cannot mix two files. Opened without blocking: a FIFO (or a device) at `path`, given at
    /// start or renamed over a served file, is refused at once rather than waiting for a writer
    /// for ever (start-up, or the reload watcher, would hang).
    /// With `signature` (`serve --key`), each tile is checked against `PATH.tpsig` on its first read.
    static func open(name: String, path: String, signature: SignatureCheck? = nil) throws(TileServerError) -> ArchiveGeneration {
        let descriptor = Foundation.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            let code = errno
            throw TileServerError("\(path): cannot open (errno \(code)): \(String(cString: strerror(code)))")
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(descriptor)
            throw TileServerError("\(path): not a regular file (\(Self.kind(of: info.st_mode))): an archive is a file")
        }
        // Reads of the file block as usual (O_NONBLOCK means nothing to a regular file's reads,
        // but the descriptor is shared with SQLite through /proc/self/fd).
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
        #if os(Linux)
        let pinned = "/proc/self/fd/\(descriptor)"
        #else
        let pinned = "/dev/fd/\(descriptor)"
        #endif
        do {
            // A file nobody may write changes only by being replaced (Specs/serve.md, "Replacing
            // an archive"), so SQLite may skip its per-query locks and journal checks (`immutable`):
            // two `fcntl` and three `stat` calls less per tile. A writable MBTiles file may be
            // patched in place in one transaction (`tilepack patch`, Specs/updates.md §5): it is
            // read with SQLite's locks, so a request sees the old version or the new, never a mix.
            // Not memory-mapped, so that a file truncated in place gives read errors, not SIGBUS.
            // Its connections keep their read transactions between tiles (SQLite's per-query lock
            // and change checks, six system calls, were a third of a tile's time: bench-serve.sh),
            // ended by the watcher at each of its looks, so a patch waits at most that long.
            // Tiles are read by rowid, from an index of them in memory (a hint checked at each
            // read, so a patched file is served as SQL gives it): one B-tree walk a tile, not two.
            var mbtiles = MBTilesOpenOptions(immutable: info.st_mode & 0o222 == 0, memoryMapSize: 0, keepsReadTransactions: true)
            mbtiles.rowidIndexLimit = Self.rowidIndexLimit
            var archive = try openTileArchive(path: pinned, bundleAccess: .positionalReads, mbtiles: mbtiles)
            if let signature { archive = try signature.verified(archive, path: path) }
            return try ArchiveGeneration(
                name: name, path: path, archive: archive, identity: .file(FileIdentity(info)), descriptor: descriptor)
        } catch let error as TileArchiveError {
            close(descriptor)
            throw TileServerError("\(path): \(error.fault)")
        } catch {
            close(descriptor)
            throw TileServerError("\(path): \(error)")
        }
    }

    /// Up to how many tiles an MBTiles file's rowids are held in memory (16 bytes a tile: 64 MiB
    /// at most, per generation); a larger file is read by coordinates.
    static let rowidIndexLimit = 4 << 20

    /// What a file that is not a regular one is, for messages.
    static func kind(of mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: "a FIFO"
        case S_IFDIR: "a directory"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFSOCK: "a socket"
        case S_IFLNK: "a symbolic link"
        default: "not a file"
        }
    }

    /// The text of an error thrown while reading this generation, naming the file as given.
    func describe(_ error: any Error) -> String {
        if let error = error as? TileArchiveError { return "\(path): \(error.fault)" }
        return "\(path): \(error)"
    }

    /// The format tiles go out in (raw bitmaps are encoded as PNG).
    static func servedFormat(of content: TileContent?) -> TileFormat? {
        switch content {
        case .encoded(let format): format
        case .rawBitmap: .png
        case nil: nil
        }
    }

    /// The file extensions tile URLs of an archive in `format` may end with; the first is the canonical one.
    static func extensions(of format: TileFormat?) -> [String] {
        switch format {
        case .png: ["png"]
        case .jpeg: ["jpg", "jpeg"]
        case .webp: ["webp"]
        case .gif: ["gif"]
        case .pbf: ["pbf", "mvt"]
        case .json: ["json"]
        case nil: []
        }
    }

    /// Whether `fileExtension` is one of ``extensions``, ignoring ASCII case (an archive of no
    /// known format takes any).
    func allowsExtension(_ fileExtension: Substring) -> Bool {
        extensions.isEmpty
            || extensions.contains { allowed in
                allowed.utf8.count == fileExtension.utf8.count
                    && zip(allowed.utf8, fileExtension.utf8).allSatisfy { lower, byte in
                        (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) == lower
                    }
            }
    }
}
