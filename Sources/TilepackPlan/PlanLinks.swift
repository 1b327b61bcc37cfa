/// Each tile's parent and children by index, found once per plan by walking the sorted levels
/// side by side (no lookup per tile while choosing): the parent of `(x, y)` is `(x / 2, y / 2)`
/// in the level above, and a column's tiles ask for parents in ascending order.
struct PlanLinks {
    /// Per level, each tile's parent's index in the level above; -1 when that level does not hold
    /// it (and for the lowest level, which has none to wait for).
    let parents: [[Int32]]
    /// Per level, once asked for (``linkChildren(of:levels:)``), the children of tile `i` in the
    /// level below: `children[level]!.list[start[i] ..< start[i + 1]]`, ascending.
    private(set) var children: [(start: [Int], list: [Int])?]

    init(levels: [AreaTileSizes.Level]) {
        var parents: [[Int32]] = [[Int32](repeating: -1, count: levels.first?.count ?? 0)]
        for level in levels.indices.dropFirst() { parents.append(Self.parents(of: levels[level], in: levels[level - 1])) }
        self.parents = parents
        children = [(start: [Int], list: [Int])?](repeating: nil, count: levels.count)
    }

    /// Links the children of `level`'s tiles (the first time a tile of it is taken one by one).
    mutating func linkChildren(of level: Int, levels: [AreaTileSizes.Level]) {
        guard children[level] == nil, level + 1 < levels.count else { return }
        children[level] = Self.children(parents: parents[level + 1], keys: levels[level + 1].keys, count: levels[level].count)
    }

    /// The parent of each tile of `child` in `parent` (both sorted by key), or -1.
    static func parents(of child: AreaTileSizes.Level, in parent: AreaTileSizes.Level) -> [Int32] {
        // Int32: a level of 2^31 tiles would not fit in memory as AreaTileSizes keeps it.
        var result = [Int32](repeating: -1, count: child.count)
        let above = parent.keys
        var j = 0, column = -1
        for (i, key) in child.keys.enumerated() {
            let x = Int(key >> 32)
            let target = UInt64(x >> 1) << 32 | (key & 0xFFFF_FFFF) >> 1
            if x != column {
                // A new column: its parents start at the first key of column x / 2.
                column = x
                let first = UInt64(x >> 1) << 32
                var low = 0, high = above.count
                while low < high {
                    let middle = (low + high) / 2
                    if above[middle] < first { low = middle + 1 } else { high = middle }
                }
                j = low
            }
            while j < above.count, above[j] < target { j += 1 }
            if j < above.count, above[j] == target { result[i] = Int32(j) }
        }
        return result
    }

    /// The children of each of `count` parents, grouped by parent (a counting sort of `parents`);
    /// a key repeated in a level (a hostile index) links its first tile only.
    static func children(parents: [Int32], keys: [UInt64], count: Int) -> (start: [Int], list: [Int]) {
        var start = [Int](repeating: 0, count: count + 1)
        for (i, parent) in parents.enumerated() where parent >= 0 && (i == 0 || keys[i - 1] != keys[i]) { start[Int(parent) + 1] += 1 }
        for i in 0..<count { start[i + 1] += start[i] }
        var list = [Int](repeating: 0, count: start[count])
        var fill = start
        for (i, parent) in parents.enumerated() where parent >= 0 && (i == 0 || keys[i - 1] != keys[i]) {
            list[fill[Int(parent)]] = i
            fill[Int(parent)] += 1
        }
        return (start, list)
    }
}

/// The first candidates of the detail phase, highest priority first and, among equal priorities,
/// in the order offered (as a stable sort gives them), ordered only as far as the choice reads:
/// one counting pass puts them in buckets by the top 16 bits of their priority, and a bucket is
/// sorted when the choice reaches it, or passed over whole when its cheapest tile no longer fits
/// (what is taken only grows, so none of it could be taken later).
struct CandidateOrder {
    /// `~priority.bitPattern` (priorities are positive: ascending keys are descending priorities).
    private var keys: [UInt64]
    private var items: [Int]
    private var costs: [Int]
    /// The non-empty buckets: `ends[b]` is where bucket `b` ends, `cheapest[b]` its least cost.
    private var ends: [Int] = []
    private var cheapest: [Int] = []
    private var bucket = -1
    private var next = 0

    /// `priorities[k]` of `items[k]`, whose least possible cost is `costs[k]`; items ascending.
    init(priorities: [Double], items: [Int], costs: [Int]) {
        // counts[b + 1]: the size of bucket b, then (summed) where it ends.
        var counts = [Int](repeating: 0, count: 1 << 16 + 1)
        for priority in priorities { counts[Int(~priority.bitPattern >> 48) + 1] += 1 }
        for b in 0..<1 << 16 {
            if counts[b + 1] > 0 { ends.append(counts[b] + counts[b + 1]) }
            counts[b + 1] += counts[b]
        }
        var least = [Int](repeating: .max, count: 1 << 16)
        var place = counts
        keys = [UInt64](repeating: 0, count: items.count)
        self.items = [Int](repeating: 0, count: items.count)
        self.costs = self.items
        for k in items.indices {
            let key = ~priorities[k].bitPattern
            let b = Int(key >> 48)
            keys[place[b]] = key
            self.items[place[b]] = items[k]
            self.costs[place[b]] = costs[k]
            place[b] += 1
            least[b] = min(least[b], costs[k])
        }
        for b in 0..<1 << 16 where least[b] != .max { cheapest.append(least[b]) }
    }

    /// The next candidate when one of the buckets left may hold a tile of at most `remaining`
    /// bytes, with the least it can cost (its cost where the format shares no bytes); `nil` when
    /// none does.
    mutating func peek(remaining: Int) -> (priority: Double, item: Int, cost: Int)? {
        while bucket < 0 || bucket == ends.count || next == ends[bucket] {
            guard bucket < ends.count else { return nil }
            bucket += 1
            guard bucket < ends.count else { return nil }
            guard cheapest[bucket] <= remaining else {
                next = ends[bucket]
                continue
            }
            sortBucket(next..<ends[bucket])
        }
        return (Double(bitPattern: ~keys[next]), items[next], costs[next])
    }

    mutating func advance() { next += 1 }

    /// Sorts one bucket by key, equal keys in the order offered (ascending items): a counting
    /// pass on the next 12 bits of the key, then each run by insertion where it is short or of one
    /// key (a bucket holds few distinct priorities, each of many tiles), else by a sort.
    private mutating func sortBucket(_ range: Range<Int>) {
        guard range.count > 1 else { return }
        func digit(_ key: UInt64) -> Int { Int(key >> 36 & 0xFFF) }
        var counts = [Int](repeating: 0, count: 1 << 12 + 1)
        for k in range { counts[digit(keys[k]) + 1] += 1 }
        for d in 0..<1 << 12 { counts[d + 1] += counts[d] }
        var sorted = [(key: UInt64, item: Int, cost: Int)](repeating: (0, 0, 0), count: range.count)
        var place = counts
        for k in range {
            let d = digit(keys[k])
            sorted[place[d]] = (keys[k], items[k], costs[k])
            place[d] += 1
        }
        for d in 0..<1 << 12 where counts[d + 1] - counts[d] > 1 {
            let run = counts[d]..<counts[d + 1]
            guard run.count <= 32 || sorted[run].allSatisfy({ $0.key == sorted[run.lowerBound].key }) else {
                sorted[run].sort { $0.key < $1.key || ($0.key == $1.key && $0.item < $1.item) }
                continue
            }
            for j in run.dropFirst() {
                let entry = sorted[j]
                var k = j
                while k > run.lowerBound, sorted[k - 1].key > entry.key {
                    sorted[k] = sorted[k - 1]
                    k -= 1
                }
                sorted[k] = entry
            }
        }
        for (k, entry) in sorted.enumerated() {
            (keys[range.lowerBound + k], items[range.lowerBound + k], costs[range.lowerBound + k]) = entry
        }
    }
}
