import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@Suite struct RouteCoverTests {
    /// Points along the route, each segment straight in Mercator and the short way round, computed
    /// here with the Gudermannian form (independent of the library's asinh/atan(sinh) form).
    static func samples(of route: [GeoCoordinate], perSegment: Int) -> [GeoCoordinate] {
        guard route.count > 1 else { return route }
        func mercatorY(_ latitude: Double) -> Double { log(tan(.pi / 4 + latitude * .pi / 360)) }
        var points: [GeoCoordinate] = []
        for (a, b) in zip(route, route.dropFirst()) {
            var eastOfA = b.longitude
            if b.longitude - a.longitude > 180 { eastOfA -= 360 } else if b.longitude - a.longitude < -180 { eastOfA += 360 }
            let ya = mercatorY(a.latitude), yb = mercatorY(b.latitude)
            for step in 0...perSegment {
                let t = Double(step) / Double(perSegment)
                var longitude = a.longitude + (eastOfA - a.longitude) * t
                if longitude > 180 { longitude -= 360 } else if longitude < -180 { longitude += 360 }
                let latitude = (2 * atan(exp(ya + (yb - ya) * t)) - .pi / 2) * 180 / .pi
                points.append(GeoCoordinate(latitude: latitude, longitude: longitude))
            }
        }
        return points
    }

    /// Checks both accuracy promises against brute force:
    /// - conservative: random points whose distance from the route is at most the radius (measured
    ///   by haversine on the mean-radius sphere to dense route samples, an upper bound) lie in
    ///   covered tiles;
    /// - tight: every covered tile has a point within `slack * radius` (+ the sampling step) of the route.
    static func checkAccuracy(route: [GeoCoordinate], radius: Double, zoom: Int, slack: Double, seed: UInt64) throws -> RouteCover {
        let cover = try RouteCover(route: route, radius: radius, zoom: zoom)
        let dense = samples(of: route, perSegment: 400)
        let step = zip(dense, dense.dropFirst()).map { haversine($0, $1) }.max() ?? 0
        var random = SplitMix64(seed: seed)
        let margin = radius * 1.6 / 111_000
        var inside = 0
        for _ in 0..<1500 {
            let anchor = dense.randomElement(using: &random) ?? route[0]
            let latitude = min(max(anchor.latitude + Double.random(in: -margin...margin, using: &random), -85), 85)
            let stretch = margin / max(cos(latitude * .pi / 180), 0.05)
            var longitude = anchor.longitude + Double.random(in: -stretch...stretch, using: &random)
            if longitude > 180 { longitude -= 360 } else if longitude < -180 { longitude += 360 }
            let point = GeoCoordinate(latitude: latitude, longitude: longitude)
            let distance = dense.map { haversine($0, point) }.min() ?? .infinity
            if distance <= radius {
                inside += 1
                let tile = try WebMercator.tile(containing: point, zoom: zoom)
                #expect(cover.contains(tile), "\(point) is \(distance) m from the route but its tile \(tile) is not covered")
            }
        }
        #expect(inside > 100, "too few sample points fell within the radius to test anything")
        for tile in cover {
            let box = tile.boundingBox
            let nearest =
                dense.map { p -> Double in
                    var longitude = p.longitude
                    let centre = (box.west + box.east) / 2
                    if longitude - centre > 180 { longitude -= 360 } else if longitude - centre < -180 { longitude += 360 }
                    let q = GeoCoordinate(
                        latitude: min(max(p.latitude, box.south), box.north), longitude: min(max(longitude, box.west), box.east))
                    return haversine(p, q)
                }.min() ?? .infinity
            #expect(nearest <= radius * slack + step, "\(tile) is \(nearest) m from the route, radius \(radius) m")
        }
        return cover
    }

    @Test func pointRoute() throws {
        let gate = GeoCoordinate(latitude: 52.516275, longitude: 13.377704)
        let tile = try WebMercator.tile(containing: gate, zoom: 18)
        let single = try RouteCover(route: [gate], radius: 0, zoom: 18)
        #expect(Array(single) == [tile] && single.count == 1)
        // Radius 0 on a tile corner: the four closed tiles meeting there.
        let corner = try RouteCover(route: [GeoCoordinate(latitude: 0, longitude: 0)], radius: 0, zoom: 3)
        #expect(Set(corner.map(\.description)) == ["3/3/3", "3/4/3", "3/3/4", "3/4/4"])
        let around = try Self.checkAccuracy(route: [gate], radius: 1500, zoom: 15, slack: 1.03, seed: 1)
        #expect(around.contains(try WebMercator.tile(containing: gate, zoom: 15)))
        #expect(around.count > 9 && around.count < 100)
    }

    @Test func routeThroughBerlin() throws {
        let route = [
            GeoCoordinate(latitude: 52.5200, longitude: 13.4050),
            GeoCoordinate(latitude: 52.4500, longitude: 13.2000),
            GeoCoordinate(latitude: 52.4000, longitude: 13.0600),
        ]
        let cover = try Self.checkAccuracy(route: route, radius: 2000, zoom: 13, slack: 1.03, seed: 2)
        #expect(cover.count == Array(cover).count && Set(cover).count == cover.count)
        #expect(cover.rows.map(\.row) == cover.rows.map(\.row).sorted())
        for row in cover.rows {
            for (a, b) in zip(row.columns, row.columns.dropFirst()) { #expect(a.upperBound + 1 < b.lowerBound) }
        }
    }

    @Test func longRouteAcrossLatitudes() throws {
        // Oslo -> Tromsø -> Svalbard: the Mercator scale grows from 1.9 to 4.6 along the way.
        let route = [
            GeoCoordinate(latitude: 59.91, longitude: 10.75),
            GeoCoordinate(latitude: 69.65, longitude: 18.96),
            GeoCoordinate(latitude: 78.22, longitude: 15.65),
        ]
        _ = try Self.checkAccuracy(route: route, radius: 20_000, zoom: 8, slack: 1.06, seed: 3)
    }

    @Test func routeAcrossTheAntimeridian() throws {
        let route = [GeoCoordinate(latitude: -16.5, longitude: 179.9), GeoCoordinate(latitude: -16.4, longitude: -179.9)]
        let cover = try Self.checkAccuracy(route: route, radius: 800, zoom: 12, slack: 1.03, seed: 4)
        let last = (1 << 12) - 1
        // The short way: only columns beside the antimeridian, never the 4000 columns the long way round.
        let columns = Set(cover.map(\.x))
        #expect(columns.allSatisfy { $0 <= 3 || $0 >= last - 3 })
        #expect(columns.contains(0) && columns.contains(last))
        #expect(cover.count < 40)
        for point in route { #expect(cover.contains(try WebMercator.tile(containing: point, zoom: 12))) }
        // The same route turned by 180 degrees about the pole axis covers the same tiles, shifted by half the columns.
        let turned = route.map {
            GeoCoordinate(latitude: $0.latitude, longitude: $0.longitude > 0 ? $0.longitude - 180 : $0.longitude + 180)
        }
        let shifted = try RouteCover(route: turned, radius: 800, zoom: 12)
        #expect(Set(shifted.map(\.description)) == Set(cover.map { "12/\(($0.x + (1 << 11)) % (1 << 12))/\($0.y)" }))
        // Written with 180 / -180 as the meeting point, the route is unchanged.
        let viaEdge = try RouteCover(route: [route[0], GeoCoordinate(latitude: -16.45, longitude: 180), route[1]], radius: 800, zoom: 12)
        #expect(Set(viaEdge).isSuperset(of: Set(cover)) && viaEdge.count <= cover.count + 2)
    }

    @Test func bufferReachingThePoleTakesWholeRows() throws {
        let cover = try RouteCover(route: [GeoCoordinate(latitude: 80, longitude: 30)], radius: 1_200_000, zoom: 4)
        #expect(cover.rows.first?.row == 0)
        #expect(cover.rows.first?.columns == [0...15])
        _ = try Self.checkAccuracy(route: [GeoCoordinate(latitude: 84.9, longitude: -150)], radius: 30_000, zoom: 6, slack: 40, seed: 5)
    }

    /// 20 degrees of equator at zoom 30 (3.7 cm tiles) with a 100 m radius: 3 * 10^11 tiles, counted
    /// from 5 400 rows of column ranges, never enumerated.
    @Test func countsWithoutEnumerating() throws {
        let route = [GeoCoordinate(latitude: 0.001, longitude: -10), GeoCoordinate(latitude: 0.001, longitude: 10)]
        let cover = try RouteCover(route: route, radius: 100, zoom: 30)
        let tileSize = WebMercator.earthCircumference / Double(1 << 30)
        let expectedRows = 2 * 100 * RouteCover.ellipsoidFactor / tileSize
        #expect(abs(Double(cover.rows.count) - expectedRows) < 3)
        let tilesPerRow = Double(1 << 30) * 20 / 360
        #expect(Double(cover.count) > (Double(cover.rows.count) - 200) * tilesPerRow)
        #expect(Double(cover.count) < Double(cover.rows.count) * (tilesPerRow + 2 * expectedRows))
        #expect(cover.ranges.reduce(0) { $0 + $1.count } == cover.count)
        #expect(cover.contains(try WebMercator.tile(containing: GeoCoordinate(latitude: 0.001, longitude: 3.3), zoom: 30)))
        #expect(!cover.contains(try WebMercator.tile(containing: GeoCoordinate(latitude: 0.1, longitude: 3.3), zoom: 30)))
        // Zoom 0: one tile whatever the radius.
        #expect(try RouteCover(route: route, radius: 1e7, zoom: 0).count == 1)
    }

    @Test func rejectsBadRoutes() {
        let here = GeoCoordinate(latitude: 1, longitude: 1)
        #expect(throws: GeometryError.emptyRoute) { try RouteCover(route: [], radius: 10, zoom: 3) }
        #expect(throws: GeometryError.invalidRadius(-1)) { try RouteCover(route: [here], radius: -1, zoom: 3) }
        #expect(throws: GeometryError.self) { try RouteCover(route: [here], radius: .nan, zoom: 3) }
        #expect(throws: GeometryError.invalidRadius(.infinity)) { try RouteCover(route: [here], radius: .infinity, zoom: 3) }
        #expect(throws: GeometryError.zoomOutOfRange(31)) { try RouteCover(route: [here], radius: 1, zoom: 31) }
        #expect(throws: GeometryError.latitudeOutOfRange(95)) {
            try RouteCover(route: [here, GeoCoordinate(latitude: 95, longitude: 0)], radius: 1, zoom: 3)
        }
        #expect(throws: GeometryError.self) {
            try RouteCover(route: [here, GeoCoordinate(latitude: 0, longitude: .nan)], radius: 1, zoom: 3)
        }
    }
}
