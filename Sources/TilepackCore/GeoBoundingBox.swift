/// A point on the WGS 84 ellipsoid in degrees.
public struct GeoCoordinate: Hashable, Sendable, CustomStringConvertible {
    /// Degrees north of the equator, -90...90.
    public var latitude: Double
    /// Degrees east of Greenwich, -180...180.
    public var longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    public var description: String { "\(latitude),\(longitude)" }
}

/// A geographic bounding box in degrees: west, south, east, north (the MBTiles `bounds` order).
///
/// When `west > east` the box crosses the antimeridian: it spans from `west` eastwards through
/// 180 to `east`.
public struct GeoBoundingBox: Hashable, Sendable, CustomStringConvertible {
    public var west: Double
    public var south: Double
    public var east: Double
    public var north: Double

    public init(west: Double, south: Double, east: Double, north: Double) {
        self.west = west
        self.south = south
        self.east = east
        self.north = north
    }

    /// The whole Web Mercator world: -180, -85.05112878, 180, 85.05112878.
    public static let world = GeoBoundingBox(
        west: -180, south: -WebMercator.maximumLatitude, east: 180, north: WebMercator.maximumLatitude)

    /// `west,south,east,north`, as MBTiles `bounds` metadata writes it.
    public var description: String { "\(west),\(south),\(east),\(north)" }
}
