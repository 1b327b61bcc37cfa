import Foundation
import Testing
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

/// Specs/signing-vectors.json (Specs/signing.md §10): tilepack computes every value again and
/// must find the file's. `TILEPACK_WRITE_SIGNING_VECTORS=1 swift test --filter SigningVectorTests`
/// writes the file instead (when the spec changes); `tools/verify_signed.py --vectors` checks it
/// independently.
@Suite struct SigningVectorTests {
    static let path = TestSupport.packageRoot.appendingPathComponent("Specs/signing-vectors.json").path

    static let tiles: [(TileCoordinate, [UInt8])] = [(0, 0, 0), (1, 0, 0), (1, 1, 0), (1, 0, 1), (1, 1, 1), (2, 3, 3), (3, 5, 2)].map {
        (TileCoordinate(uncheckedZoom: $0.0, x: $0.1, y: $0.2), Array("tile \($0.0)/\($0.1)/\($0.2)".utf8))
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// Every value of the vectors, as the JSON object the file holds.
    static func vectors() throws -> [String: Any] {
        let key = try #require(SigningKey(name: "example.org/maps", seed: Array(0..<32).map { UInt8($0) }))
        let metadata = TileMetadata(["name": "vectors", "format": "png"])
        var identity = ContentIdentity(metadata: ContentIdentity.metadataHash(metadata))
        let ordered = tiles.sorted { PMTilesFormat.tileID(of: $0.0) < PMTilesFormat.tileID(of: $1.0) }
        var tileObjects: [[String: Any]] = []
        var leaves: [[UInt8]] = []
        for (tile, bytes) in ordered {
            let tileHash = bytes.withUnsafeBytes { ContentIdentity.TileHasher().fullHash(tile, $0) }
            bytes.withUnsafeBytes { identity.add(tile, $0) }
            let leaf = TreeHasher().leaf(tileHash)
            leaves.append(leaf)
            tileObjects.append([
                "z": tile.zoom, "x": tile.x, "y": tile.y, "bytes": hex(bytes), "tile_id": PMTilesFormat.tileID(of: tile),
                "tile_hash": hex(tileHash), "leaf": hex(leaf),
            ])
        }
        let tree = MerkleTree(leaves: leaves.flatMap { $0 })
        let roots = (0...leaves.count).map { hex(MerkleTree(leaves: leaves.prefix($0).flatMap { $0 }).root) }
        let proofs = [[1], [2, 3], [0, 4, 6]].map { indices -> [String: Any] in
            ["indices": indices, "encoded": hex(TileProof(tree: tree, indices: indices).encoded())]
        }
        let root = SignedRoot(
            origin: "example.org/maps/vectors", treeSize: UInt64(tree.size), rootHash: tree.root, identity: identity, release: 3,
            time: SignedRoot.time(seconds: 1_767_323_045))
        let note = root.signed(by: key)
        let sidecar = SignatureSidecar(
            note: Array(note.utf8), tileIDs: ordered.map { PMTilesFormat.tileID(of: $0.0) }, storedLevels: tree.storedLevels)
        return [
            "key": [
                "name": key.name, "seed": hex(0..<32), "public_key": hex(key.verifier.publicKey),
                "key_id": String(format: "%08x", key.verifier.keyID), "public_line": key.verifier.line, "private_line": key.line,
            ],
            "metadata": metadata.entries.reduce(into: [String: String]()) { $0[$1.key] = $1.value },
            "identity": identity.description, "tiles": tileObjects, "roots": roots,
            "node": ["left": hex(leaves[0]), "right": hex(leaves[1]), "hash": hex(TreeHasher().node(leaves[0], leaves[1]))],
            "proofs": proofs, "signed_root": ["origin": root.origin, "release": 3, "time": root.time, "note": note],
            "sidecar": hex(sidecar.encoded()),
        ]
    }

    @Test func theSpecsVectorsAreWhatTilepackComputes() throws {
        let computed = try JSONSerialization.data(
            withJSONObject: try Self.vectors(), options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        if ProcessInfo.processInfo.environment["TILEPACK_WRITE_SIGNING_VECTORS"] != nil {
            try (computed + Data("\n".utf8)).write(to: URL(fileURLWithPath: Self.path))
        }
        #if canImport(CryptoKit)
        // CryptoKit's signatures differ from RFC 8032's deterministic ones: the note is checked by verification.
        #else
        let stored = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: Self.path))) as? NSDictionary
        let mine = try JSONSerialization.jsonObject(with: computed) as? NSDictionary
        #expect(stored == mine, "Specs/signing-vectors.json differs from what tilepack computes")
        #endif
        let file = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: Self.path))) as! [String: Any]
        let note = (file["signed_root"] as! [String: Any])["note"] as! String
        let key = try VerifierKey(line: (file["key"] as! [String: Any])["public_line"] as! String, source: "vectors")
        #expect(try SignedRoot.open(Array(note.utf8), key: key, source: "vectors").release == 3)
    }
}
