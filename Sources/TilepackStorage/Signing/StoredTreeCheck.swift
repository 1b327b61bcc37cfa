import TilepackCore

/// The stored hashes of a sidecar checked against its signed root a group at a time, for a reader
/// that checks tiles as they are read (``VerifiedTileArchive``): at open, the root from the stored
/// levels (the top level and each level's partial last group, Specs/signing.md §3 and §5) and every
/// stored level above the leaves against the level above it, about `n/256` hashes; then each
/// group of 256 stored leaves folded and compared with its checked level-8 hash on the first read
/// of one of its tiles, once. A million tiles: 4,000 hashes at open instead of the tree's
/// 2,000,000, and 255 more for each group an app shows.
package final class StoredTreeCheck: @unchecked Sendable {
    private let levels: [[UInt8]]
    private let size: Int
    /// One bit per group of 256 stored leaves: checked.
    private let checked: Locked<[UInt64]>
    private static let group = SignatureSidecar.groupSize

    /// Checks the stored levels but the leaves' full groups against `root`; `path` names the sidecar.
    package init(levels: [[UInt8]], size: Int, root: [UInt8], path: String) throws(SignatureError) {
        self.levels = levels
        self.size = size
        checked = Locked([UInt64](repeating: 0, count: (size / Self.group + 64) / 64))
        let fail = SignatureError.sidecar(path: path, reason: "its stored hashes do not give its signed root (the sidecar was rewritten or damaged)")
        guard hash(0, size) == root else { throw fail }
        for stored in levels.indices.dropFirst().dropLast() {
            for g in 0..<(levels[stored + 1].count / 32) where !foldsToParent(stored, g) { throw fail }
        }
    }

    /// Whether the stored leaf at `index` is checked against the root (its group folded now if not yet).
    package func leafIsChecked(_ index: Int) -> Bool {
        let g = index / Self.group
        guard levels.count > 1, g < levels[1].count / 32 else { return true }  // a partial group: checked with the root
        if checked.withLock({ $0[g / 64] & (1 << UInt64(g % 64)) != 0 }) { return true }
        guard foldsToParent(0, g) else { return false }
        checked.withLock { $0[g / 64] |= 1 << UInt64(g % 64) }
        return true
    }

    /// Whether group `g` of stored level `stored` folds to entry `g` of the stored level above.
    private func foldsToParent(_ stored: Int, _ g: Int) -> Bool {
        let bytes = levels[stored][(32 * Self.group * g)..<(32 * Self.group * (g + 1))]
        return Self.fold(Array(bytes), levels: MerkleTree.tileHeight).elementsEqual(levels[stored + 1][(32 * g)..<(32 * g + 32)])
    }

    /// `MTH(D[a:b])` from the stored levels.
    private func hash(_ a: Int, _ b: Int) -> [UInt8] {
        let count = b - a
        if count == 0 { return MerkleTree(leaves: []).root }
        if count & (count - 1) == 0 {
            let level = count.trailingZeroBitCount
            let stored = level / MerkleTree.tileHeight
            let width = 1 << (level % MerkleTree.tileHeight)
            let start = 32 * (a >> (stored * MerkleTree.tileHeight))
            return Self.fold(Array(levels[stored][start..<(start + 32 * width)]), levels: level % MerkleTree.tileHeight)
        }
        let k = SignedTreeReader.split(count)
        return TreeHasher().node(hash(a, a + k), hash(a + k, b))
    }

    /// `2^levels` hashes folded pairwise, level by level, to one.
    static func fold(_ hashes: [UInt8], levels: Int) -> [UInt8] {
        var current = hashes
        let hasher = TreeHasher()
        for _ in 0..<levels {
            var next = [UInt8](repeating: 0, count: current.count / 2)
            current.withUnsafeBytes { from in
                next.withUnsafeMutableBytes { to in
                    for j in 0..<(current.count / 64) {
                        hasher.node(UnsafeRawBufferPointer(rebasing: from[64 * j..<64 * j + 64]), into: to.baseAddress! + 32 * j)
                    }
                }
            }
            current = next
        }
        return current
    }
}
