import Foundation
import Synchronization
import TilepackCore

/// A decoded PMTiles directory (the root or a leaf), laid out so that a lookup waits for two
/// cache misses, not a chain of them: the ids from the first to the last are cut into buckets of
/// a power of two of ids each (about ``entriesPerBucket`` entries a bucket when the ids are
/// evenly spread, as a leaf's nearly always are), and a table of 4 bytes a bucket gives the first
/// entry of each. A lookup reads the table once (one miss), then the bucket's few entries (24
/// bytes each, 64-byte aligned, loaded together: the second miss), counting without a branch the
/// ids at most the one sought; a bucket holding many entries (ids bunched) is searched by halves.
/// The binary search it replaces, over every 8th id, waited for five or six lines one after the
/// other in a leaf of 4,096 entries before the block of entries (bench-pmtiles-read's
/// `locate`, `perf annotate`).
///
/// Leaf directories read below this one are kept in it, by entry index (``child(at:)``), so a
/// lookup finds its leaf with one uncontended lock and no hashing; ``LeafCache`` bounds them.
///
/// Immutable once made but for those children; it owns its buffers (hence `@unchecked
/// Sendable`: nothing writes them after `init`, and the children are behind a lock).
final class PMTilesDirectory: @unchecked Sendable {
    let count: Int
    /// The entries in tile-id order; 64-byte aligned.
    private let entries: UnsafeMutableBufferPointer<PMTilesFormat.Entry>
    /// `buckets[b]`: the index of the first entry whose id less ``firstID``, shifted right by
    /// ``shift``, is at least `b`; the last element is ``count``.
    private let buckets: UnsafeMutableBufferPointer<UInt32>
    private let firstID: UInt64
    private let lastID: UInt64
    private let shift: UInt64
    /// The leaf directories read so far under this one's entries, by index: empty when no entry
    /// points to a leaf.
    private let children: Mutex<[PMTilesDirectory?]>
    /// About how many entries a bucket holds when the ids are evenly spread.
    static let entriesPerBucket = 4
    /// A bucket of at most this many entries is counted through; a larger one searched by halves.
    static let linearLimit = 16

    init(_ decoded: [PMTilesFormat.Entry]) {
        count = decoded.count
        let raw = UnsafeMutableRawBufferPointer.allocate(
            byteCount: max(1, decoded.count) * MemoryLayout<PMTilesFormat.Entry>.stride, alignment: 64)
        entries = UnsafeMutableBufferPointer(
            start: raw.baseAddress!.bindMemory(to: PMTilesFormat.Entry.self, capacity: decoded.count), count: decoded.count)
        _ = entries.initialize(from: decoded)
        firstID = decoded.first?.tileID ?? 0
        lastID = decoded.last?.tileID ?? 0
        // The fewest shifts that leave at most count / entriesPerBucket buckets (at least one).
        let wanted = UInt64(max(1, decoded.count / Self.entriesPerBucket))
        var shift: UInt64 = 0
        while (lastID &- firstID) >> shift >= wanted { shift += 1 }
        self.shift = shift
        let bucketCount = Int((lastID &- firstID) >> shift) + 1
        buckets = UnsafeMutableBufferPointer.allocate(capacity: bucketCount + 1)
        var bucket = 0
        for (index, entry) in decoded.enumerated() {
            // Ids ascend strictly (decodeDirectory checks it), so the bucket never passes the last.
            let entryBucket = min(Int((entry.tileID &- firstID) >> shift), bucketCount - 1)
            while bucket <= entryBucket {
                buckets[bucket] = UInt32(truncatingIfNeeded: index)
                bucket += 1
            }
        }
        while bucket <= bucketCount {
            buckets[bucket] = UInt32(truncatingIfNeeded: decoded.count)
            bucket += 1
        }
        let pointsToLeaves = decoded.contains { $0.runLength == 0 }
        children = Mutex(pointsToLeaves ? [PMTilesDirectory?](repeating: nil, count: decoded.count) : [])
    }

    deinit {
        entries.deinitialize()
        entries.deallocate()
        buckets.deallocate()
    }

    /// The entry at `index` (`0 ..< count`).
    subscript(index: Int) -> PMTilesFormat.Entry { entries[index] }

    /// The index of the last entry whose id is at most `id`, or `nil` when every entry is after it.
    func lastEntry(atMost id: UInt64) -> Int? {
        guard count > 0, id >= firstID else { return nil }
        guard id < lastID else { return count &- 1 }
        // Every entry before `low` has a smaller id than `id`, every one from `high` on a larger one.
        let bucket = Int((id &- firstID) >> shift)
        let low = Int(buckets[bucket]), high = Int(buckets[bucket &+ 1])
        guard high &- low > Self.linearLimit else {
            var index = low &- 1
            for next in low..<high { index &+= entries[next].tileID <= id ? 1 : 0 }
            return index
        }
        // The first entry in low..<high whose id is after `id`, by halves.
        var first = low, length = high &- low
        while length > 0 {
            let half = length >> 1
            if entries[first &+ half].tileID <= id {
                first &+= half &+ 1
                length &-= half &+ 1
            } else {
                length = half
            }
        }
        return first &- 1
    }

    /// The leaf read for the entry at `index`, if it is kept.
    func child(at index: Int) -> PMTilesDirectory? {
        children.withLock { $0.indices.contains(index) ? $0[index] : nil }
    }

    /// Keeps `leaf` as the one for the entry at `index`.
    func setChild(_ leaf: PMTilesDirectory, at index: Int) {
        children.withLock { if $0.indices.contains(index) { $0[index] = leaf } }
    }

    /// Lets go of every leaf kept under this directory (and so of theirs).
    func dropChildren() {
        let dropped = children.withLock { children in
            let old = children
            children = [PMTilesDirectory?](repeating: nil, count: old.count)
            return old
        }
        _ = dropped  // released here, outside the lock
    }
}

/// Bounds the leaf directories an archive keeps (each in its parent, ``PMTilesDirectory/child(at:)``):
/// when they would hold more than ``maximumEntries`` entries in all, every kept leaf is let go
/// first, so that memory stays bounded whatever the lookups.
final class LeafCache: Sendable {
    private let held = Mutex<Int>(0)
    /// The default bound: 1 Mi entries (24 MiB and the bucket tables).
    static let maximumEntries = 1 << 20
    let maximumEntries: Int

    init(maximumEntries: Int = LeafCache.maximumEntries) {
        self.maximumEntries = maximumEntries
    }

    /// The entries of the leaves kept now.
    var heldEntries: Int { held.withLock { $0 } }

    /// Keeps `leaf` under `parent`'s entry `index`, after letting go of every leaf kept under
    /// `root` when the bound would be passed.
    func keep(_ leaf: PMTilesDirectory, at index: Int, in parent: PMTilesDirectory, root: PMTilesDirectory) {
        held.withLock { held in
            if held + leaf.count > maximumEntries {
                root.dropChildren()
                held = 0
            }
            parent.setChild(leaf, at: index)
            held += leaf.count
        }
    }
}
