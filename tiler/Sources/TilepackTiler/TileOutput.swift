import Foundation
import TilepackCore
import TilepackStorage

/// Where the tiles go: a bundle, an MBTiles file, a PMTiles file (chosen by the extension, each
/// written beside its destination and renamed into place by Storage's writers), or a `z/x/y`
/// tree (written into a hidden folder beside the destination and renamed into place at the
/// end). Dropped before ``finish(metadata:)``, it leaves nothing behind. One thread at a time.
final class TileOutput {
    enum Writer {
        case bundle(BundleWriter)
        case mbtiles(MBTilesWriter)
        case pmtiles(PMTilesWriter)
        case tree(temporary: String, format: TileFormat)
    }

    let destination: String
    private var writer: Writer?
    private let overwrite: Bool
    /// Whether a bundle or PMTiles output gets its tile hash index beside it (an MBTiles output
    /// its stored content identity).
    private let tileIndex: Bool
    private var finished = false

    init(destination: String, format: TileFormat, metadata: TileMetadata, overwrite: Bool, tileIndex: Bool = false) throws(TilerError) {
        self.destination = destination
        self.overwrite = overwrite
        self.tileIndex = tileIndex
        let lower = destination.lowercased()
        do {
            if lower.hasSuffix(".tilepack") {
                writer = .bundle(
                    try BundleWriter(destination: destination, content: .encoded(format), metadata: metadata, overwrite: overwrite))
            } else if lower.hasSuffix(".mbtiles") {
                var options = MBTilesWriterOptions()
                options.overwrite = overwrite
                options.contentIdentity = tileIndex
                writer = .mbtiles(try MBTilesWriter(creating: destination, metadata: metadata, options: options))
            } else if lower.hasSuffix(".pmtiles") {
                writer = .pmtiles(try PMTilesWriter(destination: destination, metadata: metadata, overwrite: overwrite))
            } else {
                if FileManager.default.fileExists(atPath: destination), !overwrite {
                    throw TilerError.output("\(destination) exists: choose another output or pass --force to replace it")
                }
                let url = URL(fileURLWithPath: destination)
                let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).tmp-\(getpid())").path
                try? FileManager.default.removeItem(atPath: temporary)
                try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
                writer = .tree(temporary: temporary, format: format)
            }
        } catch let error as TilerError {
            throw error
        } catch {
            throw .output("\(destination): \(error)")
        }
    }

    deinit { if !finished { discard() } }

    /// Adds one tile (XYZ).
    func add(_ tile: TileCoordinate, bytes: Data) throws(TilerError) {
        do {
            switch writer {
            case .bundle(let w): try w.addTile(at: tile, data: bytes)
            case .mbtiles(let w): try w.write(bytes, at: tile)
            case .pmtiles(let w): try bytes.withUnsafeBytes { raw in try w.addTile(at: tile, bytes: raw) }
            case .tree(let temporary, let format):
                let folder = "\(temporary)/\(tile.zoom)/\(tile.x)"
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                try bytes.write(to: URL(fileURLWithPath: "\(folder)/\(tile.y).\(format.fileExtension)"))
            case nil: return
            }
        } catch {
            throw .output("\(destination): \(error)")
        }
    }

    /// Writes the metadata and moves the output into place; then a bundle's or PMTiles' tile hash
    /// index beside it, when asked (else an index left beside the archive it replaced goes), as
    /// import and convert do.
    func finish(metadata: TileMetadata) throws(TilerError) {
        finished = true
        do {
            switch writer {
            case .bundle(let w):
                w.metadata = metadata
                try w.finish()
                try TileHashIndex.updateSidecar(of: destination, writes: tileIndex, canonical: true)
            case .mbtiles(let w):
                w.metadata = metadata
                try w.finish()
            case .pmtiles(let w):
                w.metadata = metadata
                try w.finish()
                try TileHashIndex.updateSidecar(of: destination, writes: tileIndex, canonical: true)
            case .tree(let temporary, _):
                let json = try JSONSerialization.data(withJSONObject: metadata.entries, options: [.sortedKeys, .prettyPrinted])
                try json.write(to: URL(fileURLWithPath: "\(temporary)/metadata.json"))
                if FileManager.default.fileExists(atPath: destination) {
                    let old = "\(temporary).old"
                    try FileManager.default.moveItem(atPath: destination, toPath: old)
                    try FileManager.default.moveItem(atPath: temporary, toPath: destination)
                    try? FileManager.default.removeItem(atPath: old)
                } else {
                    try FileManager.default.moveItem(atPath: temporary, toPath: destination)
                }
            case nil: break
            }
            writer = nil
        } catch {
            discard()
            throw .output("\(destination): \(error)")
        }
    }

    /// Drops what was written.
    func discard() {
        switch writer {
        case .mbtiles(let w): w.cancel()
        case .tree(let temporary, _): try? FileManager.default.removeItem(atPath: temporary)
        default: break  // the bundle and PMTiles writers remove their temporary file when dropped
        }
        writer = nil
    }
}
