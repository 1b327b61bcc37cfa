/// Why geometric input (coordinates, boxes, zooms, tile sizes, routes) cannot be used.
public enum GeometryError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A zoom outside `0...TileCoordinate.maximumZoom`.
    case zoomOutOfRange(Int)
    /// A latitude or longitude that is NaN or infinite.
    case notFinite(latitude: Double, longitude: Double)
    /// A latitude outside -90...90 (not merely beyond the Mercator limit, which is clamped).
    case latitudeOutOfRange(Double)
    /// A bounding box that is not a box: non-finite, outside the globe, or with south > north.
    case invalidBoundingBox(GeoBoundingBox, reason: String)
    /// A tile size that breaks ``TileSize``'s rule (a power of two in 16...4096).
    case invalidTileSize(Int)
    /// Column or row bounds that do not lie inside the pyramid at that zoom.
    case invalidTileRange(zoom: Int, columns: ClosedRange<Int>, rows: ClosedRange<Int>)
    /// A route radius that is negative or not finite.
    case invalidRadius(Double)
    /// A route without a single coordinate.
    case emptyRoute
    /// An area (`--region`) that is not one: what is wrong and where.
    case invalidRegion(String)

    public var description: String {
        switch self {
        case .zoomOutOfRange(let zoom):
            "zoom \(zoom) is outside 0...\(TileCoordinate.maximumZoom)"
        case .notFinite(let latitude, let longitude):
            "coordinate \(longitude),\(latitude) (lon,lat) is not finite"
        case .latitudeOutOfRange(let latitude):
            "latitude \(latitude) is outside -90...90"
        case .invalidBoundingBox(let box, let reason):
            "bounding box \(box) (west,south,east,north) is invalid: \(reason)"
        case .invalidTileSize(let size):
            TileSize.invalidReason(size) ?? "tile size \(size)"
        case .invalidTileRange(let zoom, let columns, let rows):
            "columns \(columns) and rows \(rows) are not inside 0..<\(zoom >= 0 && zoom <= 62 ? 1 << zoom : 0) at zoom \(zoom)"
        case .invalidRadius(let radius):
            "route radius \(radius) m is not a finite, non-negative number of metres"
        case .emptyRoute:
            "the route has no coordinates"
        case .invalidRegion(let reason):
            "the region is not an area: \(reason)"
        }
    }
}

extension GeometryError {
    /// Throws unless `zoom` is in `0...TileCoordinate.maximumZoom`.
    @usableFromInline
    static func check(zoom: Int) throws(GeometryError) {
        guard (0...TileCoordinate.maximumZoom).contains(zoom) else { throw .zoomOutOfRange(zoom) }
    }
}
