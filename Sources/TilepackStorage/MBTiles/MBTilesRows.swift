internal import CTilepackSQLite
import Foundation
import TilepackCore
internal import TilepackChecksum

/// An SQLite value as stored in a row, for reporting rows that are not what they should be.
package enum MBTilesRawValue: Hashable, Sendable, CustomStringConvertible {
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(byteCount: Int)
    case null

    init(_ statement: SQLiteStatement, _ column: Int32) {
        switch statement.type(column) {
        case .integer: self = .integer(statement.int64(column))
        case .real: self = .real(statement.double(column))
        case .text: self = .text(String((statement.text(column) ?? "").prefix(64)))
        case .blob: self = .blob(byteCount: statement.bytes(column)?.count ?? 0)
        case .null: self = .null
        }
    }

    /// The value as a whole number: an INTEGER, or a REAL with no fraction.
    package var integerValue: Int? {
        switch self {
        case .integer(let v): Int(truncatingIfNeeded: v)
        case .real(let v): v.rounded() == v && abs(v) < 1e15 ? Int(v) : nil
        default: nil
        }
    }

    /// A stored row named as every message names tiles (``TileReference``), or its raw values.
    static func name(_ zoom: MBTilesRawValue, _ column: MBTilesRawValue, _ row: MBTilesRawValue) -> String {
        guard let z = zoom.integerValue, let x = column.integerValue, let r = row.integerValue else {
            return "zoom_level \(zoom), tile_column \(column), tile_row \(row)"
        }
        return TileReference(zoom: z, column: x, tmsRow: r).description
    }

    package var description: String {
        switch self {
        case .integer(let v): String(v)
        case .real(let v): String(v)
        case .text(let t): "'\(t)'"
        case .blob(let n): "a blob of \(n) bytes"
        case .null: "NULL"
        }
    }
}

/// One row of `tiles` exactly as stored (see ``MBTilesArchive/forEachRawRow(_:)``).
///
/// Not `Sendable`: `tileData` points into SQLite's buffer and is valid only inside the callback.
package struct MBTilesRawRow {
    package var zoomLevel: MBTilesRawValue
    package var tileColumn: MBTilesRawValue
    /// The stored TMS row.
    package var tileRow: MBTilesRawValue
    /// The storage class of `tile_data` (a blob normally; text is accepted; NULL and numbers are faults).
    package var tileDataStorage: SQLiteStorageClass
    /// The bytes of `tile_data`, `nil` when NULL.
    package var tileData: UnsafeRawBufferPointer?
    /// The stored `tile_hash` (flat-with-hash only).
    package var tileHash: String?

    /// The XYZ tile this row addresses, or `nil` when the numbers are not a tile.
    package var tile: TileCoordinate? {
        guard let z = zoomLevel.integerValue, let x = tileColumn.integerValue, let row = tileRow.integerValue else { return nil }
        return try? TileCoordinate(zoom: z, x: x, row: row, scheme: .tms)
    }

    /// Why the coordinates are not a tile (`nil` when they are), e.g. "tile_row 64 is outside 0..<64 at zoom 6".
    package var coordinateProblem: String? {
        guard let z = zoomLevel.integerValue else { return "zoom_level \(zoomLevel) is not a whole number" }
        guard let x = tileColumn.integerValue else { return "tile_column \(tileColumn) is not a whole number" }
        guard let row = tileRow.integerValue else { return "tile_row \(tileRow) is not a whole number" }
        do {
            _ = try TileCoordinate(zoom: z, x: x, row: row, scheme: .tms)
            return nil
        } catch {
            switch error {
            case .zoomOutOfRange: return "zoom_level \(z) is outside 0...\(TileCoordinate.maximumZoom)"
            case .columnOutOfRange: return "tile_column \(x) is outside 0..<\(1 << z) at zoom \(z)"
            case .rowOutOfRange: return "tile_row \(row) is outside 0..<\(1 << z) at zoom \(z)"
            }
        }
    }

    /// The row's tile as messages name it, `z/x/y (TMS row r)`, or its values as stored when
    /// they are not whole numbers.
    package var storedCoordinates: String { MBTilesRawValue.name(zoomLevel, tileColumn, tileRow) }
}

/// A tile stored in more than one row of `tiles` (see ``MBTilesArchive/duplicateTiles(limit:)``).
package struct MBTilesDuplicateTile: Hashable, Sendable, CustomStringConvertible {
    package var zoomLevel: MBTilesRawValue
    package var tileColumn: MBTilesRawValue
    /// The stored TMS row.
    package var tileRow: MBTilesRawValue
    package var rowCount: Int

    package var description: String {
        "\(zoomLevel)/\(tileColumn)/\(tileRow) (TMS row) is stored in \(rowCount) rows; readers may return any of them"
    }
}

/// A `map` row whose `tile_id` no `images` row has (see ``MBTilesArchive/orphanedMapRows(limit:)``).
package struct MBTilesOrphanedMapRow: Hashable, Sendable, CustomStringConvertible {
    package var zoomLevel: MBTilesRawValue
    package var tileColumn: MBTilesRawValue
    package var tileRow: MBTilesRawValue
    package var tileID: MBTilesRawValue

    package var description: String {
        "map row \(zoomLevel)/\(tileColumn)/\(tileRow) (TMS row) names tile_id \(tileID), which no images row holds: the tile is missing from the tiles view"
    }
}

/// A `tile_hash` that does not match its tile's MD5 (flat-with-hash).
package struct MBTilesTileHashMismatch: Hashable, Sendable, CustomStringConvertible {
    package var zoomLevel: MBTilesRawValue
    package var tileColumn: MBTilesRawValue
    package var tileRow: MBTilesRawValue
    package var declared: String?
    package var computed: String?

    package var description: String {
        "tile_hash of \(MBTilesRawValue.name(zoomLevel, tileColumn, tileRow)) is \(declared ?? "NULL"), the MD5 of its data is \(computed ?? "NULL (no data)")"
    }
}

/// martin's `agg_tiles_hash`: one MD5 over all rows of `tiles` ordered by zoom_level,
/// tile_column, tile_row, fed with the decimal text of the three numbers and then the raw tile
/// bytes, with no separators; NULL values contribute nothing; upper-case hex; no rows gives the
/// MD5 of nothing, `D41D8CD98F00B204E9800998ECF8427E`.
///
/// This is martin's SQL, `hex(coalesce(md5_concat(cast(zoom_level AS text), cast(tile_column AS
/// text), cast(tile_row AS text), tile_data), md5('')))`, computed here in Swift over the same rows
/// in the same order, with SQLite doing the casts.
package enum MBTilesAggregateHash {
    /// The MD5 of no bytes, the hash of an empty `tiles` table.
    package static let empty = "D41D8CD98F00B204E9800998ECF8427E"

    static func compute(_ connection: SQLiteConnection) throws(TileArchiveError) -> String {
        let statement = try connection.prepare(
            """
            SELECT CAST(zoom_level AS TEXT), CAST(tile_column AS TEXT), CAST(tile_row AS TEXT), tile_data
            FROM tiles ORDER BY zoom_level, tile_column, tile_row
            """)
        let md5 = Digest(.md5)
        while try statement.step() {
            for column: Int32 in 0..<4 {
                if let bytes = statement.bytes(column) { md5.update(bytes) }
            }
        }
        return hex(md5.finalize())
    }

    /// The upper-case hex MD5 of `bytes` (martin's `tile_hash`, tilepack's dedup `tile_id`).
    package static func md5Hex(_ bytes: UnsafeRawBufferPointer) -> String {
        hex(Digest.hash(.md5, bytes))
    }

    static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        let digits = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for byte in digest {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// `agg_tiles_hash` computed from rows as a reader meets them (``MBTilesArchive/forEachRawRow(_:)``),
/// saving a second pass over the file when they come in the hash's own order, which is
/// storage order for files written by tilepack, mbutil and most tools. It gives up (``finalize()``
/// is `nil`) at the first row out of that order, or whose values the hash would see through a
/// text conversion (coordinates that are not integers, `tile_data` that is not a blob or NULL);
/// the caller then computes the hash with ``MBTilesArchive/aggregateTilesHash()``.
package struct MBTilesAggregateHasher {
    private var md5: Digest? = Digest(.md5)
    private var last: (Int64, Int64, Int64)?

    package init() {}

    /// Whether every row so far could be hashed.
    package var isValid: Bool { md5 != nil }

    package mutating func add(_ row: MBTilesRawRow) {
        guard md5 != nil else { return }
        guard case .integer(let z) = row.zoomLevel, case .integer(let x) = row.tileColumn, case .integer(let y) = row.tileRow,
            row.tileDataStorage == .blob || row.tileDataStorage == .null,
            last.map({ $0 < (z, x, y) }) ?? true
        else {
            md5 = nil
            return
        }
        last = (z, x, y)
        var text = "\(z)\(x)\(y)"
        text.withUTF8 { md5?.update(UnsafeRawBufferPointer($0)) }
        if let data = row.tileData { md5?.update(data) }
    }

    /// The upper-case hex hash, or `nil` when the rows could not all be hashed.
    package func finalize() -> String? { md5.map { MBTilesAggregateHash.hex($0.finalize()) } }
}

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
