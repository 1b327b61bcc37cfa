// The code of the article "Planning a download within the space you have"
// (Sources/Tilepack/Tilepack.docc), compiled here and run by DocSampleTests. tools/check-docs.sh
// checks that the article shows the lines between the markers, unchanged.
// docs:begin
import Tilepack

/// Plans the most detailed map of western Europe that fits in `freeBytes` (what the app can
/// spare), deepest around `home`, before anything is downloaded; downloads that plan when
/// `accept` says yes to it.
func downloadWithinSpace(
    template: String, storePath: String, freeBytes: Int, home: GeoCoordinate, accept: (TilePlan) -> Bool
) async throws -> PrefetchReport? {
    let prefetcher = try MapDataPrefetcher(storePath: storePath, source: PrefetchSource(urlTemplate: template))
    let request = PrefetchRequest.boundingBox(GeoBoundingBox(west: -10, south: 35, east: 30, north: 60), zooms: 0...4)
    let focus = try PlanFocus(points: [home], radius: 300_000)

    // The plan, from a sample of the server's tiles (2% of the area's, at least 8 a zoom).
    let plan = try await prefetcher.plan(request, budget: freeBytes, focus: focus)
    let confidence = Int((plan.confidence ?? 1) * 100)
    print("every tile to zoom \(plan.completeZoom ?? -1), zoom \(plan.deepestZoom ?? -1) around home")
    print("about \(plan.predictedSize) ± \(plan.margin) bytes (\(confidence)% confidence) of \(freeBytes)")
    guard accept(plan) else {
        await prefetcher.close()
        return nil
    }

    // The same plan, downloaded shallowest zoom first; it stops before the area passes the budget.
    let (_, report) = await prefetcher.fetch(request, options: PrefetchOptions(budget: freeBytes, focus: focus))
    await prefetcher.close()
    return report
}
// docs:end
