import Foundation
import Testing
@_spi(TilepackInternal) import TilepackCompression
import TilepackCore
import TilepackOperations
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport
import TilepackUpdate

/// The tile hash index says whether its archive is canonical, that is what tilepack's writer makes
/// of its tiles (Specs/updates.md §7.1); a patch whose base's index says so copies the kept
/// payloads unchecked (§4). A base that is not canonical, with an index that does not claim it (or
/// an index of version 1, which has no flags), still gives `convert`'s file; an index that lies
/// changes only the result's layout, never its tiles.
@Suite struct PatchCanonicalBaseTests {
    typealias Copy = PatchCopyTests

    /// v1's tiles written by another bundle writer: no payload compressed.
    static func storedBundle(of old: String, at path: String) throws {
        let source = try openTileArchive(path: old)
        let writer = try BundleWriter(
            destination: path, content: .encoded(.png), metadata: try source.metadata(),
            options: BundleWriter.Options(compresses: false, derivation: .fillMissing))
        try source.forEachTile { tile, bytes in try writer.addTile(at: tile, bytes: bytes) }
        try writer.finish()
    }

    /// v1's tiles as another PMTiles writer lays them out: one entry and one content per tile,
    /// equal tiles not shared, with `old`'s header fields and metadata.
    static func unsharedPMTiles(of old: String, at path: String) throws {
        let archive = try PMTilesArchive(path: old)
        let file = [UInt8](try Copy.bytes(old))
        var tiles: [(id: UInt64, bytes: [UInt8])] = []
        try archive.forEachTile { tile, bytes in tiles.append((PMTilesFormat.tileID(of: tile), Array(bytes))) }
        tiles.sort { $0.id < $1.id }
        var data: [UInt8] = []
        var entries: [PMTilesFormat.Entry] = []
        for tile in tiles {
            entries.append(PMTilesFormat.Entry(tileID: tile.id, offset: UInt64(data.count), length: UInt32(tile.bytes.count), runLength: 1))
            data += tile.bytes
        }
        var header = archive.header
        let metadata = Array(file[Int(header.metadataOffset)..<Int(header.metadataOffset + header.metadataLength)])
        let root = Gzip.compress(PMTilesFormat.encodeDirectory(entries))
        header.rootOffset = UInt64(PMTilesFormat.headerLength)
        header.rootLength = UInt64(root.count)
        header.metadataOffset = header.rootOffset + header.rootLength
        header.metadataLength = UInt64(metadata.count)
        header.leafOffset = header.metadataOffset + header.metadataLength
        header.leafLength = 0
        header.tileDataOffset = header.leafOffset
        header.tileDataLength = UInt64(data.count)
        header.tileEntries = UInt64(entries.count)
        header.tileContents = UInt64(entries.count)
        try Data(header.encoded() + root + metadata + data).write(to: URL(fileURLWithPath: path))
    }

    /// The base another writer made of v1 (`ext`), with the index `claim` makes of it beside it
    /// (`nil`: the one `tilepack index` writes, which checks).
    static func otherWritersBase(_ ext: String, old: String, in dir: TemporaryDirectory, claim: Bool?) throws -> String {
        let base = dir.file("other-\(claim.map { "\($0)" } ?? "checked").\(ext)")
        if ext == "tilepack" { try storedBundle(of: old, at: base) } else { try unsharedPMTiles(of: old, at: base) }
        #expect(try Copy.bytes(base) != (try Copy.bytes(old)))
        if let claim {
            let size = try #require(FileSystem.stat(base)?.st_size)
            try TileHashIndex.build(try openTileArchive(path: base), archiveLength: UInt64(size), canonical: claim)
                .write(to: TileHashIndex.sidecarName(of: base), overwrite: true)
        } else {
            let report = try ArchiveIndexer.run(archive: base)
            #expect(!report.canonical)
        }
        return base
    }

    static func indexOf(_ archive: String) throws -> TileHashIndex {
        let path = TileHashIndex.sidecarName(of: archive)
        return try TileHashIndex.decode([UInt8](try Copy.bytes(path)), name: path)
    }

    /// `tilepack index` says canonical of what tilepack's writers wrote (checked), a build's
    /// `--index` and a patch's result index say so (known), and the index of another writer's
    /// archive does not.
    @Test(arguments: ["tilepack", "pmtiles"])
    func theIndexSaysWhetherItsArchiveIsWhatTheWriterMakes(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let (old, _, patch, _) = try Copy.versions(ext, .middle, in: dir)
        let report = try ArchiveIndexer.run(archive: old)
        #expect(report.canonical)
        let written = [UInt8](try Copy.bytes(TileHashIndex.sidecarName(of: old)))
        #expect(written.starts(with: Array("TPINDEX2".utf8)) && written.count == TileHashIndex.fileLength(tiles: report.tiles))
        #expect(try Self.indexOf(old).canonical)

        var options = ConvertOptions()
        options.writing.tileIndex = true
        let built = dir.file("built.\(ext)")
        _ = try ArchiveConverter.run(source: dir.file("v1.mbtiles"), destination: built, options: options)
        #expect(try Self.indexOf(built).canonical)
        #expect(try Self.indexOf(built).hashes == (try Self.indexOf(old).hashes))

        _ = try ArchivePatcher.run(base: built, patch: patch)
        #expect(try Self.indexOf(built).canonical)

        let other = try Self.otherWritersBase(ext, old: old, in: dir, claim: nil)
        #expect(try !Self.indexOf(other).canonical)
        #expect(try TileHashIndex.isCanonical(openTileArchive(path: old)))
        #expect(try !TileHashIndex.isCanonical(openTileArchive(path: other)))
    }

    /// Another writer's base whose index does not claim canonical: its payloads are checked as
    /// without an index, so the result is converting NEW's file, and its index says canonical.
    @Test(arguments: ["tilepack", "pmtiles"])
    func aBaseThatIsNotCanonicalWithAnHonestIndexGivesConvertsFile(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let (old, new, patch, kept) = try Copy.versions(ext, .middle, in: dir)
        let base = try Self.otherWritersBase(ext, old: old, in: dir, claim: false)
        let report = try ArchivePatcher.run(base: base, patch: patch)
        #expect(report.index?.contains("updated") == true, "\(report.index ?? "no index")")
        #expect(try Copy.bytes(base) == (try Copy.bytes(new)), "\(Copy.firstDifference(base, new))")
        let copied = try #require(report.copiedTiles)
        // A bundle's stored payloads that LZ4 shrinks are written as prepared; every PMTiles tile is copied.
        #expect(ext == "tilepack" ? copied > 0 && copied < kept : copied == kept, "\(copied) of \(kept)")
        #expect(try Self.indexOf(base).canonical)
    }

    /// An index that claims canonical of another writer's base: the kept payloads are copied as
    /// they are, unchecked (a bundle's stored payloads stay stored, a PMTiles' equal contents stay
    /// apart), so the layout differs from converting NEW; the tiles are NEW's, as its identity says.
    @Test(arguments: ["tilepack", "pmtiles"])
    func aLyingCanonicalFlagChangesOnlyTheLayout(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let (old, new, patch, kept) = try Copy.versions(ext, .middle, in: dir)
        let base = try Self.otherWritersBase(ext, old: old, in: dir, claim: true)
        let before = try ContentIdentity.compute(openTileArchive(path: base))
        let report = try ArchivePatcher.run(base: base, patch: patch)
        #expect(report.copiedTiles == kept)
        #expect(try Copy.bytes(base) != (try Copy.bytes(new)))
        let after = try ContentIdentity.compute(openTileArchive(path: base))
        let expected = try ContentIdentity.compute(openTileArchive(path: new))
        #expect(after.tileCount == expected.tileCount && after.tiles == expected.tiles && after.tiles != before.tiles)
        #expect(report.after == expected.description)
        func tiles(_ path: String) throws -> [TileCoordinate: [UInt8]] {
            var tiles: [TileCoordinate: [UInt8]] = [:]
            try openTileArchive(path: path).forEachTile { tile, bytes in tiles[tile] = Array(bytes) }
            return tiles
        }
        let written = try tiles(base), wanted = try tiles(new)
        #expect(written.count == Int(expected.tileCount) && written == wanted)
    }

    /// Under an index that claims canonical, the identities still check the tiles that leave: a
    /// base one of whose replaced tiles is not the bytes its index was made of (damaged after the
    /// index was written, in place) is refused, and left as it was.
    @Test(arguments: ["tilepack", "pmtiles"])
    func theIdentitiesStillCatchAReplacedTileThatIsNotTheIndexs(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let (old, _, patch, _) = try Copy.versions(ext, .middle, in: dir)
        let base = try Self.otherWritersBase(ext, old: old, in: dir, claim: true)
        let index = try Copy.bytes(TileHashIndex.sidecarName(of: base))
        // 4/5/3, which the patch replaces: noise, stored as it is, found by its bytes.
        let tile = TileCoordinate(uncheckedZoom: 4, x: 5, y: 3)
        var file = try Copy.bytes(base)
        let at = try #require(file.range(of: Data(Copy.bytes(tile))))
        file[at.lowerBound + 100] ^= 0x01
        try file.write(to: URL(fileURLWithPath: base))
        try index.write(to: URL(fileURLWithPath: TileHashIndex.sidecarName(of: base)))
        #expect(throws: OperationError.self) { try ArchivePatcher.run(base: base, patch: patch) }
        #expect(try Copy.bytes(base) == file)
    }

    /// An index of version 1 (no flags: `TPINDEX1`, 56 header bytes), as published before, is
    /// read: it checks the base (the result's index is updated from it), says nothing of the
    /// payloads (so they are checked), and the result is converting NEW's file.
    @Test(arguments: ["tilepack", "pmtiles"])
    func anIndexOfTheFirstVersionIsStillRead(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let (old, new, patch, _) = try Copy.versions(ext, .middle, in: dir)
        let base = dir.file("base.\(ext)")
        try FileManager.default.copyItem(atPath: old, toPath: base)
        let size = try #require(FileSystem.stat(base)?.st_size)
        let index = try TileHashIndex.build(try openTileArchive(path: base), archiveLength: UInt64(size), canonical: true)
        var first = Array("TPINDEX1".utf8) + Array(index.encoded()[8..<56]) + Array(index.encoded()[64..<(64 + 8 * index.hashes.count)])
        let crc = first.withUnsafeBytes { BundleFormat.crc32($0) }
        for i in 0..<4 { first.append(UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i)))) }
        let decoded = try TileHashIndex.decode(first, name: "v1 index")
        #expect(!decoded.canonical && decoded.hashes == index.hashes && decoded.identity == index.identity)
        try Data(first).write(to: URL(fileURLWithPath: TileHashIndex.sidecarName(of: base)))

        let report = try ArchivePatcher.run(base: base, patch: patch)
        #expect(report.index?.contains("updated") == true, "\(report.index ?? "no index")")
        #expect(try Copy.bytes(base) == (try Copy.bytes(new)))
        #expect(try Self.indexOf(base).canonical)
        // Flags a reader does not know are ignored.
        var flagged = index.encoded()
        flagged[56] |= 0x80
        flagged.removeLast(4)
        let recrc = flagged.withUnsafeBytes { BundleFormat.crc32($0) }
        for i in 0..<4 { flagged.append(UInt8(truncatingIfNeeded: recrc >> (8 * UInt32(i)))) }
        #expect(try TileHashIndex.decode(flagged, name: "flagged").canonical)
    }
}
