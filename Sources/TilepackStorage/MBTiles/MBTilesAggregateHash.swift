import Foundation
import TilepackCore
internal import TilepackChecksum

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

    package static func compute(_ connection: SQLiteConnection) throws(TileArchiveError) -> String {
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
