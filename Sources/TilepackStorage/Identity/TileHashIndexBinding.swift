import Foundation
import TilepackCore

/// Whether the tile hash index beside an archive describes it (Specs/updates.md §7.2): one rule
/// for every reader of a local index (a patch that trusts it for its base, an upload that
/// publishes it beside the archive).
extension TileHashIndex {
    /// The index `ARCHIVE.tpindex` beside the archive at `path` (open as `archive`), checked to be
    /// this file's: not older than the archive (a file rewritten after its index was written is
    /// not described by it), its length the archive's, its tile count and metadata hash the
    /// archive's, its own CRC whole. `nil` when there is none beside it.
    /// - Throws: naming the index and what does not match, when it does not describe the archive.
    package static func beside(_ path: String, archive: any TileArchive) throws(TileArchiveError) -> TileHashIndex? {
        let sidecar = sidecarName(of: path)
        guard let indexFile = FileSystem.stat(sidecar) else { return nil }
        func refuse(_ why: String) -> TileArchiveError {
            TileArchiveError(path: sidecar, fault: .corrupt("it does not describe \(path): \(why)"))
        }
        guard let file = FileSystem.stat(path) else { throw refuse("the archive cannot be read") }
        let changed = FileVersion(file), indexed = FileVersion(indexFile)
        guard (changed.modifiedSeconds, changed.modifiedNanoseconds) <= (indexed.modifiedSeconds, indexed.modifiedNanoseconds) else {
            throw refuse("the archive was modified after the index was written (run `tilepack index` again)")
        }
        let count: Int
        do { count = try archive.tileCount() } catch { throw refuse("its tiles cannot be counted: \(error)") }
        guard isFileLength(Int(indexFile.st_size), tiles: count) else {
            throw refuse("its \(indexFile.st_size) bytes are not an index of \(count) tiles")
        }
        guard let data = FileManager.default.contents(atPath: sidecar) else {
            throw TileArchiveError(path: sidecar, fault: .cannotOpen(errno: errno, reason: "cannot read the index"))
        }
        let index = try decode(Array(data), name: sidecar)
        guard index.archiveLength == UInt64(file.st_size) else {
            throw refuse("it is of a file of \(index.archiveLength) bytes, the archive has \(file.st_size)")
        }
        guard index.identity.tileCount == UInt64(count) else {
            throw refuse("it lists \(index.identity.tileCount) tiles, the archive holds \(count)")
        }
        let metadata: TileMetadata
        do { metadata = try archive.metadata() } catch { throw refuse("its metadata cannot be read: \(error)") }
        guard index.identity.metadata == ContentIdentity.metadataHash(metadata) else {
            throw refuse("its metadata hash is not the archive's metadata's")
        }
        return index
    }
}

/// The files tilepack keeps beside an archive for its receivers, named by appending to the
/// archive's name: its tile hash index (`.tpindex`, Specs/updates.md §7) and its signature
/// (`.tpsig`, Specs/signing.md §5). A publisher uploads them after the archive, in this order,
/// as objects named the same way (`KEY.tpindex`, `KEY.tpsig`).
package enum ArchiveSidecars {
    /// The sidecars' names beside `archive` (a path or an object key), in upload order.
    package static func names(of archive: String) -> [String] {
        [TileHashIndex.sidecarName(of: archive), SignatureSidecar.sidecarName(of: archive)]
    }
}
