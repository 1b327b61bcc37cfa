import Foundation
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage

/// Writes a patched base (``PatchedArchive``) at its destination through Storage's write door
/// (``openTileSink(path:format:metadata:options:)``), as `tilepack convert` writes an archive, so
/// that the result is byte-identical to `tilepack convert NEW` into that format: the format chosen
/// by the destination's extension, every tile's bytes kept, the metadata fitted to MBTiles where it
/// is one, a bundle or PMTiles written with the base's unchanged payloads copied from its file
/// where it can (``PatchedArchive/copy(into:declared:)``). The sink stages the result beside the
/// destination and alone puts it in place. Raw pixels (a raw-bitmap bundle patched) stay raw in a
/// bundle; the sink refuses them in the formats that hold encoded images only.
enum PatchWriter {
    /// Writes `patched` (read through a patch from `patchPath`, which names it in messages) at `destination`.
    static func write(_ patched: PatchedArchive, patch patchPath: String, to destination: String) throws(OperationError) {
        try OutputIsInput.refuse(output: destination, inputs: [patchPath])
        let format = try format(of: destination)
        var metadata: TileMetadata
        let total: Int
        do {
            metadata = try patched.metadata()
            // Kept only where a patch checks it (an MBTiles file patched in place).
            metadata[ContentIdentity.metadataKey] = nil
            metadata[MBTilesIdentityStamp.key] = nil
            total = try patched.tileCount()
        } catch {
            throw OperationError.wrapping(error, path: patchPath)
        }
        if metadata.name?.isEmpty ?? true {
            // As convert names an archive that has no name: after its file.
            metadata.name = URL(fileURLWithPath: patchPath).deletingPathExtension().lastPathComponent
        }
        if format == .mbtiles { metadata = MetadataMapping.fittedToMBTiles(metadata).metadata }
        try TileCountLimit.check(total, limit: TileCountLimit.defaultMaximum, source: patchPath, writing: "convert into \(destination)")
        if format == .mbtiles, total == 0, metadata[TileMetadata.Key.format] == nil {
            throw OperationError(
                path: patchPath,
                fault: .badInput(
                    "holds no tiles and declares no format, and an MBTiles file must name its tiles' format: nothing to copy it from (a .tilepack bundle can hold it)"
                ))
        }
        let sink: TileSink
        do {
            sink = try openTileSink(
                path: destination, format: .archive(format), metadata: metadata,
                options: TileSinkOptions(
                    overwrite: true, aggregateTilesHash: metadata[TileMetadata.Key.aggregateTilesHash] != nil, inputs: [patched]))
        } catch {
            throw OperationError(path: destination, fault: .archive(error))
        }
        // Dropped unfinished, the sink removes its staged file (the destination left as it was).
        do { try write(patched, into: sink, metadata: metadata, source: patchPath) } catch {
            throw OperationError.wrapping(error, path: destination)
        }
    }

    /// The format `destination`'s extension chooses.
    static func format(of destination: String) throws(OperationError) -> TileArchiveFormat {
        guard let format = TileArchiveFormat.named(by: destination) else {
            throw OperationError(
                path: destination,
                fault: .badInput("the output's extension chooses its format: use \(TileArchiveFormat.extensions())"))
        }
        return format
    }

    /// The result's tiles, by copying the base's payloads where it can, else tile by tile.
    private static func write(_ patched: PatchedArchive, into sink: TileSink, metadata: TileMetadata, source: String) throws {
        let declared = (try? metadata.format) ?? nil
        if try !patched.copy(into: sink, declared: declared) {
            var began = false
            try patched.forEachTile { tile, bytes in
                if !began {
                    try sink.begin(content: patched.content.flatMap { $0.isRaw ? $0 : nil } ?? encoded(tile, bytes, declared, source))
                    began = true
                } else if patched.content?.isRaw != true {
                    _ = try encoded(tile, bytes, declared, source)
                }
                try sink.add(tile, bytes: bytes)
            }
        }
        try sink.finish(metadata: metadata)
    }

    /// The content of an encoded tile, from its bytes (or the metadata's format).
    private static func encoded(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer, _ declared: TileFormat?, _ source: String)
        throws(OperationError) -> TileContent
    {
        guard let format = TileFormat.sniff(bytes) ?? declared else {
            throw OperationError(path: source, fault: .badInput("tile \(tile) is of no known format"))
        }
        return .encoded(format)
    }
}

extension TileContent {
    fileprivate var isRaw: Bool { if case .rawBitmap = self { true } else { false } }
}
