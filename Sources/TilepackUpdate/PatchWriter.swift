import Foundation
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage

/// Writes a patched base (``PatchedArchive``) at its destination as `tilepack convert` writes an
/// archive, so that the result is byte-identical to `tilepack convert NEW` into that format: the
/// format chosen by the destination's extension, every tile's bytes kept, the metadata fitted to
/// MBTiles where it is one, a bundle or PMTiles written with the base's unchanged payloads copied
/// from its file where it can (``PatchedArchive/copy(into:declared:)``). Each writer stages the
/// result beside the destination and renames it over it.
///
/// The update module sits below the command library, so a patch cannot write through its
/// converter: until Storage has one door for writing an archive (issue 43, item 3), this is the
/// patch's own switch over the formats, as `SyncWriter` is the sync's, and that door replaces both.
/// Raw pixels (a raw-bitmap bundle patched) stay raw in a bundle and are refused by the formats
/// that hold encoded images only.
final class PatchWriter {
    let destination: String
    let format: TileArchiveFormat
    private var metadata: TileMetadata
    /// The writer of each format: a bundle's is made once the content is known (``begin(content:)``).
    private let mbtilesWriter: MBTilesWriter?
    private(set) var bundleWriter: BundleWriter?
    let pmtilesWriter: PMTilesWriter?

    /// What the converter writes a bundle with (metadata filled from the tiles): the payloads a
    /// tile hash index calls canonical.
    static let bundleOptions = BundleWriter.Options(derivation: .fillMissing)

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
        let sink: PatchWriter
        do { sink = try PatchWriter(destination: destination, format: format, metadata: metadata) } catch {
            throw OperationError(path: destination, fault: .archive(error))
        }
        // Dropped unfinished, each writer removes its staged file (the destination left as it was).
        do { try sink.write(patched, source: patchPath) } catch { throw OperationError.wrapping(error, path: destination) }
    }

    /// The format `destination`'s extension chooses.
    static func format(of destination: String) throws(OperationError) -> TileArchiveFormat {
        let lower = destination.lowercased()
        guard let format = TileArchiveFormat.allCases.first(where: { lower.hasSuffix($0.fileExtension) }) else {
            let choices = TileArchiveFormat.allCases.map { "\($0.fileExtension) (\($0))" }
            throw OperationError(
                path: destination,
                fault: .badInput(
                    "the output's extension chooses its format: use \(choices.dropLast().joined(separator: ", ")) or \(choices[choices.count - 1])"
                ))
        }
        return format
    }

    private init(destination: String, format: TileArchiveFormat, metadata: TileMetadata) throws(TileArchiveError) {
        self.destination = destination
        self.format = format
        self.metadata = metadata
        switch format {
        case .mbtiles:
            mbtilesWriter = try MBTilesWriter(
                creating: destination, metadata: metadata,
                options: MBTilesWriterOptions(
                    schema: .flat, overwrite: true, aggregateTilesHash: metadata[TileMetadata.Key.aggregateTilesHash] != nil))
            pmtilesWriter = nil
        case .bundle:
            // Fails before any tile is read when the destination cannot be written.
            _ = try AtomicFile(destination: destination, overwrite: true)
            mbtilesWriter = nil
            pmtilesWriter = nil
        case .pmtiles:
            mbtilesWriter = nil
            pmtilesWriter = try PMTilesWriter(destination: destination, metadata: metadata, overwrite: true)
        }
    }

    /// The result's tiles, by copying the base's payloads where it can, else tile by tile.
    private func write(_ patched: PatchedArchive, source: String) throws {
        let declared = (try? metadata.format) ?? nil
        if try !patched.copy(into: self, declared: declared) {
            var began = false
            try patched.forEachTile { tile, bytes in
                if !began {
                    try begin(content: patched.content.flatMap { $0.isRaw ? $0 : nil } ?? Self.encoded(tile, bytes, declared, source))
                    began = true
                } else if patched.content?.isRaw != true {
                    _ = try Self.encoded(tile, bytes, declared, source)
                }
                try add(tile, bytes: bytes)
            }
        }
        try patched.confirmUnchanged()
        try finish()
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

    /// Declares what the payloads are, once, before the first tile: raw pixels only in a bundle.
    func begin(content: TileContent) throws {
        if case .rawBitmap(let layout) = content, format != .bundle {
            throw OperationError(
                path: destination, fault: .badInput("raw \(layout) pixels cannot be stored in \(format) (encode them as PNG)"))
        }
        if format == .bundle {
            bundleWriter = try BundleWriter(destination: destination, content: content, options: Self.bundleOptions, overwrite: true)
        }
    }

    private func add(_ tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws {
        if let mbtilesWriter { try mbtilesWriter.write(bytes, at: tile) }
        if let bundleWriter { try bundleWriter.addTile(at: tile, bytes: bytes) }
        if let pmtilesWriter { try pmtilesWriter.addTile(at: tile, bytes: bytes) }
    }

    /// Completes the result and renames it over the destination; a bundle's or PMTiles' tile
    /// hash index left beside the archive it replaced is removed (the patch writes the result's).
    private func finish() throws {
        if format == .bundle, bundleWriter == nil {
            // No tile at all: an empty bundle of the declared (or default) format.
            try begin(content: .encoded(((try? metadata.format) ?? nil) ?? .png))
        }
        if let mbtilesWriter {
            mbtilesWriter.metadata = metadata
            _ = try mbtilesWriter.finish()
        }
        if let bundleWriter {
            bundleWriter.metadata = metadata
            _ = try bundleWriter.finish()
        }
        if let pmtilesWriter {
            pmtilesWriter.metadata = metadata
            _ = try pmtilesWriter.finish()
        }
        if format != .mbtiles { try TileHashIndex.updateSidecar(of: destination, writes: false, canonical: true) }
    }
}

extension TileContent {
    fileprivate var isRaw: Bool { if case .rawBitmap = self { true } else { false } }
}
