import Foundation
import TilepackCore
import TilepackStorage

/// Writes the version a sync brought in as LOCAL's format, by LOCAL's extension, as `tilepack
/// convert` writes it: every tile's bytes kept, the publisher's metadata (an MBTiles file's fitted
/// by ``MetadataMapping``, a name given after the file when there is none), the writers of Storage.
/// Here rather than through the converter of TilepackOperations, so that an app links the sync
/// with TilepackRemote alone (no imaging, no command-line operations).
enum SyncWriter {
    /// The format LOCAL is written in, chosen by its extension.
    static func format(of local: String) throws(OperationError) -> TileArchiveFormat {
        let lower = local.lowercased()
        guard let format = TileArchiveFormat.allCases.first(where: { lower.hasSuffix($0.fileExtension) }) else {
            throw OperationError(
                path: local, fault: .badInput("the local archive's extension chooses its format: use \(TileArchiveFormat.extensions())"))
        }
        return format
    }

    /// Refuses a remote whose tiles `format` cannot hold (raw pixels outside a bundle), before
    /// anything is fetched.
    static func check(_ content: TileContent?, source: String, into format: TileArchiveFormat, local: String) throws(OperationError) {
        guard case .rawBitmap(let layout) = content, format != .bundle else { return }
        throw OperationError(
            path: local,
            fault: .badInput("\(source) holds raw \(layout) pixels, which only a .tilepack bundle stores: sync it into a .tilepack file"))
    }

    /// Writes `archive` at `destination` (a new file, replacing one there) in `format`; the notes
    /// on its metadata (a name given, values MBTiles cannot hold mapped or dropped).
    static func write(_ archive: any TileArchive, source: String, to destination: String, format: TileArchiveFormat) throws -> [String] {
        var metadata = try archive.metadata()
        // Kept only where a patch checks it (an MBTiles file patched in place).
        metadata[ContentIdentity.metadataKey] = nil
        var notes: [String] = []
        if metadata.name?.isEmpty ?? true {
            // As convert names an archive that has no name: after its file.
            let name = URL(fileURLWithPath: source).deletingPathExtension().lastPathComponent
            metadata.name = name
            notes.append("\(source) has no name in its metadata: named '\(name)' after its file")
        }
        if format == .mbtiles {
            let fitted = MetadataMapping.fittedToMBTiles(metadata)
            metadata = fitted.metadata
            notes += fitted.notes
        }
        let declared = (try? metadata.format) ?? nil
        /// The content of encoded tiles, from their bytes (or the metadata's format).
        func encoded(_ tile: @autoclosure () -> String, _ bytes: UnsafeRawBufferPointer) throws -> TileContent {
            guard let format = TileFormat.sniff(bytes) ?? declared else {
                throw OperationError(path: source, fault: .badInput("tile \(tile()) is of no known format"))
            }
            return .encoded(format)
        }
        switch format {
        case .mbtiles:
            if declared == nil, try archive.tileCount() == 0 {
                throw OperationError(
                    path: source, fault: .badInput("holds no tiles and declares no format, and an MBTiles file must name its tiles' format")
                )
            }
            let writer = try MBTilesWriter(
                creating: destination, metadata: metadata,
                options: MBTilesWriterOptions(
                    schema: .flat, overwrite: true, aggregateTilesHash: metadata[TileMetadata.Key.aggregateTilesHash] != nil))
            try archive.forEachTile { tile, bytes in
                _ = try encoded("\(tile)", bytes)
                try writer.write(bytes, at: tile)
            }
            writer.metadata = metadata
            _ = try writer.finish()
        case .bundle:
            var writer: BundleWriter?
            func begin(_ content: TileContent) throws -> BundleWriter {
                try BundleWriter(
                    destination: destination, content: content, options: BundleWriter.Options(derivation: .fillMissing), overwrite: true)
            }
            try archive.forEachTile { tile, bytes in
                if writer == nil {
                    writer = try begin(archive.content.flatMap { $0.isRaw ? $0 : nil } ?? encoded("\(tile)", bytes))
                } else if archive.content?.isRaw != true {
                    _ = try encoded("\(tile)", bytes)
                }
                try writer?.addTile(at: tile, bytes: bytes)
            }
            // No tile at all: an empty bundle of the declared (or the default) format.
            let bundle = try writer ?? begin(archive.content ?? .encoded(declared ?? .png))
            bundle.metadata = metadata
            _ = try bundle.finish()
        case .pmtiles:
            let writer = try PMTilesWriter(destination: destination, metadata: metadata, overwrite: true)
            if let pmtiles = archive as? PMTilesArchive {
                // A PMTiles download (staged whole) keeps its runs as runs, each run's bytes read once.
                let base = Int(pmtiles.header.tileDataOffset)
                try pmtiles.forEachRun { _, ids, offset, length in
                    try pmtiles.source.withBytes(offset: base + Int(offset), length: length) { bytes in
                        _ = try encoded(PMTilesFormat.tile(ofID: ids.lowerBound).map { "\($0)" } ?? "id \(ids.lowerBound)", bytes)
                        try writer.addRun(ids: ids, bytes: bytes)
                    }
                }
            } else {
                try archive.forEachTile { tile, bytes in
                    _ = try encoded("\(tile)", bytes)
                    try writer.addTile(at: tile, bytes: bytes)
                }
            }
            writer.metadata = metadata
            _ = try writer.finish()
        }
        return notes
    }
}

extension TileContent {
    fileprivate var isRaw: Bool { if case .rawBitmap = self { true } else { false } }
}
