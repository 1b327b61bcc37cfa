extension TileCoordinate {
    /// The tile one zoom up that contains this one, or `nil` at zoom 0.
    public var parent: TileCoordinate? {
        zoom == 0 ? nil : TileCoordinate(uncheckedZoom: zoom - 1, x: x >> 1, y: y >> 1)
    }

    /// The four tiles one zoom down that this one is made of, in quadkey digit order (north-west,
    /// north-east, south-west, south-east), or none at ``maximumZoom``.
    public var children: [TileCoordinate] {
        guard zoom < Self.maximumZoom else { return [] }
        let x0 = x << 1, y0 = y << 1
        return [
            TileCoordinate(uncheckedZoom: zoom + 1, x: x0, y: y0),
            TileCoordinate(uncheckedZoom: zoom + 1, x: x0 + 1, y: y0),
            TileCoordinate(uncheckedZoom: zoom + 1, x: x0, y: y0 + 1),
            TileCoordinate(uncheckedZoom: zoom + 1, x: x0 + 1, y: y0 + 1),
        ]
    }

    /// The tile at `ancestorZoom` that contains this one (itself at its own zoom), or `nil` when
    /// `ancestorZoom` is not in `0...zoom`.
    public func ancestor(atZoom ancestorZoom: Int) -> TileCoordinate? {
        guard (0...zoom).contains(ancestorZoom) else { return nil }
        let k = zoom - ancestorZoom
        return TileCoordinate(uncheckedZoom: ancestorZoom, x: x >> k, y: y >> k)
    }

    /// The tiles at `descendantZoom` that this one is made of (itself at its own zoom), counted
    /// without enumerating, or `nil` when `descendantZoom` is not in `zoom...maximumZoom`.
    public func descendants(atZoom descendantZoom: Int) -> TileRange? {
        guard (zoom...Self.maximumZoom).contains(descendantZoom) else { return nil }
        let k = descendantZoom - zoom
        return TileRange(
            uncheckedZoom: descendantZoom,
            columns: (x << k)...(((x + 1) << k) - 1),
            rows: (y << k)...(((y + 1) << k) - 1))
    }

    /// Whether this tile is `other` or one of its ancestors.
    public func contains(_ other: TileCoordinate) -> Bool {
        other.ancestor(atZoom: zoom) == self
    }

    /// Which part of its ancestor at `ancestorZoom` this tile covers: the data the fallback and
    /// overzoom code crops and scales up. `nil` when `ancestorZoom` is not in `0...zoom`.
    package func subsquare(inAncestorAtZoom ancestorZoom: Int) -> TileSubsquare? {
        guard let ancestor = ancestor(atZoom: ancestorZoom) else { return nil }
        let levelsDown = zoom - ancestorZoom
        let mask = (1 << levelsDown) - 1
        return TileSubsquare(ancestor: ancestor, levelsDown: levelsDown, column: x & mask, row: y & mask)
    }
}

/// The square part of an ancestor tile that a descendant `levelsDown` zooms deeper covers.
///
/// The ancestor is split into `divisions x divisions` equal squares (`divisions = 2^levelsDown`);
/// the descendant is the square at `column`, `row` (row 0 at the north, as XYZ).
package struct TileSubsquare: Hashable, Sendable, CustomStringConvertible {
    /// The ancestor tile.
    package let ancestor: TileCoordinate
    /// How many zooms deeper the descendant is, `0...30`.
    package let levelsDown: Int
    /// The column of the square inside the ancestor, `0..<divisions`.
    package let column: Int
    /// The row of the square inside the ancestor, `0..<divisions`, counted from the north.
    package let row: Int

    /// The number of squares along a side of the ancestor: 2^levelsDown.
    package var divisions: Int { 1 << levelsDown }

    /// The square in the ancestor's pixels for tiles of `tileSize` pixels, or `nil` when the square
    /// is smaller than one pixel (`2^levelsDown > tileSize`); use ``unitRegion`` then.
    /// - Throws: ``GeometryError/invalidTileSize(_:)`` unless `tileSize` is a power of two in
    ///   ``TileSize/range``.
    package func pixelRegion(tileSize: Int) throws(GeometryError) -> PixelSquare? {
        try WebMercator.checkTileSize(tileSize)
        guard tileSize >> levelsDown > 0 else { return nil }
        let size = tileSize >> levelsDown
        return PixelSquare(x: column * size, y: row * size, size: size)
    }

    /// The square as fractions of the ancestor's side (origin and size in `0...1`), exact for any
    /// `levelsDown`: multiply by the ancestor's pixel size to sample it.
    package var unitRegion: (x: Double, y: Double, size: Double) {
        let divisions = Double(self.divisions)
        return (Double(column) / divisions, Double(row) / divisions, 1 / divisions)
    }

    /// `ancestor[column,row of divisions]`.
    package var description: String { "\(ancestor)[\(column),\(row) of \(divisions)]" }
}

/// A square of pixels: origin (`x`, `y`, from the north-west corner) and side length `size`.
package struct PixelSquare: Hashable, Sendable {
    /// Pixels from the western edge.
    package var x: Int
    /// Pixels from the northern edge.
    package var y: Int
    /// The side length in pixels.
    package var size: Int

    /// Creates a square from its origin and side.
    package init(x: Int, y: Int, size: Int) {
        self.x = x
        self.y = y
        self.size = size
    }
}
