import Foundation
import TilepackCore
import TilepackStorage

/// Writes the version a sync brought in as LOCAL's format, by LOCAL's extension, as `tilepack
/// convert` writes it: every tile's bytes kept, the publisher's metadata (an MBTiles file's fitted
/// by ``MetadataMapping``, a name given after the file when there is none), through Storage's
/// write door. Here rather than through the converter of TilepackOperations, so that an app links
/// the sync with TilepackRemote alone (no imaging, no command-line operations).
enum SyncWriter {
    /// The format LOCAL is written in, chosen by its extension.
    static func format(of local: String) throws(OperationError) -> TileArchiveFormat {
        do { return try TileArchiveFormat(destinationPath: local) } catch {
            throw OperationError(path: local, fault: .badInput(error.fault.description))
        }
    }

    /// Refuses a remote whose tiles `format` cannot hold (raw pixels outside a bundle), before
    /// anything is fetched.
    static func check(_ content: TileContent?, source: String, into format: TileArchiveFormat, local: String) throws(OperationError) {
        guard case .rawBitmap(let layout) = content, !format.storesRawPixels else { return }
        throw OperationError(
            path: local,
            fault: .badInput("\(source) holds raw \(layout) pixels, which only a .tilepack bundle stores: sync it into a .tilepack file"))
    }

    /// Writes `archive` for `local` (replacing it) in `format`, completed beside it but not in
    /// place: the caller checks it (``TileSink/stagedPath``) and commits the sink, or drops it.
    /// Returns the sink and the notes on its metadata (a name given, values MBTiles cannot hold
    /// mapped or dropped).
    static func write(_ archive: any TileArchive, source: String, to local: String, format: TileArchiveFormat) throws -> (
        sink: TileSink, notes: [String]
    ) {
        var (metadata, notes) = try metadata(of: archive, source: source)
        if format == .mbtiles {
            let fitted = MetadataMapping.fittedToMBTiles(metadata)
            metadata = fitted.metadata
            notes += fitted.notes
        }
        let declared = (try? metadata.format) ?? nil
        if format == .mbtiles, declared == nil, try archive.tileCount() == 0 {
            throw OperationError(
                path: source, fault: .badInput("holds no tiles and declares no format, and an MBTiles file must name its tiles' format"))
        }
        var options = TileSinkOptions(overwrite: true, aggregateTilesHash: metadata[TileMetadata.Key.aggregateTilesHash] != nil)
        options.leavesIndexBeside = true
        let sink = try openTileSink(path: local, format: .archive(format), metadata: metadata, options: options)
        var began = false
        /// The tile's content (raw pixels as the archive says, else its format from its bytes or the
        /// metadata), the sink begun with the first.
        func check(_ tile: @autoclosure () -> String, _ bytes: UnsafeRawBufferPointer) throws {
            var content = archive.content
            if content?.isRaw != true {
                guard let format = TileFormat.sniff(bytes) ?? declared else {
                    throw OperationError(path: source, fault: .badInput("tile \(tile()) is of no known format"))
                }
                content = .encoded(format)
            }
            if !began, let content {
                try sink.begin(content: content)
                began = true
            }
        }
        if let pmtiles = archive as? PMTilesArchive, let runs = sink.pmtilesWriter {
            // A PMTiles download (staged whole) keeps its runs as runs, each run's bytes read once.
            let base = Int(pmtiles.header.tileDataOffset)
            try pmtiles.forEachRun { _, ids, offset, length in
                try pmtiles.source.withBytes(offset: base + Int(offset), length: length) { bytes in
                    try check(PMTilesFormat.tile(ofID: ids.lowerBound).map { "\($0)" } ?? "id \(ids.lowerBound)", bytes)
                    try runs.addRun(ids: ids, bytes: bytes)
                }
            }
        } else {
            try archive.forEachTile { tile, bytes in
                try check("\(tile)", bytes)
                try sink.add(tile, bytes: bytes)
            }
        }
        // No tile at all: an empty archive of the declared (or the default) format.
        if !began { try sink.begin(content: archive.content ?? .encoded(declared ?? .png)) }
        try sink.complete(metadata: metadata)
        return (sink, notes)
    }

    /// The publisher's metadata as LOCAL gets it, and a note when it had no name.
    private static func metadata(of archive: any TileArchive, source: String) throws -> (TileMetadata, [String]) {
        var metadata = try archive.metadata()
        // Kept only where a patch checks it (an MBTiles file patched in place).
        metadata[ContentIdentity.metadataKey] = nil
        metadata[MBTilesIdentityStamp.key] = nil
        guard metadata.name?.isEmpty ?? true else { return (metadata, []) }
        // As convert names an archive that has no name: after its file.
        let name = URL(fileURLWithPath: source).deletingPathExtension().lastPathComponent
        metadata.name = name
        return (metadata, ["\(source) has no name in its metadata: named '\(name)' after its file"])
    }
}

extension TileContent {
    fileprivate var isRaw: Bool { if case .rawBitmap = self { true } else { false } }
}
