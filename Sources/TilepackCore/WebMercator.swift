import Foundation

/// A position in the Web Mercator square, x eastwards from the antimeridian and y southwards from
/// the northern edge. The unit depends on the call that returns it: a fraction of the world
/// (`0...1`), tiles at a zoom (`0...2^zoom`) or pixels (`0...tileSize * 2^zoom`).
public struct MercatorPoint: Hashable, Sendable, CustomStringConvertible {
    /// Eastwards from the antimeridian (longitude -180).
    public var x: Double
    /// Southwards from the northern edge of the Mercator square.
    public var y: Double

    /// Creates a point from its two coordinates, in the unit the caller works in.
    public init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }

    public var description: String { "(\(x), \(y))" }
}

/// Spherical Web Mercator (EPSG:3857), the projection of every tile pyramid tilepack handles.
///
/// Formulas are those of the OpenStreetMap wiki's "Slippy map tilenames":
/// `x = 2^z * (lon + 180) / 360`, `y = 2^z * (1 - asinh(tan(lat)) / pi) / 2`, and the inverse
/// `lat = atan(sinh(pi * (1 - 2 y / 2^z)))`.
///
/// Conventions shared by every function here:
/// - Latitudes beyond ±``maximumLatitude`` (and up to ±90) are clamped to it; a latitude outside
///   -90...90 or a non-finite number throws ``GeometryError``.
/// - Longitudes in -180...180 are used as they are; a finite longitude outside is wrapped into
///   -180..<180 (190 is -170).
/// - Tiles are half-open: a point on a tile boundary belongs to the tile east/south of it, except
///   that longitude 180 belongs to the last column (not to a column 2^z) and the southern limit to
///   the last row, so that every point of the Mercator square lies in exactly one tile.
public enum WebMercator {
    /// The latitude at which the Mercator square ends: atan(sinh(pi)) in degrees, rounded up at the
    /// 8th decimal as map SDKs write it.
    public static let maximumLatitude = 85.05112878

    /// The radius of the Web Mercator sphere in metres (the WGS 84 semi-major axis).
    public static let earthRadius = 6_378_137.0

    /// The length of the equator on the Web Mercator sphere in metres (2 pi R).
    public static let earthCircumference = 2 * Double.pi * earthRadius

    // MARK: World fractions

    /// Where `coordinate` lies in the Mercator square, as a fraction of the world in `0...1` on both axes.
    ///
    /// Longitude -180 is x = 0 and 180 is x = 1; the clamped latitudes ±``maximumLatitude`` are
    /// y = 0 (north) and y = 1 (south).
    /// - Throws: ``GeometryError/notFinite(latitude:longitude:)`` or
    ///   ``GeometryError/latitudeOutOfRange(_:)``.
    public static func worldPoint(of coordinate: GeoCoordinate) throws(GeometryError) -> MercatorPoint {
        let (latitude, longitude) = try normalized(coordinate)
        return MercatorPoint(x: worldX(longitude: longitude), y: worldY(latitude: latitude))
    }

    /// The coordinate at a point of the Mercator square given as world fractions.
    ///
    /// `x` is not restricted to `0...1`: the result's longitude is wrapped into -180...180
    /// (x = 1 gives 180, not -180). `y` is clamped to `0...1`.
    public static func coordinate(atWorldPoint point: MercatorPoint) -> GeoCoordinate {
        var x = point.x
        if !(0...1).contains(x) { x -= x.rounded(.down) }
        let y = min(max(point.y, 0), 1)
        let longitude = x * 360 - 180
        let latitude = atan(sinh(Double.pi * (1 - 2 * y))) * 180 / Double.pi
        return GeoCoordinate(latitude: latitude, longitude: longitude)
    }

    // MARK: Tiles

    /// Where `coordinate` lies in tile units at `zoom` (`0...2^zoom` on both axes); the integer
    /// parts name the tile (see ``tile(containing:zoom:)`` for the edges).
    public static func tilePoint(of coordinate: GeoCoordinate, zoom: Int) throws(GeometryError) -> MercatorPoint {
        try GeometryError.check(zoom: zoom)
        let world = try worldPoint(of: coordinate)
        let n = Double(1 << zoom)
        return MercatorPoint(x: world.x * n, y: world.y * n)
    }

    /// The tile at `zoom` that contains `coordinate`.
    ///
    /// Longitude 180 lies in the last column and -180 in column 0; a latitude at or beyond the
    /// Mercator limit lies in row 0 (north) or the last row (south). A point within
    /// ``edgeTolerance`` of a tile boundary is taken as on it, so a tile's own north-west corner
    /// (computed by ``northWestCorner(of:)``) lies in that tile.
    public static func tile(containing coordinate: GeoCoordinate, zoom: Int) throws(GeometryError) -> TileCoordinate {
        let point = try tilePoint(of: coordinate, zoom: zoom)
        let last = (1 << zoom) - 1
        let x = min(max(Int(snapped(point.x, zoom: zoom).rounded(.down)), 0), last)
        let y = min(max(Int(snapped(point.y, zoom: zoom).rounded(.down)), 0), last)
        return TileCoordinate(uncheckedZoom: zoom, x: x, y: y)
    }

    /// The geographic extent of `tile`: its western and eastern meridians and its northern and
    /// southern parallels (the inverse projection of its corners).
    public static func boundingBox(of tile: TileCoordinate) -> GeoBoundingBox {
        let n = Double(1 << tile.zoom)
        // x * 360 / n - 180 is exact for every column (a 39-bit numerator over a power of two).
        let west = Double(tile.x) * 360 / n - 180
        let east = Double(tile.x + 1) * 360 / n - 180
        let north = latitude(worldY: Double(tile.y) / n)
        let south = latitude(worldY: Double(tile.y + 1) / n)
        return GeoBoundingBox(west: west, south: south, east: east, north: north)
    }

    /// The coordinate of the north-west corner of `tile`.
    public static func northWestCorner(of tile: TileCoordinate) -> GeoCoordinate {
        let n = Double(1 << tile.zoom)
        return GeoCoordinate(latitude: latitude(worldY: Double(tile.y) / n), longitude: Double(tile.x) * 360 / n - 180)
    }

    // MARK: Pixels

    /// Where `coordinate` lies in global pixel coordinates at `zoom` for tiles of `tileSize`
    /// pixels: `0...tileSize * 2^zoom` on both axes, (0, 0) at the north-west corner of the world.
    /// - Throws: ``GeometryError/invalidTileSize(_:)`` unless `tileSize` is a power of two in
    ///   ``TileSize/range`` (256 and 512 are the usual ones), and the errors of ``tilePoint(of:zoom:)``.
    public static func pixelPoint(of coordinate: GeoCoordinate, zoom: Int, tileSize: Int = TileSize.default) throws(GeometryError)
        -> MercatorPoint
    {
        try checkTileSize(tileSize)
        let point = try tilePoint(of: coordinate, zoom: zoom)
        let size = Double(tileSize)
        return MercatorPoint(x: point.x * size, y: point.y * size)
    }

    /// The tile containing `coordinate` and the position inside it in pixels (`0...tileSize`, with
    /// `tileSize` reached only on the world's eastern or southern edge).
    public static func tileAndPixel(
        of coordinate: GeoCoordinate, zoom: Int, tileSize: Int = TileSize.default
    ) throws(GeometryError) -> (tile: TileCoordinate, pixel: MercatorPoint) {
        let global = try pixelPoint(of: coordinate, zoom: zoom, tileSize: tileSize)
        let tile = try self.tile(containing: coordinate, zoom: zoom)
        let size = Double(tileSize)
        return (tile, MercatorPoint(x: global.x - Double(tile.x) * size, y: global.y - Double(tile.y) * size))
    }

    /// The coordinate at global pixel coordinates at `zoom` for tiles of `tileSize` pixels (the
    /// inverse of ``pixelPoint(of:zoom:tileSize:)``). Integer pixel coordinates name a pixel's
    /// north-west corner; add 0.5 for its centre. `x` wraps around the world, `y` is clamped.
    public static func coordinate(atPixel pixel: MercatorPoint, zoom: Int, tileSize: Int = TileSize.default) throws(GeometryError)
        -> GeoCoordinate
    {
        try GeometryError.check(zoom: zoom)
        try checkTileSize(tileSize)
        let worldSize = Double(tileSize) * Double(1 << zoom)
        return coordinate(atWorldPoint: MercatorPoint(x: pixel.x / worldSize, y: pixel.y / worldSize))
    }

    /// Ground metres per pixel at `latitude` (clamped to the Mercator limit), `zoom` and `tileSize`,
    /// on the Web Mercator sphere: `C * cos(lat) / (tileSize * 2^zoom)`. About 156 543 m at zoom 0,
    /// latitude 0, 256-pixel tiles.
    public static func metresPerPixel(latitude: Double, zoom: Int, tileSize: Int = TileSize.default) throws(GeometryError) -> Double {
        try GeometryError.check(zoom: zoom)
        try checkTileSize(tileSize)
        let (lat, _) = try normalized(GeoCoordinate(latitude: latitude, longitude: 0))
        return earthCircumference * cos(lat * Double.pi / 180) / (Double(tileSize) * Double(1 << zoom))
    }

    /// How close (as a fraction of the world's width: about 4 micrometres on the ground) a point
    /// or a box edge must be to a tile boundary to be taken as on it. The inverse projection of a
    /// tile edge is exact only to a few ulps; this tolerance is 1000 times that.
    public static let edgeTolerance = 1e-13

    // MARK: Internals

    /// `value` in tile units at `zoom`, moved onto the nearest whole number when within
    /// ``edgeTolerance`` of it.
    static func snapped(_ value: Double, zoom: Int) -> Double {
        let whole = value.rounded()
        return abs(value - whole) <= Double(1 << zoom) * edgeTolerance ? whole : value
    }

    /// Checks a tile size: ``TileSize``'s rule.
    static func checkTileSize(_ tileSize: Int) throws(GeometryError) {
        guard TileSize.isValid(tileSize) else {
            throw .invalidTileSize(tileSize)
        }
    }

    /// The latitude clamped to the Mercator limit and the longitude wrapped into -180...180.
    static func normalized(_ coordinate: GeoCoordinate) throws(GeometryError) -> (latitude: Double, longitude: Double) {
        guard coordinate.latitude.isFinite, coordinate.longitude.isFinite else {
            throw .notFinite(latitude: coordinate.latitude, longitude: coordinate.longitude)
        }
        guard (-90...90).contains(coordinate.latitude) else { throw .latitudeOutOfRange(coordinate.latitude) }
        let latitude = min(max(coordinate.latitude, -maximumLatitude), maximumLatitude)
        return (latitude, wrappedLongitude(coordinate.longitude))
    }

    /// A finite longitude in -180...180 as it is, any other wrapped into -180..<180.
    static func wrappedLongitude(_ longitude: Double) -> Double {
        if (-180...180).contains(longitude) { return longitude }
        let wrapped = longitude - 360 * ((longitude + 180) / 360).rounded(.down)
        return wrapped >= 180 ? wrapped - 360 : wrapped
    }

    /// x as a world fraction; written `(lon + 180) / 360` so that the tile edges
    /// `x * 360 / 2^z - 180` of ``boundingBox(of:)`` map back exactly to `x / 2^z`.
    static func worldX(longitude: Double) -> Double {
        (longitude + 180) / 360
    }

    /// y as a world fraction clamped to `0...1`, for a latitude already clamped.
    static func worldY(latitude: Double) -> Double {
        let phi = latitude * Double.pi / 180
        let y = (1 - asinh(tan(phi)) / Double.pi) / 2
        return min(max(y, 0), 1)
    }

    /// The latitude of a world-fraction y in `0...1`.
    static func latitude(worldY y: Double) -> Double {
        atan(sinh(Double.pi * (1 - 2 * y))) * 180 / Double.pi
    }
}

extension TileCoordinate {
    /// The tile at `zoom` containing `coordinate` (see ``WebMercator/tile(containing:zoom:)``).
    public init(containing coordinate: GeoCoordinate, zoom: Int) throws(GeometryError) {
        self = try WebMercator.tile(containing: coordinate, zoom: zoom)
    }

    /// The geographic extent of this tile (see ``WebMercator/boundingBox(of:)``).
    public var boundingBox: GeoBoundingBox { WebMercator.boundingBox(of: self) }
}
