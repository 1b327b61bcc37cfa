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
            guard case .checksumMismatch(let region, _, _) = error.fault else {
                Issue.record("\(error)")
                return
            }
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

    /// A large pack's sidecar is checked a group of 256 leaves at a time (StoredTreeCheck): a tile
    /// and its stored leaf rewritten together (the level-8 hash left) are refused at the tile's
    /// first read, as is every tile of that group; the other groups are served; a changed level-8
    /// hash refuses the open.
    @Test func aRewrittenLeafInAFullGroupIsRefusedOnItsGroupsFirstRead() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("big.pmtiles")
        var tiles = (0..<700).map { i in (TileCoordinate(uncheckedZoom: 5, x: i % 32, y: i / 32), Array("tile \(i)".utf8)) }
        try Fixture.write(tiles, format: .pmtiles, to: path)
        _ = try ArchiveSignature.sign(archivePath: path, key: Fixture.key, release: 1, time: 0)
        var sidecar = try SignatureSidecar.read(path: path + ".tpsig")
        let original = sidecar
        // Leaf 10 (group 0, full): its tile changed and its stored leaf rewritten to match.
        let index = 10
        let victim = try #require(PMTilesFormat.tile(ofID: sidecar.tileIDs[index]))
        let at = try #require(tiles.firstIndex { $0.0 == victim })
        tiles[at].1 = Array("forged".utf8)
        try Fixture.write(tiles, format: .pmtiles, to: path)
        let leaf = TreeHasher().leaf(
            ContentIdentity.TileHasher().fullHash(victim, tiles[at].1.withUnsafeBytes { UnsafeRawBufferPointer($0) }))
        sidecar.storedLevels[0].replaceSubrange((32 * index)..<(32 * index + 32), with: leaf)
        try Data(sidecar.encoded()).write(to: URL(fileURLWithPath: path + ".tpsig"))
        let archive = try VerifiedTileArchive(base: try openTileArchive(path: path), key: Fixture.key.verifier)
        #expect(throws: TileArchiveError.self) { try archive.tileData(at: victim) }
        let neighbour = try #require(PMTilesFormat.tile(ofID: sidecar.tileIDs[index + 1]))
        #expect(throws: TileArchiveError.self) { try archive.tileData(at: neighbour) }
        let elsewhere = try #require(PMTilesFormat.tile(ofID: sidecar.tileIDs[300]))
        #expect(try archive.tileData(at: elsewhere) == Data(tiles.first { $0.0 == elsewhere }!.1))
        // A level-8 node changed (700 leaves: levels 2 to 10 are checked at open): the open is
        // refused, naming the sidecar.
        var upper = original
        upper.storedLevels[8][3] ^= 1
        try Data(upper.encoded()).write(to: URL(fileURLWithPath: path + ".tpsig"))
        #expect(throws: SignatureError.self) { try VerifiedTileArchive(base: try openTileArchive(path: path), key: Fixture.key.verifier) }
    }
}
