import TilepackCore

/// A proof that some tiles are leaves of a signed tree (Specs/signing.md §6): the leaf indices
/// and the hashes of every maximal subtree that holds none of them, left to right. For one tile it
/// is RFC 6962's audit path; for a region, the minimal multi-leaf proof.
public struct TileProof: Sendable, Equatable {
    /// The tree's size.
    public var treeSize: UInt64
    /// The proven leaves' indices, strictly increasing.
    public var indices: [Int]
    /// The hashes, 32 bytes each.
    public var hashes: [[UInt8]]

    static let magic = Array("TPPROOF1".utf8)

    /// The proof of the leaves at `indices` (sorted, distinct, below the tree's size) of `tree`.
    package init(tree: MerkleTree, indices: [Int]) {
        self.treeSize = UInt64(tree.size)
        self.indices = indices
        self.hashes = tree.proof(for: indices)
    }

    public init(treeSize: UInt64, indices: [Int], hashes: [[UInt8]]) {
        self.treeSize = treeSize
        self.indices = indices
        self.hashes = hashes
    }

    /// The encoded proof (§6's table).
    public func encoded() -> [UInt8] {
        var out = Self.magic
        func put(_ value: some FixedWidthInteger) { withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0) } }
        put(treeSize)
        put(UInt32(indices.count))
        for index in indices { put(UInt64(index)) }
        put(UInt32(hashes.count))
        for hash in hashes { out += hash }
        return out
    }

    /// Reads an encoded proof, checking every count against the bytes there are; `source` names it.
    public init(decoding bytes: [UInt8], source: String) throws(SignatureError) {
        func fail(_ reason: String) -> SignatureError { .sidecar(path: source, reason: "the proof is \(reason)") }
        var at = 8
        func read(_ width: Int) throws(SignatureError) -> UInt64 {
            guard at + width <= bytes.count else { throw fail("truncated: \(bytes.count) bytes end inside it") }
            defer { at += width }
            return (0..<width).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
        }
        guard bytes.starts(with: Self.magic) else { throw fail("not a tilepack proof (no TPPROOF1 magic)") }
        treeSize = try read(8)
        let count = try read(4)
        guard count >= 1, count <= min(treeSize, UInt64(bytes.count / 8)) else { throw fail("of \(count) leaves in a tree of \(treeSize)") }
        indices = []
        for _ in 0..<count {
            let index = try read(8)
            guard index < treeSize, indices.last.map({ UInt64($0) < index }) ?? true else {
                throw fail("malformed: its leaf indices are not increasing or not below the tree's size")
            }
            indices.append(Int(index))
        }
        let hashCount = Int(try read(4))
        guard bytes.count - at == 32 * hashCount else {
            throw fail(bytes.count - at < 32 * hashCount ? "truncated: \(hashCount) hashes need \(32 * hashCount) bytes, \(bytes.count - at) remain" : "followed by \(bytes.count - at - 32 * hashCount) bytes")
        }
        hashes = (0..<hashCount).map { Array(bytes[at + 32 * $0..<at + 32 * $0 + 32]) }
    }

    /// Checks that `tiles` (in leaf order: ascending tile id, one for each of ``indices``) are the
    /// signed leaves of `root`; `source` names the proof in errors.
    public func verify(tiles: [(TileCoordinate, [UInt8])], root: SignedRoot, source: String) throws(SignatureError) {
        guard treeSize == root.treeSize, tiles.count == indices.count else {
            throw .sidecar(path: source, reason: "the proof is of \(indices.count) leaves of a tree of \(treeSize), not of the \(tiles.count) tiles given in the signed tree of \(root.treeSize)")
        }
        let tileHasher = ContentIdentity.TileHasher()
        let treeHasher = TreeHasher()
        let leaves = tiles.map { tile, bytes in bytes.withUnsafeBytes { treeHasher.leaf(tileHasher.fullHash(tile, $0)) } }
        guard let computed = MerkleTree.root(size: Int(treeSize), indices: indices, leaves: leaves, proof: hashes) else {
            throw .sidecar(path: source, reason: "the proof has \(hashes.count) hashes, not the number its \(indices.count) leaves in a tree of \(treeSize) need (truncated or padded)")
        }
        guard computed == root.rootHash else {
            throw .sidecar(path: source, reason: "the tiles and the proof do not give the signed root (a tile or the proof was altered)")
        }
    }
}
