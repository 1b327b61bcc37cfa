import Foundation
import Testing
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport
@_spi(TilepackInternal) import TilepackCompression

/// `Gzip.decompress`: a whole member inflated by libdeflate where it is here, into the length its
/// trailer states, and by zlib's streaming inflate otherwise; whichever runs, the same bytes come
/// out of a sound member and the same faults are named for a damaged one.
@Suite struct GzipTests {
    static func decompress(_ bytes: [UInt8], limit: Int = 1 << 24) -> Result<[UInt8], Gzip.Failure> {
        bytes.withUnsafeBytes { Gzip.decompress($0, limit: limit) }
    }

    /// Tile-like bytes: runs of a few values, with noise, so that deflate has work to do.
    static func sample(_ count: Int, seed: UInt64) -> [UInt8] {
        var rng = SplitMix64(seed: seed)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        while bytes.count < count {
            let value = UInt8(truncatingIfNeeded: rng.next())
            let run = Int(rng.next() % 24) + 1
            bytes += [UInt8](repeating: value, count: min(run, count - bytes.count))
        }
        return bytes
    }

    /// The trailer's ISIZE (the last four bytes, little-endian) set to `size`.
    static func withStatedSize(_ member: [UInt8], _ size: UInt32) -> [UInt8] {
        var bytes = member
        for i in 0..<4 { bytes[bytes.count - 4 + i] = UInt8(truncatingIfNeeded: size >> (8 * UInt32(i))) }
        return bytes
    }

    @Test(arguments: [0, 1, 17, 4096, 300_000])
    func soundMembersComeOutWhole(count: Int) throws {
        let original = Self.sample(count, seed: UInt64(count) + 7)
        #expect(try Self.decompress(Gzip.compress(original)).get() == original)
    }

    @Test func aTrailerThatUnderstatesOrOverstatesTheSizeIsDamage() {
        let original = Self.sample(50_000, seed: 3)
        let member = Gzip.compress(original)
        for stated in [UInt32(49_999), 50_001, 1_000_000] {
            guard case .failure(.damaged) = Self.decompress(Self.withStatedSize(member, stated)) else {
                Issue.record("a trailer stating \(stated) bytes for 50,000 was not named damage")
                continue
            }
        }
    }

    @Test func aTrailerPastTheLimitOrPastWhatDeflateCanMakeIsNotTakenAtItsWord() {
        // Stated far beyond 1032:1 of the input, and beyond the limit: no allocation of that size,
        // and the member is judged by what it inflates to.
        let member = Gzip.compress(Self.sample(1000, seed: 5))
        guard case .failure(.damaged) = Self.decompress(Self.withStatedSize(member, .max), limit: Int(UInt32.max) + 1) else {
            Issue.record("a trailer stating 4 GiB was not named damage")
            return
        }
        let zeros = [UInt8](repeating: 0, count: 200_000)
        guard case .failure(.tooLarge(let limit)) = Self.decompress(Gzip.compress(zeros), limit: 100_000) else {
            Issue.record("a member inflating past the limit was not refused at it")
            return
        }
        #expect(limit == 100_000)
    }

    @Test func bytesAfterTheMemberAreNamed() {
        let member = Gzip.compress(Self.sample(10_000, seed: 9))
        guard case .failure(.trailingBytes(let count)) = Self.decompress(member + [1, 2, 3]) else {
            Issue.record("bytes after the member were not named")
            return
        }
        #expect(count == 3)
    }

    @Test func aTruncatedOrBitFlippedMemberIsNamed() {
        let original = Self.sample(20_000, seed: 11)
        let member = Gzip.compress(original)
        guard case .failure(.truncated) = Self.decompress(Array(member.dropLast(9))) else {
            Issue.record("a truncated member was not named truncated")
            return
        }
        var flipped = member
        flipped[flipped.count - 8] ^= 0x01  // the CRC-32
        guard case .failure(.damaged) = Self.decompress(flipped) else {
            Issue.record("a member whose CRC does not match was not named damaged")
            return
        }
    }

    /// `compress(_:level:limit:)`, which the PMTiles writer uses to give up early on a root
    /// directory too large for the first 16 KiB: a member that fits is the unlimited member, byte
    /// for byte; one that does not is `nil`, also when it misses by one byte.
    @Test func aLimitedMemberIsTheWholeMemberOrNothing() {
        for (count, seed) in [(0, 1), (100, 2), (20_000, 3), (300_000, 4)] as [(Int, UInt64)] {
            let original = Self.sample(count, seed: seed)
            let whole = Gzip.compress(original)
            original.withUnsafeBytes { raw in
                #expect(Gzip.compress(raw, limit: whole.count) == whole)
                #expect(Gzip.compress(raw, limit: whole.count + 1000) == whole)
                #expect(Gzip.compress(raw, limit: whole.count - 1) == nil)
                #expect(Gzip.compress(raw, limit: whole.count / 3) == nil)
            }
        }
    }
}
