import Foundation

/// An area of the globe: polygons with holes, as GeoJSON gives them (a Polygon, a MultiPolygon, or
/// a FeatureCollection of them). Edges are straight in longitude and latitude, as RFC 7946
/// defines a GeoJSON line; each edge takes the shorter way round the globe, so a ring from 170 to
/// -170 crosses the antimeridian (20 degrees), it does not go round the world.
public struct GeoRegion: Hashable, Sendable {
    /// One polygon: its outer ring first, then its holes. Rings are open (no repeated last point).
    public struct Polygon: Hashable, Sendable {
        public let rings: [[GeoCoordinate]]
    }

    public let polygons: [Polygon]

    /// - Throws: ``GeometryError/invalidRegion(_:)`` for a region without a polygon or a ring of
    ///   fewer than three distinct points; the coordinate errors of non-finite values or
    ///   latitudes outside -90...90.
    public init(polygons rings: [[[GeoCoordinate]]]) throws(GeometryError) {
        var polygons: [Polygon] = []
        for (p, polygon) in rings.enumerated() {
            var kept: [[GeoCoordinate]] = []
            for (r, ring) in polygon.enumerated() {
                var points = ring
                if points.count > 1, points.first == points.last { points.removeLast() }
                for point in points {
                    guard point.latitude.isFinite, point.longitude.isFinite else {
                        throw .notFinite(latitude: point.latitude, longitude: point.longitude)
                    }
                    guard (-90...90).contains(point.latitude) else { throw .latitudeOutOfRange(point.latitude) }
                }
                guard Set(points).count >= 3 else {
                    throw .invalidRegion("ring \(r) of polygon \(p) has fewer than three distinct points")
                }
                kept.append(points)
            }
            guard !kept.isEmpty else { throw .invalidRegion("polygon \(p) has no ring") }
            polygons.append(Polygon(rings: kept))
        }
        guard !polygons.isEmpty else { throw .invalidRegion("no polygon") }
        self.polygons = polygons
    }

    /// The box around every polygon (longitudes -180...180 whole when a polygon crosses the antimeridian).
    public var boundingBox: GeoBoundingBox {
        var west = Double.infinity, east = -Double.infinity, south = 90.0, north = -90.0
        for polygon in polygons {
            for ring in Self.unwrapped(polygon) {
                for point in ring {
                    west = Swift.min(west, point.longitude)
                    east = Swift.max(east, point.longitude)
                    south = Swift.min(south, point.latitude)
                    north = Swift.max(north, point.latitude)
                }
            }
        }
        if west < -180 || east > 180 { (west, east) = (-180, 180) }
        return GeoBoundingBox(west: west, south: south, east: east, north: north)
    }

    /// The rings with longitudes made continuous (each step the shorter way round), holes moved
    /// by whole turns next to their outer ring.
    static func unwrapped(_ polygon: Polygon) -> [[GeoCoordinate]] {
        var result: [[GeoCoordinate]] = []
        var anchor: Double?
        for ring in polygon.rings {
            var points: [GeoCoordinate] = []
            var previous = WebMercator.wrappedLongitude(ring[0].longitude)
            for point in ring {
                var longitude = WebMercator.wrappedLongitude(point.longitude)
                longitude += 360 * ((previous - longitude) / 360).rounded()
                points.append(GeoCoordinate(latitude: point.latitude, longitude: longitude))
                previous = longitude
            }
            let mean = points.reduce(0) { $0 + $1.longitude } / Double(points.count)
            if let anchor {
                let shift = 360 * ((anchor - mean) / 360).rounded()
                points = points.map { GeoCoordinate(latitude: $0.latitude, longitude: $0.longitude + shift) }
            } else {
                anchor = mean
            }
            result.append(points)
        }
        return result
    }
}

/// The tiles at one zoom that share area with a ``GeoRegion``: every tile whose inside meets the
/// inside of a polygon (a tile the region touches only along its edge or at a corner is not one),
/// exactly, for polygons with holes, across the antimeridian and with any number of vertices.
///
/// A tile is in the cover when an edge of the region passes through its inside (then the region
/// has area on one side of it, in the tile), or else when a point inside it is inside the region
/// (even-odd rule per polygon, so holes are holes; the polygons are joined). Work is proportional
/// to the rows each edge spans plus the rows of the region; rows are kept as column ranges.
package struct RegionCover: Hashable, Sendable, RowCover {
    package let zoom: Int
    /// For each XYZ row that holds tiles, in ascending order, its columns as sorted, disjoint ranges.
    package let rows: [RouteCover.Row]

    package init(region: GeoRegion, zoom: Int) throws(GeometryError) {
        try GeometryError.check(zoom: zoom)
        self.zoom = zoom
        var grid = CoverGrid(zoom: zoom)
        for polygon in region.polygons {
            var crossings: [Int: [Double]] = [:]
            for ring in GeoRegion.unwrapped(polygon) {
                for i in ring.indices {
                    grid.addEdge(from: ring[i], to: ring[(i + 1) % ring.count], crossings: &crossings)
                }
            }
            grid.addInside(crossings)
        }
        rows = grid.spans.keys.sorted().map { row in RouteCover.Row(row: row, columns: Self.merged(grid.spans[row]!)) }
    }

    /// The cover as it is built: the column ranges found in each row, and the grid's geometry.
    private struct CoverGrid {
        let n: Int
        let scale: Double
        var spans: [Int: [ClosedRange<Int>]] = [:]

        init(zoom: Int) {
            n = 1 << zoom
            scale = Double(n)
        }

        /// Adds columns `low...high` of `row`. Wrapped into the world: a range past either edge
        /// continues on the other side.
        mutating func add(_ row: Int, _ low: Int, _ high: Int) {
            guard low <= high else { return }
            if high - low + 1 >= n {
                spans[row, default: []].append(0...(n - 1))
                return
            }
            let start = ((low % n) + n) % n
            let end = start + (high - low)
            if end < n {
                spans[row, default: []].append(start...end)
            } else {
                spans[row, default: []].append(start...(n - 1))
                spans[row, default: []].append(0...(end - n))
            }
        }

        func x(_ longitude: Double) -> Double { RegionCover.snapped((longitude + 180) / 360 * scale, n: n) }
        /// Row r spans latitudes bottom(r)...top(r), with top(r) = latitude(r / n).
        func top(_ row: Int) -> Double { WebMercator.latitude(worldY: Double(row) / scale) }
        func rowOf(_ latitude: Double) -> Int {
            let y = WebMercator.worldY(latitude: Swift.min(Swift.max(latitude, -WebMercator.maximumLatitude), WebMercator.maximumLatitude))
            return Swift.min(Swift.max(Int((y * scale).rounded(.down)), 0), n - 1)
        }

        /// Adds the tiles the edge from `a` to `b` passes through the inside of, and notes, for each
        /// row it crosses the middle latitude of, where it crosses it.
        mutating func addEdge(from a: GeoCoordinate, to b: GeoCoordinate, crossings: inout [Int: [Double]]) {
            let (x1, y1, x2, y2) = (x(a.longitude), a.latitude, x(b.longitude), b.latitude)
            let low = Swift.min(y1, y2), high = Swift.max(y1, y2)
            let firstRow = Swift.max(rowOf(high) - 1, 0), lastRow = Swift.min(rowOf(low) + 1, n - 1)
            guard firstRow <= lastRow else { return }
            for row in firstRow...lastRow {
                let bandTop = top(row), bandBottom = top(row + 1)
                // The edge through the row's inside: the columns whose inside it crosses.
                if y1 == y2 {
                    if y1 > bandBottom && y1 < bandTop, x1 != x2 {
                        add(row, Int(Swift.min(x1, x2).rounded(.down)), Int(Swift.max(x1, x2).rounded(.up)) - 1)
                    }
                } else {
                    let yLow = Swift.max(low, bandBottom), yHigh = Swift.min(high, bandTop)
                    if yLow < yHigh {
                        let xa = RegionCover.snapped(x1 + (yLow - y1) * (x2 - x1) / (y2 - y1), n: n)
                        let xb = RegionCover.snapped(x1 + (yHigh - y1) * (x2 - x1) / (y2 - y1), n: n)
                        let left = Swift.min(xa, xb), right = Swift.max(xa, xb)
                        if left < right {
                            add(row, Int(left.rounded(.down)), Int(right.rounded(.up)) - 1)
                        } else if left != left.rounded() {
                            add(row, Int(left.rounded(.down)), Int(left.rounded(.down)))
                        }
                    }
                }
                // Where the edge crosses the row's middle latitude (half-open, so a vertex counts once).
                let middle = (bandTop + bandBottom) / 2
                if (y1 <= middle) != (y2 <= middle) {
                    crossings[row, default: []].append(x1 + (middle - y1) * (x2 - x1) / (y2 - y1))
                }
            }
        }

        /// Adds the tiles no edge passes through: inside when their centre is (even-odd), from
        /// where a polygon's edges cross each row's middle latitude.
        mutating func addInside(_ crossings: [Int: [Double]]) {
            for (row, xs) in crossings {
                let sorted = xs.sorted()
                var i = 0
                while i + 1 < sorted.count {
                    let low = Int((sorted[i] - 0.5).rounded(.down)) + 1
                    let high = Int((sorted[i + 1] - 0.5).rounded(.up)) - 1
                    add(row, low, high)
                    i += 2
                }
            }
        }
    }

    /// Sorted, disjoint, non-adjacent ranges.
    static func merged(_ ranges: [ClosedRange<Int>]) -> [ClosedRange<Int>] {
        var result: [ClosedRange<Int>] = []
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = result.last, range.lowerBound <= last.upperBound + 1 {
                result[result.count - 1] = last.lowerBound...Swift.max(last.upperBound, range.upperBound)
            } else {
                result.append(range)
            }
        }
        return result
    }

    /// A value within rounding of a tile edge taken as on it (see ``WebMercator/edgeTolerance``).
    static func snapped(_ value: Double, n: Int) -> Double {
        let whole = value.rounded()
        return abs(value - whole) <= Double(n) * WebMercator.edgeTolerance ? whole : value
    }
}

extension GeoRegion {
    /// The region a GeoJSON document describes: a Polygon or MultiPolygon geometry, a Feature of
    /// one, or a FeatureCollection or GeometryCollection of them (joined).
    /// - Throws: ``GeometryError/invalidRegion(_:)`` saying what is wrong and where.
    public init(geoJSON data: Data) throws(GeometryError) {
        guard let object = try? JSONSerialization.jsonObject(with: data) else { throw .invalidRegion("not JSON") }
        var polygons: [[[GeoCoordinate]]] = []
        try Self.collect(object, path: "the document", into: &polygons)
        try self.init(polygons: polygons)
    }

    private static func collect(_ value: Any, path: String, into polygons: inout [[[GeoCoordinate]]]) throws(GeometryError) {
        guard let object = value as? [String: Any], let type = object["type"] as? String else {
            throw .invalidRegion("\(path) is not a GeoJSON object with a type")
        }
        switch type {
        case "FeatureCollection":
            guard let features = object["features"] as? [Any] else { throw .invalidRegion("\(path) has no features array") }
            for (i, feature) in features.enumerated() { try collect(feature, path: "feature \(i)", into: &polygons) }
        case "Feature":
            guard let geometry = object["geometry"], !(geometry is NSNull) else { throw .invalidRegion("\(path) has no geometry") }
            try collect(geometry, path: path, into: &polygons)
        case "GeometryCollection":
            guard let geometries = object["geometries"] as? [Any] else { throw .invalidRegion("\(path) has no geometries array") }
            for (i, geometry) in geometries.enumerated() { try collect(geometry, path: "\(path), geometry \(i)", into: &polygons) }
        case "Polygon":
            polygons.append(try rings(object["coordinates"], path: path))
        case "MultiPolygon":
            guard let list = object["coordinates"] as? [Any] else { throw .invalidRegion("\(path): coordinates is not an array") }
            for (i, polygon) in list.enumerated() { polygons.append(try rings(polygon, path: "\(path), polygon \(i)")) }
        default:
            throw .invalidRegion("\(path) is a \(type), not an area (a Polygon or MultiPolygon; a line is a --route)")
        }
    }

    private static func rings(_ value: Any?, path: String) throws(GeometryError) -> [[GeoCoordinate]] {
        guard let rings = value as? [Any] else { throw .invalidRegion("\(path): coordinates is not an array of rings") }
        var result: [[GeoCoordinate]] = []
        for (r, ring) in rings.enumerated() {
            guard let positions = ring as? [Any] else { throw .invalidRegion("\(path), ring \(r) is not an array of positions") }
            var points: [GeoCoordinate] = []
            points.reserveCapacity(positions.count)
            for (i, position) in positions.enumerated() {
                guard let numbers = position as? [Any], numbers.count >= 2, let lon = (numbers[0] as? NSNumber)?.doubleValue,
                    let lat = (numbers[1] as? NSNumber)?.doubleValue
                else { throw .invalidRegion("\(path), ring \(r), position \(i) is not [longitude, latitude]") }
                points.append(GeoCoordinate(latitude: lat, longitude: lon))
            }
            result.append(points)
        }
        return result
    }
}
