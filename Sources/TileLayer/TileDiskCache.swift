import Foundation
internal import TilepackChecksum
import TilepackCore
import TilepackImaging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// Why the disk cache could not do what was asked.
public enum TileCacheError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A file system call failed (the path, the call and errno's text).
    case io(path: String, operation: String, reason: String)

    public var description: String {
        switch self {
        case .io(let path, let operation, let reason): "\(path): \(operation) failed: \(reason)"
        }
    }
}

/// A tile read back from the cache.
struct CachedTile: Sendable {
    var bitmap: Bitmap
    /// When the tile was stored (seconds since 1970).
    var storedAt: Double
}

/// One layer's tiles on disk: `<directory>/<z>/<x>/<y>.tile`, persistent across runs.
///
/// Entry file: a 32-byte header (magic `TPLC`, version 1, payload kind, pixel format, tile size,
/// store time, payload length, CRC-32 of header and payload) followed by the payload: the raw
/// pixels, or the encoded image as downloaded (decoded again on read). A damaged entry (wrong
/// magic, length, checksum, or an image that does not decode) is deleted and never served.
///
/// Safe with several threads and processes: entries are written to a temporary file beside the
/// destination and renamed into place, so a reader sees a whole entry or none; every change
/// (store, eviction, clear) holds an exclusive `flock` on `<directory>/.lock`, and the total size
/// is kept in `<directory>/.size` under that lock. Reads take no lock. Least-recently-used
/// order is the file modification time, set on every store and every hit.
public final class TileDiskCache: Sendable {
    /// How far past the size limit the cache may grow before it evicts (back down to the limit).
    public static let sizeLimitSlack = 5 * 1024 * 1024
    /// The largest entry read back: 64 MiB.
    static let maximumEntryBytes = 64 << 20

    /// `$XDG_CACHE_HOME/tilepack/tile-layers` (or `~/.cache/...`; the user caches folder on Apple systems).
    public static var defaultRootDirectory: URL {
        #if os(Linux)
        if let xdg = ProcessInfo.processInfo.environment["XDG_CACHE_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("tilepack/tile-layers", isDirectory: true)
        }
        return FileManager.default.homeDirectoryForCurrentUser
            .appendingPathComponent(".cache/tilepack/tile-layers", isDirectory: true)
        #else
        let caches =
            FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
            ?? FileManager.default.temporaryDirectory
        return caches.appendingPathComponent("tilepack/tile-layers", isDirectory: true)
        #endif
    }

    /// The layer's cache folder.
    public let directory: URL
    private let now: @Sendable () -> Date

    /// - Parameters:
    ///   - directory: the folder of one layer (root plus identifier).
    ///   - now: the clock for store times, expiry and recency (tests pass their own).
    public init(directory: URL, now: @escaping @Sendable () -> Date = { Date() }) {
        self.directory = directory
        self.now = now
    }

    enum PayloadKind: UInt8 {
        case raw = 0
        case encoded = 1
    }

    static let magic: [UInt8] = Array("TPLC".utf8)
    static let headerSize = 32
    static let formats: [PixelFormat] = [.rgba8888, .bgra8888, .rgba8888Premultiplied, .bgra8888Premultiplied, .rgb888, .rgb565]

    func path(of tile: TileCoordinate) -> String {
        directory.appendingPathComponent("\(tile.zoom)/\(tile.x)/\(tile.y).tile").path
    }

    // MARK: - Reading

    enum Lookup {
        case hit(CachedTile)
        case expired
        case miss
        case damaged(String)
    }

    /// The tile if cached, not expired and undamaged; a damaged entry is deleted.
    /// - Parameter timeToLive: seconds; 0 never expires.
    func lookup(_ tile: TileCoordinate, tileSize: Int, pixelFormat: PixelFormat, timeToLive: Double) -> Lookup {
        let path = path(of: tile)
        guard let data = Self.readFile(path) else { return .miss }
        switch Self.parse(data, tileSize: tileSize, pixelFormat: pixelFormat, source: path) {
        case .failure(let reason):
            removeDamaged(path)
            return .damaged("\(path): \(reason)")
        case .success(let entry):
            let current = now().timeIntervalSince1970
            if timeToLive > 0, current - entry.storedAt >= timeToLive { return .expired }
            touch(path, at: current)
            return .hit(entry)
        }
    }

    private static func readFile(_ path: String) -> Data? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: maximumEntryBytes + headerSize + 1) else { return Data() }
        return data
    }

    static func parse(_ data: Data, tileSize: Int, pixelFormat: PixelFormat, source: String) -> Result<CachedTile, StringError> {
        let bytes = [UInt8](data)
        guard bytes.count >= headerSize else { return .failure("shorter than the entry header") }
        guard Array(bytes[0..<4]) == magic else { return .failure("not a tile cache entry (bad magic)") }
        guard bytes[4] == 1 else { return .failure("unsupported entry version \(bytes[4])") }
        guard let kind = PayloadKind(rawValue: bytes[5]) else { return .failure("unknown payload kind \(bytes[5])") }
        guard Int(bytes[6]) < formats.count else { return .failure("unknown pixel format code \(bytes[6])") }
        let format = formats[Int(bytes[6])]
        let size = Int(readLE(bytes, 8, 4))
        let storedAt = Double(bitPattern: readLE(bytes, 12, 8))
        let length = readLE(bytes, 20, 8)
        let checksum = UInt32(readLE(bytes, 28, 4))
        guard length == UInt64(bytes.count - headerSize) else {
            return .failure("declares \(length) payload bytes, holds \(bytes.count - headerSize)")
        }
        guard Self.checksum(bytes[0..<28], bytes[headerSize...]) == checksum else { return .failure("checksum mismatch") }
        guard storedAt.isFinite else { return .failure("store time is not a number") }
        guard TileImageSize.isAccepted(width: size, height: size, tileSize: tileSize), format == pixelFormat else {
            return .failure(
                "holds a \(size)px \(format) tile; the layer wants \(pixelFormat) and \(TileImageSize.describe(tileSize: tileSize))")
        }
        let payload = Array(bytes[headerSize...])
        switch kind {
        case .raw:
            guard let bitmap = Bitmap(width: size, height: size, pixelFormat: format, pixels: payload) else {
                return .failure("raw payload of \(payload.count) bytes is not a \(size)px \(format) tile")
            }
            return .success(CachedTile(bitmap: bitmap, storedAt: storedAt))
        case .encoded:
            do {
                let bitmap = try TileDecoding.bitmap(Data(payload), tileSize: size, pixelFormat: format, source: source)
                return .success(CachedTile(bitmap: bitmap, storedAt: storedAt))
            } catch {
                return .failure("encoded payload: \(error)")
            }
        }
    }

    /// The entry's CRC-32: the header's first 28 bytes, then the payload.
    private static func checksum(_ header: ArraySlice<UInt8>, _ payload: ArraySlice<UInt8>) -> UInt32 {
        let crc = header.withUnsafeBytes { CRC32.checksum($0) }
        return payload.withUnsafeBytes { CRC32.checksum($0, continuing: crc) }
    }

    private static func readLE(_ bytes: [UInt8], _ offset: Int, _ count: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<count { value |= UInt64(bytes[offset + i]) << (8 * UInt64(i)) }
        return value
    }

    private static func appendLE(_ value: UInt64, _ count: Int, to bytes: inout [UInt8]) {
        for i in 0..<count { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    static func entry(kind: PayloadKind, tileSize: Int, pixelFormat: PixelFormat, storedAt: Double, payload: [UInt8]) -> [UInt8] {
        var bytes = magic
        bytes.reserveCapacity(headerSize + payload.count)
        bytes.append(1)
        bytes.append(kind.rawValue)
        bytes.append(UInt8(formats.firstIndex(of: pixelFormat) ?? 0))
        bytes.append(0)
        appendLE(UInt64(tileSize), 4, to: &bytes)
        appendLE(storedAt.bitPattern, 8, to: &bytes)
        appendLE(UInt64(payload.count), 8, to: &bytes)
        appendLE(UInt64(checksum(bytes[0..<28], payload[...])), 4, to: &bytes)
        bytes.append(contentsOf: payload)
        return bytes
    }

    // MARK: - Writing

    /// Stores a tile: its raw pixels, or `encoded` (the image as downloaded) when given.
    /// - Parameter sizeLimit: bytes; 0 is unlimited. An entry larger than the limit is not stored.
    func store(_ tile: TileCoordinate, bitmap: Bitmap, encoded: Data?, sizeLimit: Int) throws(TileCacheError) {
        let storedAt = now().timeIntervalSince1970
        let bytes: [UInt8] =
            if let encoded {
                Self.entry(
                    kind: .encoded, tileSize: bitmap.width, pixelFormat: bitmap.pixelFormat, storedAt: storedAt, payload: [UInt8](encoded))
            } else {
                Self.entry(kind: .raw, tileSize: bitmap.width, pixelFormat: bitmap.pixelFormat, storedAt: storedAt, payload: bitmap.pixels)
            }
        if sizeLimit > 0 && bytes.count > sizeLimit { return }
        let path = path(of: tile)
        let folder = (path as NSString).deletingLastPathComponent
        try withLock { () throws(TileCacheError) in
            try Self.makeDirectory(folder)
            let old = Self.fileSize(path) ?? 0
            var total = readTotal() ?? scanTotal()
            if sizeLimit > 0 && total - old + bytes.count > sizeLimit + Self.sizeLimitSlack {
                total = evict(downTo: sizeLimit - bytes.count, sparing: path)
            }
            do throws(FileSystem.ReplaceFailure) {
                try FileSystem.replace(path, with: bytes)
            } catch {
                switch error {
                case .create(let code), .write(let code): throw .io(path: path, operation: "write", reason: String(cString: strerror(code)))
                case .rename(let code): throw .io(path: path, operation: "rename", reason: String(cString: strerror(code)))
                }
            }
            touch(path, at: storedAt)
            let nowOld = old  // the replaced entry, if any, is gone now
            writeTotal(max(0, total - nowOld + bytes.count))
        }
    }

    /// Deletes every entry.
    public func clear() throws(TileCacheError) {
        guard FileManager.default.fileExists(atPath: directory.path) else { return }
        try withLock { () throws(TileCacheError) in
            let contents = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            for name in contents where !name.hasPrefix(".") {
                let item = directory.appendingPathComponent(name).path
                do {
                    try FileManager.default.removeItem(atPath: item)
                } catch {
                    throw .io(path: item, operation: "remove", reason: "\(error)")
                }
            }
            writeTotal(0)
        }
    }

    /// The bytes of every entry, counted on disk.
    public func diskSize() -> Int { scanTotal() }

    /// Every entry file with its size and modification time.
    func entries() -> [(path: String, size: Int, modified: Double)] {
        guard let enumerator = FileManager.default.enumerator(atPath: directory.path) else { return [] }
        var result: [(String, Int, Double)] = []
        while let relative = enumerator.nextObject() as? String {
            guard relative.hasSuffix(".tile") else { continue }
            let path = directory.appendingPathComponent(relative).path
            var info = stat()
            guard stat(path, &info) == 0 else { continue }
            #if canImport(Darwin)
            let modified = Double(info.st_mtimespec.tv_sec) + Double(info.st_mtimespec.tv_nsec) / 1e9
            #else
            let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
            #endif
            result.append((path, Int(info.st_size), modified))
        }
        return result
    }

    private func scanTotal() -> Int { entries().reduce(0) { $0 + $1.size } }

    /// Deletes least recently used entries until the total is at most `target`; returns the new total.
    private func evict(downTo target: Int, sparing: String) -> Int {
        var all = entries()
        var total = all.reduce(0) { $0 + $1.size }
        all.sort { ($0.modified, $0.path) < ($1.modified, $1.path) }
        for entry in all where total > target {
            guard entry.path != sparing else { continue }
            if unlink(entry.path) == 0 || errno == ENOENT { total -= entry.size }
        }
        return total
    }

    private func removeDamaged(_ path: String) {
        try? withLock { () throws(TileCacheError) in
            let size = Self.fileSize(path) ?? 0
            if unlink(path) == 0, let total = readTotal() { writeTotal(max(0, total - size)) }
        }
    }

    /// Sets the modification time (recency for LRU eviction).
    private func touch(_ path: String, at seconds: Double) {
        let whole = seconds.rounded(.down)
        let stamp = timespec(tv_sec: Int(whole), tv_nsec: Int((seconds - whole) * 1e9))
        var times = [stamp, stamp]
        _ = utimensat(AT_FDCWD, path, &times, 0)
    }

    // MARK: - Lock and size file

    private var sizeFile: String { directory.appendingPathComponent(".size").path }

    private func readTotal() -> Int? {
        guard let data = FileManager.default.contents(atPath: sizeFile), let text = String(data: data, encoding: .utf8),
            let value = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), value >= 0
        else { return nil }
        return value
    }

    private func writeTotal(_ total: Int) {
        try? FileSystem.replace(sizeFile, with: Array("\(total)\n".utf8))
    }

    /// Runs `body` holding an exclusive `flock` on `<directory>/.lock` (a fresh descriptor each
    /// time, so threads of one process exclude each other as processes do).
    private func withLock<R>(_ body: () throws(TileCacheError) -> R) throws(TileCacheError) -> R {
        try Self.makeDirectory(directory.path)
        let lockPath = directory.appendingPathComponent(".lock").path
        let fd = open(lockPath, O_RDWR | O_CREAT, 0o644)
        guard fd >= 0 else { throw .io(path: lockPath, operation: "open", reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw .io(path: lockPath, operation: "flock", reason: String(cString: strerror(errno))) }
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    private static func makeDirectory(_ path: String) throws(TileCacheError) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw .io(path: path, operation: "mkdir", reason: "\(error)")
        }
    }

    private static func fileSize(_ path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : nil
    }
}

/// A reason as an error value.
struct StringError: Error, ExpressibleByStringInterpolation, CustomStringConvertible, Sendable {
    var description: String
    init(stringLiteral value: String) { description = value }
    init(stringInterpolation: DefaultStringInterpolation) { description = String(stringInterpolation: stringInterpolation) }
}
