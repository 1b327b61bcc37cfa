import Foundation
import Testing
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

/// The tamper matrix of issue 45 (Specs/signing.md §8): each way of changing a signed archive or
/// its sidecar is refused, naming the tile, the file or the key, and a verification writes nothing.
@Suite struct SigningTamperTests {
    static let key = SigningKey(name: "example.org/maps", seed: Array(0..<32).map { UInt8($0) })!
    static let metadata = TileMetadata(["name": "signed", "format": "png"])

    /// 40 tiles over zooms 0-3, each distinct.
    static let tiles: [(TileCoordinate, [UInt8])] = {
        var out: [(TileCoordinate, [UInt8])] = []
        for z in 0...3 {
            for x in 0..<(1 << z) {
                for y in 0..<(1 << z) where out.count < 40 {
                    out.append(
                        (TileCoordinate(uncheckedZoom: z, x: x, y: y), [UInt8](BundleFixtures.pngLike(60 + out.count, seed: out.count))))
                }
            }
        }
        return out
    }()

    enum Format: String, CaseIterable { case tilepack, pmtiles, mbtiles }

    static func write(_ tiles: [(TileCoordinate, [UInt8])], format: Format, to path: String, metadata: TileMetadata = metadata) throws {
        try? FileManager.default.removeItem(atPath: path)
        switch format {
        case .tilepack: try BundleFixtures.write(tiles.map { ($0.0, Data($0.1)) }, to: path, metadata: metadata)
        case .pmtiles:
            let writer = try PMTilesWriter(destination: path, metadata: metadata)
            for (tile, bytes) in tiles { try writer.addTile(at: tile, bytes: bytes) }
            _ = try writer.finish()
        case .mbtiles:
            let writer = try MBTilesWriter(creating: path, metadata: metadata)
            for (tile, bytes) in tiles { try writer.write(bytes, at: tile) }
            try writer.finish()
        }
    }

    /// A signed archive of ``tiles`` (release 5) in `dir`.
    static func signed(_ format: Format, in dir: TemporaryDirectory) throws -> String {
        let path = dir.file("world.\(format.rawValue)")
        try write(tiles, format: format, to: path)
        _ = try ArchiveSignature.sign(archivePath: path, key: key, release: 5, time: 1_767_323_045)
        return path
    }

    /// The error `verify` throws, after checking that it wrote nothing and changed nothing.
    static func refusal(_ path: String, key: VerifierKey = key.verifier, minimumRelease: UInt64 = 0) throws -> SignatureError? {
        let folder = FileSystem.split(path).folder
        let before = try FileManager.default.contentsOfDirectory(atPath: folder).sorted().map {
            ($0, try Data(contentsOf: URL(fileURLWithPath: folder + "/" + $0)))
        }
        defer {
            let after = try? FileManager.default.contentsOfDirectory(atPath: folder).sorted().map {
                ($0, try Data(contentsOf: URL(fileURLWithPath: folder + "/" + $0)))
            }
            #expect(after.map { $0.map(\.0) } == before.map(\.0) && after.map { $0.map(\.1) } == before.map(\.1), "verify wrote nothing")
        }
        do {
            _ = try ArchiveSignature.verify(archivePath: path, key: key, minimumRelease: minimumRelease)
            return nil
        } catch let error as SignatureError {
            return error
        }
    }

    static func problems(_ error: SignatureError?) -> [SignatureError.TileProblem] {
        if case .tiles(_, let problems, _) = error { return problems }
        return []
    }

    @Test(arguments: Format.allCases) func anUntouchedArchiveVerifies(_ format: Format) throws {
        let dir = try TemporaryDirectory()
        let path = try Self.signed(format, in: dir)
        let report = try ArchiveSignature.verify(
            archivePath: path, key: Self.key.verifier, minimumRelease: 5, origin: "example.org/maps/world")
        #expect(report.tiles == Self.tiles.count && report.root.release == 5)
        // Another origin is refused (a receiver that knows the dataset's name).
        #expect(
            try Self.refusal(path).map { _ in true } == nil
                && (try? ArchiveSignature.verify(archivePath: path, key: Self.key.verifier, origin: "example.org/maps/city")) == nil)
    }

    @Test(arguments: Format.allCases) func aFlippedBitInAnyTileIsNamed(_ format: Format) throws {
        let dir = try TemporaryDirectory()
        let path = try Self.signed(format, in: dir)
        for index in Self.tiles.indices {
            var tiles = Self.tiles
            tiles[index].1[index % tiles[index].1.count] ^= 1 << UInt8(index % 8)
            try Self.write(tiles, format: format, to: path)
            let error = try Self.refusal(path)
            #expect(Self.problems(error) == [.init(tile: tiles[index].0, kind: .bytesDiffer)], "tile \(index)")
            #expect(error?.description.contains("tile \(tiles[index].0.zoom)/\(tiles[index].0.x)/\(tiles[index].0.y)") == true)
        }
    }

    @Test(arguments: Format.allCases) func swappedAndMovedTilesAreNamed(_ format: Format) throws {
        let dir = try TemporaryDirectory()
        let path = try Self.signed(format, in: dir)
        var swapped = Self.tiles
        (swapped[3].1, swapped[17].1) = (swapped[17].1, swapped[3].1)
        try Self.write(swapped, format: format, to: path)
        #expect(Set(Self.problems(try Self.refusal(path)).map(\.tile)) == [swapped[3].0, swapped[17].0])
        // Tile 6 moved to a coordinate the archive did not have (zoom 4).
        var moved = Self.tiles
        let from = moved[6].0
        let to = TileCoordinate(uncheckedZoom: 4, x: 9, y: 9)
        moved[6].0 = to
        try Self.write(moved, format: format, to: path)
        let problems = Self.problems(try Self.refusal(path))
        #expect(
            problems.contains(.init(tile: to, kind: .notSigned)) && problems.contains(.init(tile: from, kind: .missing))
                && problems.count == 2)
    }

    @Test func hashesRewrittenToMatchAreRefusedNamingTheSidecar() throws {
        let dir = try TemporaryDirectory()
        let path = try Self.signed(.tilepack, in: dir)
        let sidecarPath = path + ".tpsig"
        let original = try SignatureSidecar.read(path: sidecarPath)
        var tiles = Self.tiles
        tiles[9].1[0] ^= 0x80
        try Self.write(tiles, format: .tilepack, to: path)
        // The tree and locator recomputed for the tampered tiles, under the original signed root;
        // the tile hash index rewritten to match too (it is no evidence).
        let archive = try openTileArchive(path: path)
        let leaves = try ArchiveSignature.leaves(of: archive, path: path)
        let forged = SignatureSidecar(
            note: original.note, tileIDs: leaves.ids, storedLevels: MerkleTree(leaves: leaves.hashes).storedLevels)
        try Data(forged.encoded()).write(to: URL(fileURLWithPath: sidecarPath))
        try TileHashIndex.updateSidecar(of: path, writes: true)
        guard case .sidecar(let named, let reason) = try Self.refusal(path) else {
            Issue.record("not refused as a sidecar")
            return
        }
        #expect(named == sidecarPath && reason.contains("do not give its signed root"))
        // One stored leaf hash changed alone.
        var stored = original
        stored.storedLevels[0][5] ^= 1
        try Data(stored.encoded()).write(to: URL(fileURLWithPath: sidecarPath))
        #expect({ if case .sidecar = try? Self.refusal(path) { return true } else { return false } }())
    }

    @Test func aTreeWithStoredUpperLevelsRoundTripsAndItsUpperHashesAreChecked() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("big.pmtiles")
        // 700 tiles of zoom 5 (1,024 places): levels 0 to 10 stored, each ending in a partial node.
        let tiles = (0..<700).map { i in (TileCoordinate(uncheckedZoom: 5, x: i % 32, y: i / 32), Array("tile \(i)".utf8)) }
        try Self.write(tiles, format: .pmtiles, to: path)
        _ = try ArchiveSignature.sign(archivePath: path, key: Self.key, release: 1, time: 0)
        var sidecar = try SignatureSidecar.read(path: path + ".tpsig")
        #expect(
            sidecar.storedLevels.map(\.count) == [700, 350, 175, 88, 44, 22, 11, 6, 3, 2, 1].map { 32 * $0 }
                && sidecar.storedFences.count == 3)
        #expect(try ArchiveSignature.verify(archivePath: path, key: Self.key.verifier).tiles == 700)
        sidecar.storedLevels[8][40] ^= 1
        try Data(sidecar.encoded()).write(to: URL(fileURLWithPath: path + ".tpsig"))
        guard case .sidecar(_, let reason) = try Self.refusal(path) else {
            Issue.record("a changed level-8 hash not refused")
            return
        }
        #expect(reason.contains("do not give its signed root"))
    }

    /// A sidecar of the first layout (`TPSIG001`: every 8th level stored) is refused by name, saying
    /// what to do (re-sign), by `verify`, by a side-loaded pack's open and by the independent verifier.
    @Test func aSidecarOfTheFirstLayoutIsRefusedByName() throws {
        let dir = try TemporaryDirectory()
        let path = try Self.signed(.pmtiles, in: dir)
        let sidecar = try SignatureSidecar.read(path: path + ".tpsig")
        // TPSIG001's bytes for 40 leaves: the same header, root, fences and ids, then level 0 alone.
        var old = SignatureSidecar(note: sidecar.note, tileIDs: sidecar.tileIDs, storedLevels: [sidecar.storedLevels[0]]).encoded()
        old.replaceSubrange(0..<8, with: Array("TPSIG001".utf8))
        try Data(old).write(to: URL(fileURLWithPath: path + ".tpsig"))
        guard case .sidecar(let named, let reason) = try Self.refusal(path) else {
            Issue.record("a TPSIG001 sidecar was not refused")
            return
        }
        #expect(named == path + ".tpsig" && reason.contains("TPSIG001") && reason.contains("re-sign"), "\(reason)")
        #expect(throws: SignatureError.sidecar(path: path + ".tpsig", reason: reason)) {
            try VerifiedTileArchive(base: try openTileArchive(path: path), key: Self.key.verifier)
        }
    }

    /// Every byte of the sidecar counts: any damage (a flipped bit, a byte dropped or added, the
    /// end cut) is refused with a SignatureError, never accepted, never a crash.
    @Test func anyDamageToTheSidecarIsRefused() throws {
        let dir = try TemporaryDirectory()
        let path = try Self.signed(.pmtiles, in: dir)
        let whole = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path + ".tpsig")))
        // A byte of the padding after the signed root (which the signature does not cover).
        let noteLength = Int(whole[8]) | Int(whole[9]) << 8
        try #require(noteLength % 8 != 0, "the fixture's signed root leaves padding")
        var padded = whole
        padded[32 + noteLength] = 1
        try Data(padded).write(to: URL(fileURLWithPath: path + ".tpsig"))
        guard case .sidecar(_, let reason) = try Self.refusal(path) else {
            Issue.record("non-zero padding not refused")
            return
        }
        #expect(reason.contains("padding"))
        var random = SplitMix64(seed: 45)
        for round in 0..<300 {
            var bytes = whole
            TestSupport.damage(&bytes, random: &random, times: 1, cutting: true)
            if bytes == whole { continue }
            try Data(bytes).write(to: URL(fileURLWithPath: path + ".tpsig"))
            do {
                _ = try ArchiveSignature.verify(archivePath: path, key: Self.key.verifier)
                Issue.record("round \(round): a damaged sidecar verified")
            } catch is SignatureError {}
        }
    }

    @Test func aRootSignedByAnotherKeyOrAlteredIsRefusedNamingTheKey() throws {
        let dir = try TemporaryDirectory()
        let path = try Self.signed(.pmtiles, in: dir)
        // Re-signed by another key of the same name (a forger's): not signed by the trusted key.
        let forger = try SigningKey.generate(name: Self.key.name)
        var tiles = Self.tiles
        tiles[0].1[0] ^= 1
        try Self.write(tiles, format: .pmtiles, to: path)
        _ = try ArchiveSignature.sign(archivePath: path, key: forger, release: 6, time: 0)
        #expect(
            try Self.refusal(path)
                == .notSignedBy(key: Self.key.verifier.description, path: path + ".tpsig", signers: [forger.verifier.description]))
        // The trusted key's signature kept, the body changed under it.
        try Self.write(Self.tiles, format: .pmtiles, to: path)
        _ = try ArchiveSignature.sign(archivePath: path, key: Self.key, release: 5, time: 0)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path + ".tpsig")))
        let at = try #require(bytes.firstRange(of: Array("release 5".utf8)))
        bytes[at.upperBound - 1] = UInt8(ascii: "9")
        try Data(bytes).write(to: URL(fileURLWithPath: path + ".tpsig"))
        #expect(try Self.refusal(path) == .badSignature(key: Self.key.verifier.description, path: path + ".tpsig"))
    }

    @Test func aTruncatedSidecarAnOlderReleaseAndOtherMetadataAreRefused() throws {
        let dir = try TemporaryDirectory()
        let path = try Self.signed(.tilepack, in: dir)
        let sidecar = path + ".tpsig"
        let whole = try Data(contentsOf: URL(fileURLWithPath: sidecar))
        for cut in [1, 32, whole.count - 40, whole.count - 10] {
            try whole.prefix(whole.count - cut).write(to: URL(fileURLWithPath: sidecar))
            guard case .sidecar(let named, let reason) = try Self.refusal(path) else {
                Issue.record("cut \(cut) not refused")
                continue
            }
            #expect(named == sidecar && reason.contains("truncated"), "cut \(cut): \(reason)")
        }
        try whole.write(to: URL(fileURLWithPath: sidecar))
        // Release 5 replayed to a receiver that has release 6.
        #expect(try Self.refusal(path, minimumRelease: 6) == .olderRelease(path: sidecar, release: 5, minimum: 6))
        // The tiles the signed ones, the metadata not.
        try Self.write(Self.tiles, format: .tilepack, to: path, metadata: TileMetadata(["name": "renamed", "format": "png"]))
        guard case .metadata(let archive, _, _) = try Self.refusal(path) else {
            Issue.record("other metadata not refused")
            return
        }
        #expect(archive == path)
        // No sidecar at all.
        try FileManager.default.removeItem(atPath: sidecar)
        guard case .sidecar(_, let reason) = try Self.refusal(path) else {
            Issue.record("a missing sidecar not refused")
            return
        }
        #expect(reason.contains("missing"))
    }
}

/// tools/verify_signed.py, written from Specs/signing.md alone, agrees with tilepack.
@Suite struct SigningWitnessTests {
    @Test(.needs(.cryptographyPython)) func theIndependentVerifierAgreesOnTheVectors() throws {
        let result = try TestSupport.runPython(script: "tools/verify_signed.py", ["--vectors", SigningVectorTests.path])
        #expect(result.status == 0, "\(result.errors)")
    }

    @Test(.needs(.cryptographyPython)) func theIndependentVerifierAgreesOnASignedMBTiles() throws {
        let dir = try TemporaryDirectory()
        let path = try SigningTamperTests.signed(.mbtiles, in: dir)
        try Data(SigningTamperTests.key.verifier.line.utf8).write(to: URL(fileURLWithPath: dir.file("k.pub")))
        let mine = try ArchiveSignature.verify(archivePath: path, key: SigningTamperTests.key.verifier)
        let result = try TestSupport.runPython(script: "tools/verify_signed.py", [path, "--key", dir.file("k.pub")])
        #expect(result.status == 0, "\(result.errors)")
        let theirs = try JSONSerialization.jsonObject(with: result.output) as? [String: Any]
        #expect(theirs?["root"] as? String == Data(mine.root.rootHash).base64EncodedString())
        #expect(theirs?["identity"] as? String == mine.root.identity.description && theirs?["tiles"] as? Int == mine.tiles)
        // And it refuses what tilepack refuses: a flipped bit.
        var tiles = SigningTamperTests.tiles
        tiles[11].1[2] ^= 4
        try SigningTamperTests.write(tiles, format: .mbtiles, to: path)
        let refused = try TestSupport.runPython(script: "tools/verify_signed.py", [path, "--key", dir.file("k.pub")])
        #expect(refused.status == 1 && refused.errors.contains("tiles differ"), "\(refused.errors)")
    }
}
