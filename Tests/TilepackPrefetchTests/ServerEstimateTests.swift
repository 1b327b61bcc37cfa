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

    /// The store's tiles of the area: their bytes, and whether every one past the lowest zoom has its parent.
    static func storedPyramid(_ path: String) throws -> (tiles: Int, bytes: Int, zooms: Set<Int>, orphans: Int) {
        let archive = try MBTilesArchive(path: path)
        var stored: [TileCoordinate: Int] = [:]
        for zoom in 4...8 {
            for tile in try TileCover(boundingBox: ArchiveTileServer.europe, zooms: zoom...zoom) {
                if let data = try archive.tileData(at: tile), !data.isEmpty { stored[tile] = data.count }
            }
        }
        let orphans = stored.keys.filter { $0.zoom > 4 && stored[$0.parent!] == nil }.count
        return (stored.count, stored.values.reduce(0, +), Set(stored.keys.map(\.zoom)), orphans)
    }

    /// `fetch --budget`'s library half: the plan of a sample is fetched, shallowest zoom first, and
    /// the area's stored bytes stay within the budget.
    @Test func aFetchWithABudgetStoresThePlanWithinTheBudget() async throws {
        let server = try ArchiveTileServer()
        let directory = try TemporaryDirectory()
        let request = PrefetchRequest.boundingBox(ArchiveTileServer.europe, zooms: 4...8)
        let path = directory.file("budget.mbtiles")
        let prefetcher = try MapDataPrefetcher(
            storePath: path, source: PrefetchSource(urlTemplate: server.template), configuration: testConfiguration { $0.sampleSeed = 3 })
        let budget = 600_000
        let report = try #require(await prefetcher.fetch(request, options: PrefetchOptions(budget: budget)).1)
        await prefetcher.close()
        let plan = try #require(report.budget, "\(report)")
        let stored = try Self.storedPyramid(path)
        #expect(report.status == .success && report.failed == 0, "\(report)")
        // Within the budget (the plan keeps its 95% margin free: 1.7 MB would be the whole area),
        // every zoom 4 and 5 tile, deeper tiles only under their parents.
        let file = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? .max
        #expect(stored.bytes <= budget && stored.bytes > budget / 4 && file <= budget, "\(stored.bytes) bytes stored, file \(file), budget \(budget): \(plan)")
        #expect(stored.orphans == 0 && stored.zooms.contains(4) && (plan.completeZoom ?? 0) >= 5 && (plan.deepestZoom ?? 0) >= 6, "\(stored) \(plan)")
        #expect(report.downloaded + report.absent + plan.leftOut == plan.plannedTiles, "\(report)")
        print("fetch --budget \(budget): \(stored.tiles) tiles, \(stored.bytes) tile bytes, store file \(file) bytes; \(plan)")
        // A budget of 0 is refused.
        let refused = try MapDataPrefetcher(storePath: directory.file("zero.mbtiles"), source: PrefetchSource(urlTemplate: server.template))
        #expect(refused.fetchMapData(for: request, options: PrefetchOptions(budget: 0)).error == .invalidParameters)
        await refused.close()
    }

    /// `plan TEMPLATE` and `fetch TEMPLATE OUT --budget` from the command line.
    @Test func planAndFetchATileServerWithABudget() async throws {
        let binary = try tilepackBinary()
        let server = try ArchiveTileServer()
        let directory = try TemporaryDirectory()
        let area = ["--bbox", "-12.48,34.6,42.53,71.52", "--min-zoom", "4", "--max-zoom", "8", "--budget", "600kB"]
        let plan = try await runTilepack(binary, ["plan", server.template] + area + ["--json"])
        #expect(plan.status == 0, "\(plan.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(plan.stdout.utf8)) as? [String: Any])
        let predicted = object["predictedSize"] as? Int ?? .max, margin = object["margin"] as? Int ?? .max
        #expect(object["exact"] as? Bool == false && margin > 0 && predicted + margin <= 600_000, "\(plan.stdout)")
        #expect((object["sampledTiles"] as? Int ?? .max) * 50 <= 2_621 && server.server.requestCount <= 52, "\(server.server.requestCount) requests")
        let text = try await runTilepack(binary, ["plan", server.template] + area)
        #expect(text.status == 0 && text.stdout.contains("estimated from ") && text.stdout.contains("at 95% confidence"), "\(text)")
        let path = directory.file("out.mbtiles")
        let fetch = try await runTilepack(binary, ["fetch", server.template, path] + area)
        #expect(fetch.status == 0 && fetch.stdout.contains("budget 600.0 kB: planned "), "\(fetch)")
        #expect(try Self.storedPyramid(path).bytes <= 600_000)
        let noZoom = try await runTilepack(binary, ["plan", server.template, "--bbox", "-12,35,42,71", "--budget", "1MB"])
        #expect(noZoom.status != 0 && noZoom.stderr.contains("--max-zoom"), "\(noZoom)")
    }
}
