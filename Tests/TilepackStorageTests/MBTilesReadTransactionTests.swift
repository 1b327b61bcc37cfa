import Foundation
import Testing
import TilepackCore
@testable import TilepackStorage
import TilepackTestSupport

/// Read transactions kept between reads (`MBTilesOpenOptions.keepsReadTransactions`, issue 47: the
/// server's MBTiles reads): what a writer patching the file in place and other readers see.
@Suite struct MBTilesReadTransactionTests {
    static let tile = TileCoordinate(uncheckedZoom: 0, x: 0, y: 0)

    /// A writable MBTiles file of one tile, "old".
    static func makeFile(_ dir: TemporaryDirectory) throws -> String {
        let path = dir.file("patched.mbtiles")
        let writer = try MBTilesWriter(
            creating: path, metadata: TileMetadata(["name": "patched", "format": "png"]), options: MBTilesWriterOptions(derivation: .none))
        try writer.write(Data("old".utf8), at: tile)
        _ = try writer.finish()
        return path
    }

    /// A writer on `path` that gives up at once when the file is locked.
    static func writer(_ path: String) throws -> SQLiteConnection {
        let connection = try SQLiteConnection(filename: path, archivePath: path, readOnly: false, uri: false)
        try connection.execute("PRAGMA busy_timeout = 0")
        return connection
    }

    static let patch = "UPDATE tiles SET tile_data = CAST('new' AS BLOB) WHERE zoom_level = 0"

    /// Kept: after a read, a writer cannot commit (the read holds a shared lock) and reads go on
    /// seeing the old tile; once `endReadTransactions()` is called the writer commits and the next
    /// read sees the new tile. Another reader of the file reads it all along.
    @Test func aKeptReadTransactionHoldsAWriterUntilItIsEnded() throws {
        let dir = try TemporaryDirectory("mbtiles-kept")
        let path = try Self.makeFile(dir)
        let archive = try MBTilesArchive(path: path, options: MBTilesOpenOptions(keepsReadTransactions: true))
        #expect(try archive.tileData(at: Self.tile) == Data("old".utf8))
        let writer = try Self.writer(path)
        #expect(throws: TileArchiveError.self) { try writer.execute(Self.patch) }
        #expect(try MBTilesArchive(path: path).tileData(at: Self.tile) == Data("old".utf8))
        #expect(try archive.tileData(at: Self.tile) == Data("old".utf8))
        archive.endReadTransactions()
        try writer.execute(Self.patch)
        #expect(try archive.tileData(at: Self.tile) == Data("new".utf8))
    }

    /// Not kept (the default): each read is a transaction of its own, so a writer commits between
    /// reads and the next read sees its tile.
    @Test func byDefaultEachReadIsATransactionOfItsOwn() throws {
        let dir = try TemporaryDirectory("mbtiles-unkept")
        let path = try Self.makeFile(dir)
        let archive = try MBTilesArchive(path: path)
        #expect(try archive.tileData(at: Self.tile) == Data("old".utf8))
        try Self.writer(path).execute(Self.patch)
        #expect(try archive.tileData(at: Self.tile) == Data("new".utf8))
    }
}
