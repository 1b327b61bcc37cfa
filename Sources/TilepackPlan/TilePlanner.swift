import Foundation
import TilepackCore

/// Chooses the tiles that fit a budget (`Specs/plan.md` §2): a pure function of the sizes, the
/// focus and the budget, with no I/O.
///
/// Each tile gets a depth `k = zoom + falloff`, the falloff `log2(1 + d / radius)` for a tile at
/// distance `d` from the focus (0 without one). Tiles are taken in groups of equal depth, lowest
/// first (a parent is always shallower than its children), while the whole group fits; then the
/// rest of the budget goes to single tiles whose parent is taken, by detail per byte
/// (`4^-k / bytes`), until none fits. The output file's size is then predicted, and should the
/// prediction pass the budget, the last tiles taken are given back until it does not.
public enum TilePlanner {
    /// The plan of `sizes` within `budget` bytes of a `format` output.
    /// - Parameters:
    ///   - metadataBytes: the source's metadata in bytes (the output's metadata is about as long).
    public static func plan(
        _ sizes: AreaTileSizes, budget: Int, format: PlanOutputFormat, focus: PlanFocus? = nil, metadataBytes: Int = 1024
    ) -> TilePlan {
        let model = OutputSizeModel(format: format, metadataBytes: metadataBytes)
        guard let margin = sizes.relativeMargin, margin > 0 else {
            return plan(sizes, budget: budget, limit: budget, model: model, focus: focus)
        }
        // An estimate: the expected size plus its margin stays within the budget.
        var limit = budget
        var result = plan(sizes, budget: budget, limit: limit, model: model, focus: focus)
        for _ in 0..<4 {
            let extra = Int((Double(result.tileBytes) * margin).rounded(.up))
            result.margin = extra
            result.confidence = sizes.confidence
            result.exact = false
            guard result.predictedSize + extra > budget else { break }
            limit = budget - extra
            result = plan(sizes, budget: budget, limit: limit, model: model, focus: focus)
        }
        return result
    }

    static func plan(_ sizes: AreaTileSizes, budget: Int, limit: Int, model: OutputSizeModel, focus: PlanFocus?) -> TilePlan {
        var state = State(sizes: sizes, model: model, focus: focus?.prepared())
        state.takeByDepth(limit: limit)
        state.takeByDetailPerByte(limit: limit)
        state.giveBack(limit: limit)
        var plan = state.plan(budget: budget)
        plan.focus = focus?.points.map { [$0.longitude, $0.latitude] }
        return plan
    }

    /// The tiles of all levels as one array (level offsets), what is taken, and the running cost.
    struct State {
        let sizes: AreaTileSizes
        let model: OutputSizeModel
        let focus: PlanFocus.Prepared?
        let offsets: [Int]
        var taken: [Bool]
        var order: [Int] = []
        var used: Int
        var contents = Set<UInt64>()
        let shares: Bool
        var predictedSize = 0
        /// Each tile's marginal cost (by offset) when its content is new, and when it is not:
        /// computed once, asked for several times a tile.
        let freshCosts: [Int]
        let repeatedCosts: [Int]
        /// Parents and children by index.
        var links: PlanLinks

        init(sizes: AreaTileSizes, model: OutputSizeModel, focus: PlanFocus.Prepared?) {
            self.sizes = sizes
            self.model = model
            self.focus = focus
            var offsets = [0]
            for level in sizes.levels { offsets.append(offsets.last! + level.count) }
            self.offsets = offsets
            taken = [Bool](repeating: false, count: offsets.last!)
            order.reserveCapacity(offsets.last!)
            used = model.fixed
            shares = model.format != .mbtiles
            var fresh: [Int] = [], repeated: [Int] = []
            fresh.reserveCapacity(offsets.last!)
            for level in sizes.levels {
                for i in level.keys.indices {
                    fresh.append(model.marginal(length: level.lengths[i], stored: level.stored[i], newContent: true))
                }
            }
            if shares {
                repeated.reserveCapacity(offsets.last!)
                for level in sizes.levels {
                    for i in level.keys.indices {
                        repeated.append(model.marginal(length: level.lengths[i], stored: level.stored[i], newContent: false))
                    }
                }
            }
            freshCosts = fresh
            repeatedCosts = shares ? repeated : fresh
            links = PlanLinks(levels: sizes.levels)
        }

        func locate(_ index: Int) -> (level: Int, i: Int) {
            var low = 0, high = offsets.count - 1
            while low + 1 < high {
                let middle = (low + high) / 2
                if offsets[middle] <= index { low = middle } else { high = middle }
            }
            return (low, index - offsets[low])
        }

        func depth(level: Int, i: Int) -> Double {
            let zoom = sizes.levels[level].zoom
            guard let focus else { return Double(zoom) }
            let key = sizes.levels[level].keys[i]
            return Double(zoom) + focus.falloff(zoom: zoom, x: Int(key >> 32), y: Int(key & 0xFFFF_FFFF))
        }

        /// Whether the tile's parent is taken (a tile of the lowest zoom has none to wait for).
        func parentTaken(level: Int, i: Int) -> Bool {
            guard level > 0 else { return true }
            let parent = Int(links.parents[level][i])
            return parent >= 0 && taken[offsets[level - 1] + parent]
        }

        func cost(level: Int, i: Int) -> Int {
            let index = offsets[level] + i
            return !shares || !contents.contains(sizes.levels[level].contents[i]) ? freshCosts[index] : repeatedCosts[index]
        }

        mutating func take(level: Int, i: Int, cost known: Int? = nil) {
            used += known ?? cost(level: level, i: i)
            if shares { contents.insert(sizes.levels[level].contents[i]) }
            taken[offsets[level] + i] = true
            order.append(offsets[level] + i)
        }
    }
}
