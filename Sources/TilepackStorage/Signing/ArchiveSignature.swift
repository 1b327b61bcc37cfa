import Foundation
import TilepackCore

/// Signing an archive's tiles and checking them against a signed root (Specs/signing.md): the
/// tree of every tile, the `.tpsig` sidecar beside the archive, and the checks of §8.
public enum ArchiveSignature {
    /// What a signing or a verification established.
    public struct Report: Sendable, Equatable {
        /// The signed root (checked, for a verification).
        public var root: SignedRoot
        /// The sidecar written or read.
        public var sidecar: String
        /// The key that signed it (`name+keyid`).
        public var key: String
        /// The tiles hashed.
        public var tiles: Int
        /// Whether the sidecar is an extract's (the source's signed root and a proof of the
        /// extract's tiles, Specs/signing.md §7.1): the tiles are checked, the metadata is the extract's own.
        public var extract = false
    }

    /// The leaves of an archive: its tiles' ids and leaf hashes in leaf order, and its identity.
    package struct Leaves {
        package var ids: [UInt64] = []
        package var hashes: [UInt8] = []
        package var identity: ContentIdentity
    }

    /// One pass over `archive`'s tiles: each tile's hash `T` gives its leaf and its part of the
    /// content identity (Specs/signing.md §3); then the leaves sorted by tile id.
    package static func leaves(of archive: any TileArchive, path: String) throws -> Leaves {
        var result = Leaves(identity: ContentIdentity(metadata: ContentIdentity.metadataHash(try archive.metadata())))
        let tileHasher = ContentIdentity.TileHasher()
        let treeHasher = TreeHasher()
        var sorted = true
        var tileHash: (UInt128, UInt128) = (0, 0)
        var leaf: (UInt128, UInt128) = (0, 0)
        try archive.forEachTile { tile, bytes in
            withUnsafeMutableBytes(of: &tileHash) { t in
                tileHasher.fullHash(tile, bytes, into: t.baseAddress!)
                withUnsafeMutableBytes(of: &leaf) { treeHasher.leaf(t.baseAddress!, into: $0.baseAddress!) }
            }
            result.identity.tiles &+= UInt128(littleEndian: tileHash.0)
            result.identity.tileCount &+= 1
            let id = PMTilesFormat.tileID(of: tile)
            if let last = result.ids.last, last >= id { sorted = false }
            result.ids.append(id)
            withUnsafeBytes(of: &leaf) { result.hashes.append(contentsOf: $0) }
        }
        guard UInt64(result.ids.count) < SignatureSidecar.maximumTreeSize else {
            throw SignatureError.cannotSign(path: path, reason: "\(result.ids.count) tiles: a signed tree holds fewer than 2^32")
        }
        if !sorted { result.sortByTileID(path: path) }
        return result
    }

    /// Signs `archivePath`'s tiles with `key` as release `release` and writes `ARCHIVE.tpsig`
    /// beside it (written beside that and renamed into place, replacing an older one).
    /// - Parameters:
    ///   - origin: the dataset's name; `nil`: `<key name>/<archive file name without extension>`.
    ///   - time: seconds since 1970 (the command passes `SOURCE_DATE_EPOCH` or now).
    public static func sign(
        archivePath: String, key: SigningKey, release: UInt64, origin: String? = nil, time: Int64
    ) throws -> Report {
        let origin = origin ?? defaultOrigin(key: key, archivePath: archivePath)
        guard !origin.isEmpty, !origin.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw SignatureError.cannotSign(path: archivePath, reason: "the origin \"\(origin)\" is empty or holds a control character")
        }
        let archive = try openTileArchive(path: archivePath, bundleAccess: .positionalReads)
        let leaves = try leaves(of: archive, path: archivePath)
        let tree = MerkleTree(leaves: leaves.hashes)
        let root = SignedRoot(
            origin: origin, treeSize: UInt64(tree.size), rootHash: tree.root, identity: leaves.identity, release: release,
            time: SignedRoot.time(seconds: time))
        let note = Array(root.signed(by: key).utf8)
        guard note.count <= SignedRoot.maximumNoteLength else {
            throw SignatureError.cannotSign(
                path: archivePath, reason: "the signed root is over \(SignedRoot.maximumNoteLength) bytes (a long origin)")
        }
        let path = SignatureSidecar.sidecarName(of: archivePath)
        let file = try AtomicFile(destination: path, overwrite: true)
        _ = try SignatureSidecar.write(note: note, tileIDs: leaves.ids, leaves: leaves.hashes, levels: tree.levels, to: file.temporaryPath)
        try file.commit()
        return Report(root: root, sidecar: path, key: key.verifier.description, tiles: tree.size)
    }

    /// Writes a signature file beside `path` and renames it into place, replacing an older one.
    package static func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        let file = try AtomicFile(destination: path, overwrite: true)
        do {
            try Data(bytes).write(to: URL(fileURLWithPath: file.temporaryPath))
        } catch {
            throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "cannot write the signature: \(error.localizedDescription)"))
        }
        try file.commit()
    }

    /// `<key name>/<file name without its extension>`.
    public static func defaultOrigin(key: SigningKey, archivePath: String) -> String {
        let name = FileSystem.split(archivePath).name
        let stem = name.split(separator: ".", omittingEmptySubsequences: false).dropLast().joined(separator: ".")
        return "\(key.name)/\(stem.isEmpty ? name : stem)"
    }
}

extension ArchiveSignature.Leaves {
    /// Sorts the leaves by tile id (a bundle or MBTiles gives its tiles in (zoom, x, y) order).
    mutating func sortByTileID(path: String) {
        let order = ids.indices.sorted { ids[$0] < ids[$1] }
        let oldHashes = hashes
        ids = order.map { ids[$0] }
        oldHashes.withUnsafeBytes { from in
            hashes.withUnsafeMutableBytes { to in
                for (i, j) in order.enumerated() {
                    (to.baseAddress! + 32 * i).copyMemory(from: from.baseAddress! + 32 * j, byteCount: 32)
                }
            }
        }
    }
}
