import Foundation
import Testing
import TilepackChecksum

@testable import TilepackStorage

@Suite struct BackgroundMD5Tests {
    /// Fed in uneven pieces across many 1 MiB chunks, it gives the MD5 of the whole stream.
    @Test func matchesAnMD5OfTheWholeStream() {
        var bytes = [UInt8](repeating: 0, count: (7 << 20) + 12_345)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for i in bytes.indices {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            bytes[i] = UInt8(truncatingIfNeeded: state >> 33)
        }
        let background = BackgroundMD5()
        var at = 0
        var piece = 1
        bytes.withUnsafeBytes { all in
            while at < all.count {
                let n = min(piece, all.count - at)
                background.update(UnsafeRawBufferPointer(rebasing: all[at..<(at + n)]))
                at += n
                piece = piece * 3 % 700_001 + 1
            }
        }
        #expect(background.finalize() == bytes.withUnsafeBytes { Digest.hash(.md5, $0) })
    }

    /// Large arrays handed over as they are (issue 19), among small pieces that are copied, in
    /// any mix: the MD5 of the stream in order.
    @Test func sharedArraysAndCopiedPiecesHashInOrder() {
        var stream: [UInt8] = []
        let background = BackgroundMD5()
        for i in 0..<90 {
            let length = [5, BackgroundMD5.sharedLength - 1, BackgroundMD5.sharedLength, 100_000, 1 << 20, 3][i % 6]
            let piece = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) }
            stream += piece
            if i % 4 == 0 {
                piece.withUnsafeBytes { background.update($0) }
            } else {
                background.update(sharing: piece)
            }
        }
        #expect(background.finalize() == stream.withUnsafeBytes { Digest.hash(.md5, $0) })
    }

    /// RFC 1321's test suite, through the platform's MD5 (libcrypto on Linux, CryptoKit on Apple).
    @Test(arguments: [
        ("", "D41D8CD98F00B204E9800998ECF8427E"),
        ("a", "0CC175B9C0F1B6A831C399E269772661"),
        ("abc", "900150983CD24FB0D6963F7D28E17F72"),
        ("message digest", "F96B697D7CB7938D525A2F31AAF161D0"),
        ("12345678901234567890123456789012345678901234567890123456789012345678901234567890", "57EDF4A22BE3C955AC49DA2E2107B67A"),
    ])
    func md5MatchesRFC1321(input: String, expected: String) {
        #expect(MBTilesAggregateHash.hex(Array(input.utf8).withUnsafeBytes { Digest.hash(.md5, $0) }) == expected)
        let pieces = Digest(.md5)
        for byte in input.utf8 { [byte].withUnsafeBytes { pieces.update($0) } }
        #expect(MBTilesAggregateHash.hex(pieces.finalize()) == expected)
    }

    @Test func nothingFedIsTheMD5OfNothing() {
        #expect(MBTilesAggregateHash.hex(BackgroundMD5().finalize()) == MBTilesAggregateHash.empty)
    }

    @Test func cancelEndsTheThreadWithQueuedWork() {
        let background = BackgroundMD5()
        let chunk = [UInt8](repeating: 7, count: 3 << 20)
        chunk.withUnsafeBytes { for _ in 0..<4 { background.update($0) } }
        background.cancel()  // returns once the thread has ended
    }
}
