import Foundation
import TilepackCore
import TilepackStorage

/// What `diff` found and wrote.
public struct DiffReport: Sendable, Codable {
    public var old: String
    public var new: String
    public var patch: String
    /// `tilepack` (tilepack's patch file) or `mbtiles` (martin's flat patch layout).
    public var patchFormat: String
    /// The content identities of OLD and NEW (Specs/updates.md §1).
    public var before: String
    public var after: String
    public var added = 0
    public var changed = 0
    public var deleted = 0
    public var metadataChanges = 0
    /// The bytes of the added and changed tiles, and of the patch file.
    public var tileBytes = 0
    public var patchBytes = 0
    public var seconds = 0.0
}

/// Compares two archives of one tile type, in any formats, and writes the patch that turns the
/// first into the second: tilepack's own patch file, or (PATCH ending in `.mbtiles`) martin's flat
/// MBTiles patch (Specs/updates.md).
public enum ArchiveDiff {
    /// - Parameter maximumTiles: the most tiles of both archives together (`--max-tiles`, default
    ///   500,000,000): every tile of both is hashed for their content identities, one by one, so
    ///   more (a PMTiles run of billions of tiles) is refused before anything is read or written.
    public static func run(
        old: String, new: String, patch patchPath: String, overwrite: Bool = false,
        maximumTiles: Int = 500_000_000
    ) throws(OperationError) -> DiffReport {
        try run(old: old, new: new, patch: patchPath, overwrite: overwrite, maximumTiles: maximumTiles, open: openLocalArchive)
    }

    /// - Parameter open: opens OLD and NEW (the command's opens `http(s)://` URLs too, through TilepackRemote).
    package static func run(
        old: String, new: String, patch patchPath: String, overwrite: Bool, maximumTiles: Int,
        open: (String) throws(OperationError) -> any TileArchive
    ) throws(OperationError) -> DiffReport {
        let start = DispatchTime.now().uptimeNanoseconds
        try OutputIsInput.refuse(output: patchPath, inputs: [old, new])
        let asMBTiles = patchPath.lowercased().hasSuffix(".mbtiles")
        let oldArchive = try open(old)
        let newArchive = try open(new)
        if let a = oldArchive.content, let b = newArchive.content, a != b {
            throw OperationError(
                path: new, fault: .badInput("its tiles are \(b), \(old)'s are \(a): a patch joins versions of one tile type"))
        }
        var total = 0
        for (archive, path) in [(oldArchive, old), (newArchive, new)] {
            do { total += try archive.tileCount() } catch { throw OperationError.wrapping(error, path: path) }
        }
        try TileCountLimit.check(
            total, limit: maximumTiles, source: new, writing: "diff of \(old) and \(new) (their content identities)", verb: "reads")
        var patch = TilePatch()
        var report = DiffReport(
            old: old, new: new, patch: patchPath, patchFormat: asMBTiles ? "mbtiles" : "tilepack", before: "", after: "")
        do {
            let oldMetadata = try oldArchive.metadata()
            let newMetadata = try newArchive.metadata()
            var before = ContentIdentity(metadata: ContentIdentity.metadataHash(oldMetadata))
            var after = ContentIdentity(metadata: ContentIdentity.metadataHash(newMetadata))
            try newArchive.forEachTile { tile, bytes in
                after.add(tile, bytes)
                let same = try oldArchive.withTileBytes(at: tile) { old in old.elementsEqual(bytes) }
                guard same != true else { return }
                if same == nil { report.added += 1 } else { report.changed += 1 }
                patch.tiles.append(TilePatch.Tile(tile, bytes: Array(bytes)))
            }
            try oldArchive.forEachTile { tile, bytes in
                before.add(tile, bytes)
                if try !newArchive.containsTile(at: tile) { patch.deletions.append(tile) }
            }
            patch.before = before
            patch.after = after
            patch.content = (newArchive.content ?? oldArchive.content)?.description
            patch.metadataChanges = TilePatch.metadataChanges(from: oldMetadata, to: newMetadata)
            patch.newAggregateHash = newMetadata[TileMetadata.Key.aggregateTilesHash]
            if asMBTiles {
                // martin's hashes, computed as martin does.
                patch.aggregateHashBefore = try MBTilesAggregateHash.compute(oldArchive)
                patch.aggregateHashAfter = try MBTilesAggregateHash.compute(newArchive)
            } else {
                // What each version carries, so that the result carries exactly NEW's (the identities check the tiles).
                patch.aggregateHashBefore = oldMetadata[TileMetadata.Key.aggregateTilesHash]
                patch.aggregateHashAfter = newMetadata[TileMetadata.Key.aggregateTilesHash]
            }
            if asMBTiles {
                try patch.writeMBTiles(to: patchPath, overwrite: overwrite)
            } else {
                try patch.write(to: patchPath, overwrite: overwrite)
            }
        } catch {
            throw OperationError.wrapping(error, path: patchPath)
        }
        report.before = patch.before?.description ?? ""
        report.after = patch.after?.description ?? ""
        report.deleted = patch.deletions.count
        report.metadataChanges = patch.metadataChanges.count
        report.tileBytes = patch.tileBytes
        report.patchBytes = Int(FileSystem.stat(patchPath)?.st_size ?? 0)
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }
}
