import Foundation
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage

/// What applying a patch found and did.
public struct PatchOutcome: Sendable {
    /// The base's identity before the patch (`nil` when a martin patch gave no reason to compute it).
    public var before: ContentIdentity?
    /// The result's identity, checked against the patch's before it became visible (`nil`: unchecked).
    public var after: ContentIdentity?
    /// What could not be checked (a martin patch without hashes).
    public var warnings: [String] = []
    public var tilesWritten = 0
    public var tilesDeleted = 0
    public var metadataChanges = 0
    /// Whether the base's stored identity was trusted (the file provably unchanged since it was
    /// stored, by its SQLite file change counter) rather than computed from its tiles.
    public var usedStoredIdentity = false

    public init() {}
}

/// Applies a patch to an MBTiles file in place, in one SQLite transaction (Specs/updates.md §4).
///
/// The base's identity is the one it stores (`tilepack_content_identity`, kept by an earlier
/// patch, while its change counter proves it) or is computed, inside the write transaction; the changed tiles' old bytes are subtracted
/// from it, the new bytes as written are read back inside the transaction and added, and the
/// metadata as written is hashed: only when that equals the patch's "after" identity is the
/// transaction committed. A reader sees the old file or the new one; a kill leaves the old.
public enum MBTilesPatcher {
    /// - Parameter progress: told how far the patch is, in [0, 1); returning false stops it (the
    ///   transaction rolled back, the base as it was).
    public static func apply(_ patch: TilePatch, to path: String, progress: (@Sendable (Double) -> Bool)? = nil) throws(TilePatchError)
        -> PatchOutcome
    {
        func fail(_ fault: TilePatchError.Fault) -> TilePatchError { TilePatchError(path: path, fault: fault) }
        let changes = max(1, patch.deletions.count + patch.tiles.count)
        /// Half the progress is the base's check, half the changes written.
        func step(_ value: Double) throws(TileArchiveError) {
            if let progress, !progress(value) {
                throw TileArchiveError(
                    path: path, fault: .io(errno: ECANCELED, reason: "the patch was stopped; the file was left as it was"))
            }
        }
        var outcome = PatchOutcome()
        outcome.metadataChanges = patch.metadataChanges.count
        let (writer, reader) = try openWriter(for: patch, at: path)
        var remaining: ContentIdentity?
        let hasher = ContentIdentity.TileHasher()
        do {
            remaining = try checkBase(patch, writer: writer, reader: reader, hasher: hasher, outcome: &outcome, step: step)
        } catch let error as TilePatchError {
            writer.cancel()
            throw error
        } catch {
            writer.cancel()
            throw fail(.archive(asArchiveError(error, path: path)))
        }
        var mismatch: TilePatchError?
        do throws(TileArchiveError) {
            for (i, tile) in patch.deletions.enumerated() {
                if try writer.removeTile(at: tile) { outcome.tilesDeleted += 1 }
                if i % 64 == 63 { try step(0.5 + 0.5 * Double(i + 1) / Double(changes)) }
            }
            for (i, tile) in patch.tiles.enumerated() {
                try writer.write(tile.bytes, at: tile.coordinate)
                let done = patch.deletions.count + i + 1
                if done % 64 == 0 { try step(0.5 + 0.5 * Double(done) / Double(changes)) }
            }
            outcome.tilesWritten = patch.tiles.count
            patch.apply(to: &writer.metadata)
            if remaining != nil {
                writer.contentIdentity = patch.after
                writer.knownAggregateTilesHash = patch.aggregateHashAfter
                // The after identity, checked before the commit, proves the tiles and metadata are
                // the new version's: no pass over the table to check them against each other.
                writer.checksMetadataAgainstTiles = patch.after == nil
            }
            writer.beforeCommit = { (connection) throws(TileArchiveError) in
                do {
                    outcome.after = try checkResult(patch, remaining: remaining, in: connection, hasher: hasher, path: path)
                } catch let error as TilePatchError {
                    mismatch = error
                    throw TileArchiveError(path: path, fault: .corrupt("the patched content is not the patch's"))
                } catch {
                    throw asArchiveError(error, path: path)
                }
                if let after = outcome.after { writer.provenTileCount = Int(exactly: after.tileCount) }
            }
            try writer.finish()
        } catch {
            writer.cancel()
            if let mismatch { throw mismatch }
            throw fail(.archive(error))
        }
        return outcome
    }

    /// The write transaction (BEGIN IMMEDIATE), opened first: the base is checked, and the
    /// replaced tiles' old bytes read, as the patch will change it, with no writer between;
    /// readers go on reading the old version meanwhile. With it, the base as the writer's own
    /// checks opened it, before its transaction began.
    private static func openWriter(for patch: TilePatch, at path: String) throws(TilePatchError) -> (MBTilesWriter, MBTilesArchive) {
        func fail(_ fault: TilePatchError.Fault) -> TilePatchError { TilePatchError(path: path, fault: fault) }
        // A file with no write bit is meant to stay as it is, even for root (who may write it anyway).
        guard FileManager.default.isWritableFile(atPath: path), (FileSystem.stat(path)?.st_mode ?? 0) & 0o222 != 0,
            FileManager.default.isWritableFile(atPath: FileSystem.split(path).0.isEmpty ? "." : FileSystem.split(path).0)
        else {
            throw fail(
                .archive(
                    TileArchiveError(
                        path: path,
                        fault: .io(errno: EACCES, reason: "the file or its folder is read-only: an MBTiles file is patched in place"))))
        }
        let writer: MBTilesWriter
        do throws(TileArchiveError) {
            writer = try MBTilesWriter(updating: path, options: MBTilesWriterOptions(derivation: .none, aggregateTilesHash: false))
        } catch {
            throw fail(.archive(error))
        }
        guard let reader = writer.original else {
            writer.cancel()
            throw fail(.archive(TileArchiveError(path: path, fault: .io(errno: 0, reason: "the writer is closed"))))
        }
        do { try patch.requireTileType(of: reader) } catch {
            writer.cancel()
            throw error
        }
        return (writer, reader)
    }

    /// Checks that the file is the patch's base (its stored identity, while the file's change
    /// counter proves it, else one computed; martin's agg_tiles_hash for a patch without identities) and takes the
    /// changed and deleted tiles' old bytes out of its identity: what is left of it, or `nil`
    /// when the patch carries no identity.
    private static func checkBase(
        _ patch: TilePatch, writer: MBTilesWriter, reader: MBTilesArchive, hasher: ContentIdentity.TileHasher,
        outcome: inout PatchOutcome, step: (Double) throws(TileArchiveError) -> Void
    ) throws -> ContentIdentity? {
        let path = writer.path
        if patch.before != nil {
            let metadata = writer.metadata
            var base: ContentIdentity
            // Trusted only while the file is provably the one it was stored in (its change
            // counter). The table is not counted: that reads its whole index (at 1,000,000 tiles,
            // 2,100 page reads beside the 10,600 of a 10,000-tile change), and any SQLite write
            // since, a row added or deleted included, has moved the counter. (The result's check
            // below cannot catch a stale identity: it checks the changed tiles against it.)
            if let stored = metadata[ContentIdentity.metadataKey].flatMap(ContentIdentity.init),
                MBTilesIdentityStamp.proves(metadata[MBTilesIdentityStamp.key], counterNow: writer.counterAtBegin)
            {
                outcome.usedStoredIdentity = true
                base = stored
                base.metadata = ContentIdentity.metadataHash(metadata)
            } else {
                base = try ContentIdentity.compute(reader)
            }
            try patch.requireBase(.identity(base), path: path, metadata: metadata)
            try step(0.5)
            outcome.before = base
            // What the changed and deleted tiles contribute now comes out.
            for tile in patch.deletions {
                _ = try writer.withStoredTile(at: tile) { base.remove(tile, $0, using: hasher) }
            }
            for tile in patch.tiles {
                _ = try writer.withStoredTile(at: tile.coordinate) { base.remove(tile.coordinate, $0, using: hasher) }
            }
            return base
        } else if patch.aggregateHashBefore != nil {
            let found = try writer.withConnection { (connection) throws(TileArchiveError) in
                try MBTilesAggregateHash.compute(connection)
            }
            try patch.requireBase(.aggregateHash(found), path: path)
        } else {
            outcome.warnings.append(
                "the patch carries no identity and no agg_tiles_hash_before_apply/after_apply (martin's older diff): applied, but nothing could be checked"
            )
        }
        return nil
    }

    /// Inside the write transaction, before its commit: the result's identity (what is left of the
    /// base's, `remaining`, with the changed tiles as written read back, and the metadata as
    /// written), or martin's agg_tiles_hash, checked against the patch's target; the identity when
    /// it was checked by one.
    private static func checkResult(
        _ patch: TilePatch, remaining: ContentIdentity?, in connection: SQLiteConnection, hasher: ContentIdentity.TileHasher,
        path: String
    ) throws -> ContentIdentity? {
        if var result = remaining, patch.after != nil {
            let select = try connection.prepare("SELECT tile_data FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3")
            for tile in patch.tiles {
                select.bind(1, tile.coordinate.zoom)
                select.bind(2, tile.coordinate.x)
                select.bind(3, tile.coordinate.row(in: .tms))
                if try select.step(), let bytes = select.bytes(0) { result.add(tile.coordinate, bytes, using: hasher) }
                select.reset()
            }
            let written = TileMetadata(try MBTilesArchive.readMetadataRows(connection, path: path, strict: false))
            result.metadata = ContentIdentity.metadataHash(written)
            try patch.requireTarget(.identity(result), path: path)
            return result
        } else if patch.aggregateHashAfter != nil {
            try patch.requireTarget(.aggregateHash(try MBTilesAggregateHash.compute(connection)), path: path)
        }
        return nil
    }

    static func asArchiveError(_ error: any Error, path: String) -> TileArchiveError {
        (error as? TileArchiveError) ?? TileArchiveError(path: path, fault: .io(errno: 0, reason: "\(error)"))
    }
}
