import TilepackCore
import TilepackStorage

/// Where a plan takes tiles: a box, a polygon region or a route's corridor, with Core's covers
/// (``TileCover``, `RegionCover`, `RouteCover`) deciding which tiles of each zoom belong to it, as
/// `extract`, `export --maplibre-offline` and `fetch` decide.
public enum PlanArea: Hashable, Sendable {
    /// The tiles sharing area with the box (a box may cross the antimeridian).
    case boundingBox(GeoBoundingBox)
    /// The tiles sharing area with the polygons (holes, the antimeridian).
    case region(GeoRegion)
    /// The tiles within `radius` metres of the polyline.
    case route([GeoCoordinate], radius: Double)

    /// The area's tiles at `zoom`.
    /// - Throws: ``GeometryError`` for an invalid area or zoom.
    public func cover(atZoom zoom: Int) throws(GeometryError) -> AreaCover {
        switch self {
        case .boundingBox(let box):
            return AreaCover(zoom: zoom, frame: try box.tileRanges(atZoom: zoom), rows: nil)
        case .region(let region):
            return AreaCover(rows: try RegionCover(region: region, zoom: zoom))
        case .route(let points, let radius):
            return AreaCover(rows: try RouteCover(route: points, radius: radius, zoom: zoom))
        }
    }
}

/// An area's tiles at one zoom: the rectangles that hold them (what an archive is asked for) and
/// the test that keeps the tiles of the area (a region's or a route's rows; every tile of the
/// rectangles for a box).
public struct AreaCover: Sendable {
    public let zoom: Int
    /// Disjoint rectangles holding every tile of the area.
    public let frame: [TileRange]
    /// Per XYZ row, its columns; `nil` when every tile of ``frame`` belongs.
    let rows: [RouteCover.Row]?

    init(zoom: Int, frame: [TileRange], rows: [RouteCover.Row]?) {
        self.zoom = zoom
        self.frame = frame
        self.rows = rows
    }

    init(rows cover: some RowCover) {
        zoom = cover.zoom
        rows = cover.rows
        guard let first = cover.rows.first, let last = cover.rows.last else {
            frame = []
            return
        }
        var west = Int.max, east = Int.min
        for row in cover.rows {
            west = min(west, row.columns.first!.lowerBound)
            east = max(east, row.columns.last!.upperBound)
        }
        frame = [TileRange(uncheckedZoom: cover.zoom, columns: west...east, rows: first.row...last.row)]
    }

    /// Whether the tile (of this zoom) belongs to the area.
    public func contains(x: Int, y: Int) -> Bool {
        guard let rows else { return frame.contains { $0.columns.contains(x) && $0.rows.contains(y) } }
        var low = 0, high = rows.count
        while low < high {
            let middle = (low + high) / 2
            if rows[middle].row < y { low = middle + 1 } else { high = middle }
        }
        guard low < rows.count, rows[low].row == y else { return false }
        return rows[low].columns.contains { $0.contains(x) }
    }

    /// The area's tiles as columns, west to east and each column's runs north to south: exactly
    /// its tiles, so an index asked for them needs no test per row (a region's rows turned into
    /// columns in one pass over its tiles).
    var columnSpans: [TileColumnSpan] {
        var spans: [TileColumnSpan] = []
        if let rows, let west = frame.first?.columns.lowerBound, let east = frame.first?.columns.upperBound {
            // Per column, where its open run started and the last row it reached.
            var start = [Int](repeating: -1, count: east - west + 1), reached = start
            for row in rows {
                for columns in row.columns {
                    for x in columns {
                        let c = x - west
                        if start[c] >= 0, reached[c] != row.row - 1 { spans.append(TileColumnSpan(x: x, rows: start[c]...reached[c])) }
                        if start[c] < 0 || reached[c] != row.row - 1 { start[c] = row.row }
                        reached[c] = row.row
                    }
                }
            }
            for c in start.indices where start[c] >= 0 { spans.append(TileColumnSpan(x: west + c, rows: start[c]...reached[c])) }
        } else {
            for range in frame { for x in range.columns { spans.append(TileColumnSpan(x: x, rows: range.rows)) } }
        }
        spans.sort { ($0.x, $0.rows.lowerBound) < ($1.x, $1.rows.lowerBound) }
        return spans
    }

    /// The number of the area's tiles, without enumerating them.
    public var count: Int {
        guard let rows else { return frame.reduce(0) { $0 + $1.count } }
        return rows.reduce(0) { total, row in row.columns.reduce(total) { $0 + $1.count } }
    }

    /// Calls `body` with each tile of the area, row ranges west to east.
    public func forEach(_ body: (Int, Int) throws -> Void) rethrows {
        if let rows {
            for row in rows { for columns in row.columns { for x in columns { try body(x, row.row) } } }
        } else {
            for range in frame { for x in range.columns { for y in range.rows { try body(x, y) } } }
        }
    }
}
