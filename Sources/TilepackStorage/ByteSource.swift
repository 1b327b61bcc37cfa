import Foundation
import TilepackCore

/// Read-only bytes an archive is read from: a file on this machine (memory-mapped), bytes in
/// memory, or ranges fetched from elsewhere (`TilepackRemote`'s HTTP source).
///
/// Readers built on a byte source ask only for the ranges they need, so that a remote archive
/// costs a few requests rather than a download. Implementations are safe to use from many threads
/// at once. Every failure is a ``TileArchiveError`` naming ``name`` (the path or URL).
public protocol ByteSource: Sendable {
    /// The file's path or URL, for errors.
    var name: String { get }
    /// The total length in bytes.
    var count: Int { get }
    /// Calls `body` with the bytes `offset ..< offset + length`, valid only inside `body`.
    ///
    /// Throws ``TileArchiveError/Fault/truncated(_:)`` for a range past the end.
    func withBytes<R>(offset: Int, length: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R
    /// Announces ranges about to be read, so that a remote source can fetch them in few requests
    /// (neighbours coalesced). A local source does nothing.
    func willRead(_ ranges: [Range<Int>]) throws
    /// How many bytes one read may span to serve neighbouring ranges at once (gaps included),
    /// for a source whose every read is a call that copies: a local file read with `pread`. `0`
    /// (the default) for a source that hands out slices of memory, or coalesces by itself after
    /// ``willRead(_:)`` (a remote one).
    var coalescedReadLength: Int { get }
    /// Copies the bytes `offset ..< offset + buffer.count` into `buffer` (one copy, no other
    /// memory); throws as ``withBytes(offset:length:_:)`` does.
    func read(offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws
    /// Throws when the bytes are no longer those the source was opened on, as far as it can tell
    /// (``TileArchive/confirmUnchanged()``): a remote object that nothing pins reads its first
    /// bytes again. Nothing by default (a local file; a remote object pinned on every request).
    func confirmUnchanged() throws(TileArchiveError)
}

extension ByteSource {
    public func willRead(_ ranges: [Range<Int>]) throws {}

    public func confirmUnchanged() throws(TileArchiveError) {}

    public var coalescedReadLength: Int { 0 }

    public func read(offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws {
        try withBytes(offset: offset, length: buffer.count) { bytes in
            if let from = bytes.baseAddress, let to = buffer.baseAddress { to.copyMemory(from: from, byteCount: bytes.count) }
        }
    }

    /// The bytes `offset ..< offset + length` as an array.
    public func bytes(offset: Int, length: Int) throws -> [UInt8] {
        try withBytes(offset: offset, length: length) { Array($0) }
    }

    /// The range check every source makes, with the error it throws.
    public func checkRange(offset: Int, length: Int) throws(TileArchiveError) {
        guard offset >= 0, length >= 0, offset <= count, length <= count - offset else {
            throw TileArchiveError(path: name, fault: .truncated("bytes \(offset)..<\(offset &+ length) lie past the end (\(count) bytes)"))
        }
    }
}

/// A local file read with `pread`, or bytes held in memory.
///
/// A file is never memory-mapped: another process may truncate it in place while it is read, and
/// a map then faults the reader (SIGBUS); `pread` gives a short read, reported as `truncated`
/// naming the file. Each read copies its bytes into a buffer kept for the file's reads (one
/// per thread reading at once, see `ReadBuffers`; allocated for the call past them); a reader
/// going through many neighbouring ranges reads up to ``coalescedReadLength`` bytes of them with
/// one call (``read(offset:into:)``), as one call costs more than copying a small gap.
public struct FileByteSource: ByteSource {
    public let name: String
    public let coalescedReadLength: Int
    private let storage: Storage

    private enum Storage: Sendable {
        case memory(MappedBytes)
        case file(OpenFile)
    }

    /// An open regular file and its length when it was opened; closed with the last reader.
    private final class OpenFile: Sendable {
        let descriptor: Int32
        let size: Int
        /// What ``withBytes(offset:length:_:)`` reads into.
        let buffers = ReadBuffers()
        init(descriptor: Int32, size: Int) {
            self.descriptor = descriptor
            self.size = size
        }
        deinit { close(descriptor) }

        /// A buffer of ``buffers`` holding the bytes `offset ..< offset + length` (`length` > 0),
        /// to give back to it. Not generic, so that a lookup makes no generic metadata.
        func read(offset: Int, length: Int, name: String) throws(TileArchiveError) -> UnsafeMutableRawPointer {
            let buffer = buffers.take(length)
            do throws(TileArchiveError) {
                try MappedBytes.readFully(descriptor, into: UnsafeMutableRawBufferPointer(start: buffer, count: length), at: offset, path: name)
            } catch {
                buffers.give(buffer, length: length)
                throw error
            }
            return buffer
        }
    }

    /// The default ``coalescedReadLength`` of a file: 1 MiB (bench-pmtiles-read: a pass with
    /// 256 KiB or 1 MiB runs at the same speed, 4 MiB and more slower, the bytes copied leaving the cache).
    public static let defaultCoalescedReadLength = 1 << 20

    /// Opens the file at `path` (a regular file: a FIFO or a folder is named in the error);
    /// `coalescedReadLength` bounds the bytes one read spans (at least 1).
    public init(path: String, coalescedReadLength: Int = Self.defaultCoalescedReadLength) throws(TileArchiveError) {
        name = path
        self.coalescedReadLength = max(1, coalescedReadLength)
        let (fd, info) = try RegularFile.openForReading(path)
        storage = .file(OpenFile(descriptor: fd, size: Int(info.st_size)))
    }

    /// Bytes in memory (downloaded, or a fuzzer's input); `name` names them in errors.
    public init(data: Data, name: String) {
        self.name = name
        coalescedReadLength = 0
        storage = .memory(MappedBytes(copying: data))
    }

    public var count: Int {
        switch storage {
        case .memory(let bytes): bytes.count
        case .file(let file): file.size
        }
    }

    public func withBytes<R>(offset: Int, length: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try checkRange(offset: offset, length: length)
        switch storage {
        case .memory(let bytes):
            return try body(UnsafeRawBufferPointer(rebasing: bytes.buffer[offset..<(offset + length)]))
        case .file(let file):
            guard length > 0 else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
            let buffer = try file.read(offset: offset, length: length, name: name)
            defer { file.buffers.give(buffer, length: length) }
            return try body(UnsafeRawBufferPointer(start: buffer, count: length))
        }
    }

    public func read(offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws {
        try checkRange(offset: offset, length: buffer.count)
        guard buffer.count > 0 else { return }
        switch storage {
        case .memory(let bytes):
            buffer.baseAddress!.copyMemory(from: bytes.base! + offset, byteCount: buffer.count)
        case .file(let file):
            try MappedBytes.readFully(file.descriptor, into: buffer, at: offset, path: name)
        }
    }
}

/// An archive that reads just the tiles a filter accepts, announcing their ranges to its byte
/// source first (a remote source then fetches neighbours in few requests): PMTiles and bundles.
public protocol SelectiveTileReading: TileArchive {
    /// Calls `body` for the tiles `wanted` accepts, in the archive's own order.
    func forEachTile(where wanted: (TileCoordinate) -> Bool, _ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws
    /// As ``forEachTile(where:_:)``, offered only tiles inside `selection` (which a PMTiles
    /// archive cuts from its runs as ranges, never visiting a run's other tiles).
    func forEachTile(
        in selection: TileSelection, where wanted: (TileCoordinate) -> Bool,
        _ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws
}

extension SelectiveTileReading {
    public func forEachTile(
        in selection: TileSelection, where wanted: (TileCoordinate) -> Bool,
        _ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try forEachTile(where: { selection.contains($0) && wanted($0) }, body)
    }
}

/// Zooms and a box that limit the tiles a reader offers (`nil`: no limit).
public struct TileSelection: Sendable {
    public var zooms: ClosedRange<Int>?
    public var bounds: GeoBoundingBox?

    public init(zooms: ClosedRange<Int>? = nil, bounds: GeoBoundingBox? = nil) {
        self.zooms = zooms
        self.bounds = bounds
    }

    /// Whether `tile` is inside the zooms and touches the box.
    public func contains(_ tile: TileCoordinate) -> Bool {
        (zooms?.contains(tile.zoom) ?? true) && ((try? bounds?.intersects(tile)) ?? true) != false
    }
}

extension PMTilesArchive: SelectiveTileReading {}
extension BundleArchive: SelectiveTileReading {}

/// Opens the archive a byte source holds (a remote object): PMTiles or a bundle. MBTiles (SQLite
/// reads a local file) is named in the error, as is anything else.
public func openTileArchive(source: any ByteSource) throws(TileArchiveError) -> any TileArchive {
    let head: [UInt8]
    do {
        head = try source.bytes(offset: 0, length: min(16, source.count))
    } catch {
        throw PMTilesArchive.archiveError(error, name: source.name)
    }
    if head.starts(with: Array("SQLite format 3\0".utf8)) {
        throw TileArchiveError(
            path: source.name,
            fault: .notAnArchive(
                detected: "an MBTiles (SQLite) file: SQLite reads local files only; download it first, or convert it to PMTiles"))
    }
    if head.starts(with: BundleFormat.magic) {
        return try BundleArchive(source: source)
    }
    return try PMTilesArchive(source: source)
}
