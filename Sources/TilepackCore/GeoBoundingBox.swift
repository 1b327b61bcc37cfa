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

    /// `lon,lat`: longitude first, as `bounds`, `--bbox`, `--center`, GeoJSON and GDAL write it.
    public var description: String { "\(longitude),\(latitude)" }
}

/// A geographic bounding box in degrees: west, south, east, north (the MBTiles `bounds` order).
///
/// When `west > east` the box crosses the antimeridian: it spans from `west` eastwards through
/// 180 to `east`. When `west == east` the box is a meridian segment (zero width), not the world;
/// the world is `west: -180, east: 180`.
///
/// The plain initialiser stores any numbers; the functions that need a real box (covers,
/// ``contains(_:)-(TileCoordinate)``, ``intersects(_:)``) throw ``GeometryError/invalidBoundingBox(_:reason:)``
/// for one that is not: non-finite numbers, longitudes outside -180...180, latitudes outside
/// -90...90 or south > north. Latitudes beyond the Mercator limit are allowed and clamped when the
/// box meets tiles.
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

    /// Creates a box from untrusted numbers, checking that they make one (see the type's notes).
    public init(validatingWest west: Double, south: Double, east: Double, north: Double) throws(GeometryError) {
        self.init(west: west, south: south, east: east, north: north)
        try validate()
    }

    /// Creates a box from its north-west and south-east corners, the form of the HERE SDK's
    /// `NMAGeoBoundingBox geoBoundingBoxWithTopLeft:bottomRight:`.
    ///
    /// A `topLeft` longitude greater than the `bottomRight` one makes a box across the antimeridian.
    public init(topLeft: GeoCoordinate, bottomRight: GeoCoordinate) {
        self.init(west: topLeft.longitude, south: bottomRight.latitude, east: bottomRight.longitude, north: topLeft.latitude)
    }

    /// The whole Web Mercator world: -180, -85.05112878, 180, 85.05112878.
    public static let world = GeoBoundingBox(
        west: -180, south: -WebMercator.maximumLatitude, east: 180, north: WebMercator.maximumLatitude)

    /// The north-west corner (`NMAGeoBoundingBox.topLeft`).
    public var topLeft: GeoCoordinate { GeoCoordinate(latitude: north, longitude: west) }

    /// The south-east corner (`NMAGeoBoundingBox.bottomRight`).
    public var bottomRight: GeoCoordinate { GeoCoordinate(latitude: south, longitude: east) }

    /// Whether the box crosses the antimeridian (`west > east`).
    public var crossesAntimeridian: Bool { west > east }

    /// What a command tells the user once when the box crosses the antimeridian (a `--bbox` with
    /// west > east is more often a typo than the Pacific), e.g. "the box crosses the antimeridian
    /// (west 170 > east -170)"; `nil` for a box that does not.
    public var antimeridianNote: String? {
        guard crossesAntimeridian else { return nil }
        func degrees(_ value: Double) -> String { value == value.rounded() && abs(value) <= 360 ? String(Int(value)) : "\(value)" }
        return
            "the box crosses the antimeridian (west \(degrees(west)) > east \(degrees(east))): it spans \(degrees(longitudeSpan.rounded())) degrees of longitude through 180"
    }

    /// The east-west extent in degrees, `0...360`, measured eastwards from `west` to `east`.
    public var longitudeSpan: Double { crossesAntimeridian ? east - west + 360 : east - west }

    /// The north-south extent in degrees.
    public var latitudeSpan: Double { north - south }

    /// The centre in degrees: the midpoint of the latitudes and of the eastward longitude span
    /// (so the centre of a box across the antimeridian lies near 180, wrapped into -180...180).
    public var center: GeoCoordinate {
        var longitude = west + longitudeSpan / 2
        if longitude > 180 { longitude -= 360 }
        return GeoCoordinate(latitude: (south + north) / 2, longitude: longitude)
    }

    /// Throws unless the box is a real one (see the type's notes).
    public func validate() throws(GeometryError) {
        guard west.isFinite, south.isFinite, east.isFinite, north.isFinite else {
            throw .invalidBoundingBox(self, reason: "a number is not finite")
        }
        guard (-180...180).contains(west), (-180...180).contains(east) else {
            throw .invalidBoundingBox(self, reason: "longitudes must lie in -180...180")
        }
        guard (-90...90).contains(south), (-90...90).contains(north) else {
            throw .invalidBoundingBox(self, reason: "latitudes must lie in -90...90")
        }
        guard south <= north else { throw .invalidBoundingBox(self, reason: "south is north of north") }
    }

    /// Whether the point lies in the box, edges included; a box across the antimeridian contains
    /// the longitudes from `west` to 180 and from -180 to `east`. Longitude -180 and 180 are the
    /// same meridian. Non-finite coordinates are not contained.
    public func contains(_ coordinate: GeoCoordinate) -> Bool {
        guard (south...north).contains(coordinate.latitude), coordinate.longitude.isFinite else { return false }
        let longitude = coordinate.longitude
        let inside: (Double) -> Bool = { lon in
            crossesAntimeridian ? (lon >= west || lon <= east) : (lon >= west && lon <= east)
        }
        if inside(longitude) { return true }
        if longitude == 180 { return inside(-180) }
        if longitude == -180 { return inside(180) }
        return false
    }

    /// Whether `tile` lies wholly inside the box (edges may touch).
    ///
    /// Decided in tile units, with box edges within ``WebMercator/edgeTolerance`` of a tile boundary
    /// taken as on it, so that a tile's own ``TileCoordinate/boundingBox`` contains it.
    public func contains(_ tile: TileCoordinate) throws(GeometryError) -> Bool {
        for part in try TileCover.projectedParts(of: self, zoom: tile.zoom) {
            let x = Double(tile.x), y = Double(tile.y)
            if part.minX <= x, x + 1 <= part.maxX, part.minY <= y, y + 1 <= part.maxY { return true }
        }
        return false
    }

    /// Whether `tile` belongs to the box's cover at the tile's zoom: the tile shares area with the
    /// box, or, for a box of zero width or height, the box's line or point lies in the tile.
    ///
    /// This is exactly membership in ``tileRanges(atZoom:)``. A tile that only touches the box
    /// along an edge does not intersect it, as the HERE SDK requests no tile "fully outside" a
    /// layer's bounding box.
    public func intersects(_ tile: TileCoordinate) throws(GeometryError) -> Bool {
        try tileRanges(atZoom: tile.zoom).contains { $0.contains(tile) }
    }

    /// The tiles at `zoom` that cover the box, as one rectangle of columns and rows, or two for a
    /// box across the antimeridian (the eastern part first, from `west` to 180, then the part from
    /// -180 to `east`). The ranges never overlap.
    public func tileRanges(atZoom zoom: Int) throws(GeometryError) -> [TileRange] {
        try TileCover.ranges(of: self, zoom: zoom)
    }

    /// The tiles covering the box at each zoom of `zooms`, counted without enumerating them.
    public func cover(zooms: ClosedRange<Int>) throws(GeometryError) -> TileCover {
        try TileCover(boundingBox: self, zooms: zooms)
    }

    /// `west,south,east,north`, as MBTiles `bounds` metadata writes it.
    public var description: String { "\(west),\(south),\(east),\(north)" }
}
