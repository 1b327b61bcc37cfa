import Foundation
import TilepackCore

/// What ``MBTilesWriter/finish()`` wrote.
public struct MBTilesWriteReport: Hashable, Sendable {
    public var path: String
    /// Rows in `tiles` after the write.
    public var tileCount: Int
    /// Distinct stored blobs (the `images` rows of a deduplicated file; `tileCount` for flat).
    public var storedBlobCount: Int
    /// The `agg_tiles_hash` stored in the metadata; nil when none is (see
    /// ``MBTilesWriterOptions/aggregateTilesHash``).
    public var aggregateTilesHash: String?
    /// The metadata as written (derived keys and `agg_tiles_hash` included).
    public var metadata: TileMetadata
    /// Metadata warnings (errors stop the write instead).
    public var warnings: [MBTilesMetadataIssue]
}

/// Finishing a write: the metadata derived and checked, `agg_tiles_hash` and the content identity
/// settled, the transaction committed and a new file renamed into place.
extension MBTilesWriter {
    /// Derives and validates the metadata, stores `agg_tiles_hash` (when
    /// ``MBTilesWriterOptions/aggregateTilesHash`` asks, or an updated file carries one), commits, and (for a new
    /// file) fsyncs and renames it into place.
    /// - Throws: `invalidMetadata` listing every metadata error (nothing is written then: a new
    ///   file is discarded, an update rolled back), or the I/O and SQLite errors met.
    @discardableResult
    public func finish() throws(TileArchiveError) -> MBTilesWriteReport {
        if let failure {
            cancel()
            throw failure
        }
        guard !finished, let connection else {
            throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "the writer is already finished"))
        }
        do throws(TileArchiveError) {
            if schemaKind == .normalized {
                try connection.execute("DELETE FROM images WHERE tile_id NOT IN (SELECT tile_id FROM map WHERE tile_id IS NOT NULL)")
            }
            let issues = try checkedMetadataIssues(connection)
            try checkLimitsOfWrittenMetadata()
            let hash = try aggregateTilesHashToStore(connection)
            try settleHashesAndIdentity(hash: hash)
            try connection.replaceMetadata(metadata)
            try beforeCommit?(connection)
            let tileCount = if let provenTileCount { provenTileCount } else { try storedTileCount() }
            var blobCount = tileCount
            if schemaKind == .normalized { blobCount = Int(try connection.scalarInt("SELECT COUNT(*) FROM images") ?? 0) }
            try commitTransaction()
            if !isUpdate {
                // What a reader wants: a rollback journal (no WAL, so a read-only open needs no -shm).
                try connection.execute("PRAGMA journal_mode = DELETE")
            }
            close()
            if let atomicFile { try atomicFile.commit() }
            finished = true
            return MBTilesWriteReport(
                path: path, tileCount: tileCount, storedBlobCount: blobCount, aggregateTilesHash: hash,
                metadata: metadata, warnings: issues.filter { $0.severity == .warning })
        } catch {
            cancel()
            throw error
        }
    }

    /// The metadata's issues, with the metadata first derived from the tiles and checked against
    /// them (unless ``checksMetadataAgainstTiles`` is off); throws when one is an error.
    private func checkedMetadataIssues(_ connection: SQLiteConnection) throws(TileArchiveError) -> [MBTilesMetadataIssue] {
        let issues: [MBTilesMetadataIssue]
        if checksMetadataAgainstTiles {
            // Known from the writes when they came in order; otherwise asked of the table.
            var content =
                inOrder
                ? TileContentSummary(levels: writtenLevels)
                : summarizesByColumns
                    ? try TileContentSummary.queryByColumns(connection)
                    : try TileContentSummary.query(connection, distinct: countsDistinct)
            let sniff = try connection.prepare("SELECT tile_data FROM tiles WHERE tile_data IS NOT NULL LIMIT 1")
            if try sniff.step(), let bytes = sniff.bytes(0) { content.sniffedFormat = TileFormat.sniff(bytes) }
            sniff.reset()
            content.derive(into: &metadata, mode: options.derivation)
            issues = MBTilesMetadataValidator.validate(metadata, content: content)
        } else {
            issues = MBTilesMetadataValidator.validate(metadata)
        }
        let errors = issues.filter { $0.severity == .error }
        if !errors.isEmpty { throw Self.metadataError(path: path, errors) }
        return issues
    }

    /// Refuses metadata that readers would refuse once the keys the writer adds are in it
    /// (`agg_tiles_hash` adds 48 bytes).
    private func checkLimitsOfWrittenMetadata() throws(TileArchiveError) {
        var limited = metadata
        limited[TileMetadata.Key.aggregateTilesHash] = MBTilesAggregateHash.empty
        limited[TileMetadata.Key.hashAlgorithm] = TileMetadata.computedHashAlgorithm
        if runningIdentity != nil || contentIdentity != nil {
            limited[ContentIdentity.metadataKey] = ContentIdentity(tileCount: .max).description
        }
        if let violation = MetadataLimits.violation(limited) {
            throw TileArchiveError(path: path, fault: .invalidMetadata(violation))
        }
    }

    /// The `agg_tiles_hash` to store: the one computed while writing, the one known, or one
    /// computed now from every tile; nil when none is stored.
    private func aggregateTilesHashToStore(_ connection: SQLiteConnection) throws(TileArchiveError) -> String? {
        if let running = runningHash {
            runningHash = nil
            return MBTilesAggregateHash.hex(running.finalize())
        }
        guard storesHash else { return nil }
        if let known = knownAggregateTilesHash { return known }
        return try MBTilesAggregateHash.compute(connection)
    }

    /// Puts `hash`, the content identity and the hash algorithm into the metadata.
    private func settleHashesAndIdentity(hash: String?) throws(TileArchiveError) {
        metadata[TileMetadata.Key.aggregateTilesHash] = hash
        // A new file's sum holds when every write added a row: a tile written twice left
        // fewer rows than writes, and its first bytes in the sum.
        if var identity = runningIdentity, try UInt64(storedTileCount()) == identity.tileCount {
            identity.metadata = ContentIdentity.metadataHash(metadata)
            contentIdentity = identity
        }
        metadata[ContentIdentity.metadataKey] = contentIdentity?.description
        metadata[MBTilesIdentityStamp.key] = contentIdentity == nil ? nil : MBTilesIdentityStamp.stamp(counterAtBegin: counterAtBegin)
        // Which function made the hashes (martin's hash_algorithm): MD5 for agg_tiles_hash and
        // for the ids of a deduplicated file tilepack creates; a new file with no hash at all
        // names none (a source's fnv1a would describe hashes that are not there).
        if hash != nil || (!isUpdate && schemaKind == .normalized) {
            metadata[TileMetadata.Key.hashAlgorithm] = TileMetadata.computedHashAlgorithm
        } else if !isUpdate {
            metadata[TileMetadata.Key.hashAlgorithm] = nil
        }
    }
}
