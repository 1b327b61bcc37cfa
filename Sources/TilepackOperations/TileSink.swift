import TilepackCore
import TilepackStorage

/// Where an operation writes tiles: an archive being written (MBTiles or bundle).
///
/// Implementations write to a temporary file and only ``finish(metadata:)`` puts the archive in
/// place; dropping a sink without finishing leaves no destination file (or the old one untouched).
protocol TileSink: AnyObject {
    /// The per-tile work that needs no state of the sink (a bundle's compression and CRC), for
    /// worker threads to do before ``add(_:prepared:)``; given the bytes' CRC-32 when it is known,
    /// and the file they are the whole of (a tile file, as it was read) when there is one.
    var prepare: @Sendable (consuming TileBytes, _ crc: UInt32?, _ source: SourceFile?) -> PreparedTile { get }
    /// Whether ``prepare`` uses the bytes' CRC-32 (then the reader derives it where that is cheap).
    var usesCRC: Bool { get }
    /// Declares what the payloads are; called once, before the first tile.
    func begin(content: TileContent) throws
    /// Adds one tile (XYZ). Called from one thread at a time.
    func add(_ tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws
    /// Adds one tile (XYZ) made ready by ``prepare``. Called from one thread at a time.
    func add(_ tile: TileCoordinate, prepared: PreparedTile) throws
    /// Writes the metadata, completes the archive and moves it into place.
    func finish(metadata: TileMetadata) throws
}

/// The archive formats tilepack writes, chosen by the output path's extension.
package enum ArchiveKind: String, Sendable, Codable {
    case mbtiles
    case bundle = "tilepack"
    case pmtiles

    /// `.mbtiles`, `.tilepack` or `.pmtiles`; anything else is an error that says which to use.
    package init(destinationPath path: String) throws(OperationError) {
        let lower = path.lowercased()
        guard let format = TileArchiveFormat.allCases.first(where: { lower.hasSuffix($0.fileExtension) }) else {
            let choices = TileArchiveFormat.allCases.map { "\($0.fileExtension) (\($0))" }
            throw OperationError(
                path: path,
                fault: .badInput(
                    "the output's extension chooses its format: use \(choices.dropLast().joined(separator: ", ")) or \(choices[choices.count - 1])"
                ))
        }
        self =
            switch format {
            case .mbtiles: .mbtiles
            case .bundle: .bundle
            case .pmtiles: .pmtiles
            }
    }
}

/// A tile's bytes as a worker hands them to ``TileSink/prepare``.
enum TileBytes {
    /// An array the worker gives up.
    case owned([UInt8])
    /// Bytes the worker lends for the call (its read buffer): whatever is kept of them is copied.
    case lent(UnsafeRawBufferPointer)

    /// The bytes as an array of their own (a copy of lent bytes).
    consuming func array() -> [UInt8] {
        switch consume self {
        case .owned(let bytes): bytes
        case .lent(let buffer): Array(buffer)
        }
    }
}

/// A tile's bytes in the form a sink takes them, made on a worker thread.
enum PreparedTile: Sendable {
    /// The bytes as they are.
    case bytes([UInt8])
    /// Compressed (when it pays) and checksummed for a bundle.
    case bundlePayload(BundleWriter.PreparedPayload)
}
