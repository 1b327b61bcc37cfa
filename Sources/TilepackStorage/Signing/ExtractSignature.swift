import Foundation
import TilepackCore

/// The `.tpsig` of an extract (Specs/signing.md §7.1): the source's signed root, the extract's
/// tiles' ids and leaf hashes, and the multi-leaf proof (§6) that those leaves are leaves of the
/// signed tree. A receiver with only the extract and the publisher's key checks that every tile
/// is the publisher's tile at that coordinate, in that release.
package struct ExtractSignature: Sendable, Equatable {
    /// The source's signed note, as its sidecar holds it.
    package var note: [UInt8]
    /// The extract's tiles' ids, ascending.
    package var tileIDs: [UInt64]
    /// Their leaf hashes, 32 bytes each, in the same order.
    package var leaves: [UInt8]
    /// The proof of their leaf indices in the source's tree.
    package var proof: TileProof

    package static let magic = Array("TPSIGX01".utf8)

    package init(note: [UInt8], tileIDs: [UInt64], leaves: [UInt8], proof: TileProof) {
        self.note = note
        self.tileIDs = tileIDs
        self.leaves = leaves
        self.proof = proof
    }

    package func encoded() -> [UInt8] {
        var out = Self.magic
        func put32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) } }
        func put64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) } }
        put32(UInt32(note.count))
        put32(0)
        put64(UInt64(tileIDs.count))
        put64(0)
        out += note
        out += [UInt8](repeating: 0, count: (8 - note.count % 8) % 8)
        for id in tileIDs { put64(id) }
        out += leaves
        out += proof.encoded()
        return out
    }

    /// Whether the file at `path` starts with this form's magic (else it is an archive's sidecar).
    package static func isExtractSignature(path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        return (try? handle.read(upToCount: 8)).map { [UInt8]($0) == magic } ?? false
    }

    /// Reads the file at `path`, checking every count against its length before reading on.
    package static func read(path: String) throws(SignatureError) -> ExtractSignature {
        func fail(_ reason: String) -> SignatureError { .sidecar(path: path, reason: reason) }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw fail(errno == ENOENT ? "missing: the extract is not signed" : String(cString: strerror(errno)))
        }
        defer { try? handle.close() }
        let length = Int((try? handle.seekToEnd()) ?? 0)
        try? handle.seek(toOffset: 0)
        let header = [UInt8]((try? handle.read(upToCount: SignatureSidecar.headerLength)) ?? Data())
        guard header.count == SignatureSidecar.headerLength, header.starts(with: magic) else {
            throw fail("not an extract's signature (no TPSIGX01 magic, or under 32 bytes)")
        }
        let words = SignedTreeReader.u64s(header, from: 8, count: 1)[0]
        let noteLength = Int(words & 0xffff_ffff)
        let flags = words >> 32
        let count = SignedTreeReader.u64s(header, from: 16, count: 2)
        guard (1...SignedRoot.maximumNoteLength).contains(noteLength), flags == 0, count[1] == 0, count[0] >= 1, count[0] < SignatureSidecar.maximumTreeSize else {
            throw fail("its header is malformed (a signed root of \(noteLength) bytes, \(count[0]) tiles, flags \(flags))")
        }
        let k = Int(count[0])
        let padded = (noteLength + 7) / 8 * 8
        let fixed = SignatureSidecar.headerLength + padded + 40 * k
        guard length >= fixed + 24 + 8 * k else { throw fail("truncated: \(length) bytes, \(k) tiles and their proof need over \(fixed + 24 + 8 * k)") }
        guard length - fixed <= 24 + 8 * k + 32 * 64 * (k + 1) else { throw fail("its proof is longer than a tree of 2^32 leaves needs") }
        let bytes = [UInt8]((try? handle.read(upToCount: length - SignatureSidecar.headerLength)) ?? Data())
        guard bytes.count == length - SignatureSidecar.headerLength else { throw fail("cannot be read whole (it changed while read)") }
        guard bytes[noteLength..<padded].allSatisfy({ $0 == 0 }) else { throw fail("the padding after its signed root is not zero bytes") }
        let ids = SignedTreeReader.u64s(bytes, from: padded, count: k)
        let leaves = Array(bytes[(padded + 8 * k)..<(padded + 40 * k)])
        let proof = try TileProof(decoding: Array(bytes[(padded + 40 * k)...]), source: path)
        guard proof.indices.count == k else { throw fail("its proof is of \(proof.indices.count) leaves, not its \(k) tiles") }
        guard zip(ids, ids.dropFirst()).allSatisfy({ $0 < $1 }) else { throw fail("its tile ids are not strictly increasing") }
        return ExtractSignature(note: Array(bytes[0..<noteLength]), tileIDs: ids, leaves: leaves, proof: proof)
    }

    /// The signed root, checked with `key`, and the listed leaves against it through the proof.
    package func checkedRoot(key: VerifierKey, minimumRelease: UInt64, origin: String?, path: String) throws(SignatureError) -> SignedRoot {
        let root = try SignedRoot.open(note, key: key, source: path)
        try ArchiveSignature.checkRoot(root, treeSize: Int(proof.treeSize), minimumRelease: minimumRelease, origin: origin, path: path)
        let listed = stride(from: 0, to: leaves.count, by: 32).map { Array(leaves[$0..<$0 + 32]) }
        guard MerkleTree.root(size: Int(proof.treeSize), indices: proof.indices, leaves: listed, proof: proof.hashes) == root.rootHash else {
            throw .sidecar(path: path, reason: "its leaves and proof do not give its signed root (rewritten or damaged)")
        }
        return root
    }
}

extension ArchiveSignature {
    /// Checks an extract against its `.tpsig` (Specs/signing.md §7.1): the key's signature of the
    /// source's root, the listed leaves through the proof, then every tile of the extract against
    /// the listed leaf at its tile id (named: differs, not signed, missing). The extract's
    /// metadata is its own (bounds, zooms): not covered.
    static func verifyExtract(archivePath: String, sidecarPath path: String, key: VerifierKey, minimumRelease: UInt64, origin: String?) throws -> Report {
        let signature = try ExtractSignature.read(path: path)
        let root = try signature.checkedRoot(key: key, minimumRelease: minimumRelease, origin: origin, path: path)
        let archive = try openTileArchive(path: archivePath, bundleAccess: .positionalReads)
        let leaves = try leaves(of: archive, path: archivePath)
        let listed = SignatureSidecar(note: signature.note, tileIDs: signature.tileIDs, storedLevels: [signature.leaves])
        try compareTiles(leaves, with: listed, archive: archivePath)
        return Report(root: root, sidecar: path, key: key.description, tiles: leaves.ids.count, extract: true)
    }
}
