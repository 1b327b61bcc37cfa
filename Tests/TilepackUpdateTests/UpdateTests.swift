import Foundation
import Testing
import TilepackCore
import TilepackOperations
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport
import TilepackUpdate

/// diff and patch (Specs/updates.md): content identities, both patch layouts, martin's fixtures,
/// byte-identity with convert, in-place MBTiles chains, and hostile patches that change nothing.
@Suite struct UpdateTests {
    static let v1 = TestSupport.fixture("martin/world_cities.mbtiles")
    static let v2 = TestSupport.fixture("martin/world_cities_modified.mbtiles")

    static func tiles(_ path: String) throws -> [TileCoordinate: Data] {
        var tiles: [TileCoordinate: Data] = [:]
        try openTileArchive(path: path).forEachTile { tile, bytes in tiles[tile] = Data(bytes) }
        return tiles
    }

    static func copy(_ path: String, to destination: String) throws {
        try FileManager.default.copyItem(atPath: path, toPath: destination)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: destination)
    }

    static func bytes(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    @Test func identityIsTheSameInEveryFormatAndFollowsTheChangedTilesAlone() throws {
        let dir = try TemporaryDirectory()
        let mbtiles = try openTileArchive(path: Self.v1)
        let identity = try ContentIdentity.compute(mbtiles)
        #expect(identity.tileCount == 196)
        #expect(ContentIdentity(identity.description) == identity)
        for name in ["a.tilepack", "a.pmtiles"] {
            _ = try ArchiveConverter.run(source: Self.v1, destination: dir.file(name), options: ConvertOptions())
            let other = try ContentIdentity.compute(try openTileArchive(path: dir.file(name)))
            #expect(other.tiles == identity.tiles && other.tileCount == identity.tileCount, "\(name)")
        }
        // v2 from v1 by the changed tiles alone equals v2 computed from scratch.
        let new = try openTileArchive(path: Self.v2)
        var incremental = identity
        try mbtiles.forEachTile { tile, bytes in
            let same = try new.withTileBytes(at: tile) { $0.elementsEqual(bytes) }
            if same != true { incremental.remove(tile, bytes) }
        }
        try new.forEachTile { tile, bytes in
            if try mbtiles.withTileBytes(at: tile, { $0.elementsEqual(bytes) }) != true { incremental.add(tile, bytes) }
        }
        incremental.metadata = ContentIdentity.metadataHash(try new.metadata())
        let full = try ContentIdentity.compute(new)
        #expect(incremental == full)
        #expect(full != identity)
        // A moved tile changes the identity: coordinates are hashed with the bytes.
        let bytes: [UInt8] = [1, 2, 3]
        let a = bytes.withUnsafeBytes { ContentIdentity.tileHash(TileCoordinate(uncheckedZoom: 1, x: 0, y: 1), $0) }
        let b = bytes.withUnsafeBytes { ContentIdentity.tileHash(TileCoordinate(uncheckedZoom: 1, x: 1, y: 0), $0) }
        #expect(a != b)
    }

    /// martin's layout: its hashes as martin computes them (the fixtures' own agg_tiles_hash).
    @Test func mbtilesPatchIsMartinsLayoutAndMakesTheModifiedFixture() throws {
        let dir = try TemporaryDirectory()
        let report = try ArchiveDiff.run(old: Self.v1, new: Self.v2, patch: dir.file("p.mbtiles"))
        #expect(report.patchFormat == "mbtiles")
        #expect(report.added + report.changed + report.deleted > 0)
        let patch = try TilePatch.readMBTiles(path: dir.file("p.mbtiles"))
        // The fixture's own stored hash for world_cities; world_cities_modified stores a hash its
        // tiles do not have (578FB5..., verify reports it), so its tiles' hash is computed.
        #expect(patch.aggregateHashBefore == "84792BF4EE9AEDDC5B1A60E707011FEE")
        let modifiedHash = try MBTilesAggregateHash.compute(try openTileArchive(path: Self.v2))
        #expect(patch.aggregateHashAfter == modifiedHash)
        #expect(patch.origin == .tilepack && patch.before != nil)
        #expect(patch.metadataChanges.map(\.key) == ["description"])
        // Deletions are NULL rows, as martin writes them.
        let martin = try TilePatch.readMBTiles(path: TestSupport.fixture("martin/world_cities_diff.mbtiles"))
        #expect(martin.origin == .martin && !martin.deletions.isEmpty)
        #expect(Set(patch.deletions) == Set(martin.deletions))
        #expect(Set(patch.tiles.map(\.coordinate)) == Set(martin.tiles.map(\.coordinate)))

        try Self.copy(Self.v1, to: dir.file("base.mbtiles"))
        let applied = try ArchivePatcher.run(base: dir.file("base.mbtiles"), patch: dir.file("p.mbtiles"))
        #expect(applied.inPlace && applied.warnings.isEmpty)
        #expect(applied.after == report.after)
        #expect(try Self.tiles(dir.file("base.mbtiles")) == (try Self.tiles(Self.v2)))
        let metadata = try openTileArchive(path: dir.file("base.mbtiles")).metadata()
        #expect(metadata.description == "A modified version of major cities from Natural Earth data")
        #expect(metadata[ContentIdentity.metadataKey] == report.after)
        #expect(metadata[TileMetadata.Key.aggregateTilesHash] == modifiedHash)
        // verify recomputes the stored hash and identity: neither is flagged (the fixture's own
        // tile 4/4/4, 24 bytes of gzip that are no vector tile, is).
        let verify = ArchiveVerifier.run(path: dir.file("base.mbtiles"))
        #expect(!verify.findings.contains { $0.check == "hash" || $0.check == "identity" }, "\(verify.findings)")
    }

    @Test func martinsOwnPatchAppliesWithAWarningAndItsBinaryDiffIsRefusedByName() throws {
        let dir = try TemporaryDirectory()
        try Self.copy(Self.v1, to: dir.file("base.mbtiles"))
        let report = try ArchivePatcher.run(
            base: dir.file("base.mbtiles"), patch: TestSupport.fixture("martin/world_cities_diff.mbtiles"))
        #expect(report.warnings.count == 1 && report.warnings[0].contains("nothing could be checked"))
        #expect(report.after == nil)
        #expect(try Self.tiles(dir.file("base.mbtiles")) == (try Self.tiles(Self.v2)))

        try Self.copy(Self.v1, to: dir.file("other.mbtiles"))
        let before = try Self.bytes(dir.file("other.mbtiles"))
        #expect {
            try ArchivePatcher.run(base: dir.file("other.mbtiles"), patch: TestSupport.fixture("martin/world_cities_bindiff.mbtiles"))
        } throws: { "\($0)".contains("'bsdiffrawgz'") }
        #expect(try Self.bytes(dir.file("other.mbtiles")) == before)
    }

    /// A bundle or PMTiles base is rewritten: byte for byte what convert makes of NEW.
    @Test(arguments: ["tilepack", "pmtiles"])
    func rewrittenBaseIsByteIdenticalToConvertingNew(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let old = dir.file("v1.\(ext)"), new = dir.file("v2.\(ext)")
        _ = try ArchiveConverter.run(source: Self.v1, destination: old, options: ConvertOptions())
        _ = try ArchiveConverter.run(source: Self.v2, destination: new, options: ConvertOptions())
        let diff = try ArchiveDiff.run(old: old, new: new, patch: dir.file("p.tppatch"))
        #expect(diff.patchFormat == "tilepack")
        #expect(diff.patchBytes < diff.tileBytes + 1024)
        let report = try ArchivePatcher.run(base: old, patch: dir.file("p.tppatch"))
        #expect(!report.inPlace && report.after == diff.after && report.before == diff.before)
        #expect(try Self.bytes(old) == (try Self.bytes(new)))
        // Into OUT, in another format: what convert makes of NEW in that format.
        _ = try ArchiveConverter.run(source: Self.v1, destination: dir.file("again.\(ext)"), options: ConvertOptions())
        let other = ext == "pmtiles" ? "tilepack" : "pmtiles"
        _ = try ArchivePatcher.run(base: dir.file("again.\(ext)"), patch: dir.file("p.tppatch"), output: dir.file("out.\(other)"))
        _ = try ArchiveConverter.run(source: new, destination: dir.file("conv.\(other)"), options: ConvertOptions())
        #expect(try Self.bytes(dir.file("out.\(other)")) == (try Self.bytes(dir.file("conv.\(other)"))))
    }

    /// A bundle or PMTiles base with its tile hash index beside it (`tilepack index`) is checked
    /// by the index's identity instead of a pass over its tiles: the result is the same file; an
    /// index that states another identity gets the base refused with that identity (so it is what
    /// was checked); an index older than the base is not trusted.
    @Test(arguments: ["tilepack", "pmtiles"])
    func aBaseWithItsTileIndexBesideItIsCheckedByTheIndex(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let old = dir.file("v1.\(ext)"), new = dir.file("v2.\(ext)"), patch = dir.file("p.tppatch")
        _ = try ArchiveConverter.run(source: Self.v1, destination: old, options: ConvertOptions())
        _ = try ArchiveConverter.run(source: Self.v2, destination: new, options: ConvertOptions())
        _ = try ArchiveDiff.run(old: old, new: new, patch: patch)
        let original = try Self.bytes(old)
        _ = try ArchiveIndexer.run(archive: old)
        let sidecar = TileHashIndex.sidecarName(of: old)
        let index = try TileHashIndex.decode(Array(try Self.bytes(sidecar)), name: sidecar)
        // The index states another identity: refused, naming it.
        var other = index
        other.identity.tiles &+= 1
        try Data(other.encoded()).write(to: URL(fileURLWithPath: sidecar))
        #expect(throws: OperationError.self) { try ArchivePatcher.run(base: old, patch: patch) }
        do {
            _ = try ArchivePatcher.run(base: old, patch: patch)
        } catch {
            #expect(error.description.contains(other.identity.description), "\(error)")
        }
        #expect(try Self.bytes(old) == original)
        // The right index: applied, the same file as converting NEW.
        try Data(index.encoded()).write(to: URL(fileURLWithPath: sidecar))
        let report = try ArchivePatcher.run(base: old, patch: patch)
        #expect(report.before == index.identity.description)
        #expect(try Self.bytes(old) == (try Self.bytes(new)))
        // A base changed after its index was written: the index is not trusted (a wrong one
        // would refuse the base otherwise).
        try original.write(to: URL(fileURLWithPath: old))
        try Data(other.encoded()).write(to: URL(fileURLWithPath: sidecar))
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(60)], ofItemAtPath: old)
        _ = try ArchivePatcher.run(base: old, patch: patch)
        #expect(try Self.bytes(old) == (try Self.bytes(new)))
    }

    /// v1 -> v2 -> v3 in place; the second patch checks its base from the stored identity; a
    /// patch for another version is refused naming both identities.
    @Test func mbtilesChainAppliesInOrderAndRefusesAnotherBase() throws {
        let dir = try TemporaryDirectory()
        try Self.copy(Self.v2, to: dir.file("v3.mbtiles"))
        let writer = try MBTilesWriter(updating: dir.file("v3.mbtiles"))
        var removed: TileCoordinate?
        try openTileArchive(path: Self.v2).forEachTile { tile, _ in if removed == nil, tile.zoom == 3 { removed = tile } }
        #expect(try writer.removeTile(at: try #require(removed)))
        try writer.write([UInt8](repeating: 7, count: 100), at: TileCoordinate(uncheckedZoom: 7, x: 5, y: 9))
        writer.metadata["version"] = "3"
        try writer.finish()
        _ = try ArchiveDiff.run(old: Self.v1, new: Self.v2, patch: dir.file("1to2.tppatch"))
        let second = try ArchiveDiff.run(old: Self.v2, new: dir.file("v3.mbtiles"), patch: dir.file("2to3.tppatch"))
        #expect(second.added == 1 && second.deleted == 1 && second.metadataChanges == 1)

        try Self.copy(Self.v1, to: dir.file("base.mbtiles"))
        let before = try Self.bytes(dir.file("base.mbtiles"))
        #expect {
            try ArchivePatcher.run(base: dir.file("base.mbtiles"), patch: dir.file("2to3.tppatch"))
        } throws: { error in
            let text = "\(error)"
            return text.contains("made for another base") && text.contains(second.before)
        }
        #expect(try Self.bytes(dir.file("base.mbtiles")) == before)
        _ = try ArchivePatcher.run(base: dir.file("base.mbtiles"), patch: dir.file("1to2.tppatch"))
        let last = try ArchivePatcher.run(base: dir.file("base.mbtiles"), patch: dir.file("2to3.tppatch"))
        #expect(last.before == second.before && last.after == second.after)
        #expect(try Self.tiles(dir.file("base.mbtiles")) == (try Self.tiles(dir.file("v3.mbtiles"))))
        #expect(try ContentIdentity.compute(try openTileArchive(path: dir.file("base.mbtiles"))).description == second.after)
    }

    /// Truncated, bit-flipped, another tile type, a result that is not the patch's, a read-only
    /// base: a typed error naming the fault, and the base unchanged.
    @Test func hostilePatchesChangeNothing() throws {
        let dir = try TemporaryDirectory()
        _ = try ArchiveDiff.run(old: Self.v1, new: Self.v2, patch: dir.file("p.tppatch"))
        let good = [UInt8](try Self.bytes(dir.file("p.tppatch")))
        try Self.copy(Self.v1, to: dir.file("base.mbtiles"))
        _ = try ArchiveConverter.run(source: Self.v1, destination: dir.file("base.tilepack"), options: ConvertOptions())
        let bases = [dir.file("base.mbtiles"), dir.file("base.tilepack")]
        let originals = try bases.map(Self.bytes)
        func refused(_ bytes: [UInt8], _ expected: String, _ comment: Comment) throws {
            try Data(bytes).write(to: URL(fileURLWithPath: dir.file("bad.tppatch")))
            for (base, original) in zip(bases, originals) {
                #expect(throws: OperationError.self, comment) {
                    try ArchivePatcher.run(base: base, patch: dir.file("bad.tppatch"))
                }
                do {
                    _ = try ArchivePatcher.run(base: base, patch: dir.file("bad.tppatch"))
                } catch {
                    #expect("\(error)".contains(expected), "\(comment): \(error)")
                }
                #expect(try Self.bytes(base) == original, comment)
            }
        }
        for cut in [4, 11, 40, good.count / 2, good.count - 1] {
            try refused(Array(good[..<cut]), "patch", "cut at \(cut)")
        }
        for position in stride(from: 0, to: good.count, by: max(1, good.count / 23)) {
            var flipped = good
            flipped[position] ^= 0x10
            try refused(flipped, "patch", "bit flipped at \(position)")
        }
        // A well-formed patch whose after identity is not what applying it makes: rolled back.
        var lying = try TilePatch.decode(good, path: "p")
        lying.after?.tiles &+= 1
        try refused(lying.encoded(), "the patched archive would be", "after identity off by one")
        // Another tile type.
        var webp = lying
        webp.content = "webp"
        try refused(webp.encoded(), "its tiles are webp", "another tile type")

        // A read-only MBTiles base is patched in place, so it is refused before anything is done.
        try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: dir.file("base.mbtiles"))
        #expect { try ArchivePatcher.run(base: dir.file("base.mbtiles"), patch: dir.file("p.tppatch")) } throws: {
            "\($0)".contains("read-only")
        }
        #expect(try Self.bytes(dir.file("base.mbtiles")) == originals[0])
    }
}

extension UpdateTests {
    /// `verify` recomputes a stored identity and names both when they differ; `info` shows the
    /// identity; any write but a patch drops a stored one (it would be stale).
    @Test func verifyChecksAStoredIdentityAndInfoShowsIt() throws {
        let dir = try TemporaryDirectory()
        try Self.copy(Self.v1, to: dir.file("a.mbtiles"))
        var wrong = try ContentIdentity.compute(try openTileArchive(path: Self.v1))
        #expect(try ArchiveInspector.run(path: Self.v1).identity == wrong.description)
        wrong.tiles &+= 1
        let writer = try MBTilesWriter(updating: dir.file("a.mbtiles"))
        writer.contentIdentity = wrong
        try writer.finish()
        let report = ArchiveVerifier.run(path: dir.file("a.mbtiles"))
        #expect(report.findings.contains { $0.check == "identity" && $0.message.contains(wrong.description) }, "\(report.findings)")
        #expect(report.exitCode(strict: false) == 1)
        try MBTilesWriter(updating: dir.file("a.mbtiles")).finish()
        #expect(try openTileArchive(path: dir.file("a.mbtiles")).metadata()[ContentIdentity.metadataKey] == nil)
    }
}

extension UpdateTests {
    /// import and convert with --index store a new MBTiles file's content identity
    /// (Specs/updates.md §1.1), in the flat and the deduplicated schema and whatever order the
    /// tiles come in: what a fresh computation over the file gives, which verify agrees with
    /// (without --index, none). The first patch checks its base by it (a stored identity made
    /// wrong on purpose is the one the patch names). A tile written twice or removed leaves none;
    /// every other write keeps it true or drops it: `meta set` takes its metadata part again (and
    /// refuses to set it by hand), an append drops it.
    @Test func aNewMBTilesStoresItsIdentityAndOtherWritesKeepItTrueOrDropIt() throws {
        let dir = try TemporaryDirectory()
        func stored(_ name: String) throws -> String? { try openTileArchive(path: dir.file(name)).metadata()[ContentIdentity.metadataKey] }
        func computed(_ name: String) throws -> String {
            try ContentIdentity.compute(try openTileArchive(path: dir.file(name))).description
        }
        var indexed = ConvertOptions()
        indexed.writing.tileIndex = true
        var deduplicated = indexed
        deduplicated.deduplicate = true
        _ = try ArchiveConverter.run(source: Self.v1, destination: dir.file("plain.mbtiles"), options: ConvertOptions())
        #expect(try stored("plain.mbtiles") == nil)
        _ = try ArchiveConverter.run(source: Self.v1, destination: dir.file("flat.mbtiles"), options: indexed)
        _ = try ArchiveConverter.run(source: Self.v1, destination: dir.file("dedup.mbtiles"), options: deduplicated)
        // From PMTiles the tiles come in XYZ order, not the table's (TMS rows).
        _ = try ArchiveConverter.run(source: Self.v1, destination: dir.file("a.pmtiles"), options: ConvertOptions())
        _ = try ArchiveConverter.run(
            source: dir.file("a.pmtiles"), destination: dir.file("from-pmtiles.mbtiles"), options: indexed)
        let tree = TestSupport.packageRoot.appendingPathComponent("samples/tiles").path
        var importIndexed = ImportOptions()
        importIndexed.writing.tileIndex = true
        _ = try TileImporter.run(source: tree, destination: dir.file("imported.mbtiles"), options: importIndexed)
        for name in ["flat.mbtiles", "dedup.mbtiles", "from-pmtiles.mbtiles", "imported.mbtiles"] {
            let value = try #require(try stored(name), "\(name) stores no identity")
            #expect(value == (try computed(name)), "\(name)")
            let verify = ArchiveVerifier.run(path: dir.file(name))
            #expect(!verify.findings.contains { $0.check == "identity" }, "\(name): \(verify.findings)")
        }
        #expect(try stored("flat.mbtiles") == (try ContentIdentity.compute(try openTileArchive(path: Self.v1)).description))

        // The patch reads the stored identity: made wrong, it is what the patch names.
        _ = try ArchiveDiff.run(old: Self.v1, new: Self.v2, patch: dir.file("p.tppatch"))
        try Self.copy(dir.file("flat.mbtiles"), to: dir.file("base.mbtiles"))
        let flatIdentity = try #require(try stored("flat.mbtiles"))
        var wrong = try #require(ContentIdentity(flatIdentity))
        wrong.tiles &+= 1
        let tamper = try MBTilesWriter(updating: dir.file("base.mbtiles"))
        tamper.contentIdentity = wrong
        try tamper.finish()
        #expect { try ArchivePatcher.run(base: dir.file("base.mbtiles"), patch: dir.file("p.tppatch")) } throws: {
            "\($0)".contains(wrong.description)
        }
        try FileManager.default.removeItem(atPath: dir.file("base.mbtiles"))
        try Self.copy(dir.file("flat.mbtiles"), to: dir.file("base.mbtiles"))
        let patched = try ArchivePatcher.run(base: dir.file("base.mbtiles"), patch: dir.file("p.tppatch"))
        let patchedIdentity = try stored("base.mbtiles")
        #expect(patched.before == flatIdentity)
        #expect(patched.after == patchedIdentity)

        // A tile written twice, or one removed: the sum would count bytes the file does not hold.
        let tile = TileCoordinate(uncheckedZoom: 1, x: 0, y: 1)
        let png = try #require(try openTileArchive(path: dir.file("imported.mbtiles")).tileData(at: tile))
        for removes in [false, true] {
            let name = removes ? "removed.mbtiles" : "twice.mbtiles"
            let writer = try MBTilesWriter(
                creating: dir.file(name), metadata: TileMetadata(["name": "n"]), options: MBTilesWriterOptions(contentIdentity: true))
            try writer.write(png, at: tile)
            try writer.write(png, at: TileCoordinate(uncheckedZoom: 1, x: 1, y: 1))
            if removes { try writer.removeTile(at: tile) } else { try writer.write(png + [0], at: tile) }
            try writer.finish()
            #expect(try stored(name) == nil, "\(name)")
            #expect(try openTileArchive(path: dir.file(name)).tileCount() == (removes ? 1 : 2))
        }

        // meta set: the tiles part holds, the metadata part is taken again.
        let before = try #require(try stored("imported.mbtiles"))
        _ = try MetadataEditor.edit(path: dir.file("imported.mbtiles"), set: ["description": "edited"])
        #expect(try stored("imported.mbtiles") == (try computed("imported.mbtiles")))
        #expect(try stored("imported.mbtiles") != before)
        #expect { try MetadataEditor.edit(path: dir.file("imported.mbtiles"), set: [ContentIdentity.metadataKey: before]) } throws: {
            "\($0)".contains("computed from the tiles")
        }
        // An append drops it.
        var append = ImportOptions()
        append.append = true
        _ = try TileImporter.run(source: tree, destination: dir.file("imported.mbtiles"), options: append)
        #expect(try stored("imported.mbtiles") == nil)
    }
}
