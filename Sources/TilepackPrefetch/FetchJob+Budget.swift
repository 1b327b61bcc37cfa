import Foundation
import TilepackCore
import TilepackPlan

/// What a fetch with a budget (``PrefetchOptions/budget``) carried out.
public struct PrefetchBudgetReport: Hashable, Sendable, Codable {
    /// The budget: the most bytes of the area's tiles and their MBTiles structure.
    public var budget: Int
    /// The plan: its tiles, the deepest zoom every tile of the area is in it at, its deepest
    /// zoom, its expected tile bytes and their margin (95%).
    public var plannedTiles: Int
    public var completeZoom: Int?
    public var deepestZoom: Int?
    public var plannedBytes: Int
    public var margin: Int
    /// Tiles of the plan not requested because the area's bytes in the store reached the budget
    /// (0 when the plan fitted, as it does unless the sample underestimated).
    public var leftOut: Int
}

/// A budgeted fetch's plan and where it stops.
struct BudgetState {
    var report: PrefetchBudgetReport
    /// The area's tile bytes in the store when the fetch began.
    var storedAtStart: Int
    /// The most tile bytes: the budget less the MBTiles structure the plan predicts.
    var limit: Int
    /// Kept free for the tiles in flight: the workers times the plan's mean tile.
    var reserve: Int
    var stopped = false

    func report(settled: Int) -> PrefetchBudgetReport {
        var report = report
        report.leftOut = stopped ? max(0, report.plannedTiles - settled) : 0
        return report
    }
}

extension FetchJob {
    /// Plans the budget from a sample of the area (``MapDataPrefetcher/plan(_:budget:format:focus:seed:)``)
    /// and feeds the plan's tiles, shallowest zoom first. False when it could not (the fetch failed).
    func planBudget(_ budget: Int) async -> Bool {
        let plan: TilePlan
        do {
            plan = try await prefetcher.plan(request, budget: budget, format: .mbtiles, focus: options.focus)
        } catch {
            fail(with: "planning the budget failed: \(error)")
            return false
        }
        guard (plan.sampledTiles ?? 0) > 0 else {
            fail(with: "no sample tile could be downloaded to plan the budget")
            return false
        }
        var stored = 0
        do {
            for ranges in cover.levels { for range in ranges { stored += try store.storedTiles(in: range).bytes } }
        } catch {
            fail(with: "reading the store failed: \(error)")
            return false
        }
        let tiles = plan.tilesInWriteOrder
        let workers = max(1, prefetcher.configuration.connectionsPerHost * max(1, source.hosts.count))
        let report = PrefetchBudgetReport(
            budget: budget, plannedTiles: plan.tiles, completeZoom: plan.completeZoom, deepestZoom: plan.deepestZoom,
            plannedBytes: plan.tileBytes, margin: plan.margin, leftOut: 0)
        state.withLock { counters in
            counters.total = tiles.count
            counters.budget = BudgetState(
                report: report, storedAtStart: stored, limit: budget - max(0, plan.predictedSize - plan.tileBytes),
                reserve: workers * (plan.tileBytes / max(1, plan.tiles)))
        }
        feed.withLock { $0 = .list(tiles, 0) }
        return true
    }

    /// Whether another tile may be taken: always without a budget; with one, while the area's
    /// bytes and what the tiles in flight may add stay within it.
    var withinBudget: Bool {
        state.withLock { counters in
            guard var budget = counters.budget else { return true }
            if budget.stopped { return false }
            guard budget.storedAtStart + counters.bytes + budget.reserve <= budget.limit else {
                budget.stopped = true
                counters.budget = budget
                return false
            }
            return true
        }
    }
}
