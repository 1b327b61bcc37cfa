internal import TilepackChecksum

/// The Merkle tree of a signed archive (Specs/signing.md §3): RFC 6962's tree hash over leaf
/// hashes, with every node of the tree kept by level, so that the root, the sidecar's levels
/// (§5: every level) and any proof come from one build.
///
/// Hashes are 32 bytes, kept in flat arrays: `levels[l]` holds the ⌈n/2^l⌉ nodes of level `l`,
/// node `j` being `MTH(D[j·2^l : min((j+1)·2^l, n)])` (the last one, on the tree's right edge,
/// may hold fewer leaves); the top level holds the root alone.
package struct MerkleTree: Sendable {
    /// The number of leaves.
    package let size: Int
    /// Every level's nodes, level 0 (the leaves) first, the root's level last.
    package let levels: [[UInt8]]

    /// The levels a reader folds at once to check a group of 256 stored hashes against the
    /// level above (``SignedTreeReader/checkedHash(level:index:)``).
    package static let tileHeight = 8

    /// Builds the tree of `leaves` (32 bytes each, in leaf order).
    package init(leaves: [UInt8]) {
        precondition(leaves.count % 32 == 0)
        size = leaves.count / 32
        var levels = [leaves]
        while levels[levels.count - 1].count > 32 {
            levels.append(Self.parents(of: levels[levels.count - 1]))
        }
        self.levels = levels
    }

    /// The level above `below` (32-byte nodes): each pair joined with `node`, a last node
    /// without a pair carried up as it is (RFC 6962: a subtree of one part is that part).
    package static func parents(of below: [UInt8]) -> [UInt8] {
        let pairs = below.count / 64
        let carried = below.count % 64 != 0
        let hasher = TreeHasher()
        var level = [UInt8](repeating: 0, count: 32 * (pairs + (carried ? 1 : 0)))
        below.withUnsafeBytes { from in
            level.withUnsafeMutableBytes { to in
                for j in 0..<pairs {
                    hasher.node(UnsafeRawBufferPointer(rebasing: from[64 * j..<64 * j + 64]), into: to.baseAddress! + 32 * j)
                }
                if carried { (to.baseAddress! + 32 * pairs).copyMemory(from: from.baseAddress! + 64 * pairs, byteCount: 32) }
            }
        }
        return level
    }

    /// The node at `level`, `index`.
    package func node(level: Int, index: Int) -> [UInt8] { Array(levels[level][32 * index..<32 * index + 32]) }

    /// RFC 6962's `MTH(D[a:b])` (`a` aligned as every subtree of the tree is).
    package func hash(_ a: Int, _ b: Int) -> [UInt8] {
        let count = b - a
        if count == 0 { return Digest.hash(.sha256, [UInt8]()) }
        let level = Self.levelOf(count: count)
        if a & ((1 << level) - 1) == 0, b == min(a + (1 << level), size) { return node(level: level, index: a >> level) }
        let k = 1 << (Int.bitWidth - 1 - (count - 1).leadingZeroBitCount)
        return TreeHasher().node(hash(a, a + k), hash(a + k, b))
    }

    /// The level of a node over `count` leaves: ⌈log2 count⌉.
    package static func levelOf(count: Int) -> Int { count <= 1 ? 0 : Int.bitWidth - (count - 1).leadingZeroBitCount }

    /// The root: `MTH` of every leaf.
    package var root: [UInt8] { hash(0, size) }

    /// The levels the sidecar stores: every level, the leaves first, the root last.
    package var storedLevels: [[UInt8]] { levels }

    /// The number of levels of a tree of `size` leaves (one for 0 or 1 leaf).
    package static func levelCount(size: Int) -> Int { levelOf(count: size) + 1 }

    /// The number of nodes of level `level` of a tree of `size` leaves: ⌈size/2^level⌉.
    package static func nodeCount(size: Int, level: Int) -> Int { (size + (1 << level) - 1) >> level }

    /// The proof of the leaves at `indices` (sorted, distinct, each below ``size``): the hashes of
    /// every maximal subtree that holds none of them, left to right (Specs/signing.md §6).
    package func proof(for indices: [Int]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        func prove(_ a: Int, _ b: Int, _ range: Range<Int>) {
            // `range`: the positions in `indices` whose leaves lie in [a, b).
            if range.isEmpty {
                out.append(hash(a, b))
                return
            }
            if b - a == 1 { return }
            let k = 1 << (Int.bitWidth - 1 - (b - a - 1).leadingZeroBitCount)
            let split = indices[range].firstIndex { $0 >= a + k } ?? range.upperBound
            prove(a, a + k, range.lowerBound..<split)
            prove(a + k, b, split..<range.upperBound)
        }
        if size > 0 { prove(0, size, 0..<indices.count) }
        return out
    }

    /// The root that `proof` and the leaves at `indices` (their leaf hashes, in the same order)
    /// give for a tree of `size` leaves; `nil` when the proof has too few hashes or some left over.
    package static func root(size: Int, indices: [Int], leaves: [[UInt8]], proof: [[UInt8]]) -> [UInt8]? {
        guard size > 0, !indices.isEmpty, indices.count == leaves.count, indices.last! < size else { return nil }
        var next = 0
        let hasher = TreeHasher()
        func compute(_ a: Int, _ b: Int, _ range: Range<Int>) -> [UInt8]? {
            if range.isEmpty {
                guard next < proof.count, proof[next].count == 32 else { return nil }
                next += 1
                return proof[next - 1]
            }
            if b - a == 1 { return leaves[range.lowerBound] }
            let k = 1 << (Int.bitWidth - 1 - (b - a - 1).leadingZeroBitCount)
            let split = indices[range].firstIndex { $0 >= a + k } ?? range.upperBound
            guard let left = compute(a, a + k, range.lowerBound..<split), let right = compute(a + k, b, split..<range.upperBound) else {
                return nil
            }
            return hasher.node(left, right)
        }
        guard let root = compute(0, size, 0..<indices.count), next == proof.count else { return nil }
        return root
    }
}

/// The hashes of Specs/signing.md §3, through ``Digest/sha256(_:_:into:)`` (no context object,
/// no array per hash: a tree of a million leaves makes two million of them).
package final class TreeHasher {
    package init() {}

    /// `SHA-256(0x00 || T)`: the leaf of the tile hash `T` (32 bytes at `tileHash`), written at `out`.
    package func leaf(_ tileHash: UnsafeRawPointer, into out: UnsafeMutableRawPointer) {
        var input: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &input) { raw in
            raw[0] = 0
            (raw.baseAddress! + 1).copyMemory(from: tileHash, byteCount: 32)
            Digest.sha256(UnsafeRawBufferPointer(rebasing: raw[0..<33]), into: out)
        }
    }

    /// `SHA-256(0x00 || T)`.
    package func leaf(_ tileHash: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { buffer, count in
            tileHash.withUnsafeBytes { leaf($0.baseAddress!, into: buffer.baseAddress!) }
            count = 32
        }
    }

    /// `SHA-256(0x01 || left || right)`.
    package func node(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] {
        (left + right).withUnsafeBytes { pair in
            [UInt8](unsafeUninitializedCapacity: 32) { buffer, count in
                node(pair, into: buffer.baseAddress!)
                count = 32
            }
        }
    }

    /// `SHA-256(0x01 || pair)` of the 64 bytes `pair` (left then right), written at `out`.
    package func node(_ pair: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer) {
        withUnsafeBytes(of: UInt8(1)) { Digest.sha256($0, pair, into: out) }
    }
}
