import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@testable import TilepackStorage

/// The read path of a local PMTiles (issue 47, item 6): the directory search and the full pass's
/// reads, which bench-pmtiles-read times; here what they find and how many calls they make.
@Suite struct PMTilesReadPathTests {
    /// A local file whose reads by copy (``ByteSource/read(offset:into:)``, what a pass uses) are counted.
    struct CountingSource: ByteSource {
        let file: FileByteSource
        let reads = Locked(0)
        var name: String { file.name }
        var count: Int { file.count }
        var coalescedReadLength: Int { file.coalescedReadLength }

        func withBytes<R>(offset: Int, length: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
            reads.withLock { $0 += 1 }
            return try file.withBytes(offset: offset, length: length, body)
        }

        func read(offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws {
            reads.withLock { $0 += 1 }
            try file.read(offset: offset, into: buffer)
        }
    }

    /// A full pass hands out the tiles of a zoom in (x, y) order, while the file holds them in
    /// tile-id (Hilbert) order: a column's tiles lie far apart, but an aligned strip of 2^k
    /// columns lies in stretches of 4^k tiles. Read a strip at a time (8 columns of zoom 5 here),
    /// the 1,365 tiles took 18 reads; read as they came, 64 KiB at a time (a column and a bit),
    /// they took 241.
    @Test func aFullPassReadsStripsOfColumnsInFewCalls() throws {
        let dir = try TemporaryDirectory("pmtiles-strips")
        let path = dir.file("mixed.pmtiles")
        try PMTilesHostileTests.writeMixedSizes(path)
        let memory = try PMTilesArchive(source: FileByteSource(data: Data(contentsOf: URL(fileURLWithPath: path)), name: path))
        let expected = try PMTilesHostileTests.pass(memory)
        let source = try CountingSource(file: FileByteSource(path: path, coalescedReadLength: 64 << 10))
        let archive = try PMTilesArchive(source: source)
        let before = source.reads.withLock { $0 }
        let got = try PMTilesHostileTests.pass(archive)
        let reads = source.reads.withLock { $0 } - before
        #expect(got.count == 1365)
        #expect(zip(got, expected).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 })
        #expect(reads <= 1365 / 40, "\(reads) reads for 1,365 tiles")
    }

    /// The strip of a zoom: the widest power of two of columns whose tiles hold at most the
    /// budget at the zoom's mean bytes a column, never wider than the zoom, at least one column.
    @Test func stripsAreAsWideAsTheBudgetAllows() {
        func level(zoom: Int, columns: Int, rows: Int, bytes: Int) -> [(key: UInt64, offset: UInt64, length: Int)] {
            (0..<columns).flatMap { x in (0..<rows).map { y in ((UInt64(x) << UInt64(zoom)) | UInt64(y), 0, bytes) } }
        }
        // 256 columns of 256 tiles of 3,000 bytes: 768,000 bytes a column.
        let z8 = level(zoom: 8, columns: 256, rows: 256, bytes: 3000)
        #expect(PMTilesArchive.stripWidth(of: z8, zoom: 8, bytes: 8 << 20) == 8)
        #expect(PMTilesArchive.stripWidth(of: z8, zoom: 8, bytes: 1 << 20) == 1)
        #expect(PMTilesArchive.stripWidth(of: z8, zoom: 8, bytes: 10) == 1)
        // Zoom 2 of 16 tiles: the whole zoom, not more.
        #expect(PMTilesArchive.stripWidth(of: level(zoom: 2, columns: 4, rows: 4, bytes: 10), zoom: 2, bytes: 1 << 30) == 4)
        // Huge tiles and a huge budget: no overflow.
        #expect(PMTilesArchive.stripWidth(of: level(zoom: 31, columns: 2, rows: 1, bytes: Int(UInt32.max)), zoom: 31, bytes: .max) > 1)
    }

    /// The directory's search (a bucket of ids from a table, then its few entries counted, or
    /// searched by halves when the ids bunch) finds the entry a plain search finds, for every id
    /// around every entry, in directories of 0 to 40 entries with gaps and runs.
    @Test func theDirectorySearchFindsWhatAPlainSearchFinds() {
        var random = SplitMix64(seed: 47)
        for count in 0...40 {
            var entries: [PMTilesFormat.Entry] = []
            var id: UInt64 = random.next() % 5
            for _ in 0..<count {
                let run = UInt32(random.next() % 3)
                entries.append(PMTilesFormat.Entry(tileID: id, offset: random.next() % 1000, length: 7, runLength: run))
                id += 1 + random.next() % 4
            }
            Self.expectPlainSearch(entries, probes: Array(0...(id + 2)))
        }
    }

    /// Ids that bunch (a dense stretch, a gap of billions, another stretch, one id near the last
    /// zoom's end): most buckets are empty and one holds hundreds of entries, searched by halves.
    @Test func theDirectorySearchFindsBunchedAndFarApartIds() {
        var ids = Array(UInt64(10)..<300) + Array(UInt64(5_000_000_000)..<5_000_000_200)
        ids.append(PMTilesFormat.idLimit - 1)
        let entries = ids.enumerated().map { PMTilesFormat.Entry(tileID: $1, offset: UInt64($0) * 10, length: 10, runLength: 1) }
        var probes: [UInt64] = [0, 9, 150, 299, 300, 301, 4_999_999_999, 5_000_000_100, 5_000_000_300, PMTilesFormat.idLimit - 2]
        probes += ids.flatMap { [$0 &- 1, $0, $0 + 1] }
        Self.expectPlainSearch(entries, probes: probes)
    }

    /// Entries kept in 12 bytes give back exactly what was decoded: runs of 0, 1, 254 and 255
    /// and longer (kept beside the entries), offsets past 2^40 that span less than 2^32, and ids
    /// and offsets spanning exactly 2^32 - 1.
    @Test func compactEntriesKeepEveryValue() {
        let runs: [UInt32] = [1, 0, 254, 255, 256, 1, 3, .max, 1, 1000, 0, 254]
        let far = UInt64(1) << 41
        var entries = runs.enumerated().map { index, run in
            PMTilesFormat.Entry(tileID: UInt64(index) * 5_000, offset: far + UInt64(index) * 70_000, length: 70_000, runLength: run)
        }
        // The last id and the last offset each exactly 2^32 - 1 past the first.
        entries.append(
            PMTilesFormat.Entry(
                tileID: UInt64(UInt32.max), offset: far + UInt64(UInt32.max), length: CompactEntries.lengthLimit - 1, runLength: 1))
        let directory = PMTilesDirectory(entries)
        #expect(directory.isCompact)
        Self.expectPlainSearch(
            entries, probes: entries.flatMap { [$0.tileID, $0.tileID + 1, $0.tileID + 4_999] } + [UInt64(UInt32.max) + 5])
    }

    /// A directory whose values do not fit 12 bytes keeps its entries in 24, exact: ids spanning
    /// 2^32, offsets spanning 2^32, a length of 2^24 (never truncated to the compact width).
    @Test func entriesThatDoNotFitStayWide() {
        func entries(lastID: UInt64, lastOffset: UInt64, lastLength: UInt32) -> [PMTilesFormat.Entry] {
            [
                PMTilesFormat.Entry(tileID: 7, offset: 100, length: 10, runLength: 1),
                PMTilesFormat.Entry(tileID: 9, offset: 110, length: 10, runLength: 300),
                PMTilesFormat.Entry(tileID: lastID, offset: lastOffset, length: lastLength, runLength: 2),
            ]
        }
        let idSpan = entries(lastID: 7 + (UInt64(1) << 32), lastOffset: 120, lastLength: 10)
        let offsetSpan = entries(lastID: 20, lastOffset: 100 + (UInt64(1) << 32), lastLength: 10)
        let longTile = entries(lastID: 20, lastOffset: 120, lastLength: CompactEntries.lengthLimit)
        for wide in [idSpan, offsetSpan, longTile] {
            #expect(!PMTilesDirectory(wide).isCompact)
            Self.expectPlainSearch(wide, probes: wide.flatMap { [$0.tileID &- 1, $0.tileID, $0.tileID + 1] } + [0, 1 << 20])
        }
        // One less of each fits.
        for fits in [
            entries(lastID: 7 + UInt64(UInt32.max), lastOffset: 120, lastLength: 10),
            entries(lastID: 20, lastOffset: 100 + UInt64(UInt32.max), lastLength: 10),
            entries(lastID: 20, lastOffset: 120, lastLength: CompactEntries.lengthLimit - 1),
        ] {
            #expect(PMTilesDirectory(fits).isCompact)
            Self.expectPlainSearch(fits, probes: fits.flatMap { [$0.tileID &- 1, $0.tileID, $0.tileID + 1] })
        }
    }

    static func expectPlainSearch(_ entries: [PMTilesFormat.Entry], probes: [UInt64]) {
        let directory = PMTilesDirectory(entries)
        #expect(directory.count == entries.count)
        for probe in probes {
            let plain = entries.lastIndex { $0.tileID <= probe }
            #expect(directory.lastEntry(atMost: probe) == plain, "\(entries.count) entries, id \(probe)")
            if let plain { #expect(directory[plain] == entries[plain]) }
        }
    }

    /// The leaves kept in their parents stay within the archive's bound (here 5,000 entries: one
    /// leaf of 4,096), every lookup still finding its tile while leaves are let go and read again.
    @Test func keptLeavesStayWithinTheBound() throws {
        let dir = try TemporaryDirectory("pmtiles-leaves")
        let path = dir.file("leaves.pmtiles")
        let writer = try PMTilesWriter(destination: path)
        var tiles: [TileCoordinate] = []
        for x in 0..<128 {
            for y in 0..<128 { tiles.append(TileCoordinate(uncheckedZoom: 7, x: x, y: y)) }
        }
        // Lengths that vary, random, so that the root directory does not compress into 16 KiB.
        func bytes(_ tile: TileCoordinate) -> [UInt8] {
            var random = SplitMix64(seed: UInt64(tile.x << 8 | tile.y))
            return Array("\(tile.x),\(tile.y);".utf8) + [UInt8](repeating: UInt8(tile.x), count: random.below(1500))
        }
        for tile in tiles { try writer.addTile(at: tile, bytes: bytes(tile)) }
        try writer.finish()
        let archive = try PMTilesArchive(source: FileByteSource(path: path), keepingLeafEntries: 5000)
        #expect((0..<archive.root.count).allSatisfy { archive.root[$0].runLength == 0 }, "the root points to leaves")
        #expect(archive.root.count >= 4)
        var random = SplitMix64(seed: 3)
        for _ in 0..<2000 {
            let tile = tiles[random.below(tiles.count)]
            #expect(try archive.withTileBytes(at: tile) { Array($0) } == bytes(tile))
            #expect(archive.leaves.heldEntries <= 5000)
        }
        #expect(archive.leaves.heldEntries > 0)
    }

    /// Reads from many threads at once, some nested inside another read's body, each get their
    /// own bytes (the file's pooled buffers are never handed to two reads at once), short reads
    /// and reads longer than a pooled buffer alike.
    @Test func readsAtOnceEachGetTheirOwnBytes() throws {
        let dir = try TemporaryDirectory("file-reads")
        let path = dir.file("bytes.bin")
        let content = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }
        try Data(content).write(to: URL(fileURLWithPath: path))
        let source = try FileByteSource(path: path)
        let failures = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            var random = SplitMix64(seed: UInt64(thread))
            for _ in 0..<300 {
                let length = random.next() % 10 == 0 ? 70_000 + random.below(100_000) : 1 + random.below(5000)
                let offset = random.below(content.count - length)
                let inner = random.below(content.count - 100)
                let same = try? source.withBytes(offset: offset, length: length) { outer -> Bool in
                    let nested = try source.withBytes(offset: inner, length: 100) { Array($0) == Array(content[inner..<(inner + 100)]) }
                    return nested && Array(outer) == Array(content[offset..<(offset + length)])
                }
                if same != true { failures.withLock { $0 += 1 } }
            }
        }
        #expect(failures.withLock { $0 } == 0)
    }
}

extension SplitMix64 {
    /// A number in `0 ..< n`.
    fileprivate mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(1, n))) }
}
