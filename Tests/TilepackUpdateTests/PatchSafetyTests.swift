import Foundation
import Testing
import TilepackCore
import TilepackOperations
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport
import TilepackUpdate

/// `patch` where the disk or the file refuses (Specs/updates.md §4, issue 30 item 7): a full disk
/// mid-apply gives a typed error and leaves the base as it was, in every format; a read-only base
/// is refused in every format before anything is written.
@Suite(.serialized) struct PatchSafetyTests {
    /// A pair of versions whose patch writes well over 64 KiB: 300 tiles of 2 KB, 120 of them changed.
    static func versions(in dir: TemporaryDirectory) throws -> (old: String, new: String, patch: String) {
        func bytes(_ i: Int, _ version: Int) -> [UInt8] {
            [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]
                + (0..<2000).map { UInt8(truncatingIfNeeded: ($0 &* 31) ^ (i &* 7) ^ (version &* 131) ^ ($0 >> 3)) }
        }
        for (name, version) in [("v1", 1), ("v2", 2)] {
            let writer = try MBTilesWriter(
                creating: dir.file("\(name).mbtiles"), metadata: TileMetadata(["name": "full", "format": "png"]))
            for i in 0..<300 {
                try writer.write(bytes(i, version == 2 && i % 5 < 2 ? 2 : 1), at: TileCoordinate(uncheckedZoom: 9, x: i % 20, y: i / 20))
            }
            try writer.finish()
        }
        _ = try ArchiveDiff.run(old: dir.file("v1.mbtiles"), new: dir.file("v2.mbtiles"), patch: dir.file("p.tppatch"))
        return (dir.file("v1.mbtiles"), dir.file("v2.mbtiles"), dir.file("p.tppatch"))
    }

    static func bytes(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    @Test(
        .enabled(if: TmpfsMount.canMount, "mounts a small tmpfs: needs root with CAP_SYS_ADMIN"),
        arguments: ["mbtiles", "tilepack", "pmtiles"])
    func aFullDiskMidApplyIsATypedErrorAndLosesNothing(_ ext: String) throws {
        let disk = try #require(TmpfsMount(megabytes: 4))
        let dir = try TemporaryDirectory()
        let (old, new, patch) = try Self.versions(in: dir)
        let base = disk.path + "/base.\(ext)"
        _ = try ArchiveConverter.run(source: old, destination: base, options: ConvertOptions())
        let original = try Self.bytes(base)
        let identity = try ContentIdentity.compute(try openTileArchive(path: base))
        // Room for a few pages, not for the changed tiles (MBTiles' journal) or a new file.
        try disk.fill(leaving: 24 << 10)
        do {
            _ = try ArchivePatcher.run(base: base, patch: patch)
            Issue.record("patched \(ext) on a full disk")
        } catch {
            let text = "\(error)"
            #expect(text.contains(base) && (text.contains("full") || text.contains("No space")), "\(text)")
        }
        // The base is what it was, and no temporary file or journal is left beside it.
        #expect(try Self.bytes(base) == original)
        #expect(try ContentIdentity.compute(try openTileArchive(path: base)) == identity)
        let left = try FileManager.default.contentsOfDirectory(atPath: disk.path).sorted()
        #expect(left == ["base.\(ext)", "filler"], "\(left)")
        // With room again, the same patch applies and gives the new version.
        try FileManager.default.removeItem(atPath: disk.path + "/filler")
        let report = try ArchivePatcher.run(base: base, patch: patch)
        #expect(try ContentIdentity.compute(try openTileArchive(path: base)).description == report.after)
        #expect(try ContentIdentity.compute(try openTileArchive(path: new)).tiles == ContentIdentity(report.after ?? "")?.tiles)
    }

    @Test(arguments: ["mbtiles", "tilepack", "pmtiles"])
    func aReadOnlyBaseIsRefusedInEveryFormat(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let (old, _, patch) = try Self.versions(in: dir)
        let base = dir.file("ro.\(ext)")
        _ = try ArchiveConverter.run(source: old, destination: base, options: ConvertOptions())
        try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: base)
        let original = try Self.bytes(base)
        #expect {
            try ArchivePatcher.run(base: base, patch: patch)
        } throws: { error in
            let text = "\(error)"
            return text.contains(base) && text.contains("read-only")
        }
        #expect(try Self.bytes(base) == original)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix(".") }.isEmpty)
        // Into OUT, a read-only base is only read.
        let report = try ArchivePatcher.run(base: base, patch: patch, output: dir.file("out.\(ext)"))
        #expect(!report.inPlace && report.after != nil)
    }
}
