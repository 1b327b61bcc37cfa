import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@testable import TilepackStorage

/// Tiles read by rowid from an index in memory (`MBTilesOpenOptions.rowidIndexLimit`, issue 47:
/// the server's MBTiles reads): the index is a hint, so a file changed in place is read as SQL
/// by coordinates reads it, and files it cannot index are read as before.
@Suite struct MBTilesRowidIndexTests {
    /// Zooms 0-3 (85 tiles), each tile's bytes naming it.
    static let tiles: [TileCoordinate] = (0...3).flatMap { z in
        (0..<(1 << z)).flatMap { x in (0..<(1 << z)).map { y in TileCoordinate(uncheckedZoom: z, x: x, y: y) } }
    }

    static func bytes(_ tile: TileCoordinate, _ version: String = "") -> Data { Data("\(tile)\(version)".utf8) }

    static func makeFile(_ dir: TemporaryDirectory, schema: MBTilesWriteSchema = .flat) throws -> String {
        let path = dir.file("indexed.mbtiles")
        let writer = try MBTilesWriter(
            creating: path, metadata: TileMetadata(["name": "indexed", "format": "png"]),
            options: MBTilesWriterOptions(schema: schema, derivation: .none))
        for tile in tiles { try writer.write(bytes(tile), at: tile) }
        _ = try writer.finish()
        return path
    }

    static func open(_ path: String, limit: Int = 1000) throws -> MBTilesArchive {
        var options = MBTilesOpenOptions(keepsReadTransactions: true)
        options.rowidIndexLimit = limit
        return try MBTilesArchive(path: path, options: options)
    }

    static func writer(_ path: String) throws -> SQLiteConnection {
        try SQLiteConnection(filename: path, archivePath: path, readOnly: false, uri: false)
    }

    /// Every tile is indexed under the rowid SQLite gives it, and read by it: the statement by
    /// rowid runs once a tile and the lookup by coordinates never.
    @Test func everyTileIsIndexedAndReadByItsRowid() throws {
        let dir = try TemporaryDirectory("rowid-index")
        let path = try Self.makeFile(dir)
        let archive = try Self.open(path)
        let index = try #require(archive.rowidIndex)
        #expect(index.count == Self.tiles.count)
        let sql = try Self.writer(path)
        for tile in Self.tiles {
            let rowid = try sql.scalarInt(
                "SELECT rowid FROM tiles WHERE zoom_level = \(tile.zoom) AND tile_column = \(tile.x) AND tile_row = \(tile.row(in: .tms))")
            #expect(index.rowid(zoom: tile.zoom, x: tile.x, row: tile.row(in: .tms)) == rowid)
            #expect(try archive.tileData(at: tile) == Self.bytes(tile))
        }
        #expect(index.rowid(zoom: 4, x: 0, row: 0) == nil)
        #expect(try archive.tileData(at: TileCoordinate(uncheckedZoom: 4, x: 0, y: 0)) == nil)
        let reader = try archive.checkout()
        defer { archive.checkin(reader) }
        #expect(reader.byRowid?.runCount == Self.tiles.count)
        #expect(reader.lookup.runCount == 1)  // the tile at zoom 4, not indexed
    }

    /// A file changed in place by a writer (between two periods of kept read transactions): tiles
    /// whose rows moved, were deleted, were added or had their bytes replaced are read as they
    /// are now, never from the row the index remembers.
    @Test func aFileChangedInPlaceIsReadAsItIsNow() throws {
        let dir = try TemporaryDirectory("rowid-index-patched")
        let path = try Self.makeFile(dir)
        let archive = try Self.open(path)
        let (a, b) = (TileCoordinate(uncheckedZoom: 1, x: 0, y: 0), TileCoordinate(uncheckedZoom: 1, x: 0, y: 1))
        let updated = TileCoordinate(uncheckedZoom: 2, x: 1, y: 2)
        #expect(try archive.tileData(at: a) == Self.bytes(a))
        archive.endReadTransactions()
        let sql = try Self.writer(path)
        // The tile of the last row, whose rowid SQLite gives to the next row inserted.
        let last = try #require(try sql.scalarInt("SELECT MAX(rowid) FROM tiles"))
        let gone = try TileCoordinate(
            zoom: Int(try #require(try sql.scalarInt("SELECT zoom_level FROM tiles WHERE rowid = \(last)"))),
            x: Int(try #require(try sql.scalarInt("SELECT tile_column FROM tiles WHERE rowid = \(last)"))),
            row: Int(try #require(try sql.scalarInt("SELECT tile_row FROM tiles WHERE rowid = \(last)"))), scheme: .tms)
        let added = TileCoordinate(uncheckedZoom: 4, x: 3, y: 3)
        func rowWhere(_ tile: TileCoordinate) -> String {
            "zoom_level = \(tile.zoom) AND tile_column = \(tile.x) AND tile_row = \(tile.row(in: .tms))"
        }
        try sql.inTransaction { () throws(TileArchiveError) in
            // a and b (one column) swap rows; the last row is deleted and its rowid given to a new tile.
            try sql.execute("UPDATE tiles SET tile_row = -1 WHERE \(rowWhere(a))")
            try sql.execute("UPDATE tiles SET tile_row = \(a.row(in: .tms)) WHERE \(rowWhere(b))")
            try sql.execute("UPDATE tiles SET tile_row = \(b.row(in: .tms)) WHERE zoom_level = 1 AND tile_row = -1")
            try sql.execute("DELETE FROM tiles WHERE \(rowWhere(gone))")
            try sql.execute("INSERT INTO tiles VALUES (4, 3, \(added.row(in: .tms)), CAST('added' AS BLOB))")
            #expect(try sql.scalarInt("SELECT rowid FROM tiles WHERE \(rowWhere(added))") == last)
            try sql.execute("UPDATE tiles SET tile_data = CAST('updated' AS BLOB) WHERE \(rowWhere(updated))")
        }
        #expect(try archive.tileData(at: a) == Self.bytes(b))
        #expect(try archive.tileData(at: b) == Self.bytes(a))
        #expect(try archive.tileData(at: gone) == nil)
        #expect(try archive.tileData(at: added) == Data("added".utf8))
        #expect(try archive.tileData(at: updated) == Data("updated".utf8))
        #expect(try archive.containsTile(at: gone) == false)
    }

    /// Files the index cannot describe are read by coordinates: past the limit, the deduplicated
    /// schema (a `tiles` view), a `WITHOUT ROWID` table; rows whose coordinates are not a tile's
    /// are left out of the index.
    @Test func filesItCannotIndexAreReadByCoordinates() throws {
        let dir = try TemporaryDirectory("rowid-index-none")
        let path = try Self.makeFile(dir)
        #expect(try Self.open(path, limit: Self.tiles.count - 1).rowidIndex == nil)
        #expect(try Self.open(path, limit: Self.tiles.count).rowidIndex?.count == Self.tiles.count)
        #expect(try MBTilesArchive(path: path).rowidIndex == nil)

        let sql = try Self.writer(path)
        try sql.execute("INSERT INTO tiles VALUES (1, 2, 0, x'00'), ('3x', 0, 0, x'00'), (31, 0, 0, x'00'), (-1, 0, 0, x'00')")
        let odd = try Self.open(path)
        #expect(odd.rowidIndex?.count == Self.tiles.count)
        for tile in Self.tiles { #expect(try odd.tileData(at: tile) == Self.bytes(tile)) }
        odd.endReadTransactions()
        try sql.execute("DELETE FROM tiles WHERE tile_data = x'00'")

        try sql.execute(
            """
            CREATE TABLE packed (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB,
              PRIMARY KEY (zoom_level, tile_column, tile_row)) WITHOUT ROWID;
            INSERT INTO packed SELECT * FROM tiles; DROP TABLE tiles; ALTER TABLE packed RENAME TO tiles;
            """)
        let withoutRowid = try Self.open(path)
        #expect(withoutRowid.rowidIndex == nil)
        for tile in Self.tiles { #expect(try withoutRowid.tileData(at: tile) == Self.bytes(tile)) }

        let normalizedDir = try TemporaryDirectory("rowid-index-normalized")
        let normalized = try Self.open(try Self.makeFile(normalizedDir, schema: .deduplicated))
        #expect(normalized.rowidIndex == nil)
        for tile in Self.tiles { #expect(try normalized.tileData(at: tile) == Self.bytes(tile)) }
    }

    /// Keys are unique over zooms and grow in (zoom, column, row) order, up to zoom 30.
    @Test func keysAreUniqueAndOrdered() {
        var previous: UInt64?
        for zoom in 0...3 {
            for x in 0..<(1 << zoom) {
                for row in 0..<(1 << zoom) {
                    let key = MBTilesRowidIndex.key(zoom: zoom, x: x, row: row)
                    if let previous { #expect(key == previous + 1) }
                    previous = key
                }
            }
        }
        let last = (1 << 30) - 1
        #expect(MBTilesRowidIndex.key(zoom: 30, x: last, row: last) > MBTilesRowidIndex.key(zoom: 30, x: last, row: last - 1))
        #expect(MBTilesRowidIndex.key(zoom: 30, x: 0, row: 0) > MBTilesRowidIndex.key(zoom: 29, x: last >> 1, row: last >> 1))
    }
}
