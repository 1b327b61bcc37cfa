import Foundation

/// The tiles at one zoom that lie within a distance of a route: what a prefetcher fetches for
/// "a radius around a route" (the HERE SDK's `fetchMapDataForRoute:radius:`).
///
/// ## The route
/// A polyline of ``GeoCoordinate``s, each segment drawn straight in Web Mercator (a rhumb line, as
/// a map draws it) and taking the shorter way around the globe: 179.9 to -179.9 crosses the
/// antimeridian (0.2 degrees), it does not go round the world. A segment exactly 180 degrees long
/// goes east. Latitudes beyond the Mercator limit are clamped first, longitudes wrapped into
/// -180...180; a route of one coordinate is a point.
///
/// ## Accuracy
/// - Conservative: every tile holding a point whose distance from the route is at most `radius`
///   is included, for distances on the WGS 84 ellipsoid and on the Web Mercator sphere
///   (radius 6 378 137 m) alike. Tiles are closed squares here: a buffer that just touches a tile
///   edge includes that tile, so a point route of radius 0 on a tile corner yields the four tiles
///   meeting there.
/// - Tight: every included tile comes within about `radius * 1.0067 * 1.01 * cos(φ - δ) / cos(φ + δ)`
///   of the route, where φ is the route's latitude and δ = radius / 6 378 137 m (in radians): the
///   buffer is a disc in Mercator space sized for the highest latitude it reaches, and the ellipsoid
///   factor `1 / (1 - e²) ≈ 1.0067` bounds the sphere-to-ellipsoid difference. That is less than 5%
///   beyond the radius for radii up to 50 km below latitude 60° (about 2% for a few km at mid
///   latitudes), and grows towards the poles. Tiles are whole, so a tile counts as within reach
///   when any point of it is.
/// - Near the poles: when the radius reaches within 0.1° (11 km) of a pole from some part of the
///   route, every column of the rows within reach is included (a disc around a pole spans every
///   longitude).
///
/// ## Cost
/// Work is proportional to the rows of tiles each segment's buffer crosses plus the tiles returned
/// when enumerated; a row's tiles are kept as column ranges, so ``count`` never enumerates.
package struct RouteCover: Hashable, Sendable, RowCover {
    /// `1 / (1 - e²)` for WGS 84: no distance on the ellipsoid is shorter than the same path on
    /// the sphere of radius `a` divided by this factor.
    package static let ellipsoidFactor = 1 / (1 - 0.00669437999014)

    /// The zoom of the tiles.
    package let zoom: Int
    /// The radius in metres.
    package let radius: Double
    /// For each row (XYZ) that holds tiles, in ascending order, its columns as sorted, disjoint,
    /// non-adjacent ranges.
    package let rows: [Row]

    /// The tiles of one row: its columns as sorted, disjoint, non-adjacent ranges.
    package struct Row: Hashable, Sendable {
        /// The XYZ row (0 at the north).
        package let row: Int
        /// The columns, west to east.
        package let columns: [ClosedRange<Int>]
    }

    /// Computes the tiles at `zoom` within `radius` metres of `route`.
    /// - Throws: ``GeometryError/emptyRoute``, ``GeometryError/invalidRadius(_:)`` for a negative or
    ///   non-finite radius, ``GeometryError/zoomOutOfRange(_:)``, and the coordinate errors of
    ///   ``WebMercator/worldPoint(of:)``.
    package init(route: [GeoCoordinate], radius: Double, zoom: Int) throws(GeometryError) {
        try GeometryError.check(zoom: zoom)
        guard radius.isFinite, radius >= 0 else { throw .invalidRadius(radius) }
        guard let first = route.first else { throw .emptyRoute }
        var builder = Builder(zoom: zoom, radius: radius)
        var previous = try WebMercator.normalized(first)
        if route.count == 1 { builder.add(from: previous, to: previous) }
        for coordinate in route.dropFirst() {
            let next = try WebMercator.normalized(coordinate)
            builder.add(from: previous, to: next)
            previous = next
        }
        self.zoom = zoom
        self.radius = radius
        self.rows = builder.mergedRows()
    }
}

extension RouteCover {
    /// Accumulates column ranges per row, segment by segment.
    struct Builder {
        let zoom: Int
        let n: Double
        let last: Int
        /// The ground radius inflated by the ellipsoid factor, in metres.
        let reach: Double
        /// The same as an angle on the sphere, in degrees.
        let reachDegrees: Double
        var spans: [Int: [ClosedRange<Int>]] = [:]

        /// A buffer reaching this close to a pole (degrees) takes whole rows, keeping sec φ finite.
        static let poleMargin = 0.1

        init(zoom: Int, radius: Double) {
            self.zoom = zoom
            n = Double(1 << zoom)
            last = (1 << zoom) - 1
            reach = radius * RouteCover.ellipsoidFactor
            reachDegrees = reach / WebMercator.earthRadius * 180 / Double.pi
        }

        /// Adds the tiles near the segment from `a` to `b` (normalised coordinates).
        mutating func add(from a: (latitude: Double, longitude: Double), to b: (latitude: Double, longitude: Double)) {
            var eastOfA = b.longitude
            let delta = b.longitude - a.longitude
            if delta > 180 { eastOfA -= 360 } else if delta < -180 { eastOfA += 360 }

            // A buffer reaching a pole spans every longitude: whole rows within reach.
            let lowest = Swift.min(a.latitude, b.latitude) - reachDegrees
            let highest = Swift.max(a.latitude, b.latitude) + reachDegrees
            if highest >= 90 - Self.poleMargin || lowest <= -90 + Self.poleMargin {
                let clamp = { (lat: Double) in Swift.min(Swift.max(lat, -WebMercator.maximumLatitude), WebMercator.maximumLatitude) }
                let top = WebMercator.worldY(latitude: clamp(highest)) * n
                let bottom = WebMercator.worldY(latitude: clamp(lowest)) * n
                for row in rowSpan(top, bottom) { insert(row: row, columns: 0...last) }
                return
            }

            let start = MercatorPoint(x: WebMercator.worldX(longitude: a.longitude) * n, y: WebMercator.worldY(latitude: a.latitude) * n)
            let end = MercatorPoint(x: WebMercator.worldX(longitude: eastOfA) * n, y: WebMercator.worldY(latitude: b.latitude) * n)

            // Split the segment so that the Mercator scale (sec φ) varies by at most 1% within each
            // piece, never into more pieces than the rows it crosses.
            let equatorCrossed = (a.latitude < 0) != (b.latitude < 0)
            let lowAbs = equatorCrossed ? 0 : Swift.min(abs(a.latitude), abs(b.latitude))
            let highAbs = Swift.max(abs(a.latitude), abs(b.latitude)) + reachDegrees
            let scaleRatio = cos(lowAbs * Double.pi / 180) / cos(highAbs * Double.pi / 180)
            let rowsCrossed = abs(end.y - start.y).rounded(.up)
            let pieces = Int(Swift.max(1, Swift.min((log(scaleRatio) / log(1.01)).rounded(.up), rowsCrossed, 4096)))
            for piece in 0..<pieces {
                let t0 = Double(piece) / Double(pieces), t1 = Double(piece + 1) / Double(pieces)
                let p = MercatorPoint(x: start.x + (end.x - start.x) * t0, y: start.y + (end.y - start.y) * t0)
                let q = piece == pieces - 1 ? end : MercatorPoint(x: start.x + (end.x - start.x) * t1, y: start.y + (end.y - start.y) * t1)
                let pieceLatitude =
                    Swift.max(
                        abs(WebMercator.latitude(worldY: p.y / n)), abs(WebMercator.latitude(worldY: q.y / n))) + reachDegrees
                // Ground metres -> Mercator metres at the highest latitude the buffer can reach, -> tiles.
                let radiusInTiles = reach / cos(pieceLatitude * Double.pi / 180) / WebMercator.earthCircumference * n
                addCapsule(p, q, radius: radiusInTiles)
            }
        }

        /// Adds the tiles meeting the set of points within `r` (tile units) of segment `p`-`q`.
        mutating func addCapsule(_ p: MercatorPoint, _ q: MercatorPoint, radius r: Double) {
            let length = ((q.x - p.x) * (q.x - p.x) + (q.y - p.y) * (q.y - p.y)).squareRoot()
            var corners: [MercatorPoint] = []
            if length > 0 {
                let nx = -(q.y - p.y) / length * r, ny = (q.x - p.x) / length * r
                corners = [
                    MercatorPoint(x: p.x + nx, y: p.y + ny), MercatorPoint(x: q.x + nx, y: q.y + ny),
                    MercatorPoint(x: q.x - nx, y: q.y - ny), MercatorPoint(x: p.x - nx, y: p.y - ny),
                ]
            }
            for row in rowSpan(Swift.min(p.y, q.y) - r, Swift.max(p.y, q.y) + r) {
                let y0 = Double(row), y1 = Double(row + 1)
                var low = Double.infinity, high = -Double.infinity
                // The discs at both ends.
                for centre in [p, q] {
                    let dy = Swift.min(Swift.max(centre.y, y0), y1) - centre.y
                    guard abs(dy) <= r else { continue }
                    let half = (r * r - dy * dy).squareRoot()
                    low = Swift.min(low, centre.x - half)
                    high = Swift.max(high, centre.x + half)
                }
                // The rectangle swept by the segment: vertices in the band and edge crossings of its edges.
                for (index, start) in corners.enumerated() {
                    let end = corners[(index + 1) % corners.count]
                    if start.y >= y0, start.y <= y1 {
                        low = Swift.min(low, start.x)
                        high = Swift.max(high, start.x)
                    }
                    for boundary in [y0, y1] where (start.y - boundary) * (end.y - boundary) < 0 {
                        let x = start.x + (boundary - start.y) / (end.y - start.y) * (end.x - start.x)
                        low = Swift.min(low, x)
                        high = Swift.max(high, x)
                    }
                }
                guard low <= high else { continue }
                // Closed tiles: a column whose edge the buffer touches is included.
                let first = Int(low.rounded(.up)) - 1
                let lastColumn = Int(high.rounded(.down))
                insertWrapping(row: row, first: Swift.min(first, lastColumn), last: lastColumn)
            }
        }

        /// The rows whose closed band meets `top...bottom` (tile units), inside the pyramid.
        func rowSpan(_ top: Double, _ bottom: Double) -> ClosedRange<Int> {
            let first = Swift.max(Int(Swift.max(top, -1).rounded(.up)) - 1, 0)
            let end = Swift.min(Int(Swift.min(bottom, n).rounded(.down)), last)
            return first...Swift.max(first, end)
        }

        /// Inserts columns that may lie outside the pyramid, wrapping them around the antimeridian.
        mutating func insertWrapping(row: Int, first: Int, last lastColumn: Int) {
            let columns = 1 << zoom
            if lastColumn - first + 1 >= columns {
                insert(row: row, columns: 0...last)
                return
            }
            let start = ((first % columns) + columns) % columns
            let end = start + (lastColumn - first)
            if end < columns {
                insert(row: row, columns: start...end)
            } else {
                insert(row: row, columns: start...last)
                insert(row: row, columns: 0...(end - columns))
            }
        }

        mutating func insert(row: Int, columns: ClosedRange<Int>) {
            spans[row, default: []].append(columns)
        }

        /// Rows ascending, each with its ranges sorted and merged (overlapping or adjacent ones joined).
        func mergedRows() -> [Row] {
            spans.keys.sorted().map { row in
                var merged: [ClosedRange<Int>] = []
                for range in spans[row, default: []].sorted(by: { $0.lowerBound < $1.lowerBound }) {
                    if let previous = merged.last, range.lowerBound <= previous.upperBound + 1 {
                        merged[merged.count - 1] = previous.lowerBound...Swift.max(previous.upperBound, range.upperBound)
                    } else {
                        merged.append(range)
                    }
                }
                return Row(row: row, columns: merged)
            }
        }
    }
}

/// The tiles at one zoom as rows of column ranges (a route's or a region's cover).
package protocol RowCover: Sequence where Iterator == TileCover.Iterator {
    /// The zoom of the tiles.
    var zoom: Int { get }
    /// For each XYZ row that holds tiles, in ascending order, its columns as sorted, disjoint ranges.
    var rows: [RouteCover.Row] { get }
}

extension RowCover {
    /// The number of tiles, without enumerating them.
    package var count: Int { rows.reduce(0) { total, row in row.columns.reduce(total) { $0 + $1.count } } }

    /// Whether `tile` is one of the cover's tiles.
    package func contains(_ tile: TileCoordinate) -> Bool {
        guard tile.zoom == zoom else { return false }
        var low = 0, high = rows.count
        while low < high {
            let middle = (low + high) / 2
            if rows[middle].row < tile.y { low = middle + 1 } else { high = middle }
        }
        guard low < rows.count, rows[low].row == tile.y else { return false }
        return rows[low].columns.contains { $0.contains(tile.x) }
    }

    /// The cover as one-row ``TileRange``s, north to south, west to east.
    package var ranges: [TileRange] {
        rows.flatMap { row in row.columns.map { TileRange(uncheckedZoom: zoom, columns: $0, rows: row.row...row.row) } }
    }

    package var underestimatedCount: Int { count }

    /// Visits the tiles row by row, north to south, each row west to east.
    package func makeIterator() -> TileCover.Iterator { TileCover.Iterator(ranges: ranges) }
}
