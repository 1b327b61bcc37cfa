import Foundation
import TilepackCore

extension TilePlanner.State {
    /// Groups of equal depth, shallowest first, each taken whole while it fits.
    mutating func takeByDepth(limit: Int) {
        if focus == nil {
            // Depth is the zoom: a group is a level.
            for level in sizes.levels.indices {
                guard takeLevel(level, limit: limit) else { return }
            }
            return
        }
        var all: [(depth: Double, level: Int, i: Int)] = []
        all.reserveCapacity(taken.count)
        for level in sizes.levels.indices {
            for i in sizes.levels[level].keys.indices { all.append((depth(level: level, i: i), level, i)) }
        }
        all.sort { ($0.depth, $0.level) < ($1.depth, $1.level) }
        var start = 0
        while start < all.count {
            var end = start + 1
            while end < all.count, all[end].depth == all[start].depth { end += 1 }
            guard takeGroup(all[start..<end].map { ($0.level, $0.i) }, limit: limit) else { return }
            start = end
        }
    }

    /// ``takeGroup(_:limit:)`` of a whole level, without a list of its tiles where no bytes are shared.
    private mutating func takeLevel(_ level: Int, limit: Int) -> Bool {
        guard !shares else { return takeGroup(sizes.levels[level].keys.indices.map { (level, $0) }, limit: limit) }
        let offset = offsets[level]
        var cost = 0
        for i in sizes.levels[level].keys.indices where parentTaken(level: level, i: i) { cost += freshCosts[offset + i] }
        guard used + cost <= limit else { return false }
        for i in sizes.levels[level].keys.indices where parentTaken(level: level, i: i) {
            taken[offset + i] = true
            order.append(offset + i)
        }
        used += cost
        return true
    }

    /// Takes the group's tiles whose parents are taken when all of them fit; false when they do not.
    private mutating func takeGroup(_ group: [(level: Int, i: Int)], limit: Int) -> Bool {
        let eligible = group.filter { parentTaken(level: $0.level, i: $0.i) }
        var cost = 0
        var seen = Set<UInt64>()
        for tile in eligible {
            let index = offsets[tile.level] + tile.i
            guard shares else {
                cost += freshCosts[index]
                continue
            }
            let content = sizes.levels[tile.level].contents[tile.i]
            cost += !contents.contains(content) && seen.insert(content).inserted ? freshCosts[index] : repeatedCosts[index]
        }
        guard used + cost <= limit else { return false }
        for tile in eligible { take(level: tile.level, i: tile.i) }
        return true
    }

    /// The rest of the budget, tile by tile, to the untaken tiles whose parents are taken, most
    /// detail per byte first; a taken tile's children join the candidates.
    mutating func takeByDetailPerByte(limit: Int) {
        // Without a focus a tile's depth is its zoom: its level's weight, computed once.
        let weights = sizes.levels.map { Foundation.exp2(-2 * Double($0.zoom)) }
        func priority(_ level: Int, _ i: Int, cost: Int) -> Double {
            (focus == nil ? weights[level] : Foundation.exp2(-2 * depth(level: level, i: i))) / Double(max(1, cost))
        }
        // The first candidates (a million-tile area offers hundreds of thousands) ordered as far
        // as the budget reads them; the children of taken tiles, offered later, in a heap; the
        // larger of the two heads next.
        var priorities: [Double] = [], items: [Int] = [], least: [Int] = []
        priorities.reserveCapacity(taken.count - order.count)
        items.reserveCapacity(taken.count - order.count)
        least.reserveCapacity(taken.count - order.count)
        for level in sizes.levels.indices {
            for i in sizes.levels[level].keys.indices where !taken[offsets[level] + i] && parentTaken(level: level, i: i) {
                let index = offsets[level] + i
                priorities.append(priority(level, i, cost: cost(level: level, i: i)))
                items.append(index)
                least.append(min(freshCosts[index], repeatedCosts[index]))
            }
        }
        var first = CandidateOrder(priorities: priorities, items: items, costs: least)
        var heap = PriorityHeap()
        while true {
            let index: Int
            var known: Int?
            if let head = first.peek(remaining: limit - used), heap.top.map({ head.priority >= $0 }) ?? true {
                (index, known) = (head.item, shares ? nil : head.cost)
                first.advance()
            } else if let popped = heap.pop() {
                index = popped
            } else {
                break
            }
            let (level, i) = locate(index)
            let price = known ?? cost(level: level, i: i)
            guard !taken[index], used + price <= limit else { continue }
            take(level: level, i: i, cost: price)
            guard level + 1 < sizes.levels.count else { continue }
            links.linkChildren(of: level, levels: sizes.levels)
            let (start, list) = links.children[level]!
            for child in list[start[i]..<start[i + 1]] {
                heap.push(priority: priority(level + 1, child, cost: cost(level: level + 1, i: child)), item: offsets[level + 1] + child)
            }
        }
    }

    /// The file's predicted size with the first `count` tiles of the taken order.
    func predict(prefix count: Int) -> Int {
        guard count < order.count else { return model.predict(sizes.levels, offsets: offsets, taken: taken) }
        var mask = taken
        for index in order[count...] { mask[index] = false }
        return model.predict(sizes.levels, offsets: offsets, taken: mask)
    }

    /// Gives back the last tiles taken (never a parent before its children) until the predicted
    /// file fits `limit`: the longest prefix of the taken order that fits. Marginal costs narrow it
    /// down (a few predictions), a bisection finds it: page-sized steps in a prediction can make the
    /// marginal sum give back more than needed (a one-tile plan given back to none).
    mutating func giveBack(limit: Int) {
        var predicted = predict(prefix: order.count)
        var fits = order.count, over = order.count
        while predicted > limit, fits > 0 {
            over = fits
            var excess = predicted - limit
            while excess > 0, fits > 0 {
                fits -= 1
                let (level, i) = locate(order[fits])
                let l = sizes.levels[level]
                excess -= model.marginal(length: l.lengths[i], stored: l.stored[i], newContent: true)
            }
            predicted = predict(prefix: fits)
        }
        // The prefix of `fits` tiles fits (or is empty), the one of `over` does not (or is all).
        while over - fits > 1 {
            let middle = (fits + over) / 2
            let size = predict(prefix: middle)
            if size <= limit { (fits, predicted) = (middle, size) } else { over = middle }
        }
        for index in order[fits...] { taken[index] = false }
        order.removeSubrange(fits...)
        predictedSize = predicted
    }
}

extension TilePlanner.State {
    /// The plan: per level what the area holds and what is taken, where, and the taken keys.
    func plan(budget: Int) -> TilePlan {
        var levels: [TilePlan.Level] = []
        var chosen: [[UInt64]] = []
        for (index, level) in sizes.levels.enumerated() {
            var keys: [UInt64] = []
            var bytes = 0
            var (west, east, north, south) = (Int.max, Int.min, Int.max, Int.min)
            for i in level.keys.indices where taken[offsets[index] + i] {
                let key = level.keys[i]
                keys.append(key)
                bytes += level.lengths[i]
                let x = Int(key >> 32), y = Int(key & 0xFFFF_FFFF)
                (west, east, north, south) = (min(west, x), max(east, x), min(north, y), max(south, y))
            }
            var extent: [Double]?
            if !keys.isEmpty {
                let northWest = TileCoordinate(uncheckedZoom: level.zoom, x: west, y: north).boundingBox
                let southEast = TileCoordinate(uncheckedZoom: level.zoom, x: east, y: south).boundingBox
                extent = [northWest.west, southEast.south, southEast.east, northWest.north]
            }
            levels.append(
                TilePlan.Level(
                    zoom: level.zoom, available: level.count, availableBytes: level.bytes, taken: keys.count, takenBytes: bytes,
                    extent: extent))
            chosen.append(keys)
        }
        var plan = TilePlan(budget: budget, format: model.format, levels: levels, chosen: chosen, lowestZoom: sizes.zooms.lowerBound)
        plan.predictedSize = predictedSize
        return plan
    }
}

/// A binary max-heap of indices by priority.
struct PriorityHeap {
    private var items: [(priority: Double, item: Int)] = []

    /// The largest priority, or `nil` when empty.
    var top: Double? { items.first?.priority }

    mutating func push(priority: Double, item: Int) {
        items.append((priority, item))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[parent].priority < items[child].priority else { break }
            items.swapAt(parent, child)
            child = parent
        }
    }

    mutating func pop() -> Int? {
        guard !items.isEmpty else { return nil }
        let top = items[0].item
        let last = items.removeLast()
        guard !items.isEmpty else { return top }
        items[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var largest = parent
            if left < items.count, items[left].priority > items[largest].priority { largest = left }
            if right < items.count, items[right].priority > items[largest].priority { largest = right }
            guard largest != parent else { return top }
            items.swapAt(parent, largest)
            parent = largest
        }
    }
}
