import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

/// `tilepack plan` and `extract --budget` as a user runs them (issue 46): the focus goal, and a
/// route corridor carried out by extract.
@Suite struct PlanCommandTests {
    static let box = "16.2,48.1,16.5,48.3"
    static let focus = GeoCoordinate(latitude: 48.2, longitude: 16.35)

    /// A tile's size: 2-6 kB, varying by place.
    static func size(_ zoom: Int, _ x: Int, _ y: Int) -> Int {
        var h = UInt64(zoom) &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(x) &* 0xBF58_476D_1CE4_E5B9 ^ UInt64(y) &* 0x94D0_49BB_1331_11EB
        h ^= h >> 29
        return 2_000 + Int(h % 4_000)
    }

    /// Zooms 10-16 of the box (some 4,000 tiles), and each zoom's tile bytes.
    static func archive(in dir: TemporaryDirectory) throws -> (path: String, bytes: [Int: Int]) {
        let path = dir.file("vienna.mbtiles")
        let writer = try MBTilesWriter(creating: path, metadata: TileMetadata(["name": "vienna", "format": "png"]))
        let box = GeoBoundingBox(west: 16.2, south: 48.1, east: 16.5, north: 48.3)
        var bytes: [Int: Int] = [:]
        for zoom in 10...16 {
            for range in try box.tileRanges(atZoom: zoom) {
                for tile in range {
                    let length = size(zoom, tile.x, tile.y)
                    try writer.write([0x89, 0x50, 0x4E, 0x47] + [UInt8](repeating: UInt8(truncatingIfNeeded: tile.x ^ tile.y), count: length - 4), at: tile)
                    bytes[zoom, default: 0] += length
                }
            }
        }
        try writer.finish()
        return (path, bytes)
    }

    static func json(_ result: CommandOutput) throws -> [String: Any] {
        try #require(result.status == 0, "\(result)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
    }

    static func fileSize(_ path: String) throws -> Int { Int(try #require(FileSystem.lstat(path)).st_size) }

    /// Issue 46's goal: the uniform plan stops at least 3 zooms short of the archive's deepest and
    /// is the deepest complete zoom that fits; with --focus the tile under the point is taken 2
    /// zooms deeper, and the output stays under the budget.
    @Test func aFocusGetsTwoZoomsMoreThanTheUniformPlan() async throws {
        let dir = try TemporaryDirectory("plan-cli")
        let (source, bytes) = try Self.archive(in: dir)
        let through13 = (10...13).reduce(0) { $0 + bytes[$1]! }
        let budget = through13 + 64 * 1024 + bytes[14]! / 2
        #expect(budget < through13 + bytes[14]!)  // zoom 14 does not fit whole
        let uniform = try Self.json(await Binary.run(["plan", source, "--bbox", Self.box, "--budget", "\(budget)B", "--json"]))
        #expect(uniform["completeZoom"] as? Int == 13, "\(uniform)")
        #expect(uniform["exact"] as? Bool == true)
        #expect((uniform["predictedSize"] as? Int ?? .max) <= budget)

        let output = dir.file("focused.mbtiles")
        let arguments = [
            "extract", source, output, "--bbox", Self.box, "--budget", "\(budget)B", "--focus", "16.35,48.2", "--focus-radius", "300", "--quiet",
        ]
        let extracted = try await Binary.run(arguments)
        try #require(extracted.status == 0, "\(extracted)")
        #expect(try Self.fileSize(output) <= budget)
        let archive = try MBTilesArchive(path: output)
        let point = try WebMercator.worldPoint(of: Self.focus)
        let under = TileCoordinate(uncheckedZoom: 15, x: Int(point.x * 32768), y: Int(point.y * 32768))
        #expect(try archive.tileData(at: under) != nil, "the tile under the focus at zoom 15")
        // Detail falls off: far from the point the focused map is shallower than the uniform one.
        let southWest = try WebMercator.worldPoint(of: GeoCoordinate(latitude: 48.101, longitude: 16.201))
        let corner = TileCoordinate(uncheckedZoom: 13, x: Int(southWest.x * 8192), y: Int(southWest.y * 8192))
        #expect(try archive.tileData(at: corner) == nil)
    }

    /// `extract --budget --route --radius` plans the corridor as `plan --route` does: the same
    /// tile bytes, every tile in the corridor, the file under the budget.
    @Test func extractWithABudgetTakesARouteCorridor() async throws {
        let dir = try TemporaryDirectory("plan-cli")
        let (source, _) = try Self.archive(in: dir)
        let route = dir.file("route.geojson")
        try #"{"type": "LineString", "coordinates": [[16.22, 48.12], [16.35, 48.2], [16.48, 48.28]]}"#.write(
            toFile: route, atomically: true, encoding: .utf8)
        let corridor = ["--route", route, "--radius", "600", "--budget", "1.5MB"]
        let plan = try Self.json(await Binary.run(["plan", source] + corridor + ["--output-format", "pmtiles", "--json"]))
        let output = dir.file("corridor.pmtiles")
        let report = try Self.json(await Binary.run(["extract", source, output] + corridor + ["--json", "--quiet"]))
        #expect(report["bytes"] as? Int == plan["tileBytes"] as? Int, "plan \(plan), extract \(report)")
        #expect(report["tiles"] as? Int == plan["tiles"] as? Int)
        #expect(try Self.fileSize(output) <= 1_500_000)
        let points = [GeoCoordinate(latitude: 48.12, longitude: 16.22), Self.focus, GeoCoordinate(latitude: 48.28, longitude: 16.48)]
        let archive = try PMTilesArchive(path: output)
        var outside: [TileCoordinate] = []
        let covers = try (10...16).map { try RouteCover(route: points, radius: 600, zoom: $0) }
        try archive.forEachTile { tile, _ in
            if !covers[tile.zoom - 10].contains(tile) { outside.append(tile) }
        }
        #expect(outside.isEmpty, "tiles outside the corridor: \(outside.prefix(5))")
    }
}
