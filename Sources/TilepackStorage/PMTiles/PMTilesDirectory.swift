import Foundation
import TilepackCore

/// A decoded PMTiles directory (the root or a leaf), laid out so that a lookup waits for one
/// cache miss, not a chain of them: it binary-searches every 8th tile id (kept apart, 8 bytes
/// each: a leaf of 4,096 entries needs 4 KiB of them, which stay in the cache between lookups),
/// then compares `id` with each id of that block of 8 entries without a branch. The entries are
/// 24 bytes and 64-byte aligned, so a block is exactly three cache lines whose loads do not wait
/// for one another, and the entry found lies in one of them. A binary search over the entries
/// waited for a new line at nearly every one of its 12 steps; a search of the ids kept apart from
/// the places (offset, length) waited for two lines, one after the other (bench-pmtiles-read).
///
/// Immutable once made; it owns its buffer (hence `@unchecked Sendable`: nothing writes it after
/// `init`).
final class PMTilesDirectory: @unchecked Sendable {
    let count: Int
    /// The entries in tile-id order; 64-byte aligned.
    private let entries: UnsafeMutableBufferPointer<PMTilesFormat.Entry>
    /// `entries[0].tileID`, `entries[8].tileID`, ...
    private let sampled: [UInt64]
    static let blockLength = 8

    init(_ decoded: [PMTilesFormat.Entry]) {
        count = decoded.count
        let raw = UnsafeMutableRawBufferPointer.allocate(
            byteCount: max(1, decoded.count) * MemoryLayout<PMTilesFormat.Entry>.stride, alignment: 64)
        entries = UnsafeMutableBufferPointer(
            start: raw.baseAddress!.bindMemory(to: PMTilesFormat.Entry.self, capacity: decoded.count), count: decoded.count)
        _ = entries.initialize(from: decoded)
        sampled = stride(from: 0, to: decoded.count, by: Self.blockLength).map { decoded[$0].tileID }
    }

    deinit {
        entries.deinitialize()
        entries.deallocate()
    }

    /// The entry at `index` (`0 ..< count`).
    subscript(index: Int) -> PMTilesFormat.Entry { entries[index] }

    /// The index of the last entry whose id is at most `id`, or `nil` when every entry is after it.
    func lastEntry(atMost id: UInt64) -> Int? {
        sampled.withUnsafeBufferPointer { sampled -> Int? in
            // The last block whose first id is at most `id`, by halves, without a branch to mispredict.
            var block = 0, length = sampled.count
            guard length > 0, sampled[0] <= id else { return nil }
            while length > 1 {
                let half = length >> 1
                block = sampled[block &+ half] <= id ? block &+ half : block
                length &-= half
            }
            // Inside it (its first id is at most `id`), the ids at most `id` after the first.
            let first = block &* Self.blockLength
            let end = min(first &+ Self.blockLength, count)
            var index = first
            for next in (first &+ 1)..<end { index &+= entries[next].tileID <= id ? 1 : 0 }
            return index
        }
    }
}

/// Leaf directories read so far, by offset in the leaf section; emptied when they hold more than
/// ``maximumEntries`` entries in all, so that memory stays bounded whatever the lookups.
final class LeafCache: Sendable {
    private let state = Locked<(leaves: [UInt64: PMTilesDirectory], entries: Int)>(([:], 0))
    static let maximumEntries = 1 << 20

    func get(_ offset: UInt64) -> PMTilesDirectory? { state.withLock { $0.leaves[offset] } }

    func put(_ offset: UInt64, _ leaf: PMTilesDirectory) {
        state.withLock { state in
            if state.entries + leaf.count > Self.maximumEntries {
                state.leaves.removeAll()
                state.entries = 0
            }
            state.leaves[offset] = leaf
            state.entries += leaf.count
        }
    }
}
