import Foundation
import Testing
import TilepackCore
import TilepackOperations
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport
import TilepackUpdate

/// Issue 44 items 4-6: what a patch says of an archive that is already its target or differs only
/// in metadata; one metadata rule whichever patch layout (martin's MBTiles or tilepack's file);
/// an MBTiles file's stored identity trusted only while its change counter proves it unchanged.
@Suite struct PatchVersionTests {
    static let v1 = TestSupport.fixture("martin/world_cities.mbtiles")
    static let v2 = TestSupport.fixture("martin/world_cities_modified.mbtiles")

    static func copy(_ path: String, to destination: String) throws {
        try FileManager.default.copyItem(atPath: path, toPath: destination)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: destination)
    }

    static func bytes(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    /// Runs `sql` on an MBTiles file as another tool would (SQLite's own connection, rollback journal).
    static func sql(_ path: String, _ sql: String) throws {
        let connection = try SQLiteConnection(filename: path, archivePath: path, readOnly: false, uri: false)
        try connection.execute(sql)
    }

    /// Applied to the archive it has already updated: "already at the version this patch makes",
    /// no error, nothing written (in place, rewritten with its index, rewritten without one).
    @Test(arguments: ["mbtiles", "tilepack", "tilepack+index"])
    func aPatchAppliedAgainSaysAlreadyAtItsVersionAndWritesNothing(_ kind: String) throws {
        let dir = try TemporaryDirectory()
        let ext = kind.hasPrefix("tilepack") ? "tilepack" : "mbtiles"
        let base = dir.file("base.\(ext)"), patch = dir.file("p.tppatch")
        if ext == "mbtiles" {
            try Self.copy(Self.v1, to: base)
        } else {
            _ = try ArchiveConverter.run(source: Self.v1, destination: base, options: ConvertOptions())
        }
        _ = try ArchiveDiff.run(old: Self.v1, new: Self.v2, patch: patch)
        let first = try ArchivePatcher.run(base: base, patch: patch, writesIndex: kind.hasSuffix("index"))
        #expect(!first.alreadyApplied)
        let patched = try Self.bytes(base)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        let again = try ArchivePatcher.run(base: base, patch: patch)
        #expect(again.alreadyApplied)
        #expect(again.after == first.after)
        #expect(again.tilesWritten == 0)
        #expect(try Self.bytes(base) == patched)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == files)
        // Into OUT: nothing written there either.
        let out = try ArchivePatcher.run(base: base, patch: patch, output: dir.file("out.\(ext)"))
        #expect(out.alreadyApplied && FileSystem.stat(dir.file("out.\(ext)")) == nil)
    }

    /// Tiles the patch's target's (or base's), metadata not: said so, naming the keys it can; refused.
    @Test func onlyMetadataDiffersIsSaidWithTheKeys() throws {
        let dir = try TemporaryDirectory()
        let patch = dir.file("p.tppatch")
        _ = try ArchiveDiff.run(old: Self.v1, new: Self.v2, patch: patch)
        // v2's tiles, and a description that is neither v1's nor v2's: the patch sets it.
        let target = dir.file("target.mbtiles")
        try Self.copy(Self.v2, to: target)
        try Self.sql(target, "UPDATE metadata SET value = 'mine' WHERE name = 'description'")
        let before = try Self.bytes(target)
        #expect {
            try ArchivePatcher.run(base: target, patch: patch)
        } throws: { error in
            "\(error)".contains("the tiles match (the patch's target version's); only the metadata differs (keys description)")
        }
        #expect(try Self.bytes(target) == before)
        // v1's tiles and a key the patch does not change: the message cannot name it, and says why.
        let base = dir.file("base.tilepack")
        _ = try ArchiveConverter.run(source: Self.v1, destination: base, options: ConvertOptions())
        _ = try MetadataEditor.edit(path: base, set: ["type": "baselayer"])
        #expect {
            try ArchivePatcher.run(base: base, patch: patch)
        } throws: { error in
            "\(error)".contains("the tiles match (the patch's base version's); only the metadata differs (keys the patch does not change")
        }
    }

    /// `patch base.tilepack patch.mbtiles` (martin's layout, as `tilepack diff` writes it) is
    /// byte-identical to `convert v2`, as the tilepack patch file's result is: the result carries
    /// agg_tiles_hash exactly when NEW does, whichever layout carried the patch.
    @Test(arguments: ["p.mbtiles", "p.tppatch"])
    func everyPatchLayoutGivesTheBundleConvertMakes(_ name: String) throws {
        let dir = try TemporaryDirectory()
        // Versions that carry no agg_tiles_hash (as an import of a tile tree makes), as bundles.
        for (source, version) in [(Self.v1, "v1"), (Self.v2, "v2")] {
            try Self.copy(source, to: dir.file("\(version).mbtiles"))
            try Self.sql(dir.file("\(version).mbtiles"), "DELETE FROM metadata WHERE name = 'agg_tiles_hash'")
            _ = try ArchiveConverter.run(
                source: dir.file("\(version).mbtiles"), destination: dir.file("\(version).tilepack"), options: ConvertOptions())
        }
        #expect(try openTileArchive(path: dir.file("v2.tilepack")).metadata()[TileMetadata.Key.aggregateTilesHash] == nil)
        _ = try ArchiveDiff.run(old: dir.file("v1.tilepack"), new: dir.file("v2.tilepack"), patch: dir.file(name))
        _ = try ArchivePatcher.run(base: dir.file("v1.tilepack"), patch: dir.file(name), output: dir.file("out.tilepack"))
        #expect(try Self.bytes(dir.file("out.tilepack")) == (try Self.bytes(dir.file("v2.tilepack"))))
        // And where NEW carries one (the MBTiles fixtures), the result carries it as convert does.
        _ = try ArchiveConverter.run(source: Self.v1, destination: dir.file("w1.tilepack"), options: ConvertOptions())
        _ = try ArchiveConverter.run(source: Self.v2, destination: dir.file("w2.tilepack"), options: ConvertOptions())
        _ = try ArchiveDiff.run(old: Self.v1, new: Self.v2, patch: dir.file("w-\(name)"))
        _ = try ArchivePatcher.run(base: dir.file("w1.tilepack"), patch: dir.file("w-\(name)"))
        #expect(try Self.bytes(dir.file("w1.tilepack")) == (try Self.bytes(dir.file("w2.tilepack"))))
    }

    /// A stored identity is trusted while the file's change counter is the one stored with it;
    /// an `UPDATE` by another tool (the tile count unchanged) or a `DELETE` moves the counter, and
    /// the next patch computes the identity, finds another base and changes nothing.
    @Test func aStoredIdentityIsTrustedOnlyWhileTheFileIsUnchanged() throws {
        let dir = try TemporaryDirectory()
        let base = dir.file("base.mbtiles"), forward = dir.file("f.tppatch"), back = dir.file("b.tppatch")
        try Self.copy(Self.v1, to: base)
        _ = try ArchiveDiff.run(old: Self.v1, new: Self.v2, patch: forward)
        _ = try ArchiveDiff.run(old: Self.v2, new: Self.v1, patch: back)
        let first = try ArchivePatcher.run(base: base, patch: forward)
        #expect(first.usedStoredIdentity == false)
        // Untouched since: the stored identity is trusted.
        let second = try ArchivePatcher.run(base: base, patch: back)
        #expect(second.usedStoredIdentity == true)
        _ = try ArchivePatcher.run(base: base, patch: forward)
        // Another tool rewrites a tile the patch does not touch: same count, other content.
        try Self.sql(base, "UPDATE tiles SET tile_data = x'00' WHERE rowid = (SELECT min(rowid) FROM tiles WHERE zoom_level = 6)")
        let changed = try Self.bytes(base)
        #expect {
            try ArchivePatcher.run(base: base, patch: back)
        } throws: { error in
            "\(error)".contains("made for another base")
        }
        #expect(try Self.bytes(base) == changed)
        // The counter alone says so when another tool deletes a tile (the table is not counted).
        let other = dir.file("other.mbtiles")
        try Self.copy(Self.v1, to: other)
        _ = try ArchivePatcher.run(base: other, patch: forward)
        try Self.sql(other, "DELETE FROM tiles WHERE rowid = (SELECT min(rowid) FROM tiles WHERE zoom_level = 6)")
        let deleted = try Self.bytes(other)
        #expect {
            try ArchivePatcher.run(base: other, patch: back)
        } throws: { error in
            "\(error)".contains("made for another base")
        }
        #expect(try Self.bytes(other) == deleted)
        // In WAL mode commits leave the counter: never trusted there.
        let wal = dir.file("wal.mbtiles")
        try Self.copy(Self.v1, to: wal)
        _ = try ArchivePatcher.run(base: wal, patch: forward)
        try Self.sql(wal, "PRAGMA journal_mode = WAL")
        let report = try ArchivePatcher.run(base: wal, patch: back)
        #expect(report.usedStoredIdentity == false)
    }
}
