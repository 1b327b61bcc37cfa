import Foundation
import TilepackCore

/// A source that fetches several ranges at once (`Range: bytes=a-b,c-d`, one range a request
/// where the server answers only one): what a ``SignedTreeReader`` reads a proof's hashes through.
package protocol RangeBatchReading: ByteSource {
    /// Fetches `ranges` (ascending, disjoint), handing each to `body` with its bytes, in order.
    func readBatch(_ ranges: [Range<Int>], _ body: (Range<Int>, Data) throws -> Void) throws
}

/// A `.tpsig` read by ranges (Specs/signing.md §5, "Range reads"): the header, signed root and
/// fences at open, then only the tile-id groups and the tree's nodes a set of tiles needs, each
/// set fetched in one batch of ranges. What a verified extract of a remote archive reads instead
/// of the whole sidecar.
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
    /// The byte offset of each level's first node.
    private let levelOffsets: [Int]
    private var idGroups: [Int: [UInt64]] = [:]
    /// Groups of 256 nodes read, by (level, group), and those checked against the root.
    private var hashGroups: [[Int]: [UInt8]] = [:]
    private var checkedGroups: Set<[Int]> = []
    /// Bytes fetched ahead in a batch, by offset (each a range a caller asked for).
    private var fetched: [Int: [UInt8]] = [:]
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
            throw SignatureError.sidecar(
                path: path, reason: "\(what): \(source.count) bytes, the signed root and tree of \(size) leaves need \(expected)")
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
        var offsets = [idsOffset + 8 * size]
        for level in 0..<MerkleTree.levelCount(size: size) {
            offsets.append(offsets[level] + 32 * MerkleTree.nodeCount(size: size, level: level))
        }
        self.levelOffsets = offsets
    }

    /// The number of levels: the leaves' is 0, the root's ``levelCount`` - 1.
    package var levelCount: Int { levelOffsets.count - 1 }

    // MARK: - The locator

    /// The leaf index of the tile with `tileID` in the signed tree, or `nil` when the tree does not
    /// hold it (reads its group's 256 tile ids once). The locator is not evidence: a wrong index
    /// makes the tile's proof fail, never pass.
    package func leafIndex(of tileID: UInt64) throws -> Int? {
        guard let group = group(of: tileID) else { return nil }
        let ids = try idGroup(group)
        var a = 0
        var b = ids.count
        while a < b {
            let mid = (a + b) / 2
            if ids[mid] < tileID { a = mid + 1 } else { b = mid }
        }
        return a < ids.count && ids[a] == tileID ? group * SignatureSidecar.groupSize + a : nil
    }

    /// The leaf indices of many tiles, their groups of tile ids fetched in one batch.
    package func leafIndices(of tileIDs: [UInt64]) throws -> [Int?] {
        let groups = Set(tileIDs.compactMap { group(of: $0) }).filter { idGroups[$0] == nil }
        try prefetch(groups.map { idRange(of: $0) })
        return try tileIDs.map { try leafIndex(of: $0) }
    }

    /// The group of 256 leaves whose tile ids would hold `tileID`, from the fences.
    private func group(of tileID: UInt64) -> Int? {
        var low = 0
        var high = fences.count
        while low < high {
            let mid = (low + high) / 2
            if fences[mid] <= tileID { low = mid + 1 } else { high = mid }
        }
        return low > 0 ? low - 1 : nil
    }

    private func idRange(of group: Int) -> Range<Int> {
        let first = group * SignatureSidecar.groupSize
        let count = min(SignatureSidecar.groupSize, size - first)
        return (idsOffset + 8 * first)..<(idsOffset + 8 * (first + count))
    }

    private func idGroup(_ group: Int) throws -> [UInt64] {
        if let ids = idGroups[group] { return ids }
        let range = idRange(of: group)
        let ids = Self.u64s(try take(range), from: 0, count: range.count / 8)
        idGroups[group] = ids
        return ids
    }

    // MARK: - Proofs

    /// The proof of the leaves at `indices` (sorted, distinct): each hash of Specs/signing.md §6's
    /// list is one node of the sidecar's levels, a 32-byte range; all of them fetched in one batch.
    package func proof(for indices: [Int]) throws -> [[UInt8]] {
        var nodes: [Range<Int>] = []
        func prove(_ a: Int, _ b: Int, _ range: Range<Int>) {
            if range.isEmpty {
                let level = MerkleTree.levelOf(count: b - a)
                return nodes.append(nodeRange(level: level, index: a >> level))
            }
            if b - a == 1 { return }
            let k = Self.split(b - a)
            let middle = indices[range].firstIndex { $0 >= a + k } ?? range.upperBound
            prove(a, a + k, range.lowerBound..<middle)
            prove(a + k, b, middle..<range.upperBound)
        }
        if size > 0, !indices.isEmpty { prove(0, size, 0..<indices.count) }
        try prefetch(nodes)
        return try nodes.map { try readHash($0) }
    }

    /// The stored leaf hashes at `indices` (unchecked: to name the tiles that fail a proof).
    package func storedLeaves(_ indices: [Int]) throws -> [[UInt8]] {
        let ranges = indices.map { nodeRange(level: 0, index: $0) }
        try prefetch(ranges)
        return try ranges.map { try readHash($0) }
    }

    // MARK: - Checked nodes

    /// The stored root, once the top levels are checked: the levels from 8 below the root's (at
    /// most 256 nodes) to the root's, one range, each level the pairs of the one below. An empty
    /// array when one is not (the sidecar was rewritten or damaged). The hashes a reader trusts
    /// once it equals the signed root.
    package func storedRoot() throws -> [UInt8] {
        guard size > 0 else { return MerkleTree(leaves: []).root }
        let top = levelCount - 1
        let first = max(0, top - MerkleTree.tileHeight)
        let bytes = try take(levelOffsets[first]..<levelOffsets[top + 1])
        hashBytesRead += bytes.count
        var level = Array(bytes[0..<(levelOffsets[first + 1] - levelOffsets[first])])
        for above in (first + 1)..<(top + 1) {
            let stored = Array(bytes[(levelOffsets[above] - levelOffsets[first])..<(levelOffsets[above + 1] - levelOffsets[first])])
            guard MerkleTree.parents(of: level) == stored else { return [] }
            level = stored
        }
        return level
    }

    /// The node at (`level`, `index`), checked against the signed root: its group of 256 nodes is
    /// folded up 8 levels (or to the root) once, and compared with its checked parent there (or the
    /// signed root). `nil`: the group does not fold to it (the sidecar was rewritten or damaged).
    package func checkedHash(level: Int, index: Int) throws -> [UInt8]? {
        let group = index / SignatureSidecar.groupSize
        let hashes = try self.group(level: level, group: group)
        let at = 32 * (index - group * SignatureSidecar.groupSize)
        let mine = Array(hashes[at..<(at + 32)])
        let key = [level, group]
        if checkedGroups.contains(key) { return mine }
        let up = min(level + MerkleTree.tileHeight, levelCount - 1)
        let folded = Self.fold(hashes, levels: up - level)
        let parent = up == levelCount - 1 ? root.rootHash : try checkedHash(level: up, index: group)
        guard let parent, folded == parent else { return nil }
        checkedGroups.insert(key)
        return mine
    }

    /// The nodes of group `group` (256 nodes) of `level`, read once.
    private func group(level: Int, group: Int) throws -> [UInt8] {
        if let held = hashGroups[[level, group]] { return held }
        let first = group * SignatureSidecar.groupSize
        let count = min(SignatureSidecar.groupSize, MerkleTree.nodeCount(size: size, level: level) - first)
        let start = nodeRange(level: level, index: first).lowerBound
        let hashes = try take(start..<(start + 32 * count))
        hashBytesRead += 32 * count
        hashGroups[[level, group]] = hashes
        return hashes
    }

    /// The bytes of the node at (`level`, `index`).
    private func nodeRange(level: Int, index: Int) -> Range<Int> {
        let offset = levelOffsets[level] + 32 * index
        return offset..<(offset + 32)
    }

    // MARK: - Reading

    /// Fetches `ranges` in one batch (touching neighbours joined: no byte beyond a proof's nodes
    /// is asked for), kept until read.
    private func prefetch(_ ranges: [Range<Int>]) throws {
        let wanted = Set(ranges.filter { fetched[$0.lowerBound]?.count != $0.count }.map { [$0.lowerBound, $0.upperBound] })
            .map { $0[0]..<$0[1] }.sorted { $0.lowerBound < $1.lowerBound }
        guard !wanted.isEmpty else { return }
        var merged: [Range<Int>] = []
        for range in wanted {
            if let last = merged.last, range.lowerBound <= last.upperBound {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
        var parts: [Range<Int>: [UInt8]] = [:]
        if let batch = source as? any RangeBatchReading, merged.count > 1 {
            try batch.readBatch(merged) { range, data in parts[range] = [UInt8](data) }
        } else {
            for range in merged { parts[range] = try Self.bytes(source, range.lowerBound, range.count) }
        }
        var m = 0
        for range in wanted {
            while merged[m].upperBound < range.upperBound { m += 1 }
            guard let part = parts[merged[m]], part.count == merged[m].count else {
                throw SignatureError.sidecar(
                    path: source.name, reason: "a batch of ranges came back without bytes \(range.lowerBound)-\(range.upperBound - 1)")
            }
            let start = range.lowerBound - merged[m].lowerBound
            fetched[range.lowerBound] = Array(part[start..<(start + range.count)])
        }
    }

    /// The bytes of `range`: fetched ahead (and then let go), or read now.
    private func take(_ range: Range<Int>) throws -> [UInt8] {
        if let held = fetched[range.lowerBound], held.count == range.count {
            fetched[range.lowerBound] = nil
            return held
        }
        return try Self.bytes(source, range.lowerBound, range.count)
    }

    private func readHash(_ range: Range<Int>) throws -> [UInt8] {
        hashBytesRead += range.count
        return try take(range)
    }

    /// Nodes folded pairwise, level by level, `levels` times (a node without a pair carried up).
    static func fold(_ hashes: [UInt8], levels: Int) -> [UInt8] {
        var current = hashes
        for _ in 0..<levels where current.count > 32 { current = MerkleTree.parents(of: current) }
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
