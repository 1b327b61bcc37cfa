import Foundation
import TilepackCore
import TilepackStorage

/// What `index` wrote.
public struct IndexReport: Sendable, Codable {
    public var archive: String
    public var index: String
    public var tiles = 0
    public var indexBytes = 0
    public var identity = ""
    /// Whether the index says the archive's bytes are what tilepack's writer makes of its tiles
    /// (checked here), so that a patch copies its unchanged payloads unchecked (Specs/updates.md §7.1).
    public var canonical = false
    public var seconds = 0.0
}

/// Writes the tile hash index of a local archive beside it (`ARCHIVE.tpindex`, Specs/updates.md
/// §7), to be published with it for `sync`. The index says whether the archive's bytes are what
/// tilepack's writer makes of its tiles (its flag `canonical`), checked from them here.
public enum ArchiveIndexer {
    public static func run(archive path: String, output: String? = nil, overwrite: Bool = true) throws(OperationError) -> IndexReport {
        try run(archive: path, output: output, overwrite: overwrite, canonical: nil)
    }

    /// - Parameter canonical: what the caller knows of the archive's bytes (its own writer wrote
    ///   them), or `nil`: checked (``TileHashIndex/isCanonical(_:)``).
    static func run(archive path: String, output: String?, overwrite: Bool, canonical known: Bool?) throws(OperationError) -> IndexReport {
        let start = DispatchTime.now().uptimeNanoseconds
        let destination = output ?? TileHashIndex.sidecarName(of: path)
        try OutputIsInput.refuse(output: destination, inputs: [path])
        guard !path.contains("://") else { throw OperationError(path: path, fault: .badInput("an index is made of a local archive file")) }
        let archive = try openLocalArchive(path)
        guard let size = FileSystem.stat(path)?.st_size else {
            throw OperationError(path: path, fault: .badInput("an index is made of a local archive file"))
        }
        let index: TileHashIndex
        do {
            let count = try archive.tileCount()
            guard count <= TileHashIndex.maximumTiles else {
                throw OperationError(
                    path: path,
                    fault: .badInput(
                        "\(count) tiles: an index holds at most \(TileHashIndex.maximumTiles) (such an archive is synced whole)"))
            }
            let canonical = try known ?? TileHashIndex.isCanonical(archive)
            index = try TileHashIndex.build(archive, archiveLength: UInt64(size), canonical: canonical)
            try index.write(to: destination, overwrite: overwrite)
        } catch {
            throw OperationError.wrapping(error, path: path)
        }
        var report = IndexReport(archive: path, index: destination)
        report.tiles = index.hashes.count
        report.indexBytes = Int(FileSystem.stat(destination)?.st_size ?? 0)
        report.identity = index.identity.description
        report.canonical = index.canonical
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }
}

/// Opens an archive on this machine (MBTiles, bundle or PMTiles, recognised by its bytes) as the
/// commands do: a bundle read with `pread`, since another process may cut the file.
func openLocalArchive(_ path: String) throws(OperationError) -> any TileArchive {
    do { return try openTileArchive(path: path, bundleAccess: .positionalReads) } catch {
        throw OperationError(path: path, fault: .archive(error))
    }
}
