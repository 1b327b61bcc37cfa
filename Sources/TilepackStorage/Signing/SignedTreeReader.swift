import TilepackCore

/// A `.tpsig` read by ranges (Specs/signing.md §5, "Range reads"): the header, signed root and
/// fences at open, then only the tile-id groups and the stored hashes a set of tiles needs. What a
/// verified extract of a remote archive reads instead of the whole sidecar.
///
/// Not thread-safe: one reader per extract, used from its thread, or under a lock
/// (``VerifiedTileArchive``).
package final class SignedTreeReader: @unchecked Sendable {
    /// The sidecar's bytes (a local file, or an `http(s)://` or `s3://` object read by range).
    package let source: any ByteSource
    /// The checked signed root.
    package let root: SignedRoot
    /// The tree's size.
    package let size: Int
    /// The signed note's bytes.
    package let note: [UInt8]
    private let fences: [UInt64]
    private let idsOffset: Int
    private var idGroups: [Int: [UInt64]] = [:]
    /// Groups of 256 stored hashes read, by (stored level, group), and those checked against the root.
    private var hashGroups: [[Int]: [UInt8]] = [:]
    private var checkedGroups: Set<[Int]> = []
    /// The hash bytes read for proofs and leaves (the benchmark's "proof bytes").
    package private(set) var hashBytesRead = 0

    /// Reads and checks the header, the signed root (`key`'s signature, the release, the origin)
    /// and the fences; throws ``SignatureError`` naming the sidecar or the key.
    package init(source: any ByteSource, key: VerifierKey, minimumRelease: UInt64, origin: String?) throws {
        self.source = source
        let path = source.name
        let header = try Self.bytes(source, 0, min(SignatureSidecar.headerLength, source.count))
        let (noteLength, size) = try SignatureSidecar.parseHeader(header, path: path)
        let expected = SignatureSidecar.fileLength(noteLength: noteLength, size: size)
        guard source.count == expected else {
            let what = source.count < expected ? "truncated" : "longer than its tree"
            throw SignatureError.sidecar(path: path, reason: "\(what): \(source.count) bytes, the signed root and tree of \(size) leaves need \(expected)")
        }
        let padded = (noteLength + 7) / 8 * 8
        let groups = (size + SignatureSidecar.groupSize - 1) / SignatureSidecar.groupSize
        let head = try Self.bytes(source, SignatureSidecar.headerLength, padded + 8 * groups)
        guard head[noteLength..<padded].allSatisfy({ $0 == 0 }) else {
            throw SignatureError.sidecar(path: path, reason: "the padding after its signed root is not zero bytes (a damaged sidecar)")
        }
        let root = try SignedRoot.open(Array(head[0..<noteLength]), key: key, source: path)
        try ArchiveSignature.checkRoot(root, treeSize: size, minimumRelease: minimumRelease, origin: origin, path: path)
        self.root = root
        self.note = Array(head[0..<noteLength])
        self.size = size
        self.fences = Self.u64s(head, from: padded, count: groups)
        self.idsOffset = SignatureSidecar.headerLength + padded + 8 * groups
    }

    /// The leaf index of the tile with `tileID` in the signed tree, or `nil` when the tree does not
    /// hold it (reads its group's 256 tile ids once). The locator is not evidence: a wrong index
    /// makes the tile's proof fail, never pass.
    package func leafIndex(of tileID: UInt64) throws -> Int? {
        var low = 0
        var high = fences.count
        while low < high {
            let mid = (low + high) / 2
            if fences[mid] <= tileID { low = mid + 1 } else { high = mid }
        }
        guard low > 0 else { return nil }
        let group = low - 1
        let ids = try idGroup(group)
        var a = 0
        var b = ids.count
        while a < b {
            let mid = (a + b) / 2
            if ids[mid] < tileID { a = mid + 1 } else { b = mid }
        }
        return a < ids.count && ids[a] == tileID ? group * SignatureSidecar.groupSize + a : nil
    }

    private func idGroup(_ group: Int) throws -> [UInt64] {
        if let ids = idGroups[group] { return ids }
        let first = group * SignatureSidecar.groupSize
        let count = min(SignatureSidecar.groupSize, size - first)
        let ids = Self.u64s(try Self.bytes(source, idsOffset + 8 * first, 8 * count), from: 0, count: count)
        idGroups[group] = ids
        return ids
    }

    /// The proof of the leaves at `indices` (sorted, distinct) from the stored hashes: each hash
    /// of Specs/signing.md §6's list read as the stored hashes of its subtree's level (a stored
    /// level's hash as it is, another's from the 2^(l mod 8) hashes of the stored level below),
    /// every range announced first so that a remote source fetches them in few requests.
    package func proof(for indices: [Int]) throws -> [[UInt8]] {
        var spans: [(Int, Int)] = []
        func prove(_ a: Int, _ b: Int, _ range: Range<Int>) {
            if range.isEmpty { return spans.append((a, b)) }
            if b - a == 1 { return }
            let k = Self.split(b - a)
            let middle = indices[range].firstIndex { $0 >= a + k } ?? range.upperBound
            prove(a, a + k, range.lowerBound..<middle)
            prove(a + k, b, middle..<range.upperBound)
        }
        if size > 0, !indices.isEmpty { prove(0, size, 0..<indices.count) }
        let reads = spans.flatMap { completeSubtrees($0.0, $0.1) }.map { storedRange(level: $0.level, index: $0.index) }
        try source.willRead(reads.map { $0.offset..<($0.offset + $0.length) })
        return try spans.map { try hash($0.0, $0.1) }
    }

    /// The stored leaf hashes at `indices` (unchecked: to name the tiles that fail a proof).
    package func storedLeaves(_ indices: [Int]) throws -> [[UInt8]] {
        let ranges = indices.map { storedRange(level: 0, index: $0) }
        try source.willRead(ranges.map { $0.offset..<($0.offset + $0.length) })
        return try ranges.map { try read($0) }
    }

    // MARK: - Hashes from the stored levels

    /// The root folded from the stored levels: the top level and each level's partial last group
    /// (Specs/signing.md §5), the hashes a reader trusts once it equals the signed root.
    package func storedRoot() throws -> [UInt8] { size == 0 ? MerkleTree(leaves: []).root : try hash(0, size) }

    /// The stored hash at (level `8·stored`, `index`), checked against the root: a hash of a
    /// partial group is (``storedRoot()`` folds it); a full group of 256 is folded once and
    /// compared with its checked parent one stored level up. `nil`: the group does not fold to it
    /// (the sidecar was rewritten or damaged).
    package func checkedHash(stored: Int, index: Int) throws -> [UInt8]? {
        let group = index / SignatureSidecar.groupSize
        let count = size >> (MerkleTree.tileHeight * stored)
        let first = group * SignatureSidecar.groupSize
        let key = [stored, group]
        let hashes: [UInt8]
        if let held = hashGroups[key] {
            hashes = held
        } else {
            hashes = try read(storedRange(level: MerkleTree.tileHeight * stored, index: first, count: min(SignatureSidecar.groupSize, count - first)))
            hashGroups[key] = hashes
        }
        let mine = Array(hashes[(32 * (index - first))..<(32 * (index - first) + 32)])
        if first + SignatureSidecar.groupSize > count || checkedGroups.contains(key) { return mine }
        guard let parent = try checkedHash(stored: stored + 1, index: group),
            Self.fold(hashes, levels: MerkleTree.tileHeight) == parent
        else { return nil }
        checkedGroups.insert(key)
        return mine
    }

    /// The complete subtrees (level, index) whose fold is `MTH(D[a:b])`, left to right.
    private func completeSubtrees(_ a: Int, _ b: Int) -> [(level: Int, index: Int)] {
        let count = b - a
        if count & (count - 1) == 0 {
            let level = count.trailingZeroBitCount
            return [(level, a >> level)]
        }
        let k = Self.split(count)
        return completeSubtrees(a, a + k) + completeSubtrees(a + k, b)
    }

    private func hash(_ a: Int, _ b: Int) throws -> [UInt8] {
        let count = b - a
        if count & (count - 1) == 0 {
            let level = count.trailingZeroBitCount
            let stored = try read(storedRange(level: level, index: a >> level))
            return Self.fold(stored, levels: level % MerkleTree.tileHeight)
        }
        let k = Self.split(count)
        return TreeHasher().node(try hash(a, a + k), try hash(a + k, b))
    }

    /// The bytes of the stored hashes that give the complete subtree at (`level`, `index`) (or
    /// `count` such subtrees, side by side).
    private func storedRange(level: Int, index: Int, count: Int = 1) -> (offset: Int, length: Int) {
        let stored = level - level % MerkleTree.tileHeight
        let width = (1 << (level - stored)) * count
        var offset = idsOffset + 8 * size
        for below in stride(from: 0, to: stored, by: MerkleTree.tileHeight) { offset += 32 * (size >> below) }
        return (offset + 32 * index * (width / count), 32 * width)
    }

    private func read(_ range: (offset: Int, length: Int)) throws -> [UInt8] {
        hashBytesRead += range.length
        return try Self.bytes(source, range.offset, range.length)
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

    /// The largest power of two below `count` (> 1).
    static func split(_ count: Int) -> Int { 1 << (Int.bitWidth - 1 - (count - 1).leadingZeroBitCount) }

    static func bytes(_ source: any ByteSource, _ offset: Int, _ length: Int) throws -> [UInt8] {
        try source.withBytes(offset: offset, length: length) { [UInt8]($0) }
    }

    static func u64s(_ bytes: [UInt8], from: Int, count: Int) -> [UInt64] {
        bytes.withUnsafeBytes { raw in
            (0..<count).map { UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: from + 8 * $0, as: UInt64.self)) }
        }
    }
}
