import Foundation
import Synchronization
import TilepackCore

/// A decoded PMTiles directory (the root or a leaf), kept small so that a random lookup touches
/// as little memory as it can: on this project's benchmark machine one load at a random place of
/// a table the size of the leaf entries, after each `pread`, costs a tenth to a sixth of the
/// `pread`, two dependent loads a quarter (bench-pmtiles-read's `floor-touch` contenders).
///
/// **Entries.** Kept compact, 12 bytes each (``CompactEntries``): the tile id as a 32-bit
/// delta from the directory's first id, the offset as a 32-bit delta from its smallest offset,
/// and the length (24 bits) with the run length (8 bits: 0 to 254 as they are; 255 for a longer
/// run, found in a small sorted side table). A directory whose ids span 2^32 or more, whose
/// offsets do, or with a length of 2^24 or more keeps the 24-byte entries instead
/// (``WideEntries``): nothing is ever truncated. A leaf (a few thousand entries of one
/// neighbourhood) fits unless it points to tiles more than 4 GiB apart (a shared ocean tile far
/// back in a planet); a root of a large archive may not fit, and is small.
///
/// **Search.** The ids from the first to the last are cut into buckets of a power of two of ids
/// each (about ``entriesPerBucket`` entries a bucket when the ids are evenly spread, as a leaf's
/// nearly always are), and a table of 4 bytes a bucket gives the first entry of each: a lookup
/// reads the table once, then the bucket's few entries (neighbouring cache lines, loaded
/// together), counting without a branch the ids at most the one sought; a bucket holding many
/// entries (ids bunched) is searched by halves. The table and the entries are one allocation.
///
/// Leaf directories read below this one are kept in it, by entry index (``child(at:)``), so a
/// lookup finds its leaf with one uncontended lock and no hashing; ``LeafCache`` bounds them.
///
/// Immutable once made but for those children; it owns its buffers (hence `@unchecked
/// Sendable`: nothing writes them after `init`, and the children are behind a lock).
final class PMTilesDirectory: @unchecked Sendable {
    let count: Int
    private let firstID: UInt64
    private let lastID: UInt64
    private let shift: UInt64
    /// `buckets[b]`: the index of the first entry whose id less ``firstID``, shifted right by
    /// ``shift``, is at least `b`; the last element is ``count``. Inside ``memory``, after the entries.
    private let buckets: UnsafeMutablePointer<UInt32>
    /// Whether the entries are kept in 12 bytes each (``compact``), else in 24 (``wide``): both
    /// views of ``memory``, one of them meaningful.
    let isCompact: Bool
    private let compact: CompactEntries
    private let wide: WideEntries
    /// The runs longer than 254 of compact entries, by entry index (ascending).
    private let longRuns: [(index: Int, run: UInt32)]
    /// The one allocation holding the entries and then the bucket table (64-byte aligned).
    private let memory: UnsafeMutableRawPointer
    /// The leaf directories read so far under this one's entries, by index: empty when no entry
    /// points to a leaf.
    private let children: Mutex<[PMTilesDirectory?]>
    /// About how many entries a bucket holds when the ids are evenly spread.
    static let entriesPerBucket = 8
    /// A bucket of at most this many entries is counted through (their loads independent, so
    /// their cache lines are fetched together); a larger one searched by halves.
    static let linearLimit = 32

    init(_ decoded: [PMTilesFormat.Entry]) {
        count = decoded.count
        firstID = decoded.first?.tileID ?? 0
        lastID = decoded.last?.tileID ?? 0
        // The fewest shifts that leave at most count / entriesPerBucket buckets (at least one).
        let wanted = UInt64(max(1, decoded.count / Self.entriesPerBucket))
        var shift: UInt64 = 0
        while (lastID &- firstID) >> shift >= wanted { shift += 1 }
        self.shift = shift
        let bucketCount = Int((lastID &- firstID) >> shift) + 1
        let fits = CompactEntries.fits(decoded)
        let entryBytes = decoded.count * (fits ? CompactEntries.stride : MemoryLayout<PMTilesFormat.Entry>.stride)
        let tableAt = (entryBytes + 63) & ~63
        memory = .allocate(byteCount: tableAt + (bucketCount + 1) * 4, alignment: 64)
        isCompact = fits
        if fits {
            (compact, longRuns) = CompactEntries.pack(decoded, at: memory)
        } else {
            compact = CompactEntries(words: memory.assumingMemoryBound(to: UInt32.self), firstOffset: 0)
            longRuns = []
        }
        wide = WideEntries(decoded, at: memory, initialize: !fits)
        buckets = (memory + tableAt).bindMemory(to: UInt32.self, capacity: bucketCount + 1)
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

    deinit { memory.deallocate() }

    /// The bytes the entries and the bucket table take.
    var footprint: Int {
        count * (isCompact ? CompactEntries.stride : MemoryLayout<PMTilesFormat.Entry>.stride)
            + Int(((lastID &- firstID) >> shift) + 2) * 4 + longRuns.count * 16
    }

    /// The entry at `index` (`0 ..< count`).
    subscript(index: Int) -> PMTilesFormat.Entry {
        guard isCompact else { return wide.base[index] }
        var entry = compact.entry(index, firstID: firstID)
        if entry.runLength == CompactEntries.longRun { entry.runLength = longRun(at: index) }
        return entry
    }

    /// The index of the last entry whose id is at most `id`, or `nil` when every entry is after it.
    func lastEntry(atMost id: UInt64) -> Int? {
        guard count > 0, id >= firstID else { return nil }
        guard id < lastID else { return count &- 1 }
        // Every entry before `low` has a smaller id than `id`, every one from `high` on a larger one.
        let bucket = Int((id &- firstID) >> shift)
        let low = Int(buckets[bucket]), high = Int(buckets[bucket &+ 1])
        // id - firstID < lastID - firstID: fits the compact width whenever the entries do.
        if isCompact { return Self.search(compact, UInt64(id &- firstID), low, high) }
        return Self.search(wide, id, low, high)
    }

    /// The run length of the compact entry at `index`, one of ``longRuns``.
    private func longRun(at index: Int) -> UInt32 {
        var low = 0, high = longRuns.count
        while low < high {
            let middle = (low + high) / 2
            if longRuns[middle].index < index { low = middle + 1 } else { high = middle }
        }
        return longRuns[low].run
    }

    /// The index of the last entry of `low ..< high` whose key is at most `key`, or `low - 1`.
    @inline(__always)
    private static func search<Entries: DirectoryKeys>(_ entries: Entries, _ key: UInt64, _ low: Int, _ high: Int) -> Int {
        guard high &- low > Self.linearLimit else {
            // Counted without a branch (a compare-and-branch here mispredicted once a lookup):
            // keys are below 2^62, so `k - key - 1` wraps past 2^63 exactly when `k <= key`.
            var index = low &- 1
            var next = low
            while next < high {
                index &+= Int(truncatingIfNeeded: (entries.key(next) &- key &- 1) >> 63)
                next &+= 1
            }
            return index
        }
        // The first entry in low..<high whose key is after `key`, by halves.
        var first = low, length = high &- low
        while length > 0 {
            let half = length >> 1
            if entries.key(first &+ half) <= key {
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

/// What the search reads of a directory's entries: the key (the id, or its delta) of one.
protocol DirectoryKeys {
    func key(_ index: Int) -> UInt64
}

/// Entries of 24 bytes, as decoded: any directory.
private struct WideEntries: DirectoryKeys {
    let base: UnsafeMutablePointer<PMTilesFormat.Entry>

    /// A view of `memory`, filled with `decoded` when `initialize`.
    init(_ decoded: [PMTilesFormat.Entry], at memory: UnsafeMutableRawPointer, initialize: Bool) {
        base = memory.assumingMemoryBound(to: PMTilesFormat.Entry.self)
        if initialize {
            memory.bindMemory(to: PMTilesFormat.Entry.self, capacity: decoded.count).initialize(from: decoded, count: decoded.count)
        }
    }

    @inline(__always) func key(_ index: Int) -> UInt64 { base[index].tileID }
}

/// Entries of 12 bytes (three 32-bit words): the id less the directory's first, the offset less
/// the smallest, and the length with the run length in the top 8 bits (``longRun``: a run longer
/// than 254, its length kept beside). A view of memory the directory owns.
struct CompactEntries: DirectoryKeys {
    static let stride = 12
    /// The run-length code of a run longer than 254.
    static let longRun: UInt32 = 255
    static let lengthLimit: UInt32 = 1 << 24

    let words: UnsafeMutablePointer<UInt32>
    let firstOffset: UInt64

    /// Whether every entry fits: ids and offsets spanning less than 2^32, lengths under 2^24.
    static func fits(_ decoded: [PMTilesFormat.Entry]) -> Bool {
        guard let first = decoded.first, let last = decoded.last else { return true }
        guard last.tileID &- first.tileID <= UInt64(UInt32.max) else { return false }
        var lowest = UInt64.max, highest: UInt64 = 0
        for entry in decoded {
            guard entry.length < lengthLimit else { return false }
            lowest = min(lowest, entry.offset)
            highest = max(highest, entry.offset)
        }
        return highest &- lowest <= UInt64(UInt32.max)
    }

    /// Packs `decoded` (``fits(_:)`` must hold) at `memory`; returns the runs longer than 254.
    static func pack(_ decoded: [PMTilesFormat.Entry], at memory: UnsafeMutableRawPointer)
        -> (CompactEntries, [(index: Int, run: UInt32)])
    {
        let words = memory.bindMemory(to: UInt32.self, capacity: decoded.count * 3)
        let firstOffset = decoded.lazy.map(\.offset).min() ?? 0
        let firstID = decoded.first?.tileID ?? 0
        var longRuns: [(index: Int, run: UInt32)] = []
        for (index, entry) in decoded.enumerated() {
            let code = min(entry.runLength, Self.longRun)
            if code == Self.longRun { longRuns.append((index, entry.runLength)) }
            (words + 3 * index).initialize(to: UInt32(entry.tileID - firstID))
            (words + 3 * index + 1).initialize(to: UInt32(entry.offset - firstOffset))
            (words + 3 * index + 2).initialize(to: entry.length | code << 24)
        }
        return (CompactEntries(words: words, firstOffset: firstOffset), longRuns)
    }

    @inline(__always) func key(_ index: Int) -> UInt64 { UInt64(words[3 &* index]) }

    /// The entry at `index`, in a directory whose first id is `firstID`; a run longer than 254
    /// has the run length ``longRun``.
    @inline(__always)
    func entry(_ index: Int, firstID: UInt64) -> PMTilesFormat.Entry {
        let place = words + 3 &* index
        let packed = place[2]
        return PMTilesFormat.Entry(
            tileID: firstID &+ UInt64(place[0]), offset: firstOffset &+ UInt64(place[1]), length: packed & (Self.lengthLimit - 1),
            runLength: packed >> 24)
    }
}

/// Bounds the leaf directories an archive keeps (each in its parent, ``PMTilesDirectory/child(at:)``):
/// when they would hold more than ``maximumEntries`` entries in all, every kept leaf is let go
/// first, so that memory stays bounded whatever the lookups.
final class LeafCache: Sendable {
    private let held = Mutex<Int>(0)
    /// The default bound: 1 Mi entries (12 MiB compact, 24 MiB at most, and the bucket tables).
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
