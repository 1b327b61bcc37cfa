import TilepackCore
import TilepackStorage

/// What is known of an archive when a patch checks it (Specs/updates.md §4, item 2).
package enum ArchiveEvidence: Sendable {
    /// Its content identity: stored in an MBTiles file, its tile hash index's, or computed from
    /// its tiles and metadata.
    case identity(ContentIdentity)
    /// Its tile count alone, known before any tile is read: it can refute a base, never prove one.
    case tileCount(Int)
    /// martin's `agg_tiles_hash` of its tiles (a martin patch carries no identity).
    case aggregateHash(String)
}

/// What an archive is to a patch, as far as the evidence and the patch can tell: `nil` where the
/// patch carries nothing to compare it with (martin's older diff: no identity, no hashes).
package struct PatchVersionMatch: Sendable, Equatable {
    /// Whether it is the version the patch was made from.
    package var isBase: Bool?
    /// Whether it is the version the patch makes (then the patch was applied already).
    package var isTarget: Bool?

    package init(isBase: Bool?, isTarget: Bool?) {
        self.isBase = isBase
        self.isTarget = isTarget
    }
}

extension TilePatch {
    /// The one decision whether an archive is this patch's base, and whether it is already its
    /// target. Every check of a base or a result asks it: an MBTiles file patched in place (its
    /// stored or computed identity, or martin's `agg_tiles_hash`), a bundle or PMTiles rewritten
    /// (its tile count and its tile hash index's identity before a tile is read, then the
    /// identities its tile pass tallies).
    package func match(_ evidence: ArchiveEvidence) -> PatchVersionMatch {
        switch evidence {
        case .identity(let found):
            PatchVersionMatch(isBase: before.map { $0 == found }, isTarget: after.map { $0 == found })
        case .tileCount(let count):
            // Equal counts prove nothing: only a differing one is an answer.
            PatchVersionMatch(
                isBase: before.flatMap { $0.tileCount == UInt64(count) ? nil : false },
                isTarget: after.flatMap { $0.tileCount == UInt64(count) ? nil : false })
        case .aggregateHash(let found):
            PatchVersionMatch(isBase: aggregateHashBefore.map { $0 == found }, isTarget: aggregateHashAfter.map { $0 == found })
        }
    }

    /// Throws when `evidence` shows the archive at `path` is not this patch's base: `alreadyApplied`
    /// when it is the version the patch makes, `onlyMetadataDiffers` when its tiles are the base's
    /// or the target's and only its metadata (`metadata`, as read, names the keys where it can) is
    /// not, else `wrongBase` naming both versions.
    package func requireBase(_ evidence: ArchiveEvidence, path: String, metadata: TileMetadata? = nil) throws(TilePatchError) {
        let match = match(evidence)
        guard match.isBase == false else { return }
        if match.isTarget == true { throw TilePatchError(path: path, fault: .alreadyApplied(version: Self.describe(evidence))) }
        if case .identity(let found) = evidence {
            for (version, name) in [(before, "base"), (after, "target")] {
                guard let version, version.tileCount == found.tileCount, version.tiles == found.tiles else { continue }
                throw TilePatchError(
                    path: path, fault: .onlyMetadataDiffers(version: name, keys: differingKeys(metadata, fromTarget: name == "target")))
            }
        }
        throw TilePatchError(
            path: path, fault: .wrongBase(expected: expected(evidence, version: \.before), found: Self.describe(evidence)))
    }

    /// The keys where `metadata` is known to differ from the version whose tiles it has: the
    /// target's, the keys the patch sets (or deletes) to another value than `metadata` holds; the
    /// base's, the keys whose change the patch records but `metadata` already holds (a patch
    /// carries its versions' metadata as a hash and the changes alone, so other keys go unnamed).
    private func differingKeys(_ metadata: TileMetadata?, fromTarget: Bool) -> [String] {
        guard let metadata else { return [] }
        return metadataChanges.filter { ContentIdentity.derivedKeys.contains($0.key) == false }.compactMap { change in
            (metadata[change.key] == change.value) != fromTarget ? change.key : nil
        }
    }

    /// Throws `wrongTileType` when `archive`'s tiles are of another type than the patch's.
    package func requireTileType(of archive: any TileArchive) throws(TilePatchError) {
        guard let expected = content, let found = archive.content?.description, expected != found else { return }
        throw TilePatchError(path: archive.path, fault: .wrongTileType(patch: expected, base: found))
    }

    /// Throws `resultMismatch` when `evidence` shows the result written at `path` is not the
    /// version this patch makes.
    package func requireTarget(_ evidence: ArchiveEvidence, path: String) throws(TilePatchError) {
        guard match(evidence).isTarget == false else { return }
        throw TilePatchError(
            path: path, fault: .resultMismatch(expected: expected(evidence, version: \.after), found: Self.describe(evidence)))
    }

    /// The version the patch names, as `evidence` is compared with it.
    private func expected(_ evidence: ArchiveEvidence, version: KeyPath<TilePatch, ContentIdentity?>) -> String {
        if case .aggregateHash = evidence {
            return "agg_tiles_hash \((version == \.before ? aggregateHashBefore : aggregateHashAfter) ?? "")"
        }
        return self[keyPath: version]?.description ?? ""
    }

    private static func describe(_ evidence: ArchiveEvidence) -> String {
        switch evidence {
        case .identity(let identity): identity.description
        case .tileCount(let count): "one of \(count) tiles"
        case .aggregateHash(let hash): "agg_tiles_hash \(hash)"
        }
    }
}
