import TilepackCore
import TilepackStorage

/// How convert, extract, merge and import write their output archive: the options they share.
package struct ArchiveWriteOptions: Sendable {
    /// Replace an existing output.
    package var overwrite = false
    /// MBTiles output: store `agg_tiles_hash` even when the input carries none.
    package var aggregateTilesHash = false
    /// PMTiles output of vector tiles that mix gzip and plain ones: keep every tile's bytes and
    /// say compression `unknown` (which MapLibre Native cannot read) instead of gzipping the plain ones.
    package var keepsMixedTileCompression = false
    /// A bundle or PMTiles output: write its tile hash index beside it (`ARCHIVE.tpindex`, for
    /// `sync`; Specs/updates.md §7.4). Without it, an index left beside the archive replaced is removed.
    package var tileIndex = false

    package init() {}

    /// The sink's options: `agg_tiles_hash` stored when asked or when the input `carriesHash`.
    func sinkOptions(carriesHash: Bool, inputs: [any TileArchive] = []) -> TileSinkOptions {
        TileSinkOptions(
            overwrite: overwrite, aggregateTilesHash: aggregateTilesHash || carriesHash,
            keepsMixedTileCompression: keepsMixedTileCompression, tileIndex: tileIndex, inputs: inputs)
    }
}

/// An operation's output archive, written through Storage's write door
/// (``openTileSink(path:format:metadata:options:)``); errors are the operation's, naming it.
enum ArchiveOutput {
    /// The format `destination`'s extension chooses.
    static func format(of destination: String) throws(OperationError) -> TileArchiveFormat {
        do { return try TileArchiveFormat(destinationPath: destination) } catch {
            throw OperationError(path: destination, fault: .badInput(error.fault.description))
        }
    }

    /// The sink that writes `destination` in `format`.
    /// - Parameter encode: the pixel format tiles are decoded into (`--encode`), which only a
    ///   bundle stores: refused for any other format before anything is read.
    static func open(
        _ destination: String, format: TileArchiveFormat, metadata: TileMetadata, encode: PixelFormat? = nil, options: TileSinkOptions
    ) throws(OperationError) -> TileSink {
        if encode != nil && !format.storesRawPixels {
            throw OperationError(path: destination, fault: .badInput("raw pixels (--encode) can only be stored in a .tilepack bundle"))
        }
        do {
            return try openTileSink(path: destination, format: .archive(format), metadata: metadata, options: options)
        } catch {
            guard case .cannotWrite(let reason) = error.fault else { throw OperationError(path: destination, fault: .archive(error)) }
            throw OperationError(path: destination, fault: .badInput(reason))
        }
    }
}
