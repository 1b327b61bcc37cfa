/// The address of one tile in a Web Mercator tile pyramid, with rows counted from the north (XYZ).
///
/// A `TileCoordinate` cannot hold an impossible tile: `zoom` is in `0...maximumZoom` and `x`, `y`
/// are in `0..<2^zoom`. Rows are always XYZ rows (y = 0 at the north, as slippy maps and
/// `MKTileOverlay` count them); a TMS row (y = 0 at the south, as MBTiles `tile_row`) is converted
/// with ``TileScheme`` at the edge of storage and never travels further.
public struct TileCoordinate: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The highest zoom level tilepack accepts: 30.
    ///
    /// At zoom 30 there are 2^30 tiles per row, so x, y and the tile count of one row fit in 32-bit
    /// arithmetic, the tile count of a whole level (2^60) fits in `Int` (64-bit), and a tile is about
    /// 3.7 cm wide at the equator: no map SDK or tile tool goes deeper (the HERE SDK stops at 20,
    /// PMTiles' Hilbert tile ids stop at 31 and overflow at 32).
    public static let maximumZoom = 30

    /// The zoom level, `0...maximumZoom`.
    public let zoom: Int
    /// The column, `0..<2^zoom`, counted from the antimeridian (west) eastwards.
    public let x: Int
    /// The row, `0..<2^zoom`, counted from the north (XYZ).
    public let y: Int

    /// Creates a coordinate from untrusted numbers, checking every bound.
    /// - Throws: ``TileCoordinateError`` naming the bound that was broken.
    public init(zoom: Int, x: Int, y: Int) throws(TileCoordinateError) {
        guard (0...Self.maximumZoom).contains(zoom) else { throw .zoomOutOfRange(zoom) }
        let size = 1 << zoom
        guard (0..<size).contains(x) else { throw .columnOutOfRange(x, zoom: zoom) }
        guard (0..<size).contains(y) else { throw .rowOutOfRange(y, zoom: zoom) }
        self.zoom = zoom
        self.x = x
        self.y = y
    }

    /// Creates a coordinate from untrusted numbers, or `nil` when any is out of range.
    public init?(validatingZoom zoom: Int, x: Int, y: Int) {
        guard let tile = try? TileCoordinate(zoom: zoom, x: x, y: y) else { return nil }
        self = tile
    }

    /// Creates a coordinate from a row counted in `scheme`, checking every bound.
    public init(zoom: Int, x: Int, row: Int, scheme: TileScheme) throws(TileCoordinateError) {
        guard (0...Self.maximumZoom).contains(zoom) else { throw .zoomOutOfRange(zoom) }
        guard (0..<(1 << zoom)).contains(row) else { throw .rowOutOfRange(row, zoom: zoom) }
        try self.init(zoom: zoom, x: x, y: scheme.flipIfTMS(row: row, zoom: zoom))
    }

    /// For callers that have already checked the bounds (internal arithmetic on valid tiles).
    @inlinable
    package init(uncheckedZoom zoom: Int, x: Int, y: Int) {
        assert((0...Self.maximumZoom).contains(zoom) && x >= 0 && y >= 0 && x < (1 << zoom) && y < (1 << zoom))
        self.zoom = zoom
        self.x = x
        self.y = y
    }

    /// The number of tiles along one side of the pyramid at `zoom`: 2^zoom.
    @inlinable
    public static func tilesPerSide(atZoom zoom: Int) -> Int { 1 << zoom }

    /// This tile's row counted in `scheme` (the XYZ row itself, or the TMS row).
    @inlinable
    public func row(in scheme: TileScheme) -> Int { scheme.flipIfTMS(row: y, zoom: zoom) }

    /// Orders by zoom, then x, then y (XYZ): the order of ``TileArchive/forEachTile(_:)``.
    public static func < (a: TileCoordinate, b: TileCoordinate) -> Bool {
        (a.zoom, a.x, a.y) < (b.zoom, b.x, b.y)
    }

    /// `z/x/y`, as in tile URLs.
    public var description: String { "\(zoom)/\(x)/\(y)" }
}

/// Why numbers do not make a tile coordinate.
public enum TileCoordinateError: Error, Hashable, Sendable, CustomStringConvertible {
    case zoomOutOfRange(Int)
    case columnOutOfRange(Int, zoom: Int)
    case rowOutOfRange(Int, zoom: Int)

    public var description: String {
        switch self {
        case .zoomOutOfRange(let z):
            "zoom \(z) is outside 0...\(TileCoordinate.maximumZoom)"
        case .columnOutOfRange(let x, let z):
            "column \(x) is outside 0..<\(1 << z) at zoom \(z)"
        case .rowOutOfRange(let y, let z):
            "row \(y) is outside 0..<\(1 << z) at zoom \(z)"
        }
    }
}

/// How rows are counted.
public enum TileScheme: String, Sendable, CaseIterable, Codable {
    /// Row 0 at the north: slippy maps, Google/OSM tile URLs, `MKTileOverlay`, the HERE SDK.
    case xyz
    /// Row 0 at the south: MBTiles `tile_row`, OSGeo TMS, gdal2tiles' default.
    case tms

    /// Converts a row between XYZ and this scheme (the flip is its own inverse).
    ///
    /// This is the one place in tilepack where the TMS flip `2^z - 1 - y` is computed.
    @inlinable
    public func flipIfTMS(row: Int, zoom: Int) -> Int {
        switch self {
        case .xyz: row
        case .tms: (1 << zoom) - 1 - row
        }
    }
}
