import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

@testable import TilepackPrefetch

/// `tilepack fetch --region` (issue 31): exactly the tiles sharing area with the polygons are
/// asked for and stored (RegionCover, checked against mercantile and shapely in RegionCoverTests).
@Suite struct RegionFetchTests {
    /// A polygon over the Alps with a hole, and a second polygon across the antimeridian.
    static let geoJSON =
        #"{"type":"MultiPolygon","coordinates":[[[[5.5,44.2],[16.4,46.1],[13.1,48.3],[6.2,47.9],[5.5,44.2]],[[9,46],[11,46],[11,47],[9,47],[9,46]]],[[[177.5,-19],[182.5,-19],[181,-15.5],[177.5,-15.5],[177.5,-19]]]]}"#

    @Test func fetchAsksForAndStoresExactlyTheRegionsTiles() async throws {
        let binary = try tilepackBinary()
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let area = directory.file("area.geojson")
        try Data(Self.geoJSON.utf8).write(to: URL(fileURLWithPath: area))
        let path = directory.file("region.mbtiles")
        let result = try await runTilepack(
            binary, ["fetch", server.template, path, "--region", area, "--zoom", "0-8", "--quiet", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let region = try GeoRegion(geoJSON: Data(Self.geoJSON.utf8))
        var expected = Set<TileCoordinate>()
        for zoom in 0...8 { expected.formUnion(try RegionCover(region: region, zoom: zoom)) }
        let asked = Set(server.server.requests.compactMap { TileServer.tile(path: $0.path) })
        #expect(asked == expected)
        var stored = Set<TileCoordinate>()
        try MBTilesArchive(path: path).forEachTile { tile, _ in stored.insert(tile) }
        #expect(stored == expected)
        // Both sides of the antimeridian.
        #expect(expected.contains { $0.zoom == 8 && $0.x == 0 } && expected.contains { $0.zoom == 8 && $0.x == 255 })
        // The same command again resumes the same region: nothing asked again.
        let before = server.server.requestCount
        let again = try await runTilepack(binary, ["fetch", server.template, path, "--region", area, "--zoom", "0-8", "--quiet"])
        #expect(again.status == 0 && server.server.requestCount == before, "\(again.stderr)")
    }

    @Test func regionRequestRoundTripsThroughTheStore() throws {
        let request = PrefetchRequest(area: .region(try GeoRegion(geoJSON: Data(Self.geoJSON.utf8))), zooms: 2...9)
        #expect(PrefetchRequest(storedJSON: request.storedJSON) == request, "\(request.storedJSON)")
        #expect(request.invalidReason == nil)
    }

    @Test func fetchRefusesARegionWithABoxOrALine() async throws {
        let binary = try tilepackBinary()
        let directory = try TemporaryDirectory()
        let area = directory.file("area.geojson")
        try Data(Self.geoJSON.utf8).write(to: URL(fileURLWithPath: area))
        var result = try await runTilepack(
            binary,
            [
                "fetch", "http://127.0.0.1:9/{z}/{x}/{y}.png", directory.file("o.mbtiles"), "--region", area, "--bbox", "0,0,1,1", "--zoom",
                "1",
            ])
        #expect(result.status != 0 && result.stderr.contains("give exactly one of --bbox, --route and --region"), "\(result.stderr)")
        try Data(#"{"type":"LineString","coordinates":[[0,0],[1,1]]}"#.utf8).write(to: URL(fileURLWithPath: area))
        result = try await runTilepack(
            binary, ["fetch", "http://127.0.0.1:9/{z}/{x}/{y}.png", directory.file("o.mbtiles"), "--region", area, "--zoom", "1"])
        #expect(result.status != 0 && result.stderr.contains("is a LineString, not an area"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("o.mbtiles")))
    }
}
