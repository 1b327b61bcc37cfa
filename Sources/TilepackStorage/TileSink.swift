import Foundation
import TilepackCore

/// What a ``TileSink`` writes: an archive in one of the formats the read door opens, or a tile tree.
public enum TileSinkFormat: Sendable, Hashable, CustomStringConvertible {
    case archive(TileArchiveFormat)
    /// A folder of `z/x/y.EXT` files (XYZ rows) and a `metadata.json`, which `tilepack import`
    /// reads back.
    case tree

    /// What an output named `path` is: an archive when its extension names a format
    /// (``TileArchiveFormat/init(destinationPath:)``), else a tile tree.
    public init(destinationPath path: String) {
        self = TileArchiveFormat.named(by: path).map { .archive($0) } ?? .tree
    }

    public var description: String {
        switch self {
        case .archive(let format): format.description
        case .tree: "tile tree"
        }
    }
}

/// How a ``TileSink`` writes (each option is for the formats it names; the others ignore it).
public struct TileSinkOptions: Sendable {
    /// Replace an existing destination (checked when the sink opens, and again when it commits).
    public var overwrite = false
    /// MBTiles: add the tiles to the file at the destination, in one transaction (its zooms and
    /// bounds widened to cover them). Every other format is written in one pass: refused.
    public var append = false
    /// A new MBTiles file: store identical tiles once (`map` + `images`).
    public var deduplicate = false
    /// MBTiles: store `agg_tiles_hash` (an appended file that carries one keeps it anyway).
    public var aggregateTilesHash = false
    /// PMTiles: keep mixed gzip and plain vector tiles as they are
    /// (``PMTilesWriter/keepsMixedTileCompression``).
    public var keepsMixedTileCompression = false
    /// A bundle or PMTiles: write its tile hash index beside it once it is in place
    /// (``TileHashIndex/sidecarName(of:)``), where without it an index left beside the archive it
    /// replaced is removed; a new MBTiles file: store its content identity
    /// (``MBTilesWriterOptions/contentIdentity``).
    public var tileIndex = false
    /// Leave the tile hash index beside the destination as it is (`sync` keeps LOCAL's own).
    package var leavesIndexBeside = false
    /// The archives the tiles are read from: each is confirmed unchanged
    /// (``TileArchive/confirmUnchanged()``: a remote object nothing pins) before the output is
    /// completed, so that an input replaced during the read leaves no output.
    public var inputs: [any TileArchive] = []

    public init(
        overwrite: Bool = false, append: Bool = false, deduplicate: Bool = false, aggregateTilesHash: Bool = false,
        keepsMixedTileCompression: Bool = false, tileIndex: Bool = false, inputs: [any TileArchive] = []
    ) {
        self.overwrite = overwrite
        self.append = append
        self.deduplicate = deduplicate
        self.aggregateTilesHash = aggregateTilesHash
        self.keepsMixedTileCompression = keepsMixedTileCompression
        self.tileIndex = tileIndex
        self.inputs = inputs
    }
}

/// An archive (or a tile tree) being written, opened by
/// ``openTileSink(path:format:metadata:options:)``, the one door for writing.
///
/// ``begin(content:)`` says what the payloads are (once, before the first tile; a sink that gets
/// no tile begins with the format its metadata declares), ``add(_:bytes:)`` adds a tile (XYZ), and
/// ``finish(metadata:)`` completes the output beside its destination and puts it in place: the
/// sink stages it (`AtomicFile`, `StagedFolder`: `.<name>.tmp-<random>` beside the
/// destination), and it alone flushes it to disk and renames it over the destination. Dropped or
/// ``cancel()``led before, it leaves nothing behind: no destination (or the old one as it was),
/// no staging file. One thread at a time.
public final class TileSink {
    /// Where the output goes.
    public let destination: String
    public let format: TileSinkFormat
    private let writer: any SinkWriter
    /// The file or folder the output is staged in; `nil` for tiles appended to an MBTiles file
    /// (one transaction: ``complete(metadata:)`` commits it).
    private let staging: (any StagedOutput)?
    private let options: TileSinkOptions
    private var state = State.writing

    private enum State { case writing, complete, done }

    /// The bundle options of every sink: what `tilepack import` and `convert` write (metadata
    /// filled from the tiles), which a tile hash index calls canonical.
    package static let bundleOptions = BundleWriter.Options(derivation: .fillMissing)

    init(path: String, format: TileSinkFormat, metadata: TileMetadata, options: TileSinkOptions) throws(TileArchiveError) {
        destination = path
        self.format = format
        self.options = options
        if options.append && format != .archive(.mbtiles) {
            let what = format == .archive(.bundle) ? "a bundle" : format == .tree ? "a tile tree" : "a \(format) archive"
            throw TileArchiveError(
                path: path,
                fault: .cannotWrite(
                    "\(what) cannot be appended to: it is written in one pass (import into MBTiles with --append, then convert)"))
        }
        switch format {
        case .archive(.mbtiles) where options.append:
            staging = nil
            writer = try MBTilesSinkWriter(appendingTo: path, options: options)
        case .archive(let archive):
            let file = try AtomicFile(destination: path, overwrite: options.overwrite, deferred: true)
            staging = file
            writer =
                switch archive {
                case .mbtiles: try MBTilesSinkWriter(creating: path, metadata: metadata, options: options, staging: file)
                case .bundle: BundleSinkWriter(destination: path, staging: file)
                case .pmtiles: try PMTilesSinkWriter(destination: path, metadata: metadata, options: options, staging: file)
                }
        case .tree:
            let folder = try StagedFolder(destination: path, overwrite: options.overwrite)
            staging = folder
            writer = TreeSinkWriter(folder: folder)
        }
    }

    deinit { cancel() }

    /// Declares what the payloads are; called once, before the first tile.
    /// - Throws: `cannotWrite` for raw pixels in a format that holds encoded images only.
    public func begin(content: TileContent) throws { try writer.begin(content: content) }

    /// Adds one tile (XYZ).
    public func add(_ tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws { try writer.add(tile, bytes: bytes) }

    /// Writes the metadata, completes the output and puts it in place (then writes or removes a
    /// bundle's or PMTiles' tile hash index beside it, ``TileSinkOptions/tileIndex``). On an
    /// error nothing is left but what was at the destination before.
    public func finish(metadata: TileMetadata) throws {
        try complete(metadata: metadata)
        try commit()
    }

    /// Abandons the output: its staging file or folder removed, an append rolled back.
    public func cancel() {
        guard state != .done else { return }
        state = .done
        writer.cancel()
        staging?.discard()
    }

    // MARK: For the commands

    /// The per-tile work that needs no state of the sink (a bundle's compression and CRC), for
    /// worker threads to do before ``add(_:prepared:)``; given the bytes' CRC-32 when it is known,
    /// and the file they are the whole of (a tile file, as it was read) when there is one.
    package var prepare: @Sendable (consuming TileBytes, _ crc: UInt32?, _ source: SourceFile?) -> PreparedTile { writer.prepare }
    /// Whether ``prepare`` uses the bytes' CRC-32 (then the reader derives it where that is cheap).
    package var usesCRC: Bool { writer.usesCRC }

    /// Adds one tile (XYZ) made ready by ``prepare``.
    package func add(_ tile: TileCoordinate, prepared: PreparedTile) throws { try writer.add(tile, prepared: prepared) }

    /// The PMTiles writer, which takes runs of tiles as ranges (``PMTilesWriter/addRun(ids:bytes:)``)
    /// and copies a patch's base; `nil` for another format.
    package var pmtilesWriter: PMTilesWriter? { (writer as? PMTilesSinkWriter)?.writer }
    /// The bundle writer, once ``begin(content:)`` made it, which copies a patch's base; `nil` for
    /// another format.
    package var bundleWriter: BundleWriter? { (writer as? BundleSinkWriter)?.writer }

    /// Writes the metadata and completes the output beside the destination, flushed to disk but
    /// not in place: a caller that checks what was written reads it at ``stagedPath``, then
    /// ``commit()``s (or drops the sink). The inputs are confirmed unchanged first. Tiles appended
    /// to an MBTiles file are committed here (one transaction).
    package func complete(metadata: TileMetadata) throws {
        precondition(state == .writing, "TileSink completed twice, or after cancel()")
        do {
            try Self.confirmUnchanged(options.inputs, destination: destination)
            try writer.complete(metadata: metadata)
        } catch {
            cancel()
            throw error
        }
        state = .complete
    }

    /// Where the completed output lies until ``commit()``: the staging file or folder (the
    /// destination itself for tiles appended to an MBTiles file).
    package var stagedPath: String { staging?.temporaryPath ?? destination }

    /// Puts the output ``complete(metadata:)`` wrote in place, then the tile hash index beside it.
    package func commit() throws {
        precondition(state == .complete, "TileSink committed before complete(metadata:), or twice")
        state = .done
        try staging?.publish()
        if case .archive(let archive) = format, archive != .mbtiles, !options.leavesIndexBeside {
            // The index says the archive is canonical: the writer prepared every bundle payload
            // with ``bundleOptions`` and shared equal PMTiles contents (a patch, which copies
            // payloads through the sink, writes its index itself).
            try TileHashIndex.updateSidecar(of: destination, writes: options.tileIndex, canonical: true)
        }
    }

    /// Refuses to complete `destination` when an input changed while it was read: the input's
    /// error, naming it (its URL), saying that nothing was written.
    private static func confirmUnchanged(_ inputs: [any TileArchive], destination: String) throws {
        for input in inputs {
            do {
                try input.confirmUnchanged()
            } catch let error as TileArchiveError {
                guard case .corrupt(let why) = error.fault else { throw error }
                throw TileArchiveError(path: error.path, fault: .corrupt("\(why); nothing was written to \(destination)"))
            }
        }
    }
}

/// A tile's bytes as a worker hands them to ``TileSink/prepare``.
package enum TileBytes {
    /// An array the worker gives up.
    case owned([UInt8])
    /// Bytes the worker lends for the call (its read buffer): whatever is kept of them is copied.
    case lent(UnsafeRawBufferPointer)

    /// The bytes as an array of their own (a copy of lent bytes).
    package consuming func array() -> [UInt8] {
        switch consume self {
        case .owned(let bytes): bytes
        case .lent(let buffer): Array(buffer)
        }
    }
}

/// A tile's bytes in the form a sink takes them, made on a worker thread.
package enum PreparedTile: Sendable {
    /// The bytes as they are.
    case bytes([UInt8])
    /// Compressed (when it pays) and checksummed for a bundle.
    case bundlePayload(BundleWriter.PreparedPayload)
}

/// Where a sink stages its output: ``AtomicFile`` or ``StagedFolder``.
protocol StagedOutput: AnyObject {
    var temporaryPath: String { get }
    func publish() throws(TileArchiveError)
    func discard()
}

extension AtomicFile: StagedOutput {}
extension StagedFolder: StagedOutput {}
