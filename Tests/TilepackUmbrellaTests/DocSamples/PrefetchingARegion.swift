// The code of the article "Prefetching a region for offline use" (Sources/Tilepack/Tilepack.docc),
// compiled here and run by DocSampleTests. tools/check-docs.sh checks that the article shows the
// lines between the markers, unchanged.
// docs:begin
import Tilepack

/// Downloads zooms 0-4 of western Europe from the tile server `template` names into the MBTiles
/// store at `storePath`, printing the progress; cancels once `cancelAt` of it is done, when given.
func prefetchEurope(template: String, storePath: String, cancelAt: Double? = nil) async throws -> PrefetchReport? {
    let source = PrefetchSource(urlTemplate: template)  // such as "https://tiles.example.com/{z}/{x}/{y}.png"
    let prefetcher = try MapDataPrefetcher(storePath: storePath, source: source)
    let request = PrefetchRequest.boundingBox(GeoBoundingBox(west: -10, south: 35, east: 30, north: 60), zooms: 0...4)

    let estimate = await prefetcher.estimate(request)
    print("\(estimate.missing) of \(estimate.tiles) tiles to download, about \(estimate.kilobytes) KB")

    // Listen first, then start: the stream sees every event of the fetch.
    let events = prefetcher.events()
    let submission = prefetcher.fetchMapData(for: request)
    guard submission.accepted else {
        print("refused: \(submission.error) \(submission.reason ?? "")")
        return nil
    }
    var report: PrefetchReport?
    for await event in events {
        switch event {
        case .progress(let progress) where progress.requestId == submission.requestId:
            print("\(Int(progress.fraction * 100))%: \(progress.done) of \(progress.tiles) tiles")
            if let cancelAt, progress.fraction >= cancelAt { prefetcher.cancel(submission.requestId) }
        case .status(let id, let status, let final) where id == submission.requestId && status.isFinal:
            report = final  // success, failure or cancelled, exactly once
        default:
            break
        }
        if report != nil { break }
    }
    await prefetcher.close()
    return report
}
// docs:end
