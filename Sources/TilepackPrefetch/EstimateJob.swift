import Foundation
import TilepackCore
import TilepackStorage

/// One estimate: the exact count of the area's tiles and of those missing from the store, and
/// the bytes of the missing ones: the budget planner's stratified sample of the area
/// (``MapDataPrefetcher/sampleSizes(for:seed:)``, `Specs/plan.md` §4) estimates the bytes of all
/// the area's tiles with a 95% margin, and the bytes already stored (exact, from the store) are
/// taken off; the margin is the sample's.
final class EstimateJob: RequestJob, @unchecked Sendable {
    unowned let prefetcher: MapDataPrefetcher
    let store: MBTilesTileStore?
    let request: PrefetchRequest
    let cover: PrefetchCover
    private let id = Locked(-1)
    private let result = Locked<PrefetchEstimate?>(nil)

    init(prefetcher: MapDataPrefetcher, store: MBTilesTileStore?, request: PrefetchRequest, cover: PrefetchCover) {
        self.prefetcher = prefetcher
        self.store = store
        self.request = request
        self.cover = cover
    }

    var finalReport: PrefetchReport? { nil }
    var finalEstimate: PrefetchEstimate? { result.withLock { $0 } }

    func start(id: Int) {
        self.id.withLock { $0 = id }
    }

    func cancel() {}

    func run() async {
        let requestId = id.withLock { $0 }
        var estimate = PrefetchEstimate(
            requestId: requestId, tiles: cover.count, missing: 0, bytes: 0, margin: 0, kilobytes: 0,
            success: false, sampled: 0, sampledPresent: 0, error: nil)
        do {
            let stored = try storedTiles()
            estimate.missing = cover.count - stored.tiles
            let sample = try await prefetcher.sampleSizes(for: request)
            let measured = sample.strata.flatMap(\.sizes)
            estimate.sampled = sample.picks.count
            estimate.sampledPresent = measured.filter { $0 > 0 }.count
            if estimate.missing == 0 {
                estimate.success = true
            } else if measured.isEmpty {
                estimate.error = "no sample tile could be downloaded"
            } else {
                let (bytes, margin) = sample.total(confidence: 0.95)
                estimate.bytes = max(0, Int(bytes.rounded()) - stored.bytes)
                estimate.margin = Int(margin.rounded(.up))
                estimate.success = true
            }
        } catch let error as GeometryError {
            estimate.error = "\(error)"
        } catch {
            estimate.error = "reading the store failed: \(error)"
        }
        if estimate.success {
            estimate.kilobytes = (estimate.bytes + 1023) / 1024
        } else {
            estimate.bytes = 0
            estimate.margin = 0
        }
        result.withLock { $0 = estimate }
        prefetcher.hub.emit(.estimate(estimate), from: prefetcher)
    }

    /// The area's tiles the store holds (stored or recorded absent), and their bytes.
    private func storedTiles() throws(TileArchiveError) -> (tiles: Int, bytes: Int) {
        guard let store else { return (0, 0) }
        var tiles = 0, bytes = 0
        for ranges in cover.levels {
            for range in ranges {
                let held = try store.storedTiles(in: range)
                tiles += held.tiles
                bytes += held.bytes
            }
        }
        return (tiles, bytes)
    }
}
