import Foundation
import TilepackCore

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
