import Foundation
import Testing
import TilepackCore
@testable import TilepackStorage
import TilepackTestSupport

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

    /// The directory's search (every 8th id, then a block of 8 without branches) finds the entry a
    /// plain search finds, for every id around every entry, in directories of 0 to 40 entries
    /// (full and partial last blocks) with gaps and runs.
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
            let directory = PMTilesDirectory(entries)
            #expect(directory.count == count)
            for probe in 0...(id + 2) {
                let plain = entries.lastIndex { $0.tileID <= probe }
                #expect(directory.lastEntry(atMost: probe) == plain, "\(count) entries, id \(probe)")
                if let plain { #expect(directory[plain] == entries[plain]) }
            }
        }
    }
}
