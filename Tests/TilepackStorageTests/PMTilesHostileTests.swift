import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

/// Issue 29's PMTiles classes: numbers that overflow when a file's values meet (11), runs of
/// billions of tiles (13), a file cut underneath its reader (15). Each case must end in a typed
/// error naming the file, or in the right answer, within a bounded time: never a trap or a hang.
@Suite struct PMTilesHostileTests {
    typealias Entry = HostilePMTiles.Entry

    static func open(_ bytes: [UInt8]) throws -> PMTilesArchive {
        try PMTilesArchive(source: FileByteSource(data: Data(bytes), name: "hostile.pmtiles"))
    }

    /// The corrupt reason of reading `bytes` (open, zoom levels, every tile), or nil when it reads.
    static func corruption(_ bytes: [UInt8]) -> String? {
        do {
            let archive = try open(bytes)
            _ = try archive.zoomLevels()
            try archive.forEachEntry { _ in }
            return nil
        } catch let error as TileArchiveError {
            #expect(error.path == "hostile.pmtiles")
            guard case .corrupt(let why) = error.fault else {
                Issue.record("not corrupt: \(error)")
                return "\(error)"
            }
            return why
        } catch {
            Issue.record("untyped: \(error)")
            return "\(error)"
        }
    }

    // MARK: 11: overflow

    @Test func offsetsNear2To64AreCorruptNotATrap() throws {
        let tile = HostilePMTiles.pngBytes
        // Entry 1 "follows" entry 0, whose offset is 2^64 - 3: their sum overflows.
        let follows = HostilePMTiles.directory([
            Entry(tileID: 0, runLength: 1, length: 5, offset: .max - 3),
            Entry(tileID: 1, runLength: 1, length: 5, offset: nil),
        ])
        let why = try #require(Self.corruption(HostilePMTiles.file(root: follows, tileData: tile, maxZoom: 1)))
        #expect(why.contains("entry 1") && why.contains("2^64"), "\(why)")
        // One entry whose offset plus length overflows (the message itself once summed them).
        let alone = HostilePMTiles.directory([Entry(tileID: 0, runLength: 1, length: 5, offset: .max - 3)])
        let outside = try #require(Self.corruption(HostilePMTiles.file(root: alone, tileData: tile, maxZoom: 0)))
        #expect(outside.contains("lie outside the tile data section"), "\(outside)")
    }

    @Test func byteTotalsPastIntMaxAreCorruptNotATrap() throws {
        // 2,100 runs of 2^32 - 1 zoom-30 tiles, each of 1 MiB: each entry valid alone, their
        // addressed bytes (9.5e18) past Int.max.
        let mib = 1 << 20
        let base = (UInt64(1) << 60 - 1) / 3  // first id of zoom 30: (4^30 - 1) / 3
        let entries = (0..<2100).map { i in
            Entry(tileID: base + UInt64(i) << 32, runLength: UInt64(UInt32.max), length: UInt64(mib), offset: 0)
        }
        let bytes = HostilePMTiles.file(
            root: HostilePMTiles.directory(entries), tileData: [UInt8](repeating: 0, count: mib), minZoom: 30, maxZoom: 30)
        let archive = try Self.open(bytes)
        #expect { _ = try archive.zoomLevels() } throws: { error in
            guard let error = error as? TileArchiveError, case .corrupt(let why) = error.fault else { return false }
            return error.path == "hostile.pmtiles" && why.contains("more than \(Int.max) bytes")
        }
    }

    // MARK: 13: runs are ranges

    @Test func squaresOfARunAreItsTiles() {
        // Every range of ids at zoom 3 (64 tiles): the squares hold exactly the run's tiles.
        let first = (UInt64(1) << 6 - 1) / 3
        for start in 0..<64 {
            for end in (start + 1)...64 {
                let ids = (first + UInt64(start))..<(first + UInt64(end))
                let squares = PMTilesFormat.squares(of: ids)
                let expected = Set(ids.map { PMTilesFormat.tile(ofID: $0)! })
                let got = squares.flatMap { Array($0) }
                #expect(got.count == expected.count && Set(got) == expected, "\(start)..<\(end)")
                #expect(squares.count <= 6 * 3 + 1)
            }
        }
        // A whole zoom is one square; 2^32 - 1 ids from 0 are a few dozen.
        #expect(PMTilesFormat.squares(of: first..<(first + 64)).count == 1)
        #expect(PMTilesFormat.split(byZoom: 0..<UInt64(UInt32.max)).count == 17)
    }

    @Test func aRunOfBillionsOfTilesIsCountedAndFilteredAsARange() throws {
        let archive = try Self.open(HostilePMTiles.billionsRun())
        let levels = try archive.zoomLevels()
        #expect(levels.count == 17)
        #expect(levels.reduce(0) { $0 + $1.tileCount } == Int(UInt32.max))
        #expect(levels[16].tileCount == Int(UInt32.max) - Int((UInt64(1) << 32 - 1) / 3))
        // Zoom 0 only: one tile, the run's other 4 billion never visited.
        var tiles: [TileCoordinate] = []
        try archive.forEachTile(in: TileSelection(zooms: 0...0), where: { _ in true }) { tile, _ in tiles.append(tile) }
        #expect(tiles == [TileCoordinate(uncheckedZoom: 0, x: 0, y: 0)])
        // A small box at zooms 0-16: only the box's tiles.
        let box = GeoBoundingBox(west: 2.33, south: 48.85, east: 2.36, north: 48.87)
        var inBox = 0
        try archive.forEachTile(in: TileSelection(zooms: 0...16, bounds: box), where: { _ in true }) { tile, _ in
            #expect((try? box.intersects(tile)) == true)
            inBox += 1
        }
        // The box's tiles that the run holds (it ends two thirds into zoom 16).
        let expected = try (0...16).flatMap { try box.tileRanges(atZoom: $0).flatMap { Array($0) } }
            .filter { PMTilesFormat.tileID(of: $0) < UInt64(UInt32.max) && (try? box.intersects($0)) == true }.count
        #expect(inBox == expected)
    }

    @Test func aRunPastTheHeadersZoomsOrCountIsCorrupt() throws {
        let run = HostilePMTiles.directory([Entry(tileID: 0, runLength: UInt64(UInt32.max), length: 12, offset: 0)])
        let pastZoom = try #require(Self.corruption(HostilePMTiles.file(root: run, tileData: HostilePMTiles.pngBytes, maxZoom: 3)))
        #expect(pastZoom.contains("outside the header's zooms 0...3"), "\(pastZoom)")
        let pastCount = try #require(
            Self.corruption(HostilePMTiles.file(root: run, tileData: HostilePMTiles.pngBytes, maxZoom: 16, addressedTiles: 85)))
        #expect(pastCount.contains("more tiles than the header's 85"), "\(pastCount)")
    }

    // MARK: 15: a file cut underneath

    @Test func aFileTruncatedInPlaceIsTruncatedNotSIGBUS() throws {
        let dir = try TemporaryDirectory("pmtiles-cut")
        let path = dir.file("cut.pmtiles")
        let writer = try PMTilesWriter(destination: path)
        var random = SplitMix64(seed: 29)
        for x in 0..<16 {
            for y in 0..<16 {
                let bytes = HostilePMTiles.pngBytes + (0..<4000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                try writer.addTile(at: TileCoordinate(uncheckedZoom: 4, x: x, y: y), bytes: bytes)
            }
        }
        try writer.finish()
        let archive = try PMTilesArchive(path: path)
        // Another process cuts the file in place (same inode) while it is open.
        #expect(truncate(path, 20_000) == 0)
        #expect { try archive.forEachTile { _, _ in } } throws: { error in
            guard let error = error as? TileArchiveError, case .truncated(let why) = error.fault else { return false }
            return error.path == path && why.contains("cut while being read")
        }
    }

    /// A file of zooms 0-5 (1,365 tiles of 100 B to 3 KB, every fifth one of two shared payloads).
    static func writeMixedSizes(_ path: String) throws {
        let writer = try PMTilesWriter(destination: path)
        for z in 0...5 {
            for x in 0..<(1 << z) {
                for y in 0..<(1 << z) {
                    var random = SplitMix64(seed: UInt64(z * 10_000 + x * 100 + y))
                    if random.next() % 5 == 0 { random = SplitMix64(seed: random.next() % 2) }
                    let count = 100 + Int(random.next() % 3000)
                    let bytes = HostilePMTiles.pngBytes + (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                    try writer.addTile(at: TileCoordinate(uncheckedZoom: z, x: x, y: y), bytes: bytes)
                }
            }
        }
        try writer.finish()
    }

    /// Every tile with its bytes, in the order a pass gives them.
    static func pass(_ archive: PMTilesArchive, selective: Bool = false) throws -> [(TileCoordinate, [UInt8])] {
        var tiles: [(TileCoordinate, [UInt8])] = []
        if selective {
            try archive.forEachTile(where: { $0.x % 3 != 1 }) { tiles.append(($0, Array($1))) }
        } else {
            try archive.forEachTile { tiles.append(($0, Array($1))) }
        }
        return tiles
    }

    @Test func passesReadingWindowsGiveWhatReadingEachTileGives() throws {
        let dir = try TemporaryDirectory("pmtiles-windows")
        let path = dir.file("mixed.pmtiles")
        try Self.writeMixedSizes(path)
        // Bytes in memory: each tile is a slice, read on its own.
        let memory = try PMTilesArchive(source: FileByteSource(data: Data(contentsOf: URL(fileURLWithPath: path)), name: path))
        for selective in [false, true] {
            let expected = try Self.pass(memory, selective: selective)
            #expect(expected.count == (selective ? 903 : 1365))
            // Windows of 4 MiB (the whole file), of 10,000 bytes (a few tiles, gaps merged), and of
            // 1 byte (every tile over the budget: one tile a read).
            for window in [FileByteSource.defaultCoalescedReadLength, 10_000, 1] {
                let file = try PMTilesArchive(source: FileByteSource(path: path, coalescedReadLength: window))
                let got = try Self.pass(file, selective: selective)
                #expect(got.count == expected.count, "window \(window)")
                #expect(zip(got, expected).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }, "window \(window), selective \(selective)")
            }
        }
    }

    @Test func aWindowPastTheEndOfAFileCutInPlaceIsTruncated() throws {
        let dir = try TemporaryDirectory("pmtiles-window-cut")
        let path = dir.file("cut.pmtiles")
        try Self.writeMixedSizes(path)
        for window in [FileByteSource.defaultCoalescedReadLength, 10_000] {
            try FileManager.default.removeItem(atPath: path)
            try Self.writeMixedSizes(path)
            let archive = try PMTilesArchive(source: FileByteSource(path: path, coalescedReadLength: window))
            // Another process cuts the file in place in the middle of the tile data.
            let cut = Int(archive.header.tileDataOffset + archive.header.tileDataLength / 2)
            #expect(truncate(path, off_t(cut)) == 0)
            for selective in [false, true] {
                #expect { _ = try Self.pass(archive, selective: selective) } throws: { error in
                    guard let error = error as? TileArchiveError, case .truncated(let why) = error.fault else { return false }
                    return error.path == path && why.contains("cut while being read") && why.contains("now has \(cut) bytes")
                }
            }
        }
    }
}
