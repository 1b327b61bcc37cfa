import ArgumentParser
import Foundation
import TilepackCore
import TilepackOperations
import TilepackPlan
import TilepackPrefetch
import TilepackRender
import TilepackStorage
import TileLayer

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

/// `plan --png`: the picture of a plan (TilepackRender's ``PlanPicture``) and its legend.
enum PlanPNG {
    /// Draws `plan` over `archive`'s tiles (nil: the tint alone) into `path`; the line to print.
    static func write(_ plan: TilePlan, over archive: String?, to path: String, force: Bool) async throws -> String {
        if let archive { try OutputIsInput.refuse(output: path, inputs: [archive]) }
        let picture: (frame: MapFrame, zoom: Int)
        do {
            picture = try await PlanPicture.render(plan: plan, archive: archive)
        } catch let error as RenderError {
            throw CommandFailure(path, "\(error.reason); nothing was written")
        }
        try RenderCommand.writePNG(picture.frame.bitmap, to: path, force: force)
        let legend = plan.levels.filter { $0.taken > 0 }.map { level in
            let colour = PlanPicture.colour(zoom: level.zoom)
            return "zoom \(level.zoom) " + String(format: "#%02X%02X%02X", colour.r, colour.g, colour.b)
        }
        let size = "\(picture.frame.bitmap.width)x\(picture.frame.bitmap.height) px"
        return "wrote \(path): \(size), the view at zoom \(picture.zoom), each place tinted by the deepest zoom it gets: \(legend.joined(separator: ", "))"
    }
}
