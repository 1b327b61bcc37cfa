import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackTestSupport

@_spi(TilepackInternal) @testable import TilepackStorage

/// Issue 45: a verified extract (`extract SOURCE OUT --key`, Specs/signing.md §7.1) of a signed
/// archive, local or read by range at a URL, and the tamper matrix: every way of changing the
/// source, its sidecar, the extract or the extract's proof is refused by name, and nothing is written.
@Suite(.serialized) struct SignedExtractTests {
    static let key = SigningKey(name: "example.org/maps", seed: Array(0..<32).map { UInt8($0) })!
    static let forger = SigningKey(name: "example.org/maps", seed: Array(32..<64).map { UInt8($0) })!
    static let metadata = TileMetadata(["name": "world", "format": "png"])
    /// A box over central Europe: 1 + 1 + 1 + 2 + 4 + ... tiles a zoom.
    static let box = GeoBoundingBox(west: 5, south: 44, east: 17, north: 48)

    /// Zooms 0-6 of the world, 5,461 distinct tiles (levels 0 to 13 of the tree).
    static let tiles: [(TileCoordinate, [UInt8])] = {
        var out: [(TileCoordinate, [UInt8])] = []
        for zoom in 0...6 {
            for x in 0..<(1 << zoom) {
                for y in 0..<(1 << zoom) {
                    out.append((TileCoordinate(uncheckedZoom: zoom, x: x, y: y), HostilePMTiles.pngBytes + Array("\(zoom)/\(x)/\(y)".utf8)))
                }
            }
        }
        return out
    }()

    static func write(_ tiles: [(TileCoordinate, [UInt8])], to path: String) throws {
        try? FileManager.default.removeItem(atPath: path)
        let writer = try PMTilesWriter(destination: path, metadata: metadata)
        for (tile, bytes) in tiles.sorted(by: { PMTilesFormat.tileID(of: $0.0) < PMTilesFormat.tileID(of: $1.0) }) {
            try writer.addTile(at: tile, bytes: bytes)
        }
        _ = try writer.finish()
    }

    static func writeMBTiles(_ tiles: [(TileCoordinate, [UInt8])], to path: String) throws {
        try? FileManager.default.removeItem(atPath: path)
        let writer = try MBTilesWriter(creating: path, metadata: metadata)
        for (tile, bytes) in tiles { try writer.write(bytes, at: tile) }
        try writer.finish()
    }

    static func allTiles(_ path: String) throws -> [(TileCoordinate, [UInt8])] {
        var out: [(TileCoordinate, [UInt8])] = []
        try openTileArchive(path: path).forEachTile { out.append(($0, [UInt8]($1))) }
        return out.sorted { PMTilesFormat.tileID(of: $0.0) < PMTilesFormat.tileID(of: $1.0) }
    }

    static func inBox(_ tile: TileCoordinate) -> Bool { (try? box.intersects(tile)) == true }

    /// Extracts `source` (a path or URL) into `out` with `key`; the error's text, or `nil`.
    static func extract(_ source: String, _ out: String, key: VerifierKey = key.verifier, minimumRelease: UInt64 = 0) -> String? {
        do {
            var options = ExtractOptions()
            options.bounds = box
            options.verification = try ExtractVerification(source: source, key: key, minimumRelease: minimumRelease)
            _ = try TileExtractor.run(source: source, destination: out, options: options)
            return nil
        } catch {
            return "\(error)"
        }
    }

    static func listing(_ dir: TemporaryDirectory) throws -> [String: Data] {
        var out: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
            out[name] = try Data(contentsOf: URL(fileURLWithPath: dir.file(name)))
        }
        return out
    }

    /// One case of the matrix: how to tamper, then what the refusal must name.
    struct Case: CustomStringConvertible {
        var description: String
        var tamper: (_ source: String, _ extract: String) throws -> Void
        /// `true`: the extract is refused (the source was tampered); `false`: `verify EXTRACT --key`.
        var atExtract: Bool
        var minimumRelease: UInt64 = 0
        var named: [String]
    }

    static func flip(_ tiles: inout [(TileCoordinate, [UInt8])], _ i: Int) { tiles[i].1[tiles[i].1.count - 1] ^= 0x10 }

    static var cases: [Case] {
        let inside = tiles.indices.filter { inBox(tiles[$0].0) && tiles[$0].0.zoom >= 4 }
        let (a, b) = (inside[1], inside[3])
        let tileName = { (i: Int) in "tile \(tiles[i].0.zoom)/\(tiles[i].0.x)/\(tiles[i].0.y)" }
        let outside = tiles.indices.first { !inBox(tiles[$0].0) && tiles[$0].0.zoom == 6 }!
        func source(_ change: @escaping (inout [(TileCoordinate, [UInt8])]) -> Void) -> (String, String) throws -> Void {
            { path, _ in
                var t = tiles
                change(&t)
                try write(t, to: path)
            }
        }
        func output(_ change: @escaping (inout [(TileCoordinate, [UInt8])]) -> Void) -> (String, String) throws -> Void {
            { _, out in
                var t = try allTiles(out)
                change(&t)
                try writeMBTiles(t, to: out)
            }
        }
        func index(_ t: [(TileCoordinate, [UInt8])], _ i: Int) -> Int { t.firstIndex { $0.0 == tiles[i].0 }! }
        return [
            Case(description: "source: a flipped bit", tamper: source { flip(&$0, a) }, atExtract: true, named: [tileName(a), "differ"]),
            Case(
                description: "source: two tiles swapped", tamper: source { ($0[a].1, $0[b].1) = ($0[b].1, $0[a].1) }, atExtract: true,
                named: [tileName(a), tileName(b)]),
            Case(
                description: "source: a tile moved into the box",
                tamper: source { $0[outside].0 = TileCoordinate(uncheckedZoom: 7, x: 66, y: 45) }, atExtract: true,
                named: ["tile 7/66/45", "not in the signed tree"]),
            Case(
                description: "source: the hashes rewritten to match",
                tamper: { path, _ in
                    var t = tiles
                    flip(&t, a)
                    try write(t, to: path)
                    let original = try SignatureSidecar.read(path: path + ".tpsig")
                    let leaves = try ArchiveSignature.leaves(of: try openTileArchive(path: path), path: path)
                    let forged = SignatureSidecar(
                        note: original.note, tileIDs: leaves.ids, storedLevels: MerkleTree(leaves: leaves.hashes).storedLevels)
                    try Data(forged.encoded()).write(to: URL(fileURLWithPath: path + ".tpsig"))
                }, atExtract: true, named: [".tpsig", "do not give its signed root"]),
            Case(
                description: "source: an older release replayed", tamper: { _, _ in }, atExtract: true, minimumRelease: 8,
                named: [".tpsig", "release 7 is older than release 8"]),
            Case(
                description: "source: a root signed by another key",
                tamper: { path, _ in
                    _ = try ArchiveSignature.sign(archivePath: path, key: forger, release: 9, time: 0)
                }, atExtract: true, named: ["not signed by the key \(key.verifier)"]),
            Case(
                description: "source: a truncated sidecar",
                tamper: { path, _ in
                    let bytes = try Data(contentsOf: URL(fileURLWithPath: path + ".tpsig"))
                    try bytes.prefix(bytes.count - 100).write(to: URL(fileURLWithPath: path + ".tpsig"))
                }, atExtract: true, named: [".tpsig", "truncated"]),
            Case(
                description: "extract: a flipped bit", tamper: output { flip(&$0, index($0, a)) }, atExtract: false,
                named: [tileName(a), "differ"]),
            Case(
                description: "extract: two tiles swapped",
                tamper: output { t in
                    let (i, j) = (index(t, a), index(t, b))
                    (t[i].1, t[j].1) = (t[j].1, t[i].1)
                }, atExtract: false, named: [tileName(a), tileName(b)]),
            Case(
                description: "extract: a tile moved", tamper: output { $0[index($0, a)].0 = TileCoordinate(uncheckedZoom: 7, x: 1, y: 1) },
                atExtract: false, named: ["tile 7/1/1: not in the signed tree", "\(tileName(a)): a signed tile the archive lacks"]),
            Case(
                description: "extract: its leaves rewritten to match",
                tamper: { _, out in
                    var t = try allTiles(out)
                    flip(&t, index(t, a))
                    try writeMBTiles(t, to: out)
                    var signature = try ExtractSignature.read(path: out + ".tpsig")
                    let leaves = try ArchiveSignature.leaves(of: try openTileArchive(path: out), path: out)
                    signature.leaves = leaves.hashes
                    try Data(signature.encoded()).write(to: URL(fileURLWithPath: out + ".tpsig"))
                }, atExtract: false, named: [".tpsig", "do not give its signed root"]),
            Case(
                description: "extract: a truncated proof",
                tamper: { _, out in
                    let bytes = try Data(contentsOf: URL(fileURLWithPath: out + ".tpsig"))
                    try bytes.prefix(bytes.count - 32).write(to: URL(fileURLWithPath: out + ".tpsig"))
                }, atExtract: false, named: [".tpsig", "truncated"]),
            Case(
                description: "extract: a root signed by another key",
                tamper: { _, out in
                    var signature = try ExtractSignature.read(path: out + ".tpsig")
                    let root = try SignedRoot.open(signature.note, key: key.verifier, source: "")
                    signature.note = Array(root.signed(by: forger).utf8)
                    try Data(signature.encoded()).write(to: URL(fileURLWithPath: out + ".tpsig"))
                }, atExtract: false, named: ["not signed by the key \(key.verifier)"]),
            Case(
                description: "extract: an older release replayed", tamper: { _, _ in }, atExtract: false, minimumRelease: 8,
                named: ["release 7 is older than release 8"]),
        ]
    }

    /// The tamper matrix: each case against a fresh signed source (release 7) served by a
    /// loopback server, whose extract is read by range requests; the extract an MBTiles file.
    @Test func theTamperMatrixIsRefusedByNameAndNothingIsWritten() throws {
        let dir = try TemporaryDirectory("signed-extract")
        let server = try LoopbackHTTPServer(files: dir.url)
        defer { server.stop() }
        let source = dir.file("world.pmtiles")
        let out = dir.file("alps.mbtiles")
        for test in Self.cases {
            try Self.write(Self.tiles, to: source)
            _ = try ArchiveSignature.sign(archivePath: source, key: Self.key, release: 7, time: 0)
            try? FileManager.default.removeItem(atPath: out)
            try? FileManager.default.removeItem(atPath: out + ".tpsig")
            if !test.atExtract {
                #expect(Self.extract("\(server.baseURL)/world.pmtiles", out) == nil, "\(test)")
            }
            try test.tamper(source, out)
            let before = try Self.listing(dir)
            let error: String?
            if test.atExtract {
                error = Self.extract("\(server.baseURL)/world.pmtiles", out, minimumRelease: test.minimumRelease)
            } else {
                do {
                    _ = try ArchiveSignature.verify(archivePath: out, key: Self.key.verifier, minimumRelease: test.minimumRelease)
                    error = nil
                } catch let refusal {
                    error = "\(refusal)"
                }
            }
            #expect(error != nil, "\(test): not refused")
            for part in test.named { #expect(error?.contains(part) == true, "\(test): \(error ?? "accepted") does not name \(part)") }
            #expect(try Self.listing(dir) == before, "\(test): something was written")
        }
    }
}

extension SignedExtractTests {
    /// A verified remote extract reads the sidecar in a few range requests beside the unverified
    /// extract's, and its proof is Specs/signing.md §6's minimal one for the extract's tiles.
    @Test func aRemoteVerifiedExtractReadsTheProofByRange() throws {
        let dir = try TemporaryDirectory("signed-extract")
        let server = try LoopbackHTTPServer(files: dir.url)
        defer { server.stop() }
        let source = dir.file("world.pmtiles")
        try Self.write(Self.tiles, to: source)
        _ = try ArchiveSignature.sign(archivePath: source, key: Self.key, release: 7, time: 0)
        var options = ExtractOptions()
        options.bounds = Self.box
        _ = try TileExtractor.run(source: "\(server.baseURL)/world.pmtiles", destination: dir.file("plain.mbtiles"), options: options)
        let plain = server.requests.count
        let verification = try ExtractVerification(source: "\(server.baseURL)/world.pmtiles", key: Self.key.verifier)
        options.verification = verification
        let report = try TileExtractor.run(
            source: "\(server.baseURL)/world.pmtiles", destination: dir.file("alps.mbtiles"), options: options)
        let sidecarRequests = server.requests.dropFirst(plain).filter { $0.path.hasSuffix(".tpsig") }
        let archiveRequests = server.requests.count - plain - sidecarRequests.count
        let signature = try ExtractSignature.read(path: dir.file("alps.mbtiles.tpsig"))
        let tree = MerkleTree(leaves: try SignatureSidecar.read(path: source + ".tpsig").storedLevels[0])
        // The archive read as the unverified extract reads it; the sidecar in at most 2 + one per
        // zoom (7) requests: its header, root and fences, the tile-id groups, the proof's hashes.
        #expect(archiveRequests == plain, "\(archiveRequests) archive requests, unverified \(plain)")
        #expect(sidecarRequests.count <= 2 + 7, "\(sidecarRequests.count) sidecar requests")
        #expect(signature.proof.hashes == tree.proof(for: signature.proof.indices))
        // Each proof hash is one stored node (Specs/signing.md §5): the hash bytes read are the proof's.
        #expect(verification.reader.hashBytesRead == 32 * signature.proof.hashes.count)
        #expect(signature.tileIDs.count == report.tiles)
    }

    /// `verify URL --key`: the archive and its `.tpsig` read by range; a changed tile named.
    @Test func aRemoteArchiveVerifiesAgainstItsSidecarByRange() throws {
        let dir = try TemporaryDirectory("signed-verify")
        let server = try LoopbackHTTPServer(files: dir.url)
        defer { server.stop() }
        let source = dir.file("world.pmtiles")
        try Self.write(Self.tiles, to: source)
        _ = try ArchiveSignature.sign(archivePath: source, key: Self.key, release: 7, time: 0)
        let url = "\(server.baseURL)/world.pmtiles"
        let report = try ExtractVerification.verifyRemote(url, key: Self.key.verifier, minimumRelease: 7)
        #expect(report.tiles == Self.tiles.count && report.sidecar == url + ".tpsig")
        var tiles = Self.tiles
        Self.flip(&tiles, 100)
        try Self.write(tiles, to: source)
        #expect(throws: SignatureError.tiles(archive: url, problems: [.init(tile: tiles[100].0, kind: .bytesDiffer)], count: 1)) {
            try ExtractVerification.verifyRemote(url, key: Self.key.verifier, minimumRelease: 7)
        }
        #expect(throws: SignatureError.self) { try ExtractVerification.verifyRemote(url, key: Self.forger.verifier, minimumRelease: 0) }
    }

    /// `info URL --key`: the signed root checked by range without a tile: a root of another key and
    /// a changed level-8 hash are refused; the archive itself is not read.
    @Test func theSignedRootOfARemoteArchiveIsCheckedWithoutATile() throws {
        let dir = try TemporaryDirectory("signed-info")
        let server = try LoopbackHTTPServer(files: dir.url)
        defer { server.stop() }
        let source = dir.file("world.pmtiles")
        try Self.write(Self.tiles, to: source)
        _ = try ArchiveSignature.sign(archivePath: source, key: Self.key, release: 7, time: 0)
        let url = "\(server.baseURL)/world.pmtiles"
        let root = try ExtractVerification.signedRoot(of: url, key: Self.key.verifier, minimumRelease: 7)
        #expect(root.release == 7 && root.treeSize == UInt64(Self.tiles.count))
        #expect(server.requests.allSatisfy { $0.path.hasSuffix(".tpsig") }, "\(server.requests.map(\.target))")
        #expect(throws: OperationError.self) { try ExtractVerification.signedRoot(of: url, key: Self.forger.verifier, minimumRelease: 0) }
        // A node of level 8 changed (5,461 leaves: levels 0 to 13; info checks levels 5 to 13).
        var sidecar = try SignatureSidecar.read(path: source + ".tpsig")
        sidecar.storedLevels[8][40] ^= 1
        try Data(sidecar.encoded()).write(to: URL(fileURLWithPath: source + ".tpsig"))
        do {
            _ = try ExtractVerification.signedRoot(of: url, key: Self.key.verifier, minimumRelease: 0)
            Issue.record("a changed level-8 hash was accepted")
        } catch {
            #expect("\(error)".contains("world.pmtiles.tpsig: its stored hashes do not give its signed root"), "\(error)")
        }
    }
}
