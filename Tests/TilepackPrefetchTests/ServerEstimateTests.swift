import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

@testable import TilepackPrefetch

/// A loopback tile server answering `/{z}/{x}/{y}.png` with a real archive's tiles
/// (node-mbtiles' plain_3: 2,621 raster tiles of Europe at zooms 4-8, sea tiles small and land
/// tiles large), 404 for a tile it lacks.
final class ArchiveTileServer: Sendable {
    static let europe = GeoBoundingBox(west: -12.48, south: 34.6, east: 42.53, north: 71.52)
    let server: LoopbackHTTPServer
    let tiles: [String: Data]
    var template: String { server.baseURL + "/{z}/{x}/{y}.png" }

    init() throws {
        let archive = try MBTilesArchive(path: TestSupport.fixture("node-mbtiles/plain_3.mbtiles"))
        var tiles: [String: Data] = [:]
        for zoom in 4...8 {
            for tile in try TileCover(boundingBox: Self.europe, zooms: zoom...zoom) {
                if let data = try archive.tileData(at: tile) { tiles["/\(tile.zoom)/\(tile.x)/\(tile.y).png"] = data }
            }
        }
        let served = tiles
        self.tiles = served
        server = try LoopbackHTTPServer { request in
            guard let data = served[request.path] else { return .status(404) }
            return .respond(status: 200, headers: ["Content-Type": "image/png"], body: data)
        }
    }
}

@Suite("Prefetch: the estimate is the planner's stratified sample")
struct ServerEstimateTests {
    /// Issue 46's goal: a sample of at most 2% of the tiles lands within its stated margin of the
    /// full download in at least 19 of 20 seeded runs.
    @Test func theEstimateFromAServerLandsWithinItsMarginIn19Of20SeededRuns() async throws {
        let server = try ArchiveTileServer()
        let directory = try TemporaryDirectory()
        let request = PrefetchRequest.boundingBox(ArchiveTileServer.europe, zooms: 4...8)
        let tiles = try request.cover().count
        // The full download: every tile of the area into a store, and its bytes.
        let full = try MapDataPrefetcher(
            storePath: directory.file("full.mbtiles"), source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration())
        let report = await full.fetch(request).1
        await full.close()
        let truth = report?.bytes ?? 0
        #expect(report?.downloaded == server.tiles.count && truth > 1_500_000, "\(String(describing: report))")
        var within = 0, runs: [String] = []
        for seed in 1...20 {
            let before = server.server.requestCount
            let prefetcher = try MapDataPrefetcher(
                storePath: directory.file("none-\(seed).mbtiles"), source: PrefetchSource(urlTemplate: server.template),
                configuration: testConfiguration {
                    $0.samplesPerZoom = 2
                    $0.sampleSeed = UInt64(seed)
                }, createStore: false)
            let estimate = await prefetcher.estimate(request)
            await prefetcher.close()
            let requests = server.server.requestCount - before
            #expect(estimate.success && estimate.tiles == tiles && estimate.missing == tiles)
            #expect(estimate.sampled * 50 <= tiles && requests == estimate.sampled, "seed \(seed): \(estimate.sampled) sampled, \(requests) requests, of \(tiles)")
            if abs(estimate.bytes - truth) <= estimate.margin { within += 1 }
            runs.append("\(estimate.bytes)±\(estimate.margin)")
        }
        #expect(within >= 19, "\(within) of 20 within the margin of \(truth): \(runs)")
        // Twenty seeds, twenty draws: not one sample repeated.
        #expect(Set(runs).count >= 15, "the seeds drew the same sample: \(runs)")
        print("server estimate: \(within) of 20 within the margin of \(truth) bytes: \(runs)")
    }
}
