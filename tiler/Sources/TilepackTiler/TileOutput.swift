import Foundation
import TilepackCore
import TilepackStorage

/// Where the tiles go, through Storage's write door (``openTileSink(path:format:metadata:options:)``):
/// a bundle, an MBTiles file or a PMTiles file, chosen by the extension, else a `z/x/y` tree,
/// staged beside the destination and put in place by the sink at ``finish(metadata:)``. Dropped
/// before, it leaves nothing behind. One thread at a time.
final class TileOutput {
    let destination: String
    private let sink: TileSink

    /// An MBTiles output stores `agg_tiles_hash`.
    /// - Parameter tileIndex: a bundle or PMTiles output gets its tile hash index beside it (an
    ///   MBTiles output its stored content identity), as import and convert do; without it an
    ///   index left beside the archive it replaces goes.
    init(destination: String, format: TileFormat, metadata: TileMetadata, overwrite: Bool, tileIndex: Bool = false) throws(TilerError) {
        self.destination = destination
        do {
            sink = try openTileSink(
                path: destination, format: TileSinkFormat(destinationPath: destination), metadata: metadata,
                options: TileSinkOptions(overwrite: overwrite, aggregateTilesHash: true, tileIndex: tileIndex))
            try sink.begin(content: .encoded(format))
        } catch {
            throw Self.failure(error, destination)
        }
    }

    /// Adds one tile (XYZ).
    func add(_ tile: TileCoordinate, bytes: Data) throws(TilerError) {
        do { try bytes.withUnsafeBytes { try sink.add(tile, bytes: $0) } } catch { throw Self.failure(error, destination) }
    }

    /// Writes the metadata and puts the output in place.
    func finish(metadata: TileMetadata) throws(TilerError) {
        do { try sink.finish(metadata: metadata) } catch { throw Self.failure(error, destination) }
    }

    /// An error of the sink, naming the destination once (Storage's errors name it).
    private static func failure(_ error: any Error, _ destination: String) -> TilerError {
        .output(error is TileArchiveError ? "\(error)" : "\(destination): \(error)")
    }
}
