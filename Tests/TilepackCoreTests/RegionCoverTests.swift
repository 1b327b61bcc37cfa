import Foundation
import Testing
import TilepackTestSupport

@testable import TilepackCore

/// The tiles sharing area with a polygon region (`--region`), checked tile for tile against an
/// independent cover: `tools/region/cover.py`, on mercantile's tile bounds and shapely's areas.
@Suite struct RegionCoverTests {
    /// The witness's tiles per zoom.
    static func witnessCover(_ geoJSON: String, zooms: ClosedRange<Int>) throws -> [Int: Set<[Int]>] {
        let dir = try TemporaryDirectory()
        try Data(geoJSON.utf8).write(to: URL(fileURLWithPath: dir.file("area.geojson")))
        let run = try TestSupport.runPython(
            script: "tools/region/cover.py", [dir.file("area.geojson"), "\(zooms.lowerBound)", "\(zooms.upperBound)"])
        guard run.status == 0 else {
            Issue.record("cover.py failed: \(run.errors)")
            return [:]
        }
        let data = run.output
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: [[Int]]])
        return Dictionary(uniqueKeysWithValues: object.map { (Int($0.key)!, Set($0.value)) })
    }

    static func polygon(_ points: [(Double, Double)]) -> String {
        "[" + (points + [points[0]]).map { "[\($0.0),\($0.1)]" }.joined(separator: ",") + "]"
    }

    /// A star of `count` vertices around (lon, lat), radii between `inner` and `outer` degrees.
    static func star(_ lon: Double, _ lat: Double, count: Int, inner: Double, outer: Double, seed: UInt64) -> [(Double, Double)] {
        var state = seed
        func random() -> Double {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(state >> 11) / Double(1 << 53)
        }
        return (0..<count).map { i in
            let angle = Double(i) / Double(count) * 2 * Double.pi
            let radius = inner + (outer - inner) * random()
            return (lon + radius * cos(angle), lat + radius * sin(angle) * 0.7)
        }
    }

    static var cases: [(name: String, geoJSON: String, zooms: ClosedRange<Int>)] {
        let quad = polygon([(2.1, 48.2), (13.4, 52.5), (16.4, 41.1), (-3.7, 40.4)])
        let outer = polygon([(-10, 35), (30, 35), (30, 60), (-10, 60)])
        let hole = polygon([(0, 42), (20, 42), (20, 55), (0, 55)])
        let a = polygon([(-120.5, 30.2), (-100.3, 31.7), (-110.2, 45.9)])
        let b = polygon([(139.1, 35.1), (140.8, 35.4), (140.2, 36.9), (139.6, 36.2)])
        let fiji = polygon(star(179.5, -17.5, count: 60, inner: 1.2, outer: 3.1, seed: 7).map { ($0.0 > 180 ? $0.0 : $0.0, $0.1) })
        let big = polygon(star(10, 50, count: 5_000, inner: 3, outer: 9, seed: 42))
        return [
            ("a quadrilateral over Europe", #"{"type":"Polygon","coordinates":[\#(quad)]}"#, 0...10),
            ("a polygon with a hole", #"{"type":"Polygon","coordinates":[\#(outer),\#(hole)]}"#, 0...9),
            (
                "a FeatureCollection of a Polygon and a MultiPolygon",
                #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[\#(a)]}},{"type":"Feature","properties":null,"geometry":{"type":"MultiPolygon","coordinates":[[\#(b)],[\#(quad)]]}}]}"#,
                0...9
            ),
            (
                "a box along tile edges (lon 0 and 90, the equator)",
                #"{"type":"Polygon","coordinates":[\#(polygon([(0, 0), (90, 0), (90, 40), (0, 40)]))]}"#, 0...8
            ),
            ("across the antimeridian (longitudes past 180)", #"{"type":"Polygon","coordinates":[\#(fiji)]}"#, 0...10),
            ("5,000 vertices", #"{"type":"Polygon","coordinates":[\#(big)]}"#, 0...8),
        ]
    }

    /// The time limit only ends a hang: quiet, the six cases take 5 s, but under stress-ng with
    /// the whole suite beside them one waited past 2 minutes for the starved cooperative pool.
    @Test(.timeLimit(.minutes(15)), .needs(.regionWitness), arguments: cases.indices)
    func coverMatchesTheWitness(_ index: Int) throws {
        let entry = Self.cases[index]
        let region = try GeoRegion(geoJSON: Data(entry.geoJSON.utf8))
        let expected = try Self.witnessCover(entry.geoJSON, zooms: entry.zooms)
        for zoom in entry.zooms {
            let cover = try RegionCover(region: region, zoom: zoom)
            let tiles = Set(cover.map { [$0.x, $0.y] })
            let witness = expected[zoom] ?? []
            #expect(
                tiles == witness,
                "\(entry.name) z\(zoom): only tilepack \(tiles.subtracting(witness).sorted { $0.lexicographicallyPrecedes($1) }.prefix(8)), only the witness \(witness.subtracting(tiles).sorted { $0.lexicographicallyPrecedes($1) }.prefix(8))"
            )
            #expect(cover.count == tiles.count)
            for tile in cover.prefix(50) { #expect(cover.contains(tile)) }
        }
    }

    /// The antimeridian written either way (past 180, or jumping from 179 to -179) is one region.
    @Test func antimeridianEitherWay() throws {
        let past = try GeoRegion(
            geoJSON: Data(#"{"type":"Polygon","coordinates":[[[170,-10],[190,-10],[190,10],[170,10],[170,-10]]]}"#.utf8))
        let jump = try GeoRegion(
            geoJSON: Data(#"{"type":"Polygon","coordinates":[[[170,-10],[-170,-10],[-170,10],[170,10],[170,-10]]]}"#.utf8))
        for zoom in 0...6 {
            let a = try RegionCover(region: past, zoom: zoom), b = try RegionCover(region: jump, zoom: zoom)
            #expect(a.rows == b.rows)
            // Both sides of the antimeridian, nothing in between (at zoom 3 and up).
            if zoom >= 3 {
                let n = 1 << zoom
                #expect(
                    a.contains(TileCoordinate(uncheckedZoom: zoom, x: 0, y: n / 2))
                        && a.contains(TileCoordinate(uncheckedZoom: zoom, x: n - 1, y: n / 2)))
                #expect(!a.contains(TileCoordinate(uncheckedZoom: zoom, x: n / 2, y: n / 2)))
            }
        }
        #expect(past.boundingBox.west == -180 && past.boundingBox.east == 180)
    }

    @Test func badGeoJSONSaysWhatIsWrong() {
        let cases: [(String, String)] = [
            ("[1]", "is not a GeoJSON object with a type"),
            (#"{"type":"LineString","coordinates":[[0,0],[1,1]]}"#, "is a LineString, not an area"),
            (#"{"type":"Polygon","coordinates":[[[0,0],[1,1],[0,0]]]}"#, "fewer than three distinct points"),
            (#"{"type":"Polygon","coordinates":[[[0,0],[1,"a"],[2,0],[0,0]]]}"#, "position 1 is not [longitude, latitude]"),
            (#"{"type":"Polygon","coordinates":[[[0,0],[1,95],[2,0],[0,0]]]}"#, "latitude 95.0 is outside -90...90"),
            (#"{"type":"FeatureCollection","features":[]}"#, "no polygon"),
            ("{", "not JSON"),
        ]
        for (text, says) in cases {
            do {
                _ = try GeoRegion(geoJSON: Data(text.utf8))
                Issue.record("\(text) was accepted")
            } catch {
                #expect(error.description.contains(says), "\(error)")
            }
        }
    }
}
