import Foundation

/// A read-only tile archive: the one read API apps use, implemented by MBTiles and the bundle.
///
/// Coordinates are always XYZ (row 0 at the north). An archive that stores TMS rows (MBTiles)
/// flips them inside its implementation; nothing above storage ever sees a TMS row.
///
/// Implementations are safe to use from many threads at once, and every method that touches the
/// file throws ``TileArchiveError`` naming the file and the fault.
public protocol TileArchive: Sendable {
    /// The file the archive was opened from.
    var path: String { get }

    /// What the payloads are, as far as the archive knows without reading every tile:
    /// `nil` for an archive that neither declares nor holds any tile.
    var content: TileContent? { get }

    /// The metadata (for MBTiles the `metadata` table; for a bundle its metadata block).
    func metadata() throws -> TileMetadata

    /// Whether the tile exists, answered from the index without reading the tile.
    func containsTile(at tile: TileCoordinate) throws -> Bool

    /// Calls `body` with the tile's stored bytes, or returns `nil` when there is no such tile.
    ///
    /// The buffer is valid only inside `body`. For an encoded archive the bytes are the encoded
    /// tile (PNG, MVT, ...); for a raw-bitmap archive they are the pixels. Implementations avoid
    /// copying where the bytes are already in memory (a memory map, SQLite's blob).
    func withTileBytes<R>(at tile: TileCoordinate, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R?

    /// Copies (or decompresses) the tile's bytes straight into `buffer` and returns how many were
    /// written, or `nil` when there is no such tile.
    ///
    /// Throws when the tile does not fit in `buffer`. A raw-bitmap bundle decompresses its LZ4
    /// payload directly into `buffer`: this is the tile layer's zero-copy path.
    func readTile(at tile: TileCoordinate, into buffer: UnsafeMutableRawBufferPointer) throws -> Int?

    /// The zoom levels that hold tiles, ascending, with their tile counts.
    func zoomLevels() throws -> [ZoomLevelSummary]

    /// Calls `body` for every tile in (zoom, x, y) order without holding the tiles in memory.
    ///
    /// The buffer is valid only inside `body`; an error thrown by `body` stops the iteration.
    func forEachTile(_ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws

    /// Throws when the object the archive is read from is no longer the one it was opened on, as
    /// far as can be told without what pins it: a remote object whose server sends no `ETag` and
    /// no `Last-Modified` has the bytes of its opening read (a PMTiles header and root directory,
    /// a bundle's header) read again and compared. Called after a whole-archive read, before its
    /// output is committed, so that a replacement during the read is refused rather than written
    /// as a mix of two versions. Every other archive: nothing (the default).
    func confirmUnchanged() throws
}

extension TileArchive {
    public func confirmUnchanged() throws {}

    /// The tile's bytes as `Data`, or `nil` when there is no such tile.
    public func tileData(at tile: TileCoordinate) throws -> Data? {
        try withTileBytes(at: tile) { Data($0) }
    }

    /// Default: copy the bytes from ``withTileBytes(at:_:)``.
    public func readTile(at tile: TileCoordinate, into buffer: UnsafeMutableRawBufferPointer) throws -> Int? {
        try withTileBytes(at: tile) { bytes throws(TileArchiveError) -> Int in
            guard bytes.count <= buffer.count else {
                throw TileArchiveError(path: path, fault: .bufferTooSmall(tile: tile, needed: bytes.count, available: buffer.count))
            }
            if let base = bytes.baseAddress, let destination = buffer.baseAddress {
                destination.copyMemory(from: base, byteCount: bytes.count)
            }
            return bytes.count
        }
    }

    /// The total number of tiles.
    public func tileCount() throws -> Int {
        try zoomLevels().reduce(0) { $0 + $1.tileCount }
    }
}

/// One zoom level of an archive.
public struct ZoomLevelSummary: Hashable, Sendable {
    public var zoom: Int
    public var tileCount: Int
    /// The stored bytes of this level's tiles, when the archive knows it cheaply.
    public var byteCount: Int?

    public init(zoom: Int, tileCount: Int, byteCount: Int? = nil) {
        self.zoom = zoom
        self.tileCount = tileCount
        self.byteCount = byteCount
    }
}

/// A fault in an archive, naming the file.
public struct TileArchiveError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The archive's path.
    public var path: String
    /// What is wrong.
    public var fault: Fault

    public init(path: String, fault: Fault) {
        self.path = path
        self.fault = fault
    }

    public enum Fault: Hashable, Sendable, CustomStringConvertible {
        /// The file does not exist or cannot be opened (errno and its text).
        case cannotOpen(errno: Int32, reason: String)
        /// Reading or writing the file failed.
        case io(errno: Int32, reason: String)
        /// The file is not an archive of this kind; `detected` says what it looks like, if known.
        case notAnArchive(detected: String)
        /// The file is of a version this reader does not support.
        case unsupportedVersion(String)
        /// The file ends before the structure it declares.
        case truncated(String)
        /// The structure is damaged (a length, offset or count that cannot be right).
        case corrupt(String)
        /// A checksum does not match: what it covers, declared and computed values.
        case checksumMismatch(region: String, declared: String, computed: String)
        /// SQLite reported an error.
        case database(code: Int32, message: String)
        /// A required table or column is missing.
        case missingTable(String)
        /// A stored row that cannot be a tile (out of range, wrong type).
        case invalidRow(String)
        /// The tile exists in the index but its data is NULL.
        case nullTile(TileCoordinate)
        /// A tile is larger than the limit a reader accepts.
        case tileTooLarge(tile: TileCoordinate, size: Int, limit: Int)
        /// The caller's buffer cannot hold the tile.
        case bufferTooSmall(tile: TileCoordinate, needed: Int, available: Int)
        /// A metadata value is malformed or inconsistent.
        case metadata(TileMetadataError)
        /// A metadata rule of the format is broken (a writer refuses to write it).
        case invalidMetadata(String)
        /// The destination exists and overwriting was not asked for.
        case alreadyExists
        /// A writer refuses a tile (added twice, or the wrong size for the archive's content).
        case invalidTile(tile: TileCoordinate, reason: String)
        /// A sound archive that tilepack reads but does not write into (an MBTiles with triggers).
        case refusesWrites(String)
        /// A write refused before it starts: a name that chooses no format, raw pixels for a format
        /// that holds encoded images only, tiles appended to a file written in one pass.
        case cannotWrite(String)

        public var description: String {
            switch self {
            // errno 0: no system call failed (a server's answer, a refused request): nothing to show.
            case .cannotOpen(let errno, let reason): errno == 0 ? "cannot open: \(reason)" : "cannot open (errno \(errno)): \(reason)"
            case .io(let errno, let reason): errno == 0 ? "I/O error: \(reason)" : "I/O error (errno \(errno)): \(reason)"
            case .notAnArchive(let detected): "not an archive of this kind: \(detected)"
            case .unsupportedVersion(let v): "unsupported version: \(v)"
            case .truncated(let what): "truncated: \(what)"
            case .corrupt(let what): "corrupt: \(what)"
            case .checksumMismatch(let region, let declared, let computed):
                "checksum mismatch in \(region): declared \(declared), computed \(computed)"
            case .database(let code, let message): "SQLite error \(code): \(message)"
            case .missingTable(let what): "missing \(what)"
            case .invalidRow(let what): "invalid row: \(what)"
            case .nullTile(let tile): "tile \(tile) has NULL data"
            case .tileTooLarge(let tile, let size, let limit): "tile \(tile) is \(size) bytes, over the limit of \(limit)"
            case .bufferTooSmall(let tile, let needed, let available):
                "tile \(tile) needs \(needed) bytes, the buffer holds \(available)"
            case .metadata(let error): error.description
            case .invalidMetadata(let what): "invalid metadata: \(what)"
            case .alreadyExists: "the file already exists (use --force to overwrite)"
            case .invalidTile(let tile, let reason): "tile \(tile): \(reason)"
            case .refusesWrites(let reason): "tilepack does not write into this file: \(reason)"
            case .cannotWrite(let reason): reason
            }
        }
    }

    public var description: String { "\(path): \(fault)" }
}
