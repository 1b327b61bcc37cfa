import Foundation
import TilepackCore

/// One format's writer behind a ``TileSink``, which stages the output and puts it in place: the
/// writer only fills the staging file or folder it is given.
protocol SinkWriter: AnyObject {
    var prepare: @Sendable (consuming TileBytes, UInt32?, SourceFile?) -> PreparedTile { get }
    var usesCRC: Bool { get }
    func begin(content: TileContent) throws
    func add(_ tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws
    func add(_ tile: TileCoordinate, prepared: PreparedTile) throws
    /// Writes the metadata and completes the staged output (a new file flushed to disk, not yet
    /// renamed; tiles appended to an MBTiles file committed).
    func complete(metadata: TileMetadata) throws
    /// Abandons the write (an append rolled back); the sink discards the staging.
    func cancel()
}

extension SinkWriter {
    var prepare: @Sendable (consuming TileBytes, UInt32?, SourceFile?) -> PreparedTile { { bytes, _, _ in .bytes(bytes.array()) } }
    var usesCRC: Bool { false }
    func cancel() {}
}

/// Raw pixels refused by a format that holds encoded images only.
private func rawPixelsRefused(_ layout: RawBitmapLayout, in format: String, destination: String) -> TileArchiveError {
    TileArchiveError(path: destination, fault: .cannotWrite("raw \(layout) pixels cannot be stored in \(format) (encode them as PNG)"))
}

/// A new MBTiles file, or tiles added to one (``TileSinkOptions/append``).
final class MBTilesSinkWriter: SinkWriter {
    private let writer: MBTilesWriter
    private let append: Bool
    /// Tiles waiting to go to the writer together (it inserts them several rows per statement).
    private var waiting: [(tile: TileCoordinate, bytes: [UInt8])] = []

    /// - Parameter metadata: what is known before the tiles (the name at least); `complete` adds the rest.
    init(creating path: String, metadata: TileMetadata, options: TileSinkOptions, staging: AtomicFile) throws(TileArchiveError) {
        append = false
        writer = try MBTilesWriter(
            creating: path, metadata: metadata,
            options: MBTilesWriterOptions(
                schema: options.deduplicate ? .deduplicated : .flat, overwrite: options.overwrite,
                aggregateTilesHash: options.aggregateTilesHash, contentIdentity: options.tileIndex)
        ) { () throws(TileArchiveError) in staging }
    }

    init(appendingTo path: String, options: TileSinkOptions) throws(TileArchiveError) {
        append = true
        // The added tiles widen the zooms and bounds: what the archive says is extended to cover them.
        writer = try MBTilesWriter(
            updating: path, options: MBTilesWriterOptions(derivation: .extend, aggregateTilesHash: options.aggregateTilesHash))
    }

    func begin(content: TileContent) throws {}

    func add(_ tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws {
        if !waiting.isEmpty { try flush() }
        try writer.write(bytes, at: tile)
    }

    func add(_ tile: TileCoordinate, prepared: PreparedTile) throws {
        switch prepared {
        case .bytes(let bytes):
            waiting.append((tile, bytes))
            if waiting.count >= 256 { try flush() }
        case .bundlePayload: preconditionFailure("an MBTiles sink given a bundle payload")
        }
    }

    private func flush() throws {
        defer { waiting.removeAll(keepingCapacity: true) }
        try writer.write(waiting)
    }

    func complete(metadata: TileMetadata) throws {
        try flush()
        if append {
            // Keep what the archive says; add only keys it lacks, and let the writer re-derive the rest.
            for key in metadata.keys where writer.metadata[key] == nil { writer.metadata[key] = metadata[key] }
        } else {
            writer.metadata = metadata
        }
        try writer.finish()
    }

    func cancel() { writer.cancel() }
}

/// A new bundle; its writer starts at ``begin(content:)``, when the content is known.
final class BundleSinkWriter: SinkWriter {
    private let destination: String
    private let staging: AtomicFile
    private(set) var writer: BundleWriter?

    init(destination: String, staging: AtomicFile) {
        self.destination = destination
        self.staging = staging
    }

    /// Large stored payloads are copied from their tile files at completion (see `BundleWriter`).
    /// Lent bytes (a small tile in the reader's buffer) are compressed where they lie, and copied
    /// only when they are stored as they are.
    let prepare: @Sendable (consuming TileBytes, UInt32?, SourceFile?) -> PreparedTile = { bytes, crc, source in
        switch consume bytes {
        case .owned(let array): .bundlePayload(BundleWriter.prepare(array, options: TileSink.bundleOptions, crc: crc, source: source))
        case .lent(let buffer): .bundlePayload(BundleWriter.prepare(buffer, options: TileSink.bundleOptions, crc: crc))
        }
    }
    var usesCRC: Bool { true }

    func begin(content: TileContent) throws {
        writer = try BundleWriter(
            destination: destination, content: content, metadata: TileMetadata(), options: TileSink.bundleOptions
        ) { () throws(TileArchiveError) in staging }
    }

    func add(_ tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws {
        guard let writer else { preconditionFailure("a bundle sink given a tile before begin(content:)") }
        try writer.addTile(at: tile, bytes: bytes)
    }

    func add(_ tile: TileCoordinate, prepared: PreparedTile) throws {
        guard let writer else { preconditionFailure("a bundle sink given a tile before begin(content:)") }
        switch prepared {
        case .bundlePayload(let payload): try writer.addTile(at: tile, payload: payload)
        case .bytes(let bytes): try bytes.withUnsafeBytes { try writer.addTile(at: tile, bytes: $0) }
        }
    }

    func complete(metadata: TileMetadata) throws {
        if writer == nil {
            // No tile at all: an empty bundle of the declared (or default) format.
            let format = (try? metadata.format) ?? nil
            try begin(content: .encoded(format ?? .png))
        }
        guard let writer else { return }
        writer.metadata = metadata
        try writer.finish()
    }
}

/// A new PMTiles archive (tiles in any order; deduplicated and clustered at completion).
final class PMTilesSinkWriter: SinkWriter {
    let writer: PMTilesWriter

    init(destination: String, metadata: TileMetadata, options: TileSinkOptions, staging: AtomicFile) throws(TileArchiveError) {
        writer = try PMTilesWriter(destination: destination, metadata: metadata, staging: staging)
        writer.keepsMixedTileCompression = options.keepsMixedTileCompression
    }

    func begin(content: TileContent) throws {
        if case .rawBitmap(let layout) = content { throw rawPixelsRefused(layout, in: "PMTiles", destination: writer.destination) }
    }

    func add(_ tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws {
        try writer.addTile(at: tile, bytes: bytes)
    }

    func add(_ tile: TileCoordinate, prepared: PreparedTile) throws {
        switch prepared {
        case .bytes(let bytes): try bytes.withUnsafeBytes { try writer.addTile(at: tile, bytes: $0) }
        case .bundlePayload: preconditionFailure("a PMTiles sink given a bundle payload")
        }
    }

    func complete(metadata: TileMetadata) throws {
        writer.metadata = metadata
        try writer.finish()
    }
}

/// A tile tree: `z/x/y.EXT` files (XYZ rows, the extension of the content's format) and a
/// `metadata.json` of the metadata's entries, in a folder staged beside the destination.
final class TreeSinkWriter: SinkWriter {
    private let folder: StagedFolder
    private var fileExtension: String?
    /// The folders made so far (`z` and `z/x`, below the staging folder).
    private var made: Set<String> = []

    init(folder: StagedFolder) { self.folder = folder }

    func begin(content: TileContent) throws {
        switch content {
        case .encoded(let format): fileExtension = format.fileExtension
        case .rawBitmap(let layout): throw rawPixelsRefused(layout, in: "a tile tree", destination: folder.destination)
        }
    }

    func add(_ tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws {
        guard let fileExtension else { preconditionFailure("a tile tree sink given a tile before begin(content:)") }
        let zoom = "\(tile.zoom)", column = "\(tile.zoom)/\(tile.x)"
        for name in [zoom, column] where !made.contains(name) {
            let path = folder.temporaryPath + "/" + name
            if FileSystem.mkdir(path, 0o755) != 0 && errno != EEXIST { throw failure(path, "cannot create the folder") }
            made.insert(name)
        }
        try write(bytes, to: "\(folder.temporaryPath)/\(column)/\(tile.y).\(fileExtension)")
    }

    func add(_ tile: TileCoordinate, prepared: PreparedTile) throws {
        switch prepared {
        case .bytes(let bytes): try bytes.withUnsafeBytes { try add(tile, bytes: $0) }
        case .bundlePayload: preconditionFailure("a tile tree sink given a bundle payload")
        }
    }

    func complete(metadata: TileMetadata) throws {
        let json = try JSONSerialization.data(withJSONObject: metadata.entries, options: [.sortedKeys, .prettyPrinted])
        try json.withUnsafeBytes { try write($0, to: folder.temporaryPath + "/metadata.json") }
    }

    /// Writes a new file in the staging folder (its own: nothing in it is anyone else's).
    private func write(_ bytes: UnsafeRawBufferPointer, to path: String) throws(TileArchiveError) {
        let fd = FileSystem.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw failure(path, "cannot create the file") }
        defer { close(fd) }
        var done = 0
        while done < bytes.count {
            let n = Foundation.write(fd, bytes.baseAddress! + done, bytes.count - done)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw failure(path, "write") }
            done += n
        }
    }

    private func failure(_ path: String, _ what: String) -> TileArchiveError {
        let code = errno
        return TileArchiveError(
            path: folder.destination, fault: .io(errno: code, reason: "\(what) \(path): \(AtomicFile.describe(errno: code))"))
    }
}
