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

    /// Throws `wrongBase` (naming both versions, and saying so when the archive is already the
    /// patch's target) when `evidence` shows the archive at `path` is not this patch's base.
    package func requireBase(_ evidence: ArchiveEvidence, path: String) throws(TilePatchError) {
        let match = match(evidence)
        guard match.isBase == false else { return }
        let applied = match.isTarget == true ? " (the version this patch makes: it was applied already)" : ""
        throw TilePatchError(
            path: path, fault: .wrongBase(expected: expected(evidence, version: \.before), found: Self.describe(evidence) + applied))
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
