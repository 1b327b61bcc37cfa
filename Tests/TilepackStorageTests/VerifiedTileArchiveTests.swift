import Foundation
import Testing
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

/// A side-loaded pack read through its publisher's key: each tile checked on its first read, once.
@Suite struct VerifiedTileArchiveTests {
    typealias Fixture = SigningTamperTests

    @Test(arguments: [Fixture.Format.tilepack, .pmtiles, .mbtiles]) func eachTileIsCheckedOnceAndATamperedOneIsNeverGiven(
        _ format: Fixture.Format
    ) throws {
        let dir = try TemporaryDirectory()
        let path = try Fixture.signed(format, in: dir)
        var tiles = Fixture.tiles
        tiles[12].1[1] ^= 2
        try Fixture.write(tiles, format: format, to: path)
        let archive = try VerifiedTileArchive(base: try openTileArchive(path: path), key: Fixture.key.verifier)
        #expect(archive.root.release == 5 && archive.checkedCount == 0)
        for (index, (tile, bytes)) in tiles.enumerated() where index != 12 {
            #expect(try archive.tileData(at: tile) == Data(bytes))
        }
        #expect(archive.checkedCount == tiles.count - 1)
        for (tile, bytes) in tiles.prefix(5) { #expect(try archive.tileData(at: tile) == Data(bytes)) }
        #expect(archive.checkedCount == tiles.count - 1, "a tile read again is not hashed again")
        do {
            _ = try archive.tileData(at: tiles[12].0)
            Issue.record("the tampered tile was given out")
        } catch let error as TileArchiveError {
            guard case .checksumMismatch(let region, _, _) = error.fault else { Issue.record("\(error)"); return }
            #expect(region.hasPrefix("tile \(tiles[12].0.zoom)/\(tiles[12].0.x)/\(tiles[12].0.y) against release 5"))
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        #expect(throws: TileArchiveError.self) { try buffer.withUnsafeMutableBytes { try archive.readTile(at: tiles[12].0, into: $0) } }
        let count = try buffer.withUnsafeMutableBytes { try archive.readTile(at: tiles[3].0, into: $0) }
        #expect(count.map { Array(buffer.prefix($0)) } == tiles[3].1)
        #expect(throws: TileArchiveError.self) { try archive.forEachTile { _, _ in } }
        #expect(try !archive.containsTile(at: TileCoordinate(uncheckedZoom: 6, x: 1, y: 1)))
    }

    @Test func anotherKeyOrOtherMetadataRefusesTheOpen() throws {
        let dir = try TemporaryDirectory()
        let path = try Fixture.signed(.pmtiles, in: dir)
        let other = try SigningKey.generate(name: Fixture.key.name)
        #expect(throws: SignatureError.self) { try VerifiedTileArchive(base: try openTileArchive(path: path), key: other.verifier) }
        #expect(throws: SignatureError.self) {
            try VerifiedTileArchive(base: try openTileArchive(path: path), key: Fixture.key.verifier, minimumRelease: 6)
        }
        try Fixture.write(Fixture.tiles, format: .pmtiles, to: path, metadata: TileMetadata(["name": "other", "format": "png"]))
        #expect(throws: SignatureError.self) { try VerifiedTileArchive(base: try openTileArchive(path: path), key: Fixture.key.verifier) }
    }
}
