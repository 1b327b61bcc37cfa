import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackStorage
import TilepackTestSupport
import TilepackUpdate

/// The one check of a patch's base and target (``TilePatch/match(_:)``, Specs/updates.md §4 item
/// 2): what each kind of evidence proves, and that a patch applied twice says it was applied
/// already, in place (MBTiles) and rewritten (a bundle checked by its tile hash index).
@Suite struct PatchBaseTests {
    static let v1 = TestSupport.fixture("martin/world_cities.mbtiles")
    static let v2 = TestSupport.fixture("martin/world_cities_modified.mbtiles")

    static func identity(_ tiles: UInt64, _ byte: UInt8) -> ContentIdentity {
        ContentIdentity(tileCount: tiles, tiles: UInt128(byte) << 64 | 1, metadata: UInt128(byte) << 64 | 2)
    }

    @Test func eachKindOfEvidenceProvesWhatItCan() {
        var patch = TilePatch()
        let before = Self.identity(10, 1), after = Self.identity(12, 2)
        patch.before = before
        patch.after = after
        #expect(patch.match(.identity(before)) == PatchVersionMatch(isBase: true, isTarget: false))
        #expect(patch.match(.identity(after)) == PatchVersionMatch(isBase: false, isTarget: true))
        #expect(patch.match(.identity(Self.identity(10, 3))) == PatchVersionMatch(isBase: false, isTarget: false))
        // A tile count refutes, never proves.
        #expect(patch.match(.tileCount(10)) == PatchVersionMatch(isBase: nil, isTarget: false))
        #expect(patch.match(.tileCount(12)) == PatchVersionMatch(isBase: false, isTarget: nil))
        #expect(patch.match(.tileCount(11)) == PatchVersionMatch(isBase: false, isTarget: false))
        // martin's hashes, where a patch carries them; nothing to say where it carries none.
        #expect(patch.match(.aggregateHash("a")) == PatchVersionMatch(isBase: nil, isTarget: nil))
        patch.aggregateHashBefore = "a"
        patch.aggregateHashAfter = "b"
        #expect(patch.match(.aggregateHash("b")) == PatchVersionMatch(isBase: false, isTarget: true))
        #expect(TilePatch().match(.identity(before)) == PatchVersionMatch(isBase: nil, isTarget: nil))

        #expect(throws: Never.self) { try patch.requireBase(.identity(before), path: "a") }
        #expect(throws: Never.self) { try patch.requireBase(.tileCount(10), path: "a") }
        #expect(throws: Never.self) { try patch.requireTarget(.identity(after), path: "a") }
        #expect { try patch.requireBase(.identity(after), path: "a.mbtiles") } throws: {
            "\($0)" == "a.mbtiles: already at the version this patch makes (\(after)): nothing to do"
        }
        // The tiles of a version, another metadata: said so (the keys, where the patch names them).
        var edited = after
        edited.metadata = 7
        #expect { try patch.requireBase(.identity(edited), path: "a") } throws: {
            "\($0)".hasPrefix("a: the tiles match (the patch's target version's); only the metadata differs")
        }
        #expect { try patch.requireBase(.tileCount(11), path: "a") } throws: {
            "\($0)" == "a: made for another base: it applies to \(before), this archive is one of 11 tiles"
        }
        #expect { try patch.requireTarget(.aggregateHash("c"), path: "a") } throws: {
            "\($0)".hasSuffix("would be agg_tiles_hash c, not agg_tiles_hash b as the patch says: nothing was changed")
        }
    }

    @Test(arguments: ["mbtiles", "tilepack"])
    func aPatchAppliedTwiceSaysItWasAppliedAlready(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let base = dir.file("base.\(ext)")
        if ext == "mbtiles" {
            try FileManager.default.copyItem(atPath: Self.v1, toPath: base)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: base)
        } else {
            _ = try ArchiveConverter.run(source: Self.v1, destination: base, options: ConvertOptions())
        }
        _ = try ArchiveDiff.run(old: Self.v1, new: Self.v2, patch: dir.file("p.tppatch"))
        _ = try ArchivePatcher.run(base: base, patch: dir.file("p.tppatch"), writesIndex: true)
        let patched = try Data(contentsOf: URL(fileURLWithPath: base))
        // MBTiles: the identity the first patch stored; a bundle: its tile hash index's.
        #expect(try ArchivePatcher.run(base: base, patch: dir.file("p.tppatch")).alreadyApplied)
        #expect(try Data(contentsOf: URL(fileURLWithPath: base)) == patched)
    }
}
