import Foundation
import Testing
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

/// Signed archives (Specs/signing.md): keys, the tree, proofs, the signed root, the sidecar.
@Suite struct SigningTests {
    static func bytes(hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    static let seed = Array(0..<32).map { UInt8($0) }
    static let key = SigningKey(name: "example.org/maps", seed: seed)!

    // MARK: Keys

    @Test func ed25519IsRFC8032() throws {
        // RFC 8032 §7.1, TEST 1 (the empty message) and TEST 2 (one byte, 0x72).
        let key = try #require(
            SigningKey(name: "rfc", seed: Self.bytes(hex: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")))
        #expect(key.verifier.publicKey == Self.bytes(hex: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"))
        #if !canImport(CryptoKit)  // CryptoKit's signatures add randomness; libcrypto's are RFC 8032's
        #expect(
            key.sign([])
                == Self.bytes(
                    hex:
                        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
                ))
        #endif
        let second = try #require(
            SigningKey(name: "rfc2", seed: Self.bytes(hex: "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb")))
        #expect(second.verifier.publicKey == Self.bytes(hex: "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"))
        let signature = Self.bytes(
            hex:
                "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
        )
        #expect(second.verifier.isValid(signature: signature, of: [0x72]))
        #expect(!second.verifier.isValid(signature: signature, of: [0x73]))
        #expect(!key.verifier.isValid(signature: signature, of: [0x72]))
    }

    @Test func keyLinesRoundTripAndRefuseEdits() throws {
        let key = try SigningKey.generate(name: "maps.example.org/world")
        let publicKey = try VerifierKey(line: key.verifier.line, source: "p")
        #expect(publicKey == key.verifier)
        #expect(key.line.hasPrefix("PRIVATE+KEY+maps.example.org/world+"))
        let dir = try TemporaryDirectory()
        try key.write(privateKeyTo: dir.file("k.key"), publicKeyTo: dir.file("k.pub"), overwrite: false)
        #expect(try SigningKey(contentsOf: dir.file("k.key")).verifier == key.verifier)
        #expect(try VerifierKey(contentsOf: dir.file("k.pub")) == key.verifier)
        let mode = try FileManager.default.attributesOfItem(atPath: dir.file("k.key"))[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(throws: (any Error).self) {
            try key.write(privateKeyTo: dir.file("k.key"), publicKeyTo: dir.file("k.pub"), overwrite: false)
        }

        // A key id that is not the name's and key's, a renamed key, a private key given as public.
        var parts = key.verifier.line.split(separator: "+").map(String.init)
        parts[1] = parts[1] == "00000000" ? "00000001" : "00000000"
        #expect(throws: SignatureError.self) { try VerifierKey(line: parts.joined(separator: "+"), source: "p") }
        let renamed = key.verifier.line.replacingOccurrences(of: "maps.example.org/world", with: "maps.example.org/other")
        #expect(throws: SignatureError.self) { try VerifierKey(line: renamed, source: "p") }
        #expect(throws: SignatureError.self) { try VerifierKey(line: key.line, source: "p") }
        #expect(throws: SignatureError.self) { try SigningKey.generate(name: "has space") }
        #expect(throws: SignatureError.self) { try SigningKey.generate(name: "has+plus") }
    }

    // MARK: The tree

    /// RFC 6962's MTH, written from its definition.
    static func naiveRoot(_ leaves: [[UInt8]]) -> [UInt8] {
        let hasher = TreeHasher()
        if leaves.isEmpty { return Digest256.empty }
        if leaves.count == 1 { return leaves[0] }
        var k = 1
        while k * 2 < leaves.count { k *= 2 }
        return hasher.node(naiveRoot(Array(leaves[..<k])), naiveRoot(Array(leaves[k...])))
    }

    enum Digest256 {
        static let empty = SigningTests.bytes(hex: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    static func leaves(_ n: Int) -> [[UInt8]] {
        (0..<n).map { i in TreeHasher().leaf([UInt8](repeating: UInt8(i & 255), count: 31) + [UInt8(i >> 8)]) }
    }

    @Test func theRootIsRFC6962sTreeHash() {
        for n in [0, 1, 2, 3, 4, 5, 7, 8, 9, 255, 256, 257, 300, 1000] {
            let leaves = Self.leaves(n)
            let tree = MerkleTree(leaves: leaves.flatMap { $0 })
            #expect(tree.root == Self.naiveRoot(leaves), "n = \(n)")
            #expect(tree.storedLevels.count == MerkleTree.levelCount(size: n))
            // Every level (Specs/signing.md §5): node j of level l is MTH(D[j·2^l : min((j+1)·2^l, n)]).
            for (level, nodes) in tree.storedLevels.enumerated() {
                #expect(nodes.count == 32 * MerkleTree.nodeCount(size: n, level: level), "n = \(n), level \(level)")
                for j in 0..<(nodes.count / 32) {
                    let span = Array(leaves[(j << level)..<min((j + 1) << level, n)])
                    #expect(Array(nodes[(32 * j)..<(32 * j + 32)]) == Self.naiveRoot(span), "n = \(n), level \(level), node \(j)")
                }
            }
        }
    }

    @Test func proofsProveTheirLeavesAndNothingElse() throws {
        var random = SplitMix64(seed: 45)
        for n in [1, 2, 3, 7, 64, 100, 257] {
            let leaves = Self.leaves(n)
            let tree = MerkleTree(leaves: leaves.flatMap { $0 })
            for _ in 0..<20 {
                let indices = Array(
                    Set((0..<Int.random(in: 1...min(n, 9), using: &random)).map { _ in Int.random(in: 0..<n, using: &random) })
                ).sorted()
                let proof = tree.proof(for: indices)
                let proven = indices.map { leaves[$0] }
                #expect(MerkleTree.root(size: n, indices: indices, leaves: proven, proof: proof) == tree.root)
                if indices.count == 1 { #expect(proof.count <= Int(log2(Double(n)).rounded(.up))) }
                // A changed leaf, a missing or an extra hash.
                var wrong = proven
                wrong[0][0] ^= 1
                #expect(MerkleTree.root(size: n, indices: indices, leaves: wrong, proof: proof) != tree.root)
                if !proof.isEmpty {
                    #expect(MerkleTree.root(size: n, indices: indices, leaves: proven, proof: Array(proof.dropLast())) == nil)
                }
                #expect(MerkleTree.root(size: n, indices: indices, leaves: proven, proof: proof + [tree.root]) == nil)
            }
        }
    }

    @Test func aTruncatedOrPaddedEncodedProofIsRefused() throws {
        let tree = MerkleTree(leaves: Self.leaves(100).flatMap { $0 })
        let proof = TileProof(tree: tree, indices: [3, 50, 51])
        let encoded = proof.encoded()
        #expect(try TileProof(decoding: encoded, source: "p") == proof)
        for cut in [1, 31, 32, encoded.count - 30] {
            #expect(throws: SignatureError.self) { try TileProof(decoding: Array(encoded.dropLast(cut)), source: "p.tpproof") }
        }
        #expect(throws: SignatureError.self) { try TileProof(decoding: encoded + [0], source: "p.tpproof") }
    }

    // MARK: The signed root

    @Test func aSignedRootVerifiesOnlyWithItsKeyAndBody() throws {
        let root = SignedRoot(
            origin: "example.org/maps/world", treeSize: 7, rootHash: Array(repeating: 7, count: 32),
            identity: ContentIdentity(tileCount: 7, tiles: 1, metadata: 2), release: 3, time: "2026-01-02T03:04:05Z")
        let note = root.signed(by: Self.key)
        #expect(try SignedRoot.open(Array(note.utf8), key: Self.key.verifier, source: "s") == root)
        let other = try SigningKey.generate(name: "example.org/maps")
        #expect(throws: SignatureError.notSignedBy(key: other.verifier.description, path: "s", signers: [Self.key.verifier.description])) {
            try SignedRoot.open(Array(note.utf8), key: other.verifier, source: "s")
        }
        let altered = note.replacingOccurrences(of: "release 3", with: "release 9")
        #expect(throws: SignatureError.badSignature(key: Self.key.verifier.description, path: "s")) {
            try SignedRoot.open(Array(altered.utf8), key: Self.key.verifier, source: "s")
        }
    }
}
