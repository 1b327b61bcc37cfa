import Foundation
import TilepackCore

/// Where to fetch: a bounding box, or a corridor around a route (HERE's NMAMapDataPrefetcher's
/// `fetchMapDataForBoundingBox:` and `fetchMapDataForRoute:radius:`).
public enum PrefetchArea: Hashable, Sendable {
    /// The tiles sharing area with the box (``TileCover``'s rule; a box may cross the antimeridian).
    case boundingBox(GeoBoundingBox)
    /// The tiles within `radius` metres of the polyline (the union of circles along the route,
    /// `RouteCover`'s rule). The radius must be at least ``PrefetchRequest/minimumRouteRadius``.
    case route([GeoCoordinate], radius: Double)
    /// The tiles sharing area with the polygons (`RegionCover`'s rule: holes, the antimeridian).
    case region(GeoRegion)
}

/// One area over a range of zooms: what ``MapDataPrefetcher`` estimates and fetches.
public struct PrefetchRequest: Hashable, Sendable {
    public var area: PrefetchArea
    /// The zooms fetched, within `0...TileCoordinate.maximumZoom`.
    public var zooms: ClosedRange<Int>

    /// HERE's NMAMapDataPrefetcher's rule: a route radius below 500 m is invalid parameters.
    public static let minimumRouteRadius = 500.0
    /// A route with more points than this is invalid parameters (it would take long to cover).
    public static let maximumRoutePoints = 100_000

    public init(area: PrefetchArea, zooms: ClosedRange<Int>) {
        self.area = area
        self.zooms = zooms
    }

    public static func boundingBox(_ box: GeoBoundingBox, zooms: ClosedRange<Int>) -> PrefetchRequest {
        PrefetchRequest(area: .boundingBox(box), zooms: zooms)
    }

    public static func route(_ route: [GeoCoordinate], radius: Double, zooms: ClosedRange<Int>) -> PrefetchRequest {
        PrefetchRequest(area: .route(route, radius: radius), zooms: zooms)
    }

    /// Why the request is invalid, or `nil` when it is valid.
    public var invalidReason: String? {
        guard zooms.lowerBound >= 0, zooms.upperBound <= TileCoordinate.maximumZoom else {
            return "zooms \(zooms.lowerBound)-\(zooms.upperBound) are outside 0-\(TileCoordinate.maximumZoom)"
        }
        switch area {
        case .boundingBox(let box):
            do { try box.validate() } catch { return "\(error)" }
        case .route(let points, let radius):
            guard !points.isEmpty else { return "the route has no points" }
            guard points.count <= Self.maximumRoutePoints else { return "the route has more than \(Self.maximumRoutePoints) points" }
            guard radius.isFinite, radius >= Self.minimumRouteRadius else {
                return "the radius \(radius) m is below the minimum of \(Int(Self.minimumRouteRadius)) m"
            }
            for point in points
            where
                !(point.latitude.isFinite && point.longitude.isFinite
                && (-90...90).contains(point.latitude) && (-180...180).contains(point.longitude))
            {
                return "the route point \(point) is not a coordinate"
            }
        case .region(let region):
            guard region.polygons.reduce(0, { $0 + $1.rings.reduce(0) { $0 + $1.count } }) <= Self.maximumRoutePoints else {
                return "the region has more than \(Self.maximumRoutePoints) points"
            }
        }
        return nil
    }

    /// The tiles of the request, computed without enumerating them.
    /// - Throws: ``GeometryError`` for an invalid area or zoom.
    package func cover() throws(GeometryError) -> PrefetchCover {
        var levels: [[TileRange]] = []
        switch area {
        case .boundingBox(let box):
            let cover = try TileCover(boundingBox: box, zooms: zooms)
            for zoom in zooms { levels.append(cover.ranges(atZoom: zoom)) }
        case .route(let points, let radius):
            for zoom in zooms { levels.append(try RouteCover(route: points, radius: radius, zoom: zoom).ranges) }
        case .region(let region):
            for zoom in zooms { levels.append(try RegionCover(region: region, zoom: zoom).ranges) }
        }
        return PrefetchCover(zooms: zooms, levels: levels)
    }

    /// A canonical text of the request and its source: the same request on the same store finds
    /// the same region, which is how a fetch resumes.
    func key(source: PrefetchSource) -> String {
        "\(source.key)|z\(zooms.lowerBound)-\(zooms.upperBound)|" + area.key
    }
}

extension PrefetchArea {
    var key: String {
        func number(_ value: Double) -> String { String(format: "%.7f", value) }
        switch self {
        case .boundingBox(let box):
            return "bbox:" + [box.west, box.south, box.east, box.north].map(number).joined(separator: ",")
        case .route(let points, let radius):
            return "route:\(number(radius)):" + points.map { number($0.latitude) + " " + number($0.longitude) }.joined(separator: ",")
        case .region(let region):
            return "region:"
                + region.polygons.map { polygon in
                    polygon.rings.map { ring in ring.map { number($0.latitude) + " " + number($0.longitude) }.joined(separator: ",") }
                        .joined(separator: ";")
                }.joined(separator: "|")
        }
    }
}

/// The tiles of a ``PrefetchRequest``: per zoom, a few rectangles of tiles (one for a box, two
/// across the antimeridian, one row-long rectangle per run of columns for a route).
package struct PrefetchCover: Hashable, Sendable, Sequence {
    package let zooms: ClosedRange<Int>
    /// The ranges of each zoom, indexed by `zoom - zooms.lowerBound`.
    package let levels: [[TileRange]]

    /// The tiles at `zoom`.
    package func count(atZoom zoom: Int) -> Int {
        zooms.contains(zoom) ? levels[zoom - zooms.lowerBound].reduce(0) { $0 + $1.count } : 0
    }

    /// All the tiles.
    package var count: Int { zooms.reduce(0) { $0 + count(atZoom: $1) } }

    package func contains(_ tile: TileCoordinate) -> Bool {
        guard zooms.contains(tile.zoom) else { return false }
        return levels[tile.zoom - zooms.lowerBound].contains { $0.contains(tile) }
    }

    /// The `index`th tile at `zoom` (0-based, in iteration order), without enumerating.
    func tile(atZoom zoom: Int, index: Int) -> TileCoordinate? {
        guard zooms.contains(zoom), index >= 0 else { return nil }
        var rest = index
        for range in levels[zoom - zooms.lowerBound] {
            if rest < range.count {
                let x = range.columns.lowerBound + rest / range.rows.count
                let y = range.rows.lowerBound + rest % range.rows.count
                return TileCoordinate(validatingZoom: zoom, x: x, y: y)
            }
            rest -= range.count
        }
        return nil
    }

    package var underestimatedCount: Int { count }

    /// Zoom by zoom, range by range.
    package func makeIterator() -> TileCover.Iterator { TileCover.Iterator(ranges: levels.flatMap { $0 }) }
}

// MARK: The request as recorded in the store

extension PrefetchRequest {
    /// The JSON recorded with the region: `{"bbox":[w,s,e,n]}` or `{"route":[[lat,lon],...],"radius":m}`,
    /// with `"minzoom"` and `"maxzoom"`, keys sorted.
    ///
    /// Written here rather than by JSONSerialization: every fetch records one, and
    /// JSONSerialization's first use (bridging to NSDictionary, sorting `AnyHashable` keys) cost
    /// 1.3 ms of a 21 ms one-tile `tilepack fetch`. The numbers are Swift's shortest round-trip
    /// text of each `Double` (valid JSON: the area is validated, so finite).
    var storedJSON: String {
        func number(_ value: Double) -> String { value.isFinite ? "\(value)" : "0" }
        func pair(_ values: [Double]) -> String { "[" + values.map(number).joined(separator: ",") + "]" }
        let zoomFields = "\"maxzoom\":\(zooms.upperBound),\"minzoom\":\(zooms.lowerBound)"
        switch area {
        case .boundingBox(let box):
            return "{\"bbox\":\(pair([box.west, box.south, box.east, box.north])),\(zoomFields)}"
        case .route(let points, let radius):
            let route = "[" + points.map { pair([$0.latitude, $0.longitude]) }.joined(separator: ",") + "]"
            return "{\(zoomFields),\"radius\":\(number(radius)),\"route\":\(route)}"
        case .region(let region):
            // GeoJSON's order, [longitude, latitude], as the file gave it.
            let polygons = region.polygons.map { polygon in
                "["
                    + polygon.rings.map { ring in "[" + ring.map { pair([$0.longitude, $0.latitude]) }.joined(separator: ",") + "]" }
                    .joined(separator: ",") + "]"
            }
            return "{\(zoomFields),\"region\":[\(polygons.joined(separator: ","))]}"
        }
    }

    /// The request recorded as ``storedJSON``, or `nil` when the text is not one (a damaged or
    /// foreign record is ignored, never trusted).
    init?(storedJSON text: String) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
            let minZoom = object["minzoom"] as? Int, let maxZoom = object["maxzoom"] as? Int,
            minZoom >= 0, maxZoom <= TileCoordinate.maximumZoom, minZoom <= maxZoom
        else { return nil }
        if let box = object["bbox"] as? [Double], box.count == 4 {
            self.init(
                area: .boundingBox(GeoBoundingBox(west: box[0], south: box[1], east: box[2], north: box[3])), zooms: minZoom...maxZoom)
        } else if let route = object["route"] as? [[Double]], let radius = object["radius"] as? Double,
            route.allSatisfy({ $0.count == 2 })
        {
            self.init(
                area: .route(route.map { GeoCoordinate(latitude: $0[0], longitude: $0[1]) }, radius: radius), zooms: minZoom...maxZoom)
        } else if let polygons = object["region"] as? [[[[Double]]]],
            polygons.allSatisfy({ $0.allSatisfy { $0.allSatisfy { $0.count == 2 } } }),
            let region = try? GeoRegion(polygons: polygons.map { $0.map { $0.map { GeoCoordinate(latitude: $0[1], longitude: $0[0]) } } })
        {
            self.init(area: .region(region), zooms: minZoom...maxZoom)
        } else {
            return nil
        }
        if invalidReason != nil { return nil }
    }
}
