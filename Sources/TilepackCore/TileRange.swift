/// A rectangle of tiles at one zoom: the columns `columns` and the XYZ rows `rows`.
///
/// A `TileRange` cannot hold an impossible tile: both ranges lie in `0..<2^zoom`. Its count is
/// computed, not enumerated; iterating it is lazy and visits the tiles in `(x, y)` order, the order
/// of ``TileCoordinate``'s `<`.
public struct TileRange: Hashable, Sendable, Sequence, CustomStringConvertible {
    /// The zoom level, `0...TileCoordinate.maximumZoom`.
    public let zoom: Int
    /// The columns, inside `0..<2^zoom`.
    public let columns: ClosedRange<Int>
    /// The XYZ rows (0 at the north), inside `0..<2^zoom`.
    public let rows: ClosedRange<Int>

    /// Creates a range from untrusted bounds.
    /// - Throws: ``GeometryError/zoomOutOfRange(_:)`` or ``GeometryError/invalidTileRange(zoom:columns:rows:)``.
    public init(zoom: Int, columns: ClosedRange<Int>, rows: ClosedRange<Int>) throws(GeometryError) {
        try GeometryError.check(zoom: zoom)
        let all = 0...((1 << zoom) - 1)
        guard all.contains(columns.lowerBound), all.contains(columns.upperBound),
            all.contains(rows.lowerBound), all.contains(rows.upperBound)
        else { throw .invalidTileRange(zoom: zoom, columns: columns, rows: rows) }
        self.init(uncheckedZoom: zoom, columns: columns, rows: rows)
    }

    /// For bounds already checked.
    package init(uncheckedZoom zoom: Int, columns: ClosedRange<Int>, rows: ClosedRange<Int>) {
        assert(
            (0...TileCoordinate.maximumZoom).contains(zoom) && columns.lowerBound >= 0 && rows.lowerBound >= 0
                && columns.upperBound < (1 << zoom) && rows.upperBound < (1 << zoom))
        self.zoom = zoom
        self.columns = columns
        self.rows = rows
    }

    /// The range holding just `tile`.
    public init(tile: TileCoordinate) {
        self.init(uncheckedZoom: tile.zoom, columns: tile.x...tile.x, rows: tile.y...tile.y)
    }

    /// Every tile at `zoom`.
    public static func world(zoom: Int) throws(GeometryError) -> TileRange {
        try GeometryError.check(zoom: zoom)
        let all = 0...((1 << zoom) - 1)
        return TileRange(uncheckedZoom: zoom, columns: all, rows: all)
    }

    /// The number of tiles, `columns.count * rows.count` (at most 4^30, which fits `Int`).
    public var count: Int { columns.count * rows.count }

    /// Whether `tile` is one of the range's tiles (same zoom, inside both ranges).
    public func contains(_ tile: TileCoordinate) -> Bool {
        tile.zoom == zoom && columns.contains(tile.x) && rows.contains(tile.y)
    }

    /// The range covering the same area at another zoom: the descendants' range at a deeper zoom,
    /// or the ancestors' range (which may cover more) at a shallower one.
    public func covering(atZoom other: Int) throws(GeometryError) -> TileRange {
        try GeometryError.check(zoom: other)
        if other >= zoom {
            let k = other - zoom
            return TileRange(
                uncheckedZoom: other,
                columns: (columns.lowerBound << k)...(((columns.upperBound + 1) << k) - 1),
                rows: (rows.lowerBound << k)...(((rows.upperBound + 1) << k) - 1))
        }
        let k = zoom - other
        return TileRange(
            uncheckedZoom: other,
            columns: (columns.lowerBound >> k)...(columns.upperBound >> k),
            rows: (rows.lowerBound >> k)...(rows.upperBound >> k))
    }

    /// The geographic extent of the range (west of its first column to east of its last, north of
    /// its first row to south of its last).
    public var boundingBox: GeoBoundingBox {
        let northWest = WebMercator.boundingBox(of: TileCoordinate(uncheckedZoom: zoom, x: columns.lowerBound, y: rows.lowerBound))
        let southEast = WebMercator.boundingBox(of: TileCoordinate(uncheckedZoom: zoom, x: columns.upperBound, y: rows.upperBound))
        return GeoBoundingBox(west: northWest.west, south: southEast.south, east: southEast.east, north: northWest.north)
    }

    public var underestimatedCount: Int { count }

    /// `z/x0-x1/y0-y1`.
    public var description: String {
        "\(zoom)/\(columns.lowerBound)-\(columns.upperBound)/\(rows.lowerBound)-\(rows.upperBound)"
    }

    public func makeIterator() -> Iterator { Iterator(range: self) }

    /// Visits the tiles column by column, each column north to south.
    public struct Iterator: IteratorProtocol, Sendable {
        let range: TileRange
        var x: Int
        var y: Int

        init(range: TileRange) {
            self.range = range
            x = range.columns.lowerBound
            y = range.rows.lowerBound
        }

        public mutating func next() -> TileCoordinate? {
            guard x <= range.columns.upperBound else { return nil }
            let tile = TileCoordinate(uncheckedZoom: range.zoom, x: x, y: y)
            if y < range.rows.upperBound {
                y += 1
            } else {
                y = range.rows.lowerBound
                x += 1
            }
            return tile
        }
    }
}

/// The tiles that cover a bounding box at each zoom of a range of zooms.
///
/// Each zoom's tiles are one ``TileRange`` (two for a box across the antimeridian), computed in
/// constant time, so counts per zoom and in total never enumerate: the world from zoom 0 to 30 is
/// (4^31 - 1) / 3 tiles, about 1.5e18, within `Int`. Iterating the cover is lazy, zoom by zoom.
///
/// Which tiles cover a box: those sharing area with it. A tile that only touches the box along an
/// edge is left out. A box of zero width or height (a meridian or parallel segment, or a point)
/// is covered by the tiles its line lies in, by the same rule as ``WebMercator/tile(containing:zoom:)``.
/// Latitudes beyond the Mercator limit are clamped. Box edges within ``WebMercator/edgeTolerance`` of a tile
/// boundary count as on it, so a tile's own bounding box is covered by that tile alone (the
/// inverse projection of a tile edge is only exact to a few ulps).
public struct TileCover: Hashable, Sendable, Sequence {
    /// The box covered.
    public let boundingBox: GeoBoundingBox
    /// The zooms covered.
    public let zooms: ClosedRange<Int>
    /// The ranges of each zoom, indexed by `zoom - zooms.lowerBound`.
    private let rangesByZoom: [[TileRange]]

    /// The cover of `boundingBox` at every zoom of `zooms`.
    /// - Throws: ``GeometryError/invalidBoundingBox(_:reason:)`` or ``GeometryError/zoomOutOfRange(_:)``.
    public init(boundingBox: GeoBoundingBox, zooms: ClosedRange<Int>) throws(GeometryError) {
        try GeometryError.check(zoom: zooms.lowerBound)
        try GeometryError.check(zoom: zooms.upperBound)
        var ranges: [[TileRange]] = []
        for zoom in zooms { ranges.append(try Self.ranges(of: boundingBox, zoom: zoom)) }
        self.boundingBox = boundingBox
        self.zooms = zooms
        self.rangesByZoom = ranges
    }

    /// The whole world at every zoom of `zooms`.
    public static func world(zooms: ClosedRange<Int>) throws(GeometryError) -> TileCover {
        try TileCover(boundingBox: .world, zooms: zooms)
    }

    /// The ranges covering the box at `zoom` (empty for a zoom outside ``zooms``).
    public func ranges(atZoom zoom: Int) -> [TileRange] {
        zooms.contains(zoom) ? rangesByZoom[zoom - zooms.lowerBound] : []
    }

    /// The number of tiles at `zoom` (0 outside ``zooms``), without enumerating them.
    public func count(atZoom zoom: Int) -> Int {
        ranges(atZoom: zoom).reduce(0) { $0 + $1.count }
    }

    /// The number of tiles at all zooms, without enumerating them.
    public var count: Int { zooms.reduce(0) { $0 + count(atZoom: $1) } }

    /// Whether `tile` is one of the cover's tiles.
    public func contains(_ tile: TileCoordinate) -> Bool {
        ranges(atZoom: tile.zoom).contains { $0.contains(tile) }
    }

    public var underestimatedCount: Int { count }

    public func makeIterator() -> Iterator { Iterator(ranges: rangesByZoom.flatMap { $0 }) }

    /// Visits the tiles zoom by zoom, range by range, each range in its own order.
    public struct Iterator: IteratorProtocol, Sendable {
        let ranges: [TileRange]
        var index = 0
        var current: TileRange.Iterator?

        package init(ranges: [TileRange]) {
            self.ranges = ranges
            current = ranges.first?.makeIterator()
        }

        public mutating func next() -> TileCoordinate? {
            while current != nil {
                if let tile = current?.next() { return tile }
                index += 1
                current = index < ranges.count ? ranges[index].makeIterator() : nil
            }
            return nil
        }
    }

    // MARK: Internals

    /// A part of a box not crossing the antimeridian, in tile units at some zoom, edges snapped.
    struct ProjectedPart {
        var minX: Double, maxX: Double, minY: Double, maxY: Double
    }

    /// The box in tile units at `zoom`: one part, or two for a box across the antimeridian
    /// (`west...180` first, then `-180...east`).
    static func projectedParts(of box: GeoBoundingBox, zoom: Int) throws(GeometryError) -> [ProjectedPart] {
        try box.validate()
        try GeometryError.check(zoom: zoom)
        var west = box.west, east = box.east
        // A crossing box starting at 180 or ending at -180 does not really cross.
        if west > east, west == 180 { west = -180 }
        if west > east, east == -180 { east = 180 }
        let n = Double(1 << zoom)
        let snap = { (value: Double) -> Double in WebMercator.snapped(value, zoom: zoom) }
        let latitude = { (degrees: Double) -> Double in
            Swift.min(Swift.max(degrees, -WebMercator.maximumLatitude), WebMercator.maximumLatitude)
        }
        let minY = snap(WebMercator.worldY(latitude: latitude(box.north)) * n)
        let maxY = snap(WebMercator.worldY(latitude: latitude(box.south)) * n)
        let x = { (longitude: Double) -> Double in snap(WebMercator.worldX(longitude: longitude) * n) }
        if west <= east {
            return [ProjectedPart(minX: x(west), maxX: x(east), minY: minY, maxY: maxY)]
        }
        return [
            ProjectedPart(minX: x(west), maxX: n, minY: minY, maxY: maxY),
            ProjectedPart(minX: 0, maxX: x(east), minY: minY, maxY: maxY),
        ]
    }

    /// The tile ranges covering `box` at `zoom` (see the type's notes for the rule).
    static func ranges(of box: GeoBoundingBox, zoom: Int) throws(GeometryError) -> [TileRange] {
        let parts = try projectedParts(of: box, zoom: zoom)
        let last = (1 << zoom) - 1
        // Columns or rows sharing length with [lower, upper], or the one holding a zero-length span.
        let span = { (lower: Double, upper: Double) -> ClosedRange<Int> in
            let first = Swift.min(Swift.max(Int(lower.rounded(.down)), 0), last)
            let end = Swift.min(Swift.max(Int(upper.rounded(.up)) - 1, first), last)
            return first...end
        }
        let rows = span(parts[0].minY, parts[0].maxY)
        if parts.count == 1 {
            return [TileRange(uncheckedZoom: zoom, columns: span(parts[0].minX, parts[0].maxX), rows: rows)]
        }
        let eastern = span(parts[0].minX, parts[0].maxX)
        let western = span(parts[1].minX, parts[1].maxX)
        if western.upperBound + 1 >= eastern.lowerBound {
            // The two parts meet or overlap in tiles: every column.
            return [TileRange(uncheckedZoom: zoom, columns: 0...last, rows: rows)]
        }
        return [
            TileRange(uncheckedZoom: zoom, columns: eastern, rows: rows),
            TileRange(uncheckedZoom: zoom, columns: western, rows: rows),
        ]
    }
}
