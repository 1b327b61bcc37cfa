import ArgumentParser
import Foundation
import TilepackCore
import TilepackOperations
import TilepackPlan
import TilepackPrefetch

/// `plan TEMPLATE` and `fetch --budget`: the plan of a tile server's tiles, from the prefetcher's
/// sample (`Specs/plan.md` §4).
enum ServerPlanning {
    /// The prefetcher's request for `request`'s area and zooms (`--min-zoom` default 0).
    static func prefetchRequest(_ request: PlanRequest, template: String) throws -> PrefetchRequest {
        let prefetch = PrefetchRequest(area: PrefetchArea(request.area), zooms: (request.minZoom ?? 0)...(request.maxZoom ?? 0))
        if let reason = prefetch.invalidReason { throw CommandFailure(template, reason) }
        return prefetch
    }

    /// The plan of `template`'s tiles: sampled over HTTP (nothing stored), then chosen.
    static func plan(template: String, request: PlanRequest, server: TileServerOptions) async throws -> TilePlan {
        let prefetch = try prefetchRequest(request, template: template)
        let prefetcher = try MapDataPrefetcher(
            storePath: "", source: server.source(template: template), configuration: server.configuration(), createStore: false,
            transport: server.transport.make(concurrency: server.concurrency))
        let plan = try await prefetcher.plan(prefetch, budget: request.budget, format: request.format, focus: request.focus)
        await prefetcher.close()
        try check(plan, template: template)
        return plan
    }

    /// Refuses a plan no sample tile was measured for, or whose every sample is absent.
    static func check(_ plan: TilePlan, template: String) throws {
        guard let sampled = plan.sampledTiles, sampled > 0 else {
            throw CommandFailure(template, "no sample tile could be downloaded, so there is no size to plan with")
        }
        if plan.levels.allSatisfy({ $0.availableBytes == 0 }) {
            throw CommandFailure(
                template,
                "every one of the \(sampled) sample tiles is absent (404 or 204): is the box outside what the server has, or are its latitude and longitude swapped (the order is west,south,east,north)?"
            )
        }
    }
}
