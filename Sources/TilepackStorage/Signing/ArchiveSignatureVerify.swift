import Foundation
import TilepackCore

extension ArchiveSignature {
    /// Checks `archivePath` against its `.tpsig` and `key` (Specs/signing.md §8): the sidecar, the
    /// key's signature, the stored hashes against the signed root, the release, every tile, the
    /// metadata. Writes nothing.
    /// - Parameters:
    ///   - minimumRelease: the lowest release accepted (a replayed older one is refused).
    ///   - origin: the dataset the root must be of; `nil`: any.
    ///   - sidecarPath: the sidecar to read; `nil`: `ARCHIVE.tpsig` beside the archive.
    /// - Throws: ``SignatureError`` naming the key, the file or the tiles; `TileArchiveError` for an archive that cannot be read.
    public static func verify(
        archivePath: String, key: VerifierKey, minimumRelease: UInt64 = 0, origin: String? = nil, sidecarPath: String? = nil
    ) throws -> Report {
        let path = sidecarPath ?? SignatureSidecar.sidecarName(of: archivePath)
        if ExtractSignature.isExtractSignature(path: path) {
            return try verifyExtract(archivePath: archivePath, sidecarPath: path, key: key, minimumRelease: minimumRelease, origin: origin)
        }
        let (sidecar, root) = try openSidecar(path: path, key: key, minimumRelease: minimumRelease, origin: origin)
        let archive = try openTileArchive(path: archivePath, bundleAccess: .positionalReads)
        return try verifyTiles(of: archive, against: sidecar, root: root, sidecarName: path, key: key)
    }

    /// ``verify(archivePath:key:minimumRelease:origin:sidecarPath:)`` of an archive read by range
    /// (`RemoteArchive`) and its sidecar (`ARCHIVE.tpsig` beside it, read by range too).
    public static func verify(
        archive: any TileArchive, sidecar source: any ByteSource, key: VerifierKey, minimumRelease: UInt64 = 0, origin: String? = nil
    ) throws -> Report {
        let sidecar = try SignatureSidecar.read(source: source)
        let root = try checkSidecar(sidecar, path: source.name, key: key, minimumRelease: minimumRelease, origin: origin)
        return try verifyTiles(of: archive, against: sidecar, root: root, sidecarName: source.name, key: key)
    }

    /// Every tile of `archive` against the checked sidecar, then the metadata against the signed identity.
    static func verifyTiles(
        of archive: any TileArchive, against sidecar: SignatureSidecar, root: SignedRoot, sidecarName: String, key: VerifierKey
    ) throws -> Report {
        let leaves = try leaves(of: archive, path: archive.path)
        try compareTiles(leaves, with: sidecar, archive: archive.path)
        guard leaves.identity == root.identity else {
            throw SignatureError.metadata(archive: archive.path, signed: root.identity.description, actual: leaves.identity.description)
        }
        return Report(root: root, sidecar: sidecarName, key: key.description, tiles: leaves.ids.count)
    }

    /// Reads a sidecar and checks all of it but the tiles: the signature, the body, the stored
    /// hashes and locator against the signed root, the release and the origin.
    package static func openSidecar(
        path: String, key: VerifierKey, minimumRelease: UInt64, origin: String?
    ) throws(SignatureError) -> (SignatureSidecar, SignedRoot) {
        let sidecar = try SignatureSidecar.read(path: path)
        return (sidecar, try checkSidecar(sidecar, path: path, key: key, minimumRelease: minimumRelease, origin: origin))
    }

    /// The checks of ``openSidecar(path:key:minimumRelease:origin:)`` on a sidecar read.
    package static func checkSidecar(
        _ sidecar: SignatureSidecar, path: String, key: VerifierKey, minimumRelease: UInt64, origin: String?
    ) throws(SignatureError) -> SignedRoot {
        let root = try SignedRoot.open(sidecar.note, key: key, source: path)
        func fail(_ reason: String) -> SignatureError { .sidecar(path: path, reason: reason) }
        try checkRoot(root, treeSize: sidecar.tileIDs.count, minimumRelease: minimumRelease, origin: origin, path: path)
        let tree = MerkleTree(leaves: sidecar.storedLevels[0])
        guard tree.storedLevels == sidecar.storedLevels, tree.root == root.rootHash else {
            throw fail("its stored hashes do not give its signed root (the sidecar was rewritten or damaged)")
        }
        guard zip(sidecar.tileIDs, sidecar.tileIDs.dropFirst()).allSatisfy({ $0 < $1 }), sidecar.storedFences == sidecar.fences else {
            throw fail("its tile ids are not strictly increasing or its fences are not every 256th (a damaged locator)")
        }
        return root
    }

    /// The signed root's tree size against the sidecar's, its identity's tile count, its release
    /// against the lowest accepted, its origin against the expected one.
    package static func checkRoot(
        _ root: SignedRoot, treeSize: Int, minimumRelease: UInt64, origin: String?, path: String
    ) throws(SignatureError) {
        guard root.treeSize == UInt64(treeSize) else {
            throw .sidecar(path: path, reason: "its signed root is of \(root.treeSize) tiles, its tree of \(treeSize)")
        }
        guard root.identity.tileCount == root.treeSize else {
            throw .sidecar(path: path, reason: "its signed identity is of \(root.identity.tileCount) tiles, its tree of \(root.treeSize)")
        }
        guard root.release >= minimumRelease else { throw .olderRelease(path: path, release: root.release, minimum: minimumRelease) }
        if let origin, root.origin != origin { throw .otherOrigin(path: path, origin: root.origin, expected: origin) }
    }

    /// Each tile's leaf against the stored leaf at its tile id; the tiles that differ, are not
    /// signed, or are missing, named.
    package static func compareTiles(_ leaves: Leaves, with sidecar: SignatureSidecar, archive: String) throws(SignatureError) {
        var found = TileProblems()
        func note(_ id: UInt64, _ kind: SignatureError.TileProblem.Kind) { found.note(id, kind) }
        let stored = sidecar.storedLevels[0]
        var i = 0
        var j = 0
        while i < leaves.ids.count || j < sidecar.tileIDs.count {
            if j == sidecar.tileIDs.count || (i < leaves.ids.count && leaves.ids[i] < sidecar.tileIDs[j]) {
                note(leaves.ids[i], .notSigned)
                i += 1
            } else if i == leaves.ids.count || sidecar.tileIDs[j] < leaves.ids[i] {
                note(sidecar.tileIDs[j], .missing)
                j += 1
            } else {
                let same = leaves.hashes[32 * i..<32 * i + 32].elementsEqual(stored[32 * j..<32 * j + 32])
                if !same { note(leaves.ids[i], .bytesDiffer) }
                i += 1
                j += 1
            }
        }
        if found.count > 0 { throw .tiles(archive: archive, problems: found.named, count: found.count) }
    }
}
