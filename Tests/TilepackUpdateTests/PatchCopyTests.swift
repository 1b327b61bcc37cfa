import Foundation
import Testing
import TilepackCore
import TilepackOperations
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport
import TilepackUpdate

/// A bundle or PMTiles base is patched by copying its unchanged payloads from its file
/// (Specs/updates.md §4): the result is still byte for byte what `convert` makes of NEW, wherever
/// the change lies (the first tile, the last, the middle, deletions, a new zoom, a tile that
/// becomes another's bytes), for a base of another writer too; and the result gets its tile hash
/// index, updated from the base's and the changed tiles.
@Suite struct PatchCopyTests {
    enum Change: String, CaseIterable, Sendable {
        /// 0/0/0 changed: the first payload, which also holds the repeated tile first used there.
        case start
        /// The last tile changed and the one before it deleted.
        case end
        /// A block of zoom 4 changed, tiles of zoom 3 deleted.
        case middle
        /// A zoom 6 added over a small area.
        case newZoom
        /// Tiles given the bytes of other tiles kept (shared with them), one turned into the repeated tile.
        case becomesAnother
    }

    static let zooms = 0...5

    /// A tile's bytes: a PNG signature, then either a compressible pattern (LZ4 pays) or noise
    /// (stored), and every seventh tile the same repeated bytes (one shared payload).
    static func bytes(_ tile: TileCoordinate, version: Int = 1) -> [UInt8] {
        let png: [UInt8] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]
        if version == 1, (tile.x + tile.y) % 7 == 0 { return png + [UInt8](repeating: 0x42, count: 700) }
        let seed = (tile.zoom &* 1_000_003) ^ (tile.x &* 7919) ^ (tile.y &* 104_729) ^ (version &* 15_485_863)
        if (tile.x + tile.zoom) % 2 == 0 {
            return png + (0..<900).map { UInt8(truncatingIfNeeded: ($0 / 16) &+ seed) }
        }
        var state = UInt64(truncatingIfNeeded: seed) | 1
        return png
            + (0..<(600 + seed % 300)).map { _ in
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                return UInt8(truncatingIfNeeded: state)
            }
    }

    /// v1's tiles, and v2's as `change` makes them.
    static func tiles(_ change: Change?) -> [TileCoordinate: [UInt8]] {
        var tiles: [TileCoordinate: [UInt8]] = [:]
        for zoom in zooms {
            for x in 0..<(1 << zoom) {
                for y in 0..<(1 << zoom) {
                    let tile = TileCoordinate(uncheckedZoom: zoom, x: x, y: y)
                    tiles[tile] = bytes(tile)
                }
            }
        }
        func at(_ z: Int, _ x: Int, _ y: Int) -> TileCoordinate { TileCoordinate(uncheckedZoom: z, x: x, y: y) }
        switch change {
        case nil: break
        case .start: tiles[at(0, 0, 0)] = bytes(at(0, 0, 0), version: 2)
        case .end:
            tiles[at(5, 31, 31)] = bytes(at(5, 31, 31), version: 2)
            tiles[at(5, 31, 30)] = nil
        case .middle:
            for x in 5..<9 { for y in 3..<7 { tiles[at(4, x, y)] = bytes(at(4, x, y), version: 2) } }
            for x in 0..<3 { tiles[at(3, x, 5)] = nil }
        case .newZoom:
            for x in 10..<14 { for y in 20..<23 { tiles[at(6, x, y)] = bytes(at(6, x, y), version: 2) } }
        case .becomesAnother:
            tiles[at(2, 1, 1)] = tiles[at(5, 3, 4)]
            tiles[at(3, 2, 3)] = tiles[at(1, 1, 0)]
            tiles[at(4, 0, 1)] = bytes(at(0, 0, 0))
        }
        return tiles
    }

    static func mbtiles(_ tiles: [TileCoordinate: [UInt8]], at path: String) throws {
        let writer = try MBTilesWriter(creating: path, metadata: TileMetadata(["name": "copy", "format": "png"]))
        for (tile, bytes) in tiles { try writer.write(bytes, at: tile) }
        try writer.finish()
    }

    static func bytes(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    /// v1 and v2 (by `change`) in `ext`, each converted from an MBTiles file, and the patch
    /// between them; the number of v1's tiles v2 keeps as they are.
    static func versions(_ ext: String, _ change: Change, in dir: TemporaryDirectory) throws -> (
        old: String, new: String, patch: String, kept: Int
    ) {
        let v1 = tiles(nil), v2 = tiles(change)
        try mbtiles(v1, at: dir.file("v1.mbtiles"))
        try mbtiles(v2, at: dir.file("v2.mbtiles"))
        let old = dir.file("v1.\(ext)"), new = dir.file("v2.\(ext)")
        _ = try ArchiveConverter.run(source: dir.file("v1.mbtiles"), destination: old, options: ConvertOptions())
        _ = try ArchiveConverter.run(source: dir.file("v2.mbtiles"), destination: new, options: ConvertOptions())
        _ = try ArchiveDiff.run(old: old, new: new, patch: dir.file("p.tppatch"))
        return (old, new, dir.file("p.tppatch"), v1.filter { v2[$0.key] == $0.value }.count)
    }

    static func firstDifference(_ a: String, _ b: String) -> String {
        guard let x = try? bytes(a), let y = try? bytes(b) else { return "unreadable" }
        let at = zip(x, y).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        let m1 = (try? openTileArchive(path: a).metadata().entries.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }) ?? []
        let m2 = (try? openTileArchive(path: b).metadata().entries.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }) ?? []
        return "lengths \(x.count) and \(y.count), first difference at \(at.map(String.init) ?? "none") \(m1) \(m2)"
    }

    static let cases = ["tilepack", "pmtiles"].flatMap { ext in Change.allCases.map { (ext, $0) } }

    /// Every kept tile's payload is copied, and the file is the one converting NEW gives; the
    /// same with the base's index beside it (no tile hashed but the changed ones), whose result
    /// gets an index equal to the one `tilepack index` writes of it.
    @Test(arguments: cases)
    func theBasesPayloadsAreCopiedAndTheResultIsConvertsFile(_ ext: String, _ change: Change) throws {
        let dir = try TemporaryDirectory()
        let (old, new, patch, kept) = try Self.versions(ext, change, in: dir)
        let base = dir.file("base.\(ext)")
        try FileManager.default.copyItem(atPath: old, toPath: base)
        let report = try ArchivePatcher.run(base: base, patch: patch)
        #expect(report.copiedTiles == kept, "\(change)")
        #expect(try Self.bytes(base) == (try Self.bytes(new)), "\(change) \(Self.firstDifference(base, new))")
        #expect(report.index == nil && FileSystem.stat(TileHashIndex.sidecarName(of: base)) == nil)

        // With the base's index: checked by it, and the result's index updated from it.
        let indexed = dir.file("indexed.\(ext)")
        try FileManager.default.copyItem(atPath: old, toPath: indexed)
        _ = try ArchiveIndexer.run(archive: indexed)
        let again = try ArchivePatcher.run(base: indexed, patch: patch)
        #expect(again.copiedTiles == kept && again.after == report.after)
        #expect(again.index?.contains("updated") == true, "\(again.index ?? "no index")")
        #expect(try Self.bytes(indexed) == (try Self.bytes(new)))
        let written = try Self.bytes(TileHashIndex.sidecarName(of: indexed))
        _ = try ArchiveIndexer.run(archive: new)
        #expect(written == (try Self.bytes(TileHashIndex.sidecarName(of: new))), "\(change)")
    }

    /// A base bundle another writer made (no payload compressed) is patched into the same file as
    /// converting NEW: the payloads LZ4 would shrink are written as the writer makes them, the
    /// others copied.
    @Test func aBundleOfAnotherWritersPayloadsGivesConvertsFileToo() throws {
        let dir = try TemporaryDirectory()
        let (old, new, patch, kept) = try Self.versions("tilepack", .middle, in: dir)
        let source = try openTileArchive(path: old)
        let base = dir.file("stored.tilepack")
        let writer = try BundleWriter(
            destination: base, content: .encoded(.png), metadata: try source.metadata(),
            options: BundleWriter.Options(compresses: false, derivation: .fillMissing))
        try source.forEachTile { tile, bytes in try writer.addTile(at: tile, bytes: bytes) }
        try writer.finish()
        #expect(try Self.bytes(base) != (try Self.bytes(old)))
        let report = try ArchivePatcher.run(base: base, patch: patch)
        #expect(try Self.bytes(base) == (try Self.bytes(new)))
        let copied = try #require(report.copiedTiles)
        #expect(copied > 0 && copied < kept, "\(copied) of \(kept)")
    }

    /// A chain v1 -> v2 -> v3 with the index beside the base: each patch copies, each result is
    /// converting its version, and each index is the one `tilepack index` writes.
    @Test(arguments: ["tilepack", "pmtiles"])
    func aChainKeepsItsIndexAndCopiesEachTime(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let v1 = Self.tiles(nil), v2 = Self.tiles(.middle)
        var v3 = Self.tiles(.newZoom)
        for (tile, bytes) in v2 where v1[tile] != bytes { v3[tile] = bytes }
        for (tile, version) in [("v1", v1), ("v2", v2), ("v3", v3)] {
            try Self.mbtiles(version, at: dir.file("\(tile).mbtiles"))
            _ = try ArchiveConverter.run(
                source: dir.file("\(tile).mbtiles"), destination: dir.file("\(tile).\(ext)"), options: ConvertOptions())
        }
        _ = try ArchiveDiff.run(old: dir.file("v1.\(ext)"), new: dir.file("v2.\(ext)"), patch: dir.file("p12.tppatch"))
        _ = try ArchiveDiff.run(old: dir.file("v2.\(ext)"), new: dir.file("v3.\(ext)"), patch: dir.file("p23.tppatch"))
        let base = dir.file("base.\(ext)")
        try FileManager.default.copyItem(atPath: dir.file("v1.\(ext)"), toPath: base)
        // Without an index beside the base: asked for, it is built from the result.
        let first = try ArchivePatcher.run(base: base, patch: dir.file("p12.tppatch"), writesIndex: true)
        #expect(first.index?.contains("built") == true, "\(first.index ?? "no index")")
        #expect(try Self.bytes(base) == (try Self.bytes(dir.file("v2.\(ext)"))))
        let second = try ArchivePatcher.run(base: base, patch: dir.file("p23.tppatch"))
        #expect(second.index?.contains("updated") == true && second.copiedTiles ?? 0 > 0)
        #expect(try Self.bytes(base) == (try Self.bytes(dir.file("v3.\(ext)"))))
        _ = try ArchiveIndexer.run(archive: dir.file("v3.\(ext)"))
        #expect(
            try Self.bytes(TileHashIndex.sidecarName(of: base)) == (try Self.bytes(TileHashIndex.sidecarName(of: dir.file("v3.\(ext)")))))
    }
}
