/// A tile as every message and JSON report names it: `z/x/y` with rows counted from the north
/// (XYZ); an MBTiles row adds the TMS row it is stored under as an extra field, never instead.
/// In JSON the fields are numbers: `{"z": 1, "x": 0, "y": 1, "tmsRow": 0}`.
package struct TileReference: Sendable, Codable, Hashable, CustomStringConvertible {
    package var z: Int
    package var x: Int
    /// The XYZ row; `nil` when a stored TMS row is outside the zoom's rows (so no XYZ row exists).
    package var y: Int?
    /// The row as MBTiles stores it (counted from the south), for MBTiles rows only.
    package var tmsRow: Int?

    package init(_ tile: TileCoordinate, tmsRow: Int? = nil) {
        z = tile.zoom
        x = tile.x
        y = tile.y
        self.tmsRow = tmsRow
    }

    /// An MBTiles row as stored: zoom, column and TMS row, in range or not.
    package init(zoom: Int, column: Int, tmsRow: Int) {
        z = zoom
        x = column
        let rows = (0...TileCoordinate.maximumZoom).contains(zoom) ? 1 << zoom : 0
        y = (0..<rows).contains(tmsRow) ? TileScheme.tms.flipIfTMS(row: tmsRow, zoom: zoom) : nil
        self.tmsRow = tmsRow
    }

    package var description: String {
        "\(z)/\(x)/\(y.map(String.init) ?? "?")" + (tmsRow.map { " (TMS row \($0))" } ?? "")
    }
}
