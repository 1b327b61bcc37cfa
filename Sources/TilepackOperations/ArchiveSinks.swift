import TilepackCore
import TilepackStorage

/// Makes the sink an operation writes into, by archive kind.
enum ArchiveSinks {
    /// How a new archive is written.
    struct Options {
        var overwrite = false
        var append = false
        var deduplicate = false
        var encode: PixelFormat?
        /// MBTiles: store `agg_tiles_hash` (an appended file that carries one keeps it anyway).
        var aggregateTilesHash = false
        /// PMTiles: keep mixed gzip and plain vector tiles as they are (``PMTilesWriter/keepsMixedTileCompression``).
        var keepsMixedTileCompression = false
        /// A bundle or PMTiles: write its tile hash index beside it (``TileIndexSidecar``); a new
        /// MBTiles file: store its content identity (``MBTilesWriterOptions/contentIdentity``).
        var tileIndex = false
        /// The archives the tiles are read from: each is confirmed unchanged
        /// (``TileArchive/confirmUnchanged()``: a remote object nothing pins) before the output is
        /// committed, so that an input replaced during the read leaves no output.
        var inputs: [any TileArchive] = []
    }

    /// Refuses to commit `destination` when an input changed while it was read: the input's error,
    /// naming it (its URL), saying that nothing was written.
    static func confirmUnchanged(_ inputs: [any TileArchive], destination: String) throws {
        for input in inputs {
            do {
                try input.confirmUnchanged()
            } catch let error as TileArchiveError {
                guard case .corrupt(let why) = error.fault else { throw error }
                throw TileArchiveError(path: error.path, fault: .corrupt("\(why); nothing was written to \(destination)"))
            }
        }
    }

    static func make(kind: ArchiveKind, destination: String, metadata: TileMetadata, options: Options) throws(OperationError)
        -> any TileSink
    {
        do {
            switch kind {
            case .mbtiles:
                if options.encode != nil {
                    throw OperationError(
                        path: destination, fault: .badInput("raw pixels (--encode) can only be stored in a .tilepack bundle"))
                }
                return try MBTilesSink(destination: destination, metadata: metadata, options: options)
            case .bundle:
                if options.append {
                    throw OperationError(
                        path: destination,
                        fault: .badInput(
                            "a bundle cannot be appended to: it is written in one pass (import into MBTiles with --append, then convert)"))
                }
                return try BundleSink(
                    destination: destination, overwrite: options.overwrite, tileIndex: options.tileIndex, inputs: options.inputs)
            case .pmtiles:
                if options.encode != nil {
                    throw OperationError(
                        path: destination, fault: .badInput("raw pixels (--encode) can only be stored in a .tilepack bundle"))
                }
                if options.append {
                    throw OperationError(
                        path: destination,
                        fault: .badInput(
                            "a PMTiles archive cannot be appended to: it is written in one pass (import into MBTiles with --append, then convert)"
                        ))
                }
                let sink = try PMTilesSink(
                    destination: destination, metadata: metadata, overwrite: options.overwrite, tileIndex: options.tileIndex,
                    inputs: options.inputs)
                sink.writer.keepsMixedTileCompression = options.keepsMixedTileCompression
                return sink
            }
        } catch let error as OperationError {
            throw error
        } catch let error as TileArchiveError {
            throw OperationError(path: destination, fault: .archive(error))
        } catch {
            throw OperationError(path: destination, fault: .io("\(error)"))
        }
    }
}

/// Writes into a new MBTiles file, or appends to one (`--append`).
final class MBTilesSink: TileSink {
    private let writer: MBTilesWriter
    private let append: Bool
    private let destination: String
    private let inputs: [any TileArchive]

    /// - Parameter metadata: what is known before the tiles (the name at least); `finish` adds the rest.
    init(destination: String, metadata: TileMetadata, options: ArchiveSinks.Options) throws(TileArchiveError) {
        append = options.append
        self.destination = destination
        inputs = options.inputs
        if options.append {
            // The added tiles widen the zooms and bounds: what the archive says is extended to cover them.
            writer = try MBTilesWriter(
                updating: destination,
                options: MBTilesWriterOptions(
                    derivation: .extend, aggregateTilesHash: options.aggregateTilesHash))
        } else {
            writer = try MBTilesWriter(
                creating: destination, metadata: metadata,
                options: MBTilesWriterOptions(
                    schema: options.deduplicate ? .deduplicated : .flat, overwrite: options.overwrite,
                    aggregateTilesHash: options.aggregateTilesHash, contentIdentity: options.tileIndex))
        }
    }

    let prepare: @Sendable (consuming TileBytes, UInt32?, SourceFile?) -> PreparedTile = { bytes, _, _ in .bytes(bytes.array()) }
    let usesCRC = false

    func begin(content: TileContent) throws {}

    func add(_ tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws {
        if !waiting.isEmpty { try flush() }
        try writer.write(bytes, at: tile)
    }

    /// Tiles waiting to go to the writer together (it inserts them several rows per statement).
    private var waiting: [(tile: TileCoordinate, bytes: [UInt8])] = []

    func add(_ tile: TileCoordinate, prepared: PreparedTile) throws {
        switch prepared {
        case .bytes(let bytes):
            waiting.append((tile, bytes))
            if waiting.count >= 256 { try flush() }
        case .bundlePayload: preconditionFailure("MBTilesSink given a bundle payload")
        }
    }

    private func flush() throws {
        defer { waiting.removeAll(keepingCapacity: true) }
        try writer.write(waiting)
    }

    func finish(metadata: TileMetadata) throws {
        try flush()
        try ArchiveSinks.confirmUnchanged(inputs, destination: destination)
        if append {
            // Keep what the archive says; add only keys it lacks, and let the writer re-derive the rest.
            for key in metadata.keys where writer.metadata[key] == nil { writer.metadata[key] = metadata[key] }
        } else {
            writer.metadata = metadata
        }
        try writer.finish()
    }
}

/// Writes a new bundle; the writer starts at the first tile, when the content is known.
final class BundleSink: TileSink {
    private let destination: String
    private let overwrite: Bool
    private let tileIndex: Bool
    private let inputs: [any TileArchive]
    private(set) var writer: BundleWriter?
    static let options = BundleWriter.Options(derivation: .fillMissing)

    /// Large stored payloads are copied from their tile files at `finish()` (see `BundleWriter`).
    /// Lent bytes (a small tile in the reader's buffer) are compressed where they lie, and copied
    /// only when they are stored as they are.
    let prepare: @Sendable (consuming TileBytes, UInt32?, SourceFile?) -> PreparedTile = { bytes, crc, source in
        switch consume bytes {
        case .owned(let array): .bundlePayload(BundleWriter.prepare(array, options: BundleSink.options, crc: crc, source: source))
        case .lent(let buffer): .bundlePayload(BundleWriter.prepare(buffer, options: BundleSink.options, crc: crc))
        }
    }
    let usesCRC = true

    init(destination: String, overwrite: Bool, tileIndex: Bool, inputs: [any TileArchive] = []) throws(TileArchiveError) {
        self.destination = destination
        self.inputs = inputs
        self.overwrite = overwrite
        self.tileIndex = tileIndex
        // Fail before reading any tile when the destination is taken.
        _ = try AtomicFile(destination: destination, overwrite: overwrite)
    }

    func begin(content: TileContent) throws {
        writer = try BundleWriter(
            destination: destination, content: content,
            options: Self.options, overwrite: overwrite)
    }

    func add(_ tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws {
        guard let writer else { preconditionFailure("BundleSink.add before begin") }
        try writer.addTile(at: tile, bytes: bytes)
    }

    func add(_ tile: TileCoordinate, prepared: PreparedTile) throws {
        guard let writer else { preconditionFailure("BundleSink.add before begin") }
        switch prepared {
        case .bundlePayload(let payload): try writer.addTile(at: tile, payload: payload)
        case .bytes(let bytes): try bytes.withUnsafeBytes { try writer.addTile(at: tile, bytes: $0) }
        }
    }

    func finish(metadata: TileMetadata) throws {
        if writer == nil {
            // No tile at all: an empty bundle of the declared (or default) format.
            let format = (try? metadata.format) ?? nil
            try begin(content: .encoded(format ?? .png))
        }
        guard let writer else { return }
        try ArchiveSinks.confirmUnchanged(inputs, destination: destination)
        writer.metadata = metadata
        try writer.finish()
        try TileIndexSidecar.update(destination, writes: tileIndex)
    }
}

/// Writes a new PMTiles archive (tiles in any order; deduplicated and clustered at the end).
final class PMTilesSink: TileSink {
    let writer: PMTilesWriter
    private let tileIndex: Bool
    private let inputs: [any TileArchive]

    init(destination: String, metadata: TileMetadata, overwrite: Bool, tileIndex: Bool, inputs: [any TileArchive] = [])
        throws(TileArchiveError)
    {
        writer = try PMTilesWriter(destination: destination, metadata: metadata, overwrite: overwrite)
        self.tileIndex = tileIndex
        self.inputs = inputs
    }

    let prepare: @Sendable (consuming TileBytes, UInt32?, SourceFile?) -> PreparedTile = { bytes, _, _ in .bytes(bytes.array()) }
    let usesCRC = false

    func begin(content: TileContent) throws {
        if case .rawBitmap(let layout) = content {
            throw OperationError(
                path: writer.destination, fault: .badInput("raw \(layout) pixels cannot be stored in PMTiles (encode them as PNG)"))
        }
    }

    func add(_ tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws {
        try writer.addTile(at: tile, bytes: bytes)
    }

    /// Adds a run of tiles (PMTiles tile ids) sharing `bytes`, kept as a range.
    func addRun(ids: Range<UInt64>, bytes: UnsafeRawBufferPointer) throws {
        try writer.addRun(ids: ids, bytes: bytes)
    }

    func add(_ tile: TileCoordinate, prepared: PreparedTile) throws {
        switch prepared {
        case .bytes(let bytes): try writer.addTile(at: tile, bytes: bytes)
        case .bundlePayload: preconditionFailure("PMTilesSink given a bundle payload")
        }
    }

    func finish(metadata: TileMetadata) throws {
        try ArchiveSinks.confirmUnchanged(inputs, destination: writer.destination)
        writer.metadata = metadata
        try writer.finish()
        try TileIndexSidecar.update(writer.destination, writes: tileIndex)
    }
}

/// The tile hash index beside a bundle or PMTiles output (`ARCHIVE.tpindex`, Specs/updates.md
/// §7.4), which `sync` reads beside a published archive.
enum TileIndexSidecar {
    /// After `archive` was committed: writes its index beside it (a new file renamed over an older
    /// one) when `writes`, else removes an index left beside the archive it replaced, which no
    /// longer describes it. The index says the archive is canonical: a sink's writer prepared
    /// every bundle payload from its tile with ``BundleSink/options`` and shared equal PMTiles
    /// contents (a patch, which copies payloads through a sink, writes its index itself).
    static func update(_ archive: String, writes: Bool) throws {
        try TileHashIndex.updateSidecar(of: archive, writes: writes, canonical: true)
    }
}
