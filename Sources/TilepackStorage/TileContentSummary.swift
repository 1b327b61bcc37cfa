import Foundation
import TilepackCore

/// Per zoom level: how many tiles and the XYZ column/row ranges they span.
package struct TileContentSummary: Hashable, Sendable {
    package struct Level: Hashable, Sendable {
        package var zoom: Int
        package var tileCount: Int
        package var minX: Int, maxX: Int
        /// XYZ rows (north = 0).
        package var minY: Int, maxY: Int

        package init(zoom: Int, tileCount: Int, minX: Int, maxX: Int, minY: Int, maxY: Int) {
            self.zoom = zoom
            self.tileCount = tileCount
            self.minX = minX
            self.maxX = maxX
            self.minY = minY
            self.maxY = maxY
        }

        /// The geographic extent of the tiles' range at this level.
        package var extent: GeoBoundingBox {
            let n = Double(1 << zoom)
            func lon(_ x: Int) -> Double { Double(x) / n * 360 - 180 }
            func lat(_ y: Int) -> Double { atan(sinh(Double.pi * (1 - 2 * Double(y) / n))) * 180 / Double.pi }
            return GeoBoundingBox(west: lon(minX), south: lat(maxY + 1), east: lon(maxX + 1), north: lat(minY))
        }
    }

    /// Levels with tiles, ascending.
    package var levels: [Level]
    /// The format the archive declares (or sniffed when it declares none).
    package var format: TileFormat?
    /// The format sniffed from the first tile.
    package var sniffedFormat: TileFormat?

    package init(levels: [Level], format: TileFormat? = nil, sniffedFormat: TileFormat? = nil) {
        self.levels = levels
        self.format = format
        self.sniffedFormat = sniffedFormat
    }

    package var tileCount: Int { levels.reduce(0) { $0 + $1.tileCount } }
    package var minZoom: Int? { levels.first?.zoom }
    package var maxZoom: Int? { levels.last?.zoom }

    /// The area covered by every zoom level (MBTiles: "bounds must define an area covered by all
    /// zoom levels"): the intersection of the levels' extents, or the deepest level's extent when
    /// the levels do not overlap. `nil` without tiles.
    package var bounds: GeoBoundingBox? {
        guard let deepest = levels.last else { return nil }
        var box = deepest.extent
        for level in levels {
            let e = level.extent
            box.west = max(box.west, e.west)
            box.east = min(box.east, e.east)
            box.south = max(box.south, e.south)
            box.north = min(box.north, e.north)
        }
        return box.west < box.east && box.south < box.north ? box : deepest.extent
    }

    /// - Parameter distinct: count a tile stored in several rows once (for files without a unique index).
    package static func query(_ connection: SQLiteConnection, distinct: Bool = false) throws(TileArchiveError) -> TileContentSummary {
        let statement = try connection.prepare(
            """
            SELECT zoom_level, COUNT(*), MIN(tile_column), MAX(tile_column), MIN(tile_row), MAX(tile_row)
            FROM \(distinct ? "(SELECT DISTINCT zoom_level, tile_column, tile_row FROM tiles)" : "tiles")
            WHERE typeof(zoom_level) = 'integer' AND typeof(tile_column) = 'integer' AND typeof(tile_row) = 'integer'
              AND zoom_level BETWEEN 0 AND 30 AND tile_column >= 0 AND tile_row >= 0
              AND tile_column < (1 << zoom_level) AND tile_row < (1 << zoom_level)
            GROUP BY zoom_level ORDER BY zoom_level
            """)
        var levels: [Level] = []
        while try statement.step() {
            let zoom = Int(statement.int64(0))
            let flip = { (row: Int64) in TileScheme.tms.flipIfTMS(row: Int(row), zoom: zoom) }
            levels.append(
                Level(
                    zoom: zoom, tileCount: Int(statement.int64(1)),
                    minX: Int(statement.int64(2)), maxX: Int(statement.int64(3)),
                    minY: flip(statement.int64(5)), maxY: flip(statement.int64(4))))
        }
        return TileContentSummary(levels: levels)
    }
}

extension TileContentSummary {
    /// The summary ``query(_:distinct:)`` gives, for a `tiles` table with its unique index on
    /// (zoom_level, tile_column, tile_row), taken column by column through the index: per
    /// column, one seek to its first valid row, one to its last, and a count of its rows. The
    /// single grouped pass evaluates every row's checks and aggregates (about 0.65 µs a row:
    /// 3.5 ms for 5,461 tiles, at the end of every fetch into a store); this takes a fraction
    /// of that. Rows are judged as ``query(_:distinct:)`` judges them (integers in range only).
    package static func queryByColumns(_ connection: SQLiteConnection) throws(TileArchiveError) -> TileContentSummary {
        let valid = "typeof(tile_column) = 'integer' AND typeof(tile_row) = 'integer' AND tile_row BETWEEN 0 AND ?3"
        // The next column after ?2 (at most ?3) with a valid row, and that row (the column's first).
        let next = try connection.prepare(
            """
            SELECT tile_column, tile_row FROM tiles
            WHERE zoom_level = ?1 AND tile_column > ?2 AND tile_column <= ?3 AND \(valid)
            ORDER BY tile_column, tile_row LIMIT 1
            """)
        let last = try connection.prepare(
            """
            SELECT tile_row FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND \(valid) ORDER BY tile_row DESC LIMIT 1
            """)
        let count = try connection.prepare("SELECT COUNT(*) FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND \(valid)")
        let zooms = try connection.prepare(
            """
            SELECT zoom_level FROM tiles WHERE zoom_level > ?1 AND zoom_level <= 30 AND typeof(zoom_level) = 'integer'
            ORDER BY zoom_level LIMIT 1
            """)
        var levels: [Level] = []
        var zoom = -1
        while true {
            zooms.bind(1, zoom)
            defer { zooms.reset() }
            // Each step moves strictly forward (integers only, past the last one): no file loops it.
            guard try zooms.step(), zooms.int64(0) > zoom else { break }
            zoom = Int(zooms.int64(0))
            let lastIndex = (1 << zoom) - 1
            var column = -1
            var level: Level?
            while true {
                next.bind(1, zoom)
                next.bind(2, column)
                next.bind(3, lastIndex)
                defer { next.reset() }
                guard try next.step(), next.int64(0) > column else { break }
                column = Int(next.int64(0))
                let firstRow = Int(next.int64(1))
                for statement in [last, count] {
                    statement.bind(1, zoom)
                    statement.bind(2, column)
                    statement.bind(3, lastIndex)
                }
                defer {
                    last.reset()
                    count.reset()
                }
                guard try last.step(), try count.step() else { continue }
                let lastRow = Int(last.int64(0))
                let rows = Int(count.int64(0))
                // Rows are TMS in the file: the first row is the southernmost.
                let minY = TileScheme.tms.flipIfTMS(row: lastRow, zoom: zoom)
                let maxY = TileScheme.tms.flipIfTMS(row: firstRow, zoom: zoom)
                if var current = level {
                    current.tileCount += rows
                    current.maxX = column
                    current.minY = min(current.minY, minY)
                    current.maxY = max(current.maxY, maxY)
                    level = current
                } else {
                    level = Level(zoom: zoom, tileCount: rows, minX: column, maxX: column, minY: minY, maxY: maxY)
                }
            }
            if let level { levels.append(level) }
        }
        return TileContentSummary(levels: levels)
    }

    /// Fills `format`, `bounds`, `center`, `minzoom` and `maxzoom` of `metadata` from the tiles,
    /// as `mode` says (the MBTiles and bundle writers share this rule).
    package func derive(into metadata: inout TileMetadata, mode: MetadataDerivation) {
        guard mode != .none else { return }
        typealias Key = TileMetadata.Key
        if metadata[Key.format] == nil, let format = sniffedFormat { metadata.setFormat(format) }
        guard let minZoom, let maxZoom, let bounds else { return }
        if mode == .extend {
            extend(&metadata, minZoom: minZoom, maxZoom: maxZoom, bounds: bounds)
            return
        }
        let replace = mode == .replace
        if replace || metadata[Key.minZoom] == nil { metadata.setMinZoom(minZoom) }
        if replace || metadata[Key.maxZoom] == nil { metadata.setMaxZoom(maxZoom) }
        if replace || metadata[Key.bounds] == nil { metadata.setBounds(Self.rounded(bounds)) }
        if replace || metadata[Key.center] == nil {
            let box = (try? metadata.bounds) ?? bounds
            let zoom = (try? metadata.minZoom) ?? minZoom
            let center = GeoCoordinate(
                latitude: Self.round7((box.south + box.north) / 2),
                longitude: Self.round7(box.west <= box.east ? (box.west + box.east) / 2 : box.west))
            metadata.setCenter(center, zoom: zoom)
        }
    }

    /// ``MetadataDerivation/extend``: what is set widened to cover the tiles too.
    private func extend(_ metadata: inout TileMetadata, minZoom: Int, maxZoom: Int, bounds: GeoBoundingBox) {
        let oldMin = (try? metadata.minZoom) ?? nil
        let oldMax = (try? metadata.maxZoom) ?? nil
        let newMin = min(oldMin ?? minZoom, minZoom)
        let newMax = max(oldMax ?? maxZoom, maxZoom)
        metadata.setMinZoom(newMin)
        metadata.setMaxZoom(newMax)
        var box = bounds
        // A box across the antimeridian (west > east) is not widened: the tiles' own box is used.
        if let old = (try? metadata.bounds) ?? nil, old.west <= old.east, bounds.west <= bounds.east {
            box = GeoBoundingBox(
                west: min(old.west, bounds.west), south: min(old.south, bounds.south),
                east: max(old.east, bounds.east), north: max(old.north, bounds.north))
        }
        box = Self.rounded(box)
        metadata.setBounds(box)
        let oldZoom = ((try? metadata.center) ?? nil)?.zoom
        let zoom = min(max(oldZoom ?? newMin, newMin), newMax)
        metadata.setCenter(
            GeoCoordinate(
                latitude: Self.round7((box.south + box.north) / 2),
                longitude: Self.round7((box.west + box.east) / 2)), zoom: zoom)
    }

    /// Bounds rounded outwards to 7 decimals (about 1 cm), so the text stays short.
    private static func rounded(_ box: GeoBoundingBox) -> GeoBoundingBox {
        func down(_ v: Double) -> Double { (v * 1e7).rounded(.down) / 1e7 }
        func up(_ v: Double) -> Double { (v * 1e7).rounded(.up) / 1e7 }
        return GeoBoundingBox(
            west: max(-180, down(box.west)), south: max(-90, down(box.south)),
            east: min(180, up(box.east)), north: min(90, up(box.north)))
    }

    private static func round7(_ v: Double) -> Double { (v * 1e7).rounded() / 1e7 }
}
