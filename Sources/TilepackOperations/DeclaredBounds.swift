import TilepackCore

/// The bounds a tile tree's description declares, and the check that the tiles an import reads
/// lie inside them: tiles far outside are the sign of a wrong `--layout` or `--scheme` (a TMS
/// tree read as XYZ lands in the other hemisphere; a zyx tree read as zxy swaps columns and rows).
package struct DeclaredBounds: Sendable, Equatable {
    /// The ways the file's numbers can be read; tiles inside any one of them fit.
    package var readings: [GeoBoundingBox]
    /// The file that declared them.
    package var source: String

    package init(readings: [GeoBoundingBox], source: String) {
        self.readings = readings
        self.source = source
    }

    /// gdal2tiles' `<BoundingBox minx miny maxx maxy>`: degrees west, south, east, north (GDAL
    /// 3.1 and later); older versions wrote south, west, north, east, so both readings are kept;
    /// numbers beyond ±180 are EPSG:3857 metres.
    init?(tileMapBox attributes: [String: String]) {
        let numbers = ["minx", "miny", "maxx", "maxy"].compactMap { attributes[$0].flatMap(Double.init) }
        guard numbers.count == 4, numbers.allSatisfy(\.isFinite) else { return nil }
        var n = numbers
        if n.contains(where: { abs($0) > 180 }) {
            let half = WebMercator.earthCircumference / 2
            let corners = [(n[0], n[1]), (n[2], n[3])].map { x, y in
                WebMercator.coordinate(atWorldPoint: MercatorPoint(x: 0.5 + x / (2 * half), y: 0.5 - y / (2 * half)))
            }
            n = [corners[0].longitude, corners[0].latitude, corners[1].longitude, corners[1].latitude]
        }
        let candidates = [(n[0], n[1], n[2], n[3]), (n[1], n[0], n[3], n[2])]
        readings = candidates.compactMap { w, s, e, north in
            guard (-180...180).contains(w), (-180...180).contains(e), (-90...90).contains(s), (-90...90).contains(north),
                s <= north, w <= e
            else { return nil }
            return GeoBoundingBox(west: w, south: s, east: e, north: north)
        }
        source = "tilemapresource.xml"
        if readings.isEmpty { return nil }
    }
}

/// Keeps the extent of the tiles an import reads, zoom by zoom, and compares it with
/// ``DeclaredBounds`` under the import's layout and scheme and the three others.
struct DeclaredBoundsCheck {
    struct Extent: Equatable {
        var columns: ClosedRange<Int>
        var rows: ClosedRange<Int>
    }

    let bounds: DeclaredBounds
    let layout: TileTreeLayout
    let scheme: TileScheme
    /// XYZ extents of the tiles read so far, as read with ``layout`` and ``scheme``.
    private(set) var extents: [Int: Extent] = [:]
    /// Set once the tiles were found outside the bounds with no other reading that fits: the
    /// bounds themselves are then suspect, and the check says so once and stops.
    private(set) var gaveUp = false

    init(bounds: DeclaredBounds, layout: TileTreeLayout, scheme: TileScheme) {
        self.bounds = bounds
        self.layout = layout
        self.scheme = scheme
    }

    mutating func add(_ tile: TileCoordinate) {
        if let extent = extents[tile.zoom] {
            extents[tile.zoom] = Extent(
                columns: min(extent.columns.lowerBound, tile.x)...max(extent.columns.upperBound, tile.x),
                rows: min(extent.rows.lowerBound, tile.y)...max(extent.rows.upperBound, tile.y))
        } else {
            extents[tile.zoom] = Extent(columns: tile.x...tile.x, rows: tile.y...tile.y)
        }
    }

    /// Compares the tiles so far with the bounds.
    /// - Returns: a note when the tiles lie outside the bounds and no other layout or scheme
    ///   would put them inside (then nothing more is checked).
    /// - Throws: ``OperationError`` (a conflict) when another layout or scheme fits.
    mutating func check() throws(OperationError) -> String? {
        guard !gaveUp, let (zoom, extent, cover) = firstMisfit(layout: layout, scheme: scheme) else { return nil }
        let seen =
            "at zoom \(zoom) the tiles span columns \(Self.text(extent.columns)), rows \(Self.text(extent.rows)) (XYZ), outside the columns \(Self.text(cover.columns)), rows \(Self.text(cover.rows)) that the bounds \(bounds.source) declares (\(bounds.readings[0])) cover"
        let others = TileTreeLayout.allCases.flatMap { l in [TileScheme.xyz, .tms].map { (l, $0) } }
            .filter { $0 != (layout, scheme) && firstMisfit(layout: $0.0, scheme: $0.1) == nil }
            .sorted { ($0.0 != layout ? 1 : 0) + ($0.1 != scheme ? 1 : 0) < ($1.0 != layout ? 1 : 0) + ($1.1 != scheme ? 1 : 0) }
        guard let fit = others.first else {
            gaveUp = true
            return "\(seen); no other --layout or --scheme puts them inside: check the bounds in \(bounds.source)"
        }
        var flags: [String] = []
        if fit.0 != layout { flags.append("--layout \(fit.0)") }
        if fit.1 != scheme { flags.append("--scheme \(fit.1)") }
        throw OperationError(
            path: bounds.source,
            fault: .conflict(
                "the tiles as read with --layout \(layout) --scheme \(scheme) do not lie where the tree says: \(seen). Read with \(flags.joined(separator: " ")) they fit: is that the tree's \(fit.0 != layout ? "layout" : "scheme")? (Or fix the bounds in \(bounds.source).)"
            ))
    }

    /// The first zoom whose tiles, read with `layout` and `scheme`, reach more than one tile
    /// beyond every reading of the bounds (one tile of slack: tools round bounds outwards).
    private func firstMisfit(layout: TileTreeLayout, scheme: TileScheme) -> (Int, Extent, Extent)? {
        for zoom in extents.keys.sorted() {
            guard let read = extents[zoom] else { continue }
            let extent = reread(read, zoom: zoom, as: layout, scheme)
            var nearest: Extent?
            var fits = false
            for box in bounds.readings {
                // A box across the antimeridian (two ranges) is not checked.
                guard let ranges = try? box.tileRanges(atZoom: zoom), ranges.count == 1, let range = ranges.first else {
                    fits = true
                    break
                }
                let cover = Extent(columns: range.columns, rows: range.rows)
                nearest = nearest ?? cover
                if cover.columns.lowerBound - 1 <= extent.columns.lowerBound, extent.columns.upperBound <= cover.columns.upperBound + 1,
                    cover.rows.lowerBound - 1 <= extent.rows.lowerBound, extent.rows.upperBound <= cover.rows.upperBound + 1
                {
                    fits = true
                    break
                }
            }
            if !fits, let nearest { return (zoom, extent, nearest) }
        }
        return nil
    }

    /// The extent the same files would have, read with `otherLayout` and `otherScheme` instead.
    private func reread(_ extent: Extent, zoom: Int, as otherLayout: TileTreeLayout, _ otherScheme: TileScheme) -> Extent {
        let last = (1 << zoom) - 1
        func flip(_ rows: ClosedRange<Int>) -> ClosedRange<Int> { (last - rows.upperBound)...(last - rows.lowerBound) }
        // The numbers in the file names: folder, then file.
        let storedRows = scheme == .tms ? flip(extent.rows) : extent.rows
        let (folder, file) = layout == .zxy ? (extent.columns, storedRows) : (storedRows, extent.columns)
        let (columns, rows) = otherLayout == .zxy ? (folder, file) : (file, folder)
        return Extent(columns: columns, rows: otherScheme == .tms ? flip(rows) : rows)
    }

    private static func text(_ range: ClosedRange<Int>) -> String {
        range.lowerBound == range.upperBound ? "\(range.lowerBound)" : "\(range.lowerBound)-\(range.upperBound)"
    }
}

/// The one check of a `--bbox` against the bounds of what is read (an archive's metadata, a
/// tree's description): a box that shares no area with them is a mistake, most often a box
/// written latitude first, even when the low zooms' world tiles would still touch it. `extract`
/// and `import` refuse it before writing anything, and name the bounds and, when the box read the
/// other way round meets them, that box.
enum BoxBesideBounds {
    /// Why `box` cannot be meant for data within `bounds` (one or more readings of them), or `nil`
    /// when it meets one of them or cannot be compared (a box across the antimeridian).
    /// `declaredBy` names what declares the bounds ("the archive's metadata", "metadata.json").
    static func mistake(box: GeoBoundingBox, bounds: [GeoBoundingBox], declaredBy: String) -> String? {
        guard let first = bounds.first, box.west <= box.east else { return nil }
        if bounds.contains(where: { $0.west > $0.east || intersection($0, box) != nil }) { return nil }
        return "the box \(box) (west,south,east,north) lies outside the bounds \(first) that \(declaredBy) declares."
            + (swappedHint(box: box, bounds: bounds) ?? "")
    }

    /// " With latitude and longitude swapped the box (...) meets ...", when it does.
    static func swappedHint(box: GeoBoundingBox, bounds: [GeoBoundingBox]) -> String? {
        guard let swapped = try? GeoBoundingBox(validatingWest: box.south, south: box.west, east: box.north, north: box.east),
            bounds.contains(where: { intersection($0, swapped) != nil })
        else { return nil }
        return " With latitude and longitude swapped the box (\(swapped)) meets them: the order is west,south,east,north."
    }

    /// The area two boxes share, `nil` when none (or either crosses the antimeridian).
    static func intersection(_ a: GeoBoundingBox, _ b: GeoBoundingBox) -> GeoBoundingBox? {
        // Boxes across the antimeridian: keep the region asked for.
        guard a.west <= a.east, b.west <= b.east else { return nil }
        let box = GeoBoundingBox(
            west: max(a.west, b.west), south: max(a.south, b.south), east: min(a.east, b.east), north: min(a.north, b.north))
        return box.west < box.east && box.south < box.north ? box : nil
    }
}

/// The columns and rows (XYZ) of the tiles of the deepest zoom seen so far.
struct TileExtent: Sendable, Equatable {
    var zoom: Int
    var columns: ClosedRange<Int>
    var rows: ClosedRange<Int>

    /// `extent` with `tile` in it: a deeper tile starts a new extent, a shallower one changes nothing.
    static func adding(_ tile: TileCoordinate, to extent: TileExtent?) -> TileExtent {
        guard let extent, extent.zoom >= tile.zoom else {
            return TileExtent(zoom: tile.zoom, columns: tile.x...tile.x, rows: tile.y...tile.y)
        }
        guard extent.zoom == tile.zoom else { return extent }
        return TileExtent(
            zoom: tile.zoom, columns: min(extent.columns.lowerBound, tile.x)...max(extent.columns.upperBound, tile.x),
            rows: min(extent.rows.lowerBound, tile.y)...max(extent.rows.upperBound, tile.y))
    }

    func tile(x: Int, y: Int) -> TileCoordinate {
        // Inside the extent of tiles already seen at this zoom: always valid.
        TileCoordinate(validatingZoom: zoom, x: x, y: y)!
    }
}
