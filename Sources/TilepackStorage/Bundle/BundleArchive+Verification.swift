import Foundation
import TilepackCore

/// Checking every byte of an opened bundle: what opening leaves to the reads (payloads, their
/// places and padding, the payloads' use), for `tilepack verify`.
extension BundleArchive {
    /// What ``verify(checksums:)`` checked.
    public struct Verification: Hashable, Sendable {
        public var tileCount: Int
        public var payloadCount: Int
        /// Payloads stored LZ4-compressed.
        public var lz4PayloadCount: Int
        /// Bytes of payloads as stored.
        public var storedBytes: Int
        /// Bytes of payloads once decompressed.
        public var rawBytes: Int
    }

    /// Checks every byte of the bundle: opening already checked the header, metadata and index;
    /// this checks each payload (record, place, CRC-32, LZ4 size, raw-bitmap size), that payloads
    /// follow each other with zero padding exactly as the format prescribes, that every payload is
    /// used by a tile and that the header's largest tile length is right.
    ///
    /// - Parameter checksums: `false` checks the layout only (records, ranges, padding, every
    ///   payload used), leaving each payload's CRC and LZ4 block to the reads of its tiles (which
    ///   check them), so that a caller reading every tile on several threads does not do it twice.
    public func verify(checksums: Bool = true) throws(TileArchiveError) -> Verification {
        func fail(_ text: String) -> TileArchiveError { TileArchiveError(path: path, fault: .corrupt(text)) }
        var used = [UInt64](repeating: 0, count: (payloadCount + 63) / 64)
        for entry in 0..<indexedTileCount {
            let number = payloadNumber(ofEntry: entry)
            used[number >> 6] |= 1 << UInt64(number & 63)
        }
        var scratch: UnsafeMutableRawBufferPointer? = nil
        var readScratch: UnsafeMutableRawBufferPointer? = nil
        defer {
            scratch?.deallocate()
            readScratch?.deallocate()
        }
        var result = Verification(tileCount: indexedTileCount, payloadCount: payloadCount, lz4PayloadCount: 0, storedBytes: 0, rawBytes: 0)
        var expectedOffset = 0
        var largest = 0
        for number in 0..<payloadCount {
            guard used[number >> 6] & (1 << UInt64(number & 63)) != 0 else {
                throw fail("payload \(number) is used by no tile")
            }
            let payload = try payload(number: number, tile: nil)
            guard payload.offset == expectedOffset else {
                throw fail("payload \(number) starts at data offset \(payload.offset), the layout puts it at \(expectedOffset)")
            }
            let end = payload.offset + payload.storedLength
            let next = number + 1 < payloadCount ? BundleFormat.aligned(end) : end
            // The payload and the padding after it, in one piece.
            let piece = try bytes.bytes(
                at: dataOffset + payload.offset, length: min(next, dataLength) - payload.offset,
                scratch: &readScratch, path: path)
            let stored = UnsafeRawBufferPointer(rebasing: piece[0..<payload.storedLength])
            if checksums { try checkCRC(payload, stored, tile: nil) }
            guard piece[payload.storedLength...].allSatisfy({ $0 == 0 }) else {
                throw fail("the padding after payload \(number) is not zero")
            }
            expectedOffset = next
            if payload.codec == .lz4Block {
                if checksums {
                    if scratch == nil {
                        scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: maximumTileLength, alignment: 16)
                    }
                    if let buffer = scratch {
                        try decompress(
                            payload, stored, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<payload.rawLength]), tile: nil)
                    }
                }
                result.lz4PayloadCount += 1
            }
            largest = max(largest, payload.rawLength)
            result.storedBytes += payload.storedLength
            result.rawBytes += payload.rawLength
        }
        guard expectedOffset == dataLength else {
            throw fail("the data section is \(dataLength) bytes, its payloads end at \(expectedOffset)")
        }
        guard largest == maximumTileLength else {
            throw fail("the header declares the largest tile as \(maximumTileLength) bytes, the largest is \(largest)")
        }
        return result
    }
}
