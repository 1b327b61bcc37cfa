import Testing
import TilepackChecksum

/// The platform's hashes give the published test vectors.
@Suite struct DigestTests {
    @Test func md5AndSHA256OfKnownInputs() {
        #expect(Digest.hex(Digest.hash(.md5, Array("abc".utf8))) == "900150983cd24fb0d6963f7d28e17f72")
        #expect(
            Digest.hex(Digest.hash(.sha256, Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            Digest.hex(Digest.hash(.sha256, [UInt8]()))
                == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    /// RFC 4231's test cases 2 (a short key) and 6 (a key longer than the block, hashed first).
    @Test func hmacSHA256MatchesRFC4231() {
        #expect(
            Digest.hex(Digest.hmacSHA256(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8)))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(
            Digest.hex(
                Digest.hmacSHA256(
                    key: [UInt8](repeating: 0xaa, count: 131),
                    message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }
}
