import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

@testable import TilepackCore

/// `extract --region` (issue 31): the tiles of the archive that share area with the polygons,
/// as `RegionCover` (checked against mercantile and shapely in RegionCoverTests) gives them.
@Suite struct RegionExtractTests {
    /// A triangle over France and Germany with a hole over Switzerland, in every output format.
    static let geoJSON =
        #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[-2,43],[16,47],[5,55],[-2,43]],[[6,46],[9.5,46],[9.5,47.5],[6,47.5],[6,46]]]}}]}"#

    @Test(arguments: ["mbtiles", "pmtiles", "tilepack"])
    func extractKeepsExactlyTheTilesSharingArea(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let source = TestSupport.fixture("node-mbtiles/plain_3.mbtiles")
        let region = try GeoRegion(geoJSON: Data(Self.geoJSON.utf8))
        var options = ExtractOptions()
        options.region = region
        let report = try TileExtractor.run(source: source, destination: dir.file("out.\(ext)"), options: options)
        var expected = Set<TileCoordinate>()
        var covers: [Int: RegionCover] = [:]
        try MBTilesArchive(path: source).forEachTile { tile, _ in
            if covers[tile.zoom] == nil { covers[tile.zoom] = try RegionCover(region: region, zoom: tile.zoom) }
            if covers[tile.zoom]!.contains(tile) { expected.insert(tile) }
        }
        var got = Set<TileCoordinate>()
        try ArchiveLocation.open(dir.file("out.\(ext)")).forEachTile { tile, _ in got.insert(tile) }
        #expect(got == expected && report.tiles == expected.count)
        #expect(expected.count > 100)
        // The box around the region holds more: the polygon, not its box, chose.
        var boxed = ExtractOptions()
        boxed.bounds = region.boundingBox
        let box = try TileExtractor.run(source: source, destination: dir.file("box.\(ext)"), options: boxed)
        #expect(box.tiles > report.tiles)
        // Nothing inside the hole: Bern at zoom 8.
        let bern = try TileCoordinate(containing: GeoCoordinate(latitude: 46.95, longitude: 7.45), zoom: 8)
        #expect(!got.contains(bern))
        #expect(ArchiveVerifier.run(path: dir.file("out.\(ext)")).errorCount == 0)
    }

    @Test func aRegionAndABoxTogetherAreRefused() throws {
        let dir = try TemporaryDirectory()
        var options = ExtractOptions()
        options.region = try GeoRegion(geoJSON: Data(Self.geoJSON.utf8))
        options.bounds = GeoBoundingBox(west: 0, south: 40, east: 10, north: 50)
        #expect(throws: OperationError.self) {
            try TileExtractor.run(
                source: TestSupport.fixture("node-mbtiles/plain_3.mbtiles"), destination: dir.file("o.mbtiles"), options: options)
        }
    }
}
