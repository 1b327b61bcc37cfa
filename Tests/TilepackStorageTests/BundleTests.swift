import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@_spi(TilepackInternal) @testable import TilepackStorage

@Suite struct BundleRoundTripTests {
    typealias F = BundleFixtures

    @Test func encodedTilesRoundTrip() throws {
        let dir = try TemporaryDirectory()
        let (path, tiles) = try F.smallBundle(in: dir)
        let archive = try BundleArchive(path: path)
        #expect(archive.path == path)
        #expect(archive.content == .encoded(.png))
        #expect(try archive.metadata() == TileMetadata(["name": "test", "format": "png"]))
        #expect(
            try archive.zoomLevels() == [
                ZoomLevelSummary(zoom: 0, tileCount: 1), ZoomLevelSummary(zoom: 1, tileCount: 3), ZoomLevelSummary(zoom: 2, tileCount: 2),
            ])
        #expect(try archive.tileCount() == 6)
        #expect(archive.payloadCount == 5)  // 1/1/0 and 1/1/1 share one payload
        for (tile, data) in tiles {
            #expect(try archive.containsTile(at: tile))
            #expect(try archive.tileData(at: tile) == data)
            var buffer = [UInt8](repeating: 0xAA, count: 300)
            let n = try buffer.withUnsafeMutableBytes { try archive.readTile(at: tile, into: $0) }
            #expect(n == data.count)
            #expect(Data(buffer.prefix(data.count)) == data)
        }
        for missing in [F.tile(1, 0, 1), F.tile(2, 3, 0), F.tile(3, 0, 0), F.tile(30, 5, 5)] {
            #expect(try !archive.containsTile(at: missing))
            #expect(try archive.tileData(at: missing) == nil)
            #expect(try archive.readTile(at: missing, into: UnsafeMutableRawBufferPointer(start: nil, count: 0)) == nil)
        }
        var seen: [(TileCoordinate, Data)] = []
        try archive.forEachTile { seen.append(($0, Data($1))) }
        #expect(seen.map(\.0) == tiles.map(\.0).sorted())
        for (tile, data) in seen { #expect(tiles.first { $0.0 == tile }?.1 == data) }
        let verification = try archive.verify()
        #expect(verification.tileCount == 6)
        #expect(verification.payloadCount == 5)
        #expect(verification.lz4PayloadCount == 2)  // the two compressible PNG-like payloads
    }

    @Test func readIntoTooSmallBufferThrows() throws {
        let dir = try TemporaryDirectory()
        let (path, _) = try F.smallBundle(in: dir)
        let archive = try BundleArchive(path: path)
        var buffer = [UInt8](repeating: 0, count: 100)
        #expect(throws: TileArchiveError(path: path, fault: .bufferTooSmall(tile: F.tile(0, 0, 0), needed: 208, available: 100))) {
            try buffer.withUnsafeMutableBytes { try archive.readTile(at: F.tile(0, 0, 0), into: $0) }
        }
    }

    @Test func rawBitmapsDecompressIntoTheCallersBuffer() throws {
        let dir = try TemporaryDirectory()
        let layout = RawBitmapLayout(pixelFormat: .rgba8888, width: 256, height: 256)
        var tiles: [(TileCoordinate, Data)] = []
        for x in 0..<4 {
            for y in 0..<4 {
                // A gradient (compressible) per tile, one noise tile (stored).
                let data =
                    x == 3 && y == 3
                    ? F.noise(256 * 256 * 4, seed: 9)
                    : Data((0..<(256 * 256 * 4)).map { UInt8(truncatingIfNeeded: ($0 / 1024) * (x + 1) + y) })
                tiles.append((F.tile(2, x, y), data))
            }
        }
        let path = dir.file("raw.tilepack")
        let summary = try F.write(tiles, to: path, content: .rawBitmap(layout), metadata: TileMetadata(["name": "raw"]))
        #expect(summary.lz4PayloadCount == 15)
        let archive = try BundleArchive(path: path)
        #expect(archive.content == .rawBitmap(layout))
        #expect(archive.maximumTileLength == 256 * 256 * 4)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 256 * 4, alignment: 16)
        defer { buffer.deallocate() }
        for (tile, data) in tiles {
            #expect(try archive.readTile(at: tile, into: buffer) == data.count)
            #expect(Data(buffer) == data)
        }
        _ = try archive.verify()
        let file = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(file.count < 16 * 256 * 256 * 4 / 4, "compressible rasters are stored as LZ4")

        // The writer refuses a tile of the wrong size for the layout.
        let writer = try BundleWriter(destination: dir.file("bad.tilepack"), content: .rawBitmap(layout))
        #expect(
            throws: TileArchiveError(
                path: dir.file("bad.tilepack"),
                fault: .invalidTile(tile: F.tile(0, 0, 0), reason: "100 bytes, but a raw rgba8888 256x256 tile is 262144 bytes"))
        ) {
            try writer.addTile(at: F.tile(0, 0, 0), data: Data(count: 100))
        }
        // Raw tiles keep Core's one tile size rule: a 300 px or an 8x4 layout is refused up front.
        for (width, height) in [(300, 300), (8, 4), (8, 8), (8192, 8192)] {
            let odd = RawBitmapLayout(pixelFormat: .rgba8888, width: width, height: height)
            #expect(
                throws: TileArchiveError(
                    path: dir.file("odd.tilepack"),
                    fault: .invalidMetadata(
                        "raw tiles of \(odd): a tile is a square whose side is a power of two in 16...4096"))
            ) {
                _ = try BundleWriter(destination: dir.file("odd.tilepack"), content: .rawBitmap(odd))
            }
        }
    }

    @Test func outputIsDeterministicWhateverTheOrderOfAdds() throws {
        let dir = try TemporaryDirectory()
        var tiles: [(TileCoordinate, Data)] = []
        for x in 0..<8 { for y in 0..<8 { tiles.append((F.tile(3, x, y), F.pngLike(100 + (x * y) % 5, seed: (x + y) % 3))) } }
        tiles.append((F.tile(0, 0, 0), F.noise(500, seed: 4)))
        let metadata = TileMetadata(["name": "n", "format": "png", "bounds": "-180,-85,180,85", "é": "ü", "a": ""])
        try F.write(tiles, to: dir.file("a.tilepack"), metadata: metadata)
        try F.write(tiles.reversed(), to: dir.file("b.tilepack"), metadata: metadata)
        var rng = SystemRandomNumberGenerator()
        try F.write(tiles.shuffled(using: &rng), to: dir.file("c.tilepack"), metadata: metadata)
        let a = try Data(contentsOf: dir.url.appendingPathComponent("a.tilepack"))
        #expect(a == (try Data(contentsOf: dir.url.appendingPathComponent("b.tilepack"))))
        #expect(a == (try Data(contentsOf: dir.url.appendingPathComponent("c.tilepack"))))
        #expect(try BundleArchive(path: dir.file("a.tilepack")).metadata() == metadata)
    }

    @Test func identicalTilesShareOnePayloadAndDifferentOnesDoNot() throws {
        let dir = try TemporaryDirectory()
        let ocean = F.pngLike(1000, seed: 5)
        var almost = ocean
        almost[500] ^= 1  // same length, one bit different
        var tiles: [(TileCoordinate, Data)] = []
        for x in 0..<16 { for y in 0..<16 { tiles.append((F.tile(4, x, y), ocean)) } }
        tiles.append((F.tile(3, 0, 0), almost))
        let path = dir.file("dedup.tilepack")
        let summary = try F.write(tiles, to: path)
        #expect(summary.payloadCount == 2)
        let archive = try BundleArchive(path: path)
        #expect(try archive.tileData(at: F.tile(3, 0, 0)) == almost)
        #expect(try archive.tileData(at: F.tile(4, 15, 15)) == ocean)
        _ = try archive.verify()
    }

    @Test func lz4IsKeptOnlyWhenItPays() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("lz4.tilepack")
        let summary = try F.write(
            [
                (F.tile(1, 0, 0), F.noise(4096, seed: 1)),  // incompressible: stored
                (F.tile(1, 0, 1), Data(count: 4096)),  // zeros: LZ4
                (F.tile(1, 1, 0), Data([1])),  // too small to gain: stored
            ], to: path)
        #expect(summary.lz4PayloadCount == 1)
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        #expect(size < 4096 + 4096 / 2)
        let uncompressed = try F.write(
            [(F.tile(1, 0, 1), Data(count: 4096))], to: dir.file("plain.tilepack"),
            options: .init(compresses: false))
        #expect(uncompressed.lz4PayloadCount == 0)
    }

    @Test func payloadsFollowTheHilbertCurve() throws {
        // Payload order is zoom, then Hilbert position: (0,0), (0,1), (1,1), (1,0) at zoom 1.
        let dir = try TemporaryDirectory()
        let path = dir.file("order.tilepack")
        try F.write(
            [
                (F.tile(1, 1, 0), F.noise(10, seed: 4)), (F.tile(1, 0, 0), F.noise(10, seed: 1)),
                (F.tile(1, 1, 1), F.noise(10, seed: 3)), (F.tile(1, 0, 1), F.noise(10, seed: 2)),
            ], to: path)
        let surgery = try BundleSurgery(path: path)
        // Payload numbers of the index entries, in key order 1/0/0, 1/0/1, 1/1/0, 1/1/1.
        let refs = (0..<4).map { surgery.u32(surgery.refsOffset + 4 * $0) }
        #expect(refs == [0, 1, 3, 2])
        #expect(BundleFormat.hilbertIndex(x: 0, y: 0, zoom: 1) == 0)
        #expect(BundleFormat.hilbertIndex(x: 0, y: 1, zoom: 1) == 1)
        #expect(BundleFormat.hilbertIndex(x: 1, y: 1, zoom: 1) == 2)
        #expect(BundleFormat.hilbertIndex(x: 1, y: 0, zoom: 1) == 3)
        // The curve visits every cell of an 8x8 grid once, each step to a neighbour.
        var cells = [Int: (Int, Int)]()
        for x in 0..<8 { for y in 0..<8 { cells[Int(BundleFormat.hilbertIndex(x: x, y: y, zoom: 3))] = (x, y) } }
        #expect(cells.count == 64)
        for d in 1..<64 {
            let (a, b) = (cells[d - 1] ?? (0, 0), cells[d] ?? (9, 9))
            #expect(abs(a.0 - b.0) + abs(a.1 - b.1) == 1)
        }
    }

    @Test func tileKeysOrderByZoomXThenY() throws {
        #expect(BundleFormat.key(of: F.tile(0, 0, 0)) == 0)
        #expect(BundleFormat.key(of: F.tile(1, 0, 0)) == 1)
        #expect(BundleFormat.key(of: F.tile(1, 0, 1)) == 2)
        #expect(BundleFormat.key(of: F.tile(1, 1, 0)) == 3)
        #expect(BundleFormat.key(of: F.tile(2, 0, 0)) == 5)
        let top = F.tile(30, (1 << 30) - 1, (1 << 30) - 1)
        #expect(BundleFormat.key(of: top) == BundleFormat.zoomBase(31) - 1)
    }

    @Test func emptyBundleAndDeepZoom() throws {
        let dir = try TemporaryDirectory()
        try F.write([], to: dir.file("empty.tilepack"))
        let empty = try BundleArchive(path: dir.file("empty.tilepack"))
        #expect(try empty.zoomLevels().isEmpty)
        #expect(empty.content == .encoded(.png))
        _ = try empty.verify()

        let deep = F.tile(30, (1 << 30) - 1, 12345)
        try F.write([(deep, F.noise(20, seed: 1))], to: dir.file("deep.tilepack"))
        let archive = try BundleArchive(path: dir.file("deep.tilepack"))
        #expect(try archive.tileData(at: deep) == F.noise(20, seed: 1))
        var seen: [TileCoordinate] = []
        try archive.forEachTile { tile, _ in seen.append(tile) }
        #expect(seen == [deep])
    }

    @Test func concurrentReadersSeeTheSameTiles() throws {
        let dir = try TemporaryDirectory()
        var tiles: [(TileCoordinate, Data)] = []
        for x in 0..<32 { for y in 0..<32 { tiles.append((F.tile(5, x, y), F.pngLike(300, seed: x ^ y))) } }
        let path = dir.file("many.tilepack")
        try F.write(tiles, to: path)
        let archive = try BundleArchive(path: path)
        let failures = Counter()
        let expected = tiles
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for (i, (tile, data)) in expected.enumerated() where i % 8 == worker {
                if (try? archive.tileData(at: tile)) != data { failures.increment() }
            }
        }
        #expect(failures.value == 0)
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        func increment() { lock.withLock { count += 1 } }
        var value: Int { lock.withLock { count } }
    }
}

@Suite struct BundleWriterTests {
    typealias F = BundleFixtures

    @Test func aTileAddedTwiceFailsAndLeavesNothing() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("dup.tilepack")
        let writer = try BundleWriter(destination: path, content: .encoded(.png))
        try writer.addTile(at: F.tile(1, 0, 0), data: Data([1, 2, 3]))
        try writer.addTile(at: F.tile(1, 0, 0), data: Data([4, 5, 6]))
        #expect(throws: TileArchiveError(path: path, fault: .invalidTile(tile: F.tile(1, 0, 0), reason: "added twice"))) {
            try writer.finish()
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    @Test func abandonedWriterLeavesNoFile() throws {
        let dir = try TemporaryDirectory()
        do {
            let writer = try BundleWriter(destination: dir.file("x.tilepack"), content: .encoded(.pbf))
            try writer.addTile(at: F.tile(0, 0, 0), data: Data([1]))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    @Test func refusesToOverwriteUnlessAskedAndReplacesAtomically() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("a.tilepack")
        try F.write([(F.tile(0, 0, 0), Data([1]))], to: path)
        let old = try BundleArchive(path: path)  // stays mapped while the file is replaced
        #expect(throws: TileArchiveError(path: path, fault: .alreadyExists)) {
            try BundleWriter(destination: path, content: .encoded(.png))
        }
        let writer = try BundleWriter(destination: path, content: .encoded(.png), overwrite: true)
        try writer.addTile(at: F.tile(0, 0, 0), data: Data([2]))
        try writer.finish()
        #expect(try BundleArchive(path: path).tileData(at: F.tile(0, 0, 0)) == Data([2]))
        #expect(try old.tileData(at: F.tile(0, 0, 0)) == Data([1]))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["a.tilepack"])
    }

    @Test func metadataFormatMustMatchTheContent() throws {
        let dir = try TemporaryDirectory()
        #expect(
            throws: TileArchiveError(
                path: dir.file("m.tilepack"), fault: .invalidMetadata("format 'jpg' contradicts the bundle's content (png)"))
        ) {
            try BundleWriter(destination: dir.file("m.tilepack"), content: .encoded(.png), metadata: TileMetadata(["format": "jpg"]))
        }
    }

    @Test func writerMemoryDoesNotHoldPayloads() async throws {
        // 2,000 distinct 64 KiB tiles (125 MiB of payload) converted from MBTiles into a bundle by
        // the tilepack command, whose own peak resident memory is measured (this process's would
        // count the tests running beside this one): it must stay far below the payload volume.
        let binary = try #require(TestSupport.tilepackBinary, "the tilepack command is not built")
        let dir = try TemporaryDirectory()
        let source = dir.file("big.mbtiles")
        let writer = try MBTilesWriter(creating: source, metadata: TileMetadata(["name": "big", "format": "png"]))
        var tile = F.noise(65536, seed: 7)
        for i in 0..<2000 {
            tile.withUnsafeMutableBytes { $0.storeBytes(of: UInt32(i), toByteOffset: 0, as: UInt32.self) }
            try tile.withUnsafeBytes { try writer.write($0, at: F.tile(6, i % 64, i / 64)) }
        }
        _ = try writer.finish()
        let output = try await TestSupport.run(binary, ["convert", source, dir.file("big.tilepack"), "--quiet"])
        #expect(output.status == 0, "\(output.stderr)")
        if let peak = output.peakResidentBytes {
            #expect(peak < 100 << 20, "tilepack convert peaked at \(peak) bytes resident while writing 125 MiB of payloads")
        }
        #expect(try BundleArchive(path: dir.file("big.tilepack")).verify().payloadCount == 2000)
    }

    @Test func payloadsPreparedOnOtherThreadsGiveTheSameFile() throws {
        let dir = try TemporaryDirectory()
        var tiles: [(TileCoordinate, Data)] = []
        for i in 0..<300 {
            let data = i % 3 == 0 ? F.noise(700 + i, seed: UInt64(i)) : F.pngLike(400 + i % 50, seed: i % 11)
            tiles.append((F.tile(5, i % 32, i / 32), data))
        }
        try F.write(tiles, to: dir.file("serial.tilepack"))
        let options = BundleWriter.Options()
        let inputs = tiles.map { [UInt8]($0.1) }
        let prepared = Locked([BundleWriter.PreparedPayload?](repeating: nil, count: tiles.count))
        DispatchQueue.concurrentPerform(iterations: inputs.count) { i in
            let payload = BundleWriter.prepare(inputs[i], options: options)
            prepared.withLock { $0[i] = payload }
        }
        let writer = try BundleWriter(
            destination: dir.file("prepared.tilepack"), content: .encoded(.png),
            metadata: TileMetadata(["name": "test", "format": "png"]), options: options)
        for (i, payload) in prepared.withLock({ $0 }).enumerated() { try writer.addTile(at: tiles[i].0, payload: try #require(payload)) }
        try writer.finish()
        #expect(
            try Data(contentsOf: dir.url.appendingPathComponent("serial.tilepack"))
                == Data(contentsOf: dir.url.appendingPathComponent("prepared.tilepack")))
    }

    @Test func duplicatesAreFoundAfterTheSpoolBufferIsWritten() throws {
        // 1,200 distinct 1 KiB tiles fill more than the 1 MiB spool buffer; then each comes again.
        let dir = try TemporaryDirectory()
        let distinct = (0..<1200).map { F.noise(1024, seed: UInt64($0) + 1) }
        var tiles: [(TileCoordinate, Data)] = []
        for i in 0..<1200 { tiles.append((F.tile(6, i % 64, i / 64), distinct[i])) }
        for i in 0..<1200 { tiles.append((F.tile(7, i % 128, i / 128), distinct[i])) }
        let path = dir.file("spooled.tilepack")
        let summary = try F.write(tiles, to: path)
        #expect(summary.payloadCount == 1200)
        let archive = try BundleArchive(path: path)
        #expect(try archive.tileData(at: F.tile(7, 5, 0)) == distinct[5])
        #expect(try archive.tileData(at: F.tile(6, 47, 18)) == distinct[18 * 64 + 47])
        _ = try archive.verify()
    }

    @Test func sameCRCAndLengthButDifferentBytesAreTwoPayloads() throws {
        // Two incompressible tiles forged to the same CRC-32 and length: the dedup key matches,
        // the bytes do not.
        let dir = try TemporaryDirectory()
        let target: UInt32 = 0x1234_5678
        let a = Self.forge(Array(F.noise(996, seed: 1)), crc: target)
        let b = Self.forge(Array(F.noise(996, seed: 2)), crc: target)
        #expect(a.withUnsafeBytes { BundleFormat.crc32($0) } == target)
        #expect(b.withUnsafeBytes { BundleFormat.crc32($0) } == target)
        #expect(a != b)
        let path = dir.file("collide.tilepack")
        let summary = try F.write(
            [(F.tile(1, 0, 0), Data(a)), (F.tile(1, 1, 0), Data(b)), (F.tile(1, 1, 1), Data(b)), (F.tile(1, 0, 1), Data(a))], to: path)
        #expect(summary.payloadCount == 2)
        let archive = try BundleArchive(path: path)
        #expect(try archive.tileData(at: F.tile(1, 0, 1)) == Data(a))
        #expect(try archive.tileData(at: F.tile(1, 1, 1)) == Data(b))
        _ = try archive.verify()
    }

    @Test func sameCRCWithOtherLengthsAreFoundApart() throws {
        // Payloads of one CRC-32 and three lengths (the writer finds a payload by its CRC and
        // tells these apart by length): each is stored once and each repeat finds its own.
        let dir = try TemporaryDirectory()
        let target: UInt32 = 0x0BAD_CAFE
        let forged = [996, 1500, 2000].enumerated().map {
            Self.forge(Array(F.noise($0.element, seed: UInt64(10 + $0.offset))), crc: target)
        }
        var tiles: [(TileCoordinate, Data)] = []
        for x in 0..<4 { for y in 0..<4 { tiles.append((F.tile(2, x, y), Data(forged[(x + y) % 3]))) } }
        // Enough other payloads around them that the table grows while they are in it.
        for x in 0..<40 { for y in 0..<40 { tiles.append((F.tile(6, x, y), F.noise(64, seed: UInt64(100 + 40 * x + y)))) } }
        let path = dir.file("lengths.tilepack")
        let summary = try F.write(tiles, to: path)
        #expect(summary.payloadCount == 3 + 1600)
        let archive = try BundleArchive(path: path)
        for x in 0..<4 { for y in 0..<4 { #expect(try archive.tileData(at: F.tile(2, x, y)) == Data(forged[(x + y) % 3])) } }
        _ = try archive.verify()
    }

    /// `bytes` followed by 4 bytes chosen so that the CRC-32 of the whole is `crc`.
    static func forge(_ bytes: [UInt8], crc: UInt32) -> [UInt8] {
        var table = [UInt32](repeating: 0, count: 256)
        var inverse = [UInt8](repeating: 0, count: 256)  // index by the top byte of table[i]
        for i in 0..<256 {
            var c = UInt32(i)
            for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            table[i] = c
            inverse[Int(c >> 24)] = UInt8(i)
        }
        // The register after `bytes`, and the one needed after the 4 added bytes, walked back.
        let before = ~bytes.withUnsafeBytes { BundleFormat.crc32($0) }
        var register = ~crc
        for _ in 0..<4 {
            let index = inverse[Int(register >> 24)]
            register = ((register ^ table[Int(index)]) << 8) | UInt32(index)
        }
        let patch = register ^ before
        return bytes + [UInt8(patch & 0xFF), UInt8((patch >> 8) & 0xFF), UInt8((patch >> 16) & 0xFF), UInt8(patch >> 24)]
    }
}

/// Issue 19: large payloads are spooled as the data section lays them out and copied by the
/// kernel; large entropy-coded payloads are sampled before LZ4 is tried.
@Suite struct BundleLargePayloadTests {
    typealias F = BundleFixtures

    /// Tiles of 40-130 KiB (runs the kernel copies) among 1 KiB ones (copied through memory),
    /// some repeated, so that runs of the spool break and join in every way.
    static func mixedTiles() -> [(TileCoordinate, Data)] {
        var tiles: [(TileCoordinate, Data)] = []
        for i in 0..<96 {
            let x = i % 8, y = i / 8
            let data: Data =
                switch i % 5 {
                case 0, 1: F.noise(40_000 + 977 * i, seed: UInt64(i) + 1)  // large, stored
                case 2: F.pngLike(130_000 + i, seed: i % 4)  // large, LZ4
                case 3: F.noise(1000 + i, seed: UInt64(i) + 500)  // small, stored
                default: F.noise(50_000, seed: 7)  // large, one shared payload
                }
            tiles.append((F.tile(4, x, y), data))
        }
        return tiles
    }

    @Test func kernelCopiedPayloadsGiveTheSameFileAsCopiesThroughMemory() throws {
        let dir = try TemporaryDirectory()
        let tiles = Self.mixedTiles()
        func write(_ tiles: [(TileCoordinate, Data)], _ name: String, kernel: Bool) throws -> Data {
            let writer = try BundleWriter(
                destination: dir.file(name), content: .encoded(.png),
                metadata: TileMetadata(["name": "mixed", "format": "png"]))
            writer.copiesInKernel = kernel
            for (tile, data) in tiles { try writer.addTile(at: tile, data: data) }
            try writer.finish()
            return try Data(contentsOf: dir.url.appendingPathComponent(name))
        }
        let memory = try write(tiles, "memory.tilepack", kernel: false)
        let kernel = try write(tiles, "kernel.tilepack", kernel: true)
        var rng = SystemRandomNumberGenerator()
        let shuffled = try write(tiles.shuffled(using: &rng), "shuffled.tilepack", kernel: true)
        let reversed = try write(tiles.reversed(), "reversed.tilepack", kernel: true)
        #expect(kernel == memory)
        #expect(shuffled == memory)
        #expect(reversed == memory)
        let archive = try BundleArchive(path: dir.file("kernel.tilepack"))
        let verification = try archive.verify()
        #expect(verification.tileCount == 96)
        #expect(verification.payloadCount == 96 - 96 / 5 + 1)
        for (tile, data) in tiles { #expect(try archive.tileData(at: tile) == data) }
    }

    /// Each tile written to a file of its own, prepared with that file as its source.
    static func sourced(_ tiles: [(TileCoordinate, Data)], in dir: TemporaryDirectory) throws -> [(
        TileCoordinate, BundleWriter.PreparedPayload
    )] {
        try tiles.enumerated().map { i, entry in
            let path = dir.file("tile-\(i).bin")
            try entry.1.write(to: URL(fileURLWithPath: path))
            let fd = open(path, O_RDONLY)
            defer { close(fd) }
            let version = try #require(FileVersion.of(descriptor: fd))
            return (
                entry.0,
                BundleWriter.prepare([UInt8](entry.1), options: BundleWriter.Options(), source: SourceFile(path: path, identity: version))
            )
        }
    }

    /// Payloads copied from their source files at finish give the same file as the spool, in
    /// any order, with the kernel's copy and without, shared payloads included.
    @Test func payloadsCopiedFromTheirFilesGiveTheSameFileAsTheSpool() throws {
        let dir = try TemporaryDirectory()
        let tiles = Self.mixedTiles()
        let prepared = try Self.sourced(tiles, in: dir)
        #expect(prepared.filter { $0.1.source != nil }.count == 96 / 5 * 3 + 1)  // the large stored ones
        func write(_ payloads: [(TileCoordinate, BundleWriter.PreparedPayload)], _ name: String, sources: Bool, kernel: Bool) throws -> Data
        {
            let writer = try BundleWriter(
                destination: dir.file(name), content: .encoded(.png),
                metadata: TileMetadata(["name": "mixed", "format": "png"]))
            writer.copiesFromSources = sources
            writer.copiesInKernel = kernel
            for (tile, payload) in payloads { try writer.addTile(at: tile, payload: payload) }
            try writer.finish()
            return try Data(contentsOf: dir.url.appendingPathComponent(name))
        }
        let spooled = try write(prepared, "spooled.tilepack", sources: false, kernel: true)
        #expect(try write(prepared, "sourced.tilepack", sources: true, kernel: true) == spooled)
        #expect(try write(prepared, "sourced-memory.tilepack", sources: true, kernel: false) == spooled)
        var rng = SystemRandomNumberGenerator()
        #expect(try write(prepared.shuffled(using: &rng), "shuffled.tilepack", sources: true, kernel: true) == spooled)
        let archive = try BundleArchive(path: dir.file("sourced.tilepack"))
        #expect(try archive.verify().tileCount == 96)
        for (tile, data) in tiles { #expect(try archive.tileData(at: tile) == data) }
    }

    /// A source file written to, resized or replaced after it was read fails the write with an
    /// error naming it, and leaves no bundle (never a payload whose CRC is of other bytes).
    @Test(arguments: ["rewritten", "grown", "replaced"])
    func aSourceFileChangedAfterItWasReadFailsTheWrite(_ change: String) throws {
        let dir = try TemporaryDirectory()
        let tiles = (0..<4).map { (F.tile(3, $0, 0), F.noise(60_000, seed: UInt64($0) + 1)) }
        let prepared = try Self.sourced(tiles, in: dir)
        let writer = try BundleWriter(
            destination: dir.file("out.tilepack"), content: .encoded(.png),
            metadata: TileMetadata(["name": "changed", "format": "png"]))
        for (tile, payload) in prepared { try writer.addTile(at: tile, payload: payload) }
        let victim = dir.file("tile-2.bin")
        switch change {
        case "rewritten":
            // Same size, other bytes, past the file system clock's tick.
            Thread.sleep(forTimeInterval: 0.05)
            try F.noise(60_000, seed: 99).write(to: URL(fileURLWithPath: victim))
        case "grown":
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: victim))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data([1]))
            try handle.close()
        default:
            try F.noise(60_000, seed: 99).write(to: URL(fileURLWithPath: victim + ".new"))
            #expect(rename(victim + ".new", victim) == 0)
        }
        do {
            try writer.finish()
            Issue.record("a changed source file was copied")
        } catch {
            #expect(error.path == victim)
            #expect("\(error)".contains("after it was read"))
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("out.tilepack")))
    }

    /// A duplicate of a payload copied from its file is compared with that file.
    @Test func aDuplicateOfASourcedPayloadIsComparedWithItsFile() throws {
        let dir = try TemporaryDirectory()
        let same = F.noise(50_000, seed: 5)
        let prepared = try Self.sourced(
            [(F.tile(2, 0, 0), same), (F.tile(2, 1, 0), same), (F.tile(2, 2, 0), F.noise(50_000, seed: 6))], in: dir)
        let writer = try BundleWriter(
            destination: dir.file("dup.tilepack"), content: .encoded(.png),
            metadata: TileMetadata(["name": "dup", "format": "png"]))
        for (tile, payload) in prepared { try writer.addTile(at: tile, payload: payload) }
        #expect(try writer.finish().payloadCount == 2)
        #expect(try BundleArchive(path: dir.file("dup.tilepack")).tileData(at: F.tile(2, 1, 0)) == same)
    }

    @Test func largeEntropyCodedPayloadsAreSampledBeforeLZ4() throws {
        // 64 KiB of zeros except noise where the two samples are (the 4 KiB a third and two thirds
        // of the way in): LZ4 would save most of it, but the samples say it will not.
        let length = 64 << 10, sample = 4 << 10
        var bytes = [UInt8](repeating: 0, count: length)
        let noise = [UInt8](F.noise(2 * sample, seed: 3))
        let third = (length - sample) / 3, middle = 2 * (length - sample) / 3
        bytes.replaceSubrange(third..<(third + sample), with: noise[0..<sample])
        bytes.replaceSubrange(middle..<(middle + sample), with: noise[sample...])
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0]
        let gzip: [UInt8] = [0x1F, 0x8B, 0x08, 0x00]
        let options = BundleWriter.Options()
        for magic in [png, jpeg, gzip] {
            var tile = bytes
            tile.replaceSubrange(0..<magic.count, with: magic)
            #expect(BundleWriter.prepare(tile, options: options).codec == .stored, "sampled \(magic): stored")
        }
        // Not entropy-coded by its first bytes (JSON, raw pixels): LZ4 is tried on the whole.
        var json = bytes
        json[0] = UInt8(ascii: "{")
        #expect(BundleWriter.prepare(json, options: options).codec == .lz4Block)
        // A PNG whose second sample compresses, and a small PNG, are tried whole (and compress).
        var compressibleMiddle = bytes
        compressibleMiddle.replaceSubrange(0..<png.count, with: png)
        compressibleMiddle.replaceSubrange(middle..<(middle + sample), with: repeatElement(0, count: sample))
        #expect(BundleWriter.prepare(compressibleMiddle, options: options).codec == .lz4Block)
        let small = [UInt8](F.pngLike(16 << 10 - 8, seed: 1))
        #expect(small.count == 16 << 10)
        #expect(BundleWriter.prepare(small, options: options).codec == .lz4Block)
    }

    @Test func aKnownCRCIsStoredForAStoredPayload() throws {
        let bytes = [UInt8](F.noise(70_000, seed: 9))
        let crc = bytes.withUnsafeBytes { BundleFormat.crc32($0) }
        let prepared = BundleWriter.prepare(bytes, options: .init(), crc: crc)
        #expect(prepared.codec == .stored)
        #expect(prepared.crc == crc)
        // Compressed, the CRC is the stored bytes' own, whatever was given.
        let zeros = [UInt8](repeating: 0, count: 70_000)
        let compressed = BundleWriter.prepare(zeros, options: .init(), crc: 0xDEAD_BEEF)
        #expect(compressed.codec == .lz4Block)
        #expect(compressed.crc == compressed.stored.withUnsafeBytes { BundleFormat.crc32($0) })
    }
}
