import Foundation
import Testing
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport
@_spi(TilepackInternal) import TilepackCompression

/// PMTiles v3: tile ids, the fixtures written by other tools, the writer's round trip and layout.
@Suite struct PMTilesTests {
    static func tile(_ z: Int, _ x: Int, _ y: Int) -> TileCoordinate { TileCoordinate(uncheckedZoom: z, x: x, y: y) }

    private func fault(_ body: () throws -> Void) -> TileArchiveError.Fault? {
        do {
            try body()
            return nil
        } catch let error as TileArchiveError {
            return error.fault
        } catch {
            Issue.record("not a TileArchiveError: \(error)")
            return nil
        }
    }

    // MARK: Tile ids

    @Test func tileIDsAreTheSpecsHilbertNumbering() {
        // Values from the spec's reference implementation (zxy_to_tileid).
        #expect(PMTilesFormat.tileID(of: Self.tile(0, 0, 0)) == 0)
        #expect(PMTilesFormat.tileID(of: Self.tile(1, 0, 0)) == 1)
        #expect(PMTilesFormat.tileID(of: Self.tile(1, 0, 1)) == 2)
        #expect(PMTilesFormat.tileID(of: Self.tile(1, 1, 1)) == 3)
        #expect(PMTilesFormat.tileID(of: Self.tile(1, 1, 0)) == 4)
        #expect(PMTilesFormat.tileID(of: Self.tile(2, 0, 0)) == 5)
        #expect(PMTilesFormat.tileID(of: Self.tile(3, 0, 0)) == 21)
        #expect(PMTilesFormat.tileID(of: Self.tile(20, 0, 0)) == 366_503_875_925)
        var random = SplitMix64(seed: 15)
        for _ in 0..<2000 {
            let z = Int.random(in: 0...TileCoordinate.maximumZoom, using: &random)
            let side = 1 << z
            let t = Self.tile(z, Int.random(in: 0..<side, using: &random), Int.random(in: 0..<side, using: &random))
            #expect(PMTilesFormat.tile(ofID: PMTilesFormat.tileID(of: t)) == t)
        }
        // Every id of the first zooms maps back to itself.
        for id in UInt64(0)..<1365 {
            guard let t = PMTilesFormat.tile(ofID: id) else {
                Issue.record("no tile for id \(id)")
                continue
            }
            #expect(PMTilesFormat.tileID(of: t) == id)
        }
        #expect(PMTilesFormat.tile(ofID: .max) == nil)
    }

    // MARK: Fixtures

    @Test func smallestVectorFixture() throws {
        let archive = try PMTilesArchive(path: TestSupport.fixture("pmtiles/test_fixture_1.pmtiles"))
        #expect(archive.content == .encoded(.pbf))
        #expect(archive.header.tileCompression == .gzip)
        #expect(try archive.zoomLevels() == [ZoomLevelSummary(zoom: 0, tileCount: 1, byteCount: 69)])
        let bytes = try #require(try archive.tileData(at: Self.tile(0, 0, 0)))
        #expect(bytes.count == 69 && bytes.starts(with: [0x1F, 0x8B]))
        #expect(try archive.tileData(at: Self.tile(1, 0, 0)) == nil)
        let metadata = try archive.metadata()
        #expect(metadata.name == "test_fixture_1.pmtiles")
        #expect(metadata[TileMetadata.Key.format] == "pbf")
        #expect(metadata.json?.contains("vector_layers") == true)
    }

    @Test func rasterFixtureWithRunsAndDedup() throws {
        let archive = try PMTilesArchive(path: TestSupport.fixture("pmtiles/stamen_toner_raster_CC-BY+ODbL_z3.pmtiles"))
        #expect(archive.content == .encoded(.png))
        #expect(try archive.zoomLevels().map(\.tileCount) == [1, 4, 16, 64])
        var seen: [TileCoordinate] = []
        var distinct = Set<Data>()
        try archive.forEachTile { t, bytes in
            seen.append(t)
            distinct.insert(Data(bytes))
            #expect(TileFormat.sniff(bytes) == .png)
            let again = try archive.tileData(at: t)
            #expect(again == Data(bytes))
        }
        #expect(seen.count == 85 && seen == seen.sorted())
        #expect(distinct.count == 80)
        var entries = 0
        try archive.forEachEntry { _ in entries += 1 }
        #expect(entries == 84)
    }

    @Test(arguments: [
        ("martin/png.pmtiles", TileFormat.png, 5), ("martin/webp2.pmtiles", .webp, 5),
        ("pmtiles/usgs-mt-whitney-8-15-webp-512.pmtiles", .webp, 50), ("pmtiles/test_fixture_2.pmtiles", .pbf, 1),
    ])
    func validFixturesRead(_ file: String, _ format: TileFormat, _ count: Int) throws {
        let archive = try openTileArchive(path: TestSupport.fixture(file))
        #expect(archive is PMTilesArchive)
        #expect(archive.content == .encoded(format))
        var n = 0
        try archive.forEachTile { _, bytes in
            n += 1
            #expect(TileFormat.sniff(bytes) == format)
        }
        let total = try archive.tileCount()
        #expect(n == count && total == count)
        #expect(try TileArchiveFormat.detect(path: TestSupport.fixture(file)) == .pmtiles)
    }

    @Test func anEmptyArchiveOfANewTileType() throws {
        let archive = try PMTilesArchive(path: TestSupport.fixture("pmtiles/test_fixture_mlt.pmtiles"))
        #expect(archive.header.tileType == .mlt)
        #expect(archive.content == nil)
        #expect(try archive.tileCount() == 0)
        #expect(try archive.tileData(at: Self.tile(0, 0, 0)) == nil)
    }

    @Test func otherVersionsAndOtherFilesAreNamed() {
        guard case .unsupportedVersion(let v4) = fault({ _ = try openTileArchive(path: TestSupport.fixture("pmtiles/invalid_v4.pmtiles")) })
        else {
            Issue.record("v4 not refused as a version")
            return
        }
        #expect(v4.contains("PMTiles spec version 4"))
        guard
            case .unsupportedVersion(let ascii) = fault({
                _ = try openTileArchive(path: TestSupport.fixture("martin/stamen_toner__raster_CC-BY+ODbL_z3.pmtiles"))
            })
        else {
            Issue.record("0x33 not refused as a version")
            return
        }
        #expect(ascii.contains("0x33"))
        guard case .notAnArchive(let empty) = fault({ _ = try openTileArchive(path: TestSupport.fixture("pmtiles/empty.pmtiles")) }) else {
            Issue.record("empty file")
            return
        }
        #expect(empty.contains("empty"))
        guard case .notAnArchive(let text) = fault({ _ = try PMTilesArchive(path: TestSupport.fixture("pmtiles/invalid.pmtiles")) }) else {
            Issue.record("text file")
            return
        }
        #expect(text.contains("text"))
        // A v2 header: "PM", version 2.
        let v2 = FileByteSource(data: Data([0x50, 0x4D, 2, 0]) + Data(count: 600), name: "old.pmtiles")
        guard case .unsupportedVersion(let two) = fault({ _ = try PMTilesArchive(source: v2) }) else {
            Issue.record("v2 not named")
            return
        }
        #expect(two.contains("version 2"))
    }

    // MARK: Writer

    static func sampleTiles(zooms: ClosedRange<Int>, seed: UInt64) -> [(TileCoordinate, [UInt8])] {
        var random = SplitMix64(seed: seed)
        var tiles: [(TileCoordinate, [UInt8])] = []
        let shared: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3]
        for z in zooms {
            for x in 0..<(1 << z) {
                for y in 0..<(1 << z) where random.next() % 4 != 0 {
                    if random.next() % 3 == 0 {
                        tiles.append((tile(z, x, y), shared))
                    } else {
                        let count = Int(random.next() % 200) + 9
                        tiles.append(
                            (
                                tile(z, x, y),
                                [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
                                    + (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                            ))
                    }
                }
            }
        }
        return tiles
    }

    @Test func writerRoundTripKeepsEveryTileAndTheMetadata() throws {
        let dir = try TemporaryDirectory("pmtiles")
        let path = dir.file("out.pmtiles")
        let tiles = Self.sampleTiles(zooms: 0...5, seed: 1)
        var metadata = TileMetadata([
            "name": "round trip", "format": "png", "agg_tiles_hash": "0123ABC",
            "json": #"{"vector_layers":[{"id":"a"}],"other":1}"#, "attribution": "<a href=\"x\">x</a>",
        ])
        metadata.setBounds(GeoBoundingBox(west: -10, south: -20, east: 30, north: 40))
        let writer = try PMTilesWriter(destination: path, metadata: metadata)
        for (t, bytes) in tiles.shuffled(using: &Self.rng) { try writer.addTile(at: t, bytes: bytes) }
        let summary = try writer.finish()
        #expect(summary.addressedTiles == tiles.count)
        #expect(summary.tileContents < tiles.count)
        #expect(summary.tileEntries < tiles.count)

        let archive = try PMTilesArchive(path: path)
        #expect(archive.header.clustered && archive.header.tileType == .png && archive.header.internalCompression == .gzip)
        #expect(archive.header.minLonE7 == -100_000_000 && archive.header.maxLatE7 == 400_000_000)
        var read: [TileCoordinate: [UInt8]] = [:]
        try archive.forEachTile { t, bytes in read[t] = Array(bytes) }
        #expect(read.count == tiles.count)
        for (t, bytes) in tiles { #expect(read[t] == bytes) }
        let back = try archive.metadata()
        for key in ["name", "format", "agg_tiles_hash", "attribution", "bounds"] { #expect(back[key] == metadata[key], "\(key)") }
        let json = try #require(back.json.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        #expect(Set(json.keys) == ["vector_layers", "other"])
        // The JSON carries vector_layers at the top, where other readers look.
        let raw = try archive.source.withBytes(offset: Int(archive.header.metadataOffset), length: Int(archive.header.metadataLength)) {
            Array($0)
        }
        let top =
            try JSONSerialization.jsonObject(
                with: Data(
                    Gzip.decompress(UnsafeRawBufferPointer(start: raw.withUnsafeBytes { $0.baseAddress }, count: raw.count), limit: 1 << 20)
                        .get())) as? [String: Any]
        #expect(top?["vector_layers"] != nil && top?["name"] as? String == "round trip")
    }
    nonisolated(unsafe) static var rng = SplitMix64(seed: 99)

    @Test func identicalNeighboursBecomeOneRun() throws {
        let dir = try TemporaryDirectory("pmtiles")
        let path = dir.file("ocean.pmtiles")
        let writer = try PMTilesWriter(destination: path)
        let ocean: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0xAA]
        for x in 0..<16 { for y in 0..<16 { try writer.addTile(at: Self.tile(4, x, y), bytes: ocean) } }
        let summary = try writer.finish()
        #expect(summary.tileEntries == 1 && summary.tileContents == 1 && summary.addressedTiles == 256)
        let archive = try PMTilesArchive(path: path)
        #expect(try archive.tileCount() == 256)
        #expect(try archive.tileData(at: Self.tile(4, 15, 3)) == Data(ocean))
    }

    @Test func manyTilesGoToLeavesAndTheRootFitsTheFirst16KiB() throws {
        let dir = try TemporaryDirectory("pmtiles")
        let path = dir.file("big.pmtiles")
        let writer = try PMTilesWriter(destination: path)
        var expected: [TileCoordinate: UInt32] = [:]
        var random = SplitMix64(seed: 7)
        // 40,000 tiles at zoom 8 and 9, added in (z, x, y) order, half of them repeating an earlier
        // tile's bytes (so that offsets jump back and the directory does not compress away).
        var values: [UInt32] = []
        for z in 8...9 {
            for x in 0..<(1 << z) {
                for y in 0..<(1 << z) where expected.count < 40_000 && random.next() % 2 == 0 {
                    let value =
                        !values.isEmpty && random.next() % 2 == 0
                        ? values[Int(random.next() % UInt64(values.count))] : UInt32(truncatingIfNeeded: random.next())
                    values.append(value)
                    expected[Self.tile(z, x, y)] = value
                    try writer.addTile(at: Self.tile(z, x, y), bytes: withUnsafeBytes(of: value) { Array($0) })
                }
            }
        }
        let summary = try writer.finish()
        #expect(summary.leafDirectories > 1)
        let archive = try PMTilesArchive(path: path)
        #expect(archive.header.rootOffset + archive.header.rootLength <= 16384)
        #expect(archive.header.leafLength > 0)
        var count = 0
        try archive.forEachTile { t, bytes in
            count += 1
            #expect(bytes.loadUnaligned(as: UInt32.self) == expected[t])
        }
        #expect(count == expected.count)
        for (t, value) in expected.prefix(500) {
            #expect(try archive.tileData(at: t) == withUnsafeBytes(of: value) { Data($0) })
        }
        #expect(try archive.tileData(at: Self.tile(10, 0, 0)) == nil)
    }

    /// A patch's way of writing (Specs/updates.md §4): the runs of an existing PMTiles given as
    /// ranges of that file, some read and compared (`addRun(ids:copying:bytes:)`), the rest
    /// unread in batches (`addRuns(copyingUnread:...)`), shared contents coming back at offsets
    /// below the last one, give the file the writer makes of the same tiles' bytes: with the
    /// kernel's copy (in chunks, the data being several of them) and through memory.
    @Test func runsCopiedFromAnotherPMTilesGiveTheSameFileAsTheirBytes() throws {
        let dir = try TemporaryDirectory("pmtiles")
        // 96 tiles at zoom 6: 40 KB of noise each (4 MB, two copy chunks and more), every fifth
        // one the same "ocean" bytes, shared wherever it comes.
        var tiles: [(TileCoordinate, [UInt8])] = []
        var random = SplitMix64(seed: 31)
        let ocean = (0..<40_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        for i in 0..<96 {
            let bytes = i % 5 == 0 ? ocean : (0..<40_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            tiles.append((Self.tile(6, i % 12, i / 12), bytes))
        }
        let metadata = TileMetadata(["name": "copies", "format": "png"])
        func write(_ name: String, _ body: (PMTilesWriter) throws -> Void) throws -> [UInt8] {
            let writer = try PMTilesWriter(destination: dir.file(name), metadata: metadata)
            try body(writer)
            try writer.finish()
            return try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir.file(name))))
        }
        let plain = try write("plain.pmtiles") { writer in
            for (tile, bytes) in tiles.reversed() { try writer.addTile(at: tile, bytes: bytes) }
        }
        let archive = try PMTilesArchive(path: dir.file("plain.pmtiles"))
        let dataOffset = Int(archive.header.tileDataOffset)
        var runs: [(ids: Range<UInt64>, offset: Int, length: Int)] = []
        try archive.forEachRun { _, ids, offset, length in runs.append((ids, dataOffset + Int(offset), length)) }
        #expect(runs.count == 96)
        let offsets = Set(runs.map(\.offset))
        #expect(offsets.count == 77)  // 96 tiles, 20 of them one shared content
        for kernel in [true, false] {
            for readEvery in [1, 3, 1000] {
                let copied = try write("copied-\(kernel)-\(readEvery).pmtiles") { writer in
                    writer.copySource = try CopySource(path: dir.file("plain.pmtiles"))
                    writer.copiesInKernel = kernel
                    var unread: [PMTilesWriter.UnreadRun] = []
                    for (i, run) in runs.enumerated() {
                        guard i % readEvery == 0 else {
                            unread.append(PMTilesWriter.UnreadRun(ids: run.ids, offset: run.offset, length: run.length))
                            continue
                        }
                        try writer.addRuns(copyingUnread: unread, format: .png, gzip: false)
                        unread.removeAll()
                        let bytes = Array(plain[run.offset..<(run.offset + run.length)])
                        try bytes.withUnsafeBytes { try writer.addRun(ids: run.ids, copying: run.offset, bytes: $0) }
                    }
                    try writer.addRuns(copyingUnread: unread, format: .png, gzip: false)
                }
                // Compared whole, not printed whole when they differ (megabytes).
                let same = copied == plain
                #expect(same, "kernel copy \(kernel), every \(readEvery)th run read: \(copied.count) bytes against \(plain.count)")
            }
        }
    }

    @Test func writerRefusesATileTwiceAndIsAtomic() throws {
        let dir = try TemporaryDirectory("pmtiles")
        let path = dir.file("twice.pmtiles")
        let writer = try PMTilesWriter(destination: path)
        try writer.addTile(at: Self.tile(1, 0, 0), bytes: [1, 2, 3])
        try writer.addTile(at: Self.tile(1, 0, 0), bytes: [1, 2, 4])
        #expect(throws: TileArchiveError(path: path, fault: .invalidTile(tile: Self.tile(1, 0, 0), reason: "added twice"))) {
            try writer.finish()
        }
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
        _ = FileManager.default.createFile(atPath: path, contents: Data("keep".utf8))
        #expect(throws: TileArchiveError(path: path, fault: .alreadyExists)) { _ = try PMTilesWriter(destination: path) }
    }

    // MARK: Hostile input

    /// Opens and reads everything; returns the error, if any. Must never crash or hang.
    static func readAll(_ bytes: [UInt8]) -> TileArchiveError? {
        do {
            let archive = try PMTilesArchive(source: FileByteSource(data: Data(bytes), name: "crafted.pmtiles"))
            _ = try archive.metadata()
            _ = try archive.zoomLevels()
            try archive.forEachTile { _, _ in }
            for z in 0...3 { for x in 0..<(1 << z) { _ = try archive.tileData(at: tile(z, x, 0)) } }
            return nil
        } catch let error as TileArchiveError {
            #expect(error.path == "crafted.pmtiles")
            return error
        } catch {
            Issue.record("untyped error \(error)")
            return nil
        }
    }

    static func smallArchive(leaves: Bool) throws -> [UInt8] {
        let dir = try TemporaryDirectory("pmtiles")
        let path = dir.file("small.pmtiles")
        let writer = try PMTilesWriter(destination: path, metadata: TileMetadata(["name": "small"]))
        for (t, bytes) in sampleTiles(zooms: 0...3, seed: 3) { try writer.addTile(at: t, bytes: bytes) }
        try writer.finish()
        var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
        if leaves {
            // Rewrite with the root split into leaves of 8 entries (as a big archive would be).
            let archive = try PMTilesArchive(path: path)
            var entries: [PMTilesFormat.Entry] = []
            try archive.forEachEntry { entries.append($0) }
            bytes = PMTilesCrafting.withLeaves(bytes, header: archive.header, entries: entries, leafSize: 8)
        }
        return bytes
    }

    @Test func everyTruncationIsAnError() throws {
        let original = try Self.smallArchive(leaves: true)
        #expect(Self.readAll(original) == nil)
        for length in stride(from: 0, to: original.count, by: 7) {
            #expect(Self.readAll(Array(original.prefix(length))) != nil, "truncated to \(length)")
        }
    }

    @Test func everyBitFlipOfHeaderAndDirectoriesIsSafe() throws {
        let original = try Self.smallArchive(leaves: true)
        let archive = try PMTilesArchive(source: FileByteSource(data: Data(original), name: "x"))
        let directoriesEnd = Int(archive.header.tileDataOffset)
        var detected = 0
        for offset in 0..<directoriesEnd {
            for bit in 0..<8 {
                var damaged = original
                damaged[offset] ^= 1 << UInt8(bit)
                if Self.readAll(damaged) != nil { detected += 1 }
            }
        }
        // Most flips in the header and gzip-compressed directories are caught (gzip's CRC-32).
        #expect(detected > directoriesEnd * 8 * 3 / 4)
    }

    @Test func lyingHeadersAndDirectoriesAreCorruptNotCrashes() throws {
        let original = try Self.smallArchive(leaves: false)
        func put64(_ bytes: inout [UInt8], _ value: UInt64, at offset: Int) {
            withUnsafeBytes(of: value.littleEndian) { for i in 0..<8 { bytes[offset + i] = $0[i] } }
        }
        // A root length past the end of the file.
        var long = original
        put64(&long, UInt64(original.count), at: 16)
        guard case .truncated = Self.readAll(long)?.fault else {
            Issue.record("root past the end")
            return
        }
        // Sections overlapping the header, offsets that overflow.
        var overflow = original
        put64(&overflow, .max - 3, at: 56)
        #expect(Self.readAll(overflow) != nil)
        // A directory that claims a billion entries, uncompressed.
        let header = try PMTilesArchive(source: FileByteSource(data: Data(original), name: "x")).header
        let huge = PMTilesCrafting.replacingRoot(original, header: header, root: [0x80, 0x94, 0xEB, 0xDC, 0x03, 0, 0, 0, 0])
        guard case .corrupt(let why) = Self.readAll(huge)?.fault else {
            Issue.record("huge count")
            return
        }
        #expect(why.contains("declares 1000000000 entries"))
        // A leaf that points at itself: the depth bound stops the walk.
        // Uncompressed, one entry: id 0, run 0 (a leaf), length 5, offset 0 (stored + 1): itself.
        let leaf: [UInt8] = [1, 0, 0, 5, 1]
        let looping = PMTilesCrafting.assemble(original, header: header, root: leaf, leaves: leaf, uncompressed: true)
        guard case .corrupt(let deep) = Self.readAll(looping)?.fault else {
            Issue.record("looping leaves")
            return
        }
        #expect(deep.contains("deeper") || deep.contains("out of order"))
        // An overlong varint.
        let varint = PMTilesCrafting.replacingRoot(
            original, header: header, root: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
        #expect(Self.readAll(varint) != nil)
        // Gzip that inflates without bound (a bomb) is refused at the limit.
        let zeros = [UInt8](repeating: 0, count: PMTilesFormat.maximumDirectoryLength + 1)
        let bomb = Gzip.compress(zeros)
        #expect(bomb.count < 100_000)
        let bombed = PMTilesCrafting.replacingRoot(original, header: header, root: bomb, compressed: true)
        guard case .corrupt(let inflated) = Self.readAll(bombed)?.fault else {
            Issue.record("gzip bomb")
            return
        }
        #expect(inflated.contains("limit"))
    }
}

/// Rewrites small archives with hand-made directories.
enum PMTilesCrafting {
    /// Header, root, metadata, leaves, tile data of `bytes`, with the root and leaf sections
    /// given as they are to be stored.
    static func assemble(_ bytes: [UInt8], header: PMTilesHeader, root: [UInt8], leaves: [UInt8]?, uncompressed: Bool = false) -> [UInt8] {
        let metadata =
            uncompressed ? Array("{}".utf8) : Array(bytes[Int(header.metadataOffset)..<Int(header.metadataOffset + header.metadataLength)])
        let leafBytes = leaves ?? Array(bytes[Int(header.leafOffset)..<Int(header.leafOffset + header.leafLength)])
        let data = Array(bytes[Int(header.tileDataOffset)...])
        var h = header
        if uncompressed { h.internalCompression = .none }
        h.rootOffset = 127
        h.rootLength = UInt64(root.count)
        h.metadataOffset = h.rootOffset + h.rootLength
        h.metadataLength = UInt64(metadata.count)
        h.leafOffset = h.metadataOffset + h.metadataLength
        h.leafLength = UInt64(leafBytes.count)
        h.tileDataOffset = h.leafOffset + h.leafLength
        return h.encoded() + root + metadata + leafBytes + data
    }

    /// The archive with its root replaced by `root` (gzip-compressed here unless `compressed`).
    static func replacingRoot(_ bytes: [UInt8], header: PMTilesHeader, root: [UInt8], compressed: Bool = false) -> [UInt8] {
        assemble(bytes, header: header, root: compressed ? root : Gzip.compress(root), leaves: nil)
    }

    /// The archive with its entries split into leaves of `leafSize`.
    static func withLeaves(_ bytes: [UInt8], header: PMTilesHeader, entries: [PMTilesFormat.Entry], leafSize: Int) -> [UInt8] {
        var leaves: [UInt8] = []
        var root: [PMTilesFormat.Entry] = []
        for start in stride(from: 0, to: entries.count, by: leafSize) {
            let leaf = Gzip.compress(PMTilesFormat.encodeDirectory(Array(entries[start..<min(entries.count, start + leafSize)])))
            root.append(
                PMTilesFormat.Entry(tileID: entries[start].tileID, offset: UInt64(leaves.count), length: UInt32(leaf.count), runLength: 0))
            leaves += leaf
        }
        return assemble(bytes, header: header, root: Gzip.compress(PMTilesFormat.encodeDirectory(root)), leaves: leaves)
    }
}
