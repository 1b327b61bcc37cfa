import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

/// Hostile input: every fault is a typed error naming the file, never a crash or a wrong tile.
@Suite struct BundleHostileTests {
    typealias F = BundleFixtures

    private func small() throws -> (dir: TemporaryDirectory, path: String, surgery: BundleSurgery) {
        let dir = try TemporaryDirectory()
        let (path, _) = try F.smallBundle(in: dir)
        return (dir, path, try BundleSurgery(path: path))
    }

    private func isCorrupt(_ error: TileArchiveError?) -> Bool {
        if case .corrupt = error?.fault { return true }
        return false
    }

    @Test func everySingleBitFlipIsDetected() throws {
        let (_, _, original) = try small()
        #expect(original.openAndVerify() == nil)
        var undetected: [String] = []
        for offset in 0..<original.bytes.count {
            for bit in 0..<8 {
                var damaged = original
                damaged.bytes[offset] ^= 1 << UInt8(bit)
                guard let error = damaged.openAndVerify(alsoFromFile: false) else {
                    undetected.append("byte \(offset) bit \(bit)")
                    continue
                }
                #expect(error.path == "crafted.tilepack")
            }
        }
        #expect(undetected.isEmpty, "undetected flips: \(undetected.prefix(10))")
        #expect(original.bytes.count > 700)
    }

    @Test func everyTruncationIsReportedAsTruncated() throws {
        let (_, path, original) = try small()
        for length in 1..<original.bytes.count {
            let bytes = Data(original.bytes.prefix(length))
            #expect(throws: TileArchiveError.self) { try BundleArchive(data: bytes, path: path) }
            do {
                _ = try BundleArchive(data: bytes, path: path)
            } catch {
                guard case .truncated = error.fault else {
                    Issue.record("length \(length): \(error)")
                    continue
                }
                #expect(error.path == path)
            }
        }
        let file = try TemporaryDirectory()
        try Data(original.bytes.prefix(500)).write(to: file.url.appendingPathComponent("cut.tilepack"))
        #expect(
            throws: TileArchiveError(
                path: file.file("cut.tilepack"), fault: .truncated("the header declares \(original.bytes.count) bytes, the file has 500"))
        ) {
            try BundleArchive(path: file.file("cut.tilepack"))
        }
    }

    @Test func bytesAfterTheEndAreRejected() throws {
        var (_, _, surgery) = try small()
        surgery.bytes.append(0)
        #expect(isCorrupt(surgery.openAndVerify()))
    }

    @Test func payloadChecksumFailureOnReadAndInVerify() throws {
        let (dir, _, original) = try small()
        // Damage the stored (non-LZ4) payload of tile 1/0/0 (40 noise bytes) without resealing.
        let archive = try BundleArchive(data: Data(original.bytes), path: "x")
        let tileBytes = try #require(try archive.tileData(at: F.tile(1, 0, 0)))
        let start = try #require(original.bytes.indices.first { original.bytes[$0...].starts(with: tileBytes) })
        var damaged = original
        damaged.bytes[start + 7] ^= 0x10
        let path = dir.file("damaged.tilepack")
        try damaged.write(to: path)

        let checked = try BundleArchive(path: path)  // opens: header and index are intact
        #expect(throws: TileArchiveError.self) { try checked.tileData(at: F.tile(1, 0, 0)) }
        do {
            _ = try checked.tileData(at: F.tile(1, 0, 0))
        } catch let error as TileArchiveError {
            guard case .checksumMismatch(let region, _, _) = error.fault else {
                Issue.record("\(error)")
                return
            }
            #expect(region.contains("tile 1/0/0"))
            #expect(error.path == path)
        }
        #expect(try checked.tileData(at: F.tile(0, 0, 0)) != nil, "other tiles still read")

        let unchecked = try BundleArchive(path: path, options: .init(verifiesPayloadChecksums: false))
        #expect(try unchecked.tileData(at: F.tile(1, 0, 0)) != tileBytes)
        #expect(throws: TileArchiveError.self) { try unchecked.verify() }
    }

    @Test func lz4BlockThatDecompressesToOtherThanDeclared() throws {
        let (_, _, original) = try small()
        let lz4 = try #require((0..<original.payloadCount).first { original.bytes[original.record($0) + 20] == 1 })
        let raw = original.u32(original.record(lz4) + 12)
        for (declared, expected) in [
            (raw + 1, "decompresses to \(raw) bytes, \(raw + 1) declared"),
            (raw - 1, "is malformed or decompresses to more than the declared \(raw - 1) bytes"),
        ] {
            var lying = original
            lying.put32(declared, at: lying.record(lz4) + 12)
            lying.put32(max(lying.u32(20), declared), at: 20)  // keep the header's largest tile consistent
            lying.reseal()
            let error = lying.openAndVerify()
            #expect(isCorrupt(error))
            #expect(error?.description.contains(expected) == true, "\(String(describing: error))")
        }
    }

    @Test func lyingOffsetsAndLengthsWithValidChecksums() throws {
        let (_, _, original) = try small()
        let cases: [(String, (inout BundleSurgery) -> Void)] = [
            ("payload offset past the data", { $0.put64(1 << 40, at: $0.record(0)) }),
            ("payload offset wrapping around", { $0.put64(UInt64.max - 7, at: $0.record(0)) }),
            (
                "payload length past the data",
                {
                    $0.put32(1 << 30, at: $0.record(1) + 8)
                    $0.put32(1 << 30, at: $0.record(1) + 12)
                }
            ),
            ("unaligned payload offset", { $0.put64($0.u64($0.record(1)) + 1, at: $0.record(1)) }),
            ("overlapping payloads", { $0.put64($0.u64($0.record(0)), at: $0.record(1)) }),
            ("unknown codec", { $0.bytes[$0.record(0) + 20] = 7 }),
            ("stored length differs from raw", { $0.put32($0.u32($0.record(0) + 8) + 1, at: $0.record(0) + 12) }),
            ("index offset", { $0.put64(64, at: 40) }),
            ("index overlapping the header", { $0.put64(0, at: 40) }),
            ("index length", { $0.put64($0.u64(48) + 8, at: 48) }),
            ("data offset", { $0.put64($0.u64(56) - 8, at: 56) }),
            ("data length", { $0.put64($0.u64(64) + 1, at: 64) }),
            ("metadata length", { $0.put64($0.u64(32) + 1, at: 32) }),
            ("payload number out of range", { $0.put32(99, at: $0.refsOffset) }),
            (
                "keys out of order",
                {
                    let k = $0.u64($0.keysOffset + 8)
                    $0.put64($0.u64($0.keysOffset + 16), at: $0.keysOffset + 8)
                    $0.put64(k, at: $0.keysOffset + 16)
                }
            ),
            ("key outside its zoom", { $0.put64(0, at: $0.keysOffset + 8) }),
            (
                "zoom table",
                {
                    $0.put64(2, at: $0.indexOffset)
                    $0.put64(2, at: $0.indexOffset + 8)
                }
            ),
            ("header zooms", { $0.bytes[19] = 5 }),
            ("largest tile too small", { $0.put32(10, at: 20) }),
            ("largest tile over the limit", { $0.put32(1 << 27, at: 20) }),
            ("content kind", { $0.bytes[12] = 9 }),
            ("reserved header byte", { $0.bytes[100] = 1 }),
            (
                "metadata keys not ascending",
                {
                    let m = 128 + 4
                    let keyLength = Int($0.u32(m))
                    $0.bytes[m + 4] = 0x7A  // "format" -> "zormat", after "name"
                    _ = keyLength
                }
            ),
            ("metadata entry count", { $0.put32(1_000_000, at: 128) }),
        ]
        for (name, edit) in cases {
            var lying = original
            edit(&lying)
            lying.reseal()
            let error = lying.openAndVerify()
            #expect(isCorrupt(error), "\(name): \(String(describing: error))")
        }
    }

    @Test func hugeCountsAllocateNothing() throws {
        let (_, _, original) = try small()
        for (tiles, payloads) in [(UInt64(1) << 40, UInt64(1) << 40), (UInt64(UInt32.max), UInt64(UInt32.max)), (UInt64.max, 1)] {
            var lying = original
            lying.put64(tiles, at: 72)
            lying.put64(payloads, at: 80)
            lying.reseal(payloads: false)
            let error = lying.openAndVerify()
            #expect(isCorrupt(error), "\(tiles) tiles: \(String(describing: error))")
        }
        var lying = original
        lying.put64(UInt64.max, at: 32)  // metadata length
        lying.reseal(payloads: false)
        #expect(isCorrupt(lying.openAndVerify()))
    }

    @Test func unknownMajorVersionAndNewerMinor() throws {
        let (_, _, original) = try small()
        var v2 = original
        v2.bytes[8] = 2
        v2.reseal()
        #expect(v2.openAndVerify()?.fault == .unsupportedVersion("bundle format 2.x (this reader reads 1.x)"))
        var minor = original
        minor.bytes[10] = 1
        minor.bytes[100] = 1  // a 1.1 writer may use reserved bytes; a 1.0 reader ignores them
        minor.reseal()
        #expect(minor.openAndVerify() == nil)
    }

    @Test func filesThatAreNotBundles() throws {
        let dir = try TemporaryDirectory()
        let empty = dir.file("empty.tilepack")
        _ = FileManager.default.createFile(atPath: empty, contents: Data())
        #expect(throws: TileArchiveError(path: empty, fault: .notAnArchive(detected: "an empty file"))) { try BundleArchive(path: empty) }
        let missing = dir.file("missing.tilepack")
        #expect(throws: TileArchiveError(path: missing, fault: .cannotOpen(errno: ENOENT, reason: String(cString: strerror(ENOENT))))) {
            try BundleArchive(path: missing)
        }
        #expect(throws: TileArchiveError(path: dir.path, fault: .notAnArchive(detected: "a folder, not a regular file"))) {
            try BundleArchive(path: dir.path)
        }
        let png = dir.file("tile.png")
        try F.pngLike(100, seed: 1).write(to: URL(fileURLWithPath: png))
        #expect(throws: TileArchiveError(path: png, fault: .notAnArchive(detected: "a png image, not a .tilepack bundle"))) {
            try BundleArchive(path: png)
        }
    }

    @Test
    func otherToolsArchivesAreNamed() throws {
        let mbtiles = TestSupport.fixture("martin/world_cities.mbtiles")
        #expect(
            throws: TileArchiveError(path: mbtiles, fault: .notAnArchive(detected: "an SQLite database (MBTiles?), not a .tilepack bundle"))
        ) {
            try BundleArchive(path: mbtiles)
        }
        for name in ["pmtiles/test_fixture_1.pmtiles", "martin/webp2.pmtiles", "pmtiles/invalid_v4.pmtiles"] {
            let path = TestSupport.fixture(name)
            #expect(throws: TileArchiveError(path: path, fault: .notAnArchive(detected: "a PMTiles archive, not a .tilepack bundle"))) {
                try BundleArchive(path: path)
            }
        }
        let truncatedSQLite = TestSupport.fixture("node-mbtiles/corrupt.mbtiles")
        #expect(throws: TileArchiveError.self) { try BundleArchive(path: truncatedSQLite) }
    }

    @Test func seededRandomMutationsNeverCrash() throws {
        // A short in-process version of tools/fuzz-bundle: random multi-byte damage, resealed or not.
        let (_, _, original) = try small()
        var rng = SplitMix64(seed: 42)
        for round in 0..<3000 {
            var damaged = original
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                let offset = Int(rng.next() % UInt64(damaged.bytes.count))
                damaged.bytes[offset] = UInt8(truncatingIfNeeded: rng.next())
            }
            if round % 2 == 0 { damaged.reseal(payloads: round % 4 == 0) }
            if let archive = try? BundleArchive(data: Data(damaged.bytes), path: "m") {
                // Whatever opened must read or fail cleanly.
                _ = try? archive.verify()
                try? archive.forEachTile { _, _ in }
                for tile in [F.tile(0, 0, 0), F.tile(1, 1, 1), F.tile(2, 0, 3)] { _ = try? archive.tileData(at: tile) }
            }
        }
    }

}
