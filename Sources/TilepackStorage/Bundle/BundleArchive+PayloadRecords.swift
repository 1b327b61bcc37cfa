import Foundation
import TilepackCore

// MARK: Payloads copied by a patch

extension BundleArchive {
    /// Buffers for ``forEachPayload(_:scratch:_:)``, reused from call to call (one per thread).
    package final class PayloadScratch {
        fileprivate var read: UnsafeMutableRawBufferPointer?
        fileprivate var raw: UnsafeMutableRawBufferPointer?
        package init() {}
        deinit {
            read?.deallocate()
            raw?.deallocate()
        }
    }

    /// Every index entry in index order (zoom, then key): its tile, its payload's number and its
    /// payload record (the offset counted from the start of the file), the record checked as a
    /// read checks it. No payload byte is read.
    package func forEachPayloadRecord(_ body: (TileCoordinate, Int, BundleWriter.CopiedPayload) throws -> Void) throws {
        try forEachEntry { entry, tile in
            let number = payloadNumber(ofEntry: entry)
            let payload = try payload(number: number, tile: tile)
            try body(
                tile, number,
                BundleWriter.CopiedPayload(
                    offset: dataOffset + payload.offset, storedLength: payload.storedLength, rawLength: payload.rawLength,
                    crc: payload.crc, codec: payload.codec))
        }
    }

    /// Calls `body` for the payloads `numbers` (ascending) with each one's codec, stored bytes and
    /// tile's bytes (the same buffer for a stored payload), after checking what a copy of the
    /// stored bytes relies on: their CRC-32 (whatever ``Options/verifiesPayloadChecksums`` says),
    /// the LZ4 block's size, and that the padding after the payload is zero. The data section is
    /// read in windows of about ``payloadWindowBytes`` (one read for many neighbours, not one a
    /// payload).
    package func forEachPayload(
        _ numbers: some Sequence<Int>, scratch: PayloadScratch,
        _ body: (_ number: Int, _ codec: BundleFormat.Codec, _ stored: UnsafeRawBufferPointer, _ raw: UnsafeRawBufferPointer) throws -> Void
    ) throws {
        var window = UnsafeRawBufferPointer(start: nil, count: 0)
        var windowStart = 0
        for number in numbers {
            let payload = try payload(number: number, tile: nil)
            let end = min(BundleFormat.aligned(payload.offset + payload.storedLength), dataLength)
            if payload.offset < windowStart || end > windowStart + window.count {
                let length = min(max(end - payload.offset, Self.payloadWindowBytes), dataLength - payload.offset)
                window = try bytes.bytes(at: dataOffset + payload.offset, length: length, scratch: &scratch.read, path: path)
                windowStart = payload.offset
            }
            let piece = UnsafeRawBufferPointer(rebasing: window[(payload.offset - windowStart)..<(end - windowStart)])
            let stored = UnsafeRawBufferPointer(rebasing: piece[0..<payload.storedLength])
            try checkCRC(payload, stored, tile: nil)
            guard piece[payload.storedLength...].allSatisfy({ $0 == 0 }) else {
                throw TileArchiveError(path: path, fault: .corrupt("the padding after payload \(number) is not zero"))
            }
            switch payload.codec {
            case .stored:
                try body(number, .stored, stored, stored)
            case .lz4Block:
                if scratch.raw == nil { scratch.raw = .allocate(byteCount: maximumTileLength, alignment: 16) }
                let target = UnsafeMutableRawBufferPointer(rebasing: scratch.raw![0..<payload.rawLength])
                try decompress(payload, stored, into: target, tile: nil)
                try body(number, .lz4Block, stored, UnsafeRawBufferPointer(target))
            }
        }
    }

    /// The bytes ``forEachPayload(_:scratch:_:)`` reads at once.
    static let payloadWindowBytes = 1 << 20
}

// MARK: Payload signatures

extension BundleArchive {
    /// What identifies a tile's payload without reading it: its CRC-32 and lengths, from the index
    /// and the payload record alone. Two tiles with the same signature hold the same bytes (up to a
    /// CRC-32 collision between payloads of equal lengths), so a server can build a strong ETag from
    /// it with no hashing.
    public struct PayloadSignature: Hashable, Sendable {
        /// The CRC-32 of the payload as stored (the LZ4 block for a compressed payload).
        public var crc32: UInt32
        /// The payload's length as stored.
        public var storedLength: Int
        /// The tile's length once decompressed: the length of the bytes ``withTileBytes(at:_:)`` gives.
        public var rawLength: Int
    }

    /// The signature of `tile`'s payload, or `nil` when there is no such tile: a binary search of
    /// the index and one payload record read, no payload byte touched. The values come from the
    /// index that opening checked; reading the tile still checks the payload itself.
    public func payloadSignature(at tile: TileCoordinate) -> PayloadSignature? {
        guard let entry = entry(of: tile) else { return nil }
        let record = recordsOffset + BundleFormat.payloadRecordLength * payloadNumber(ofEntry: entry)
        let file = bytes.buffer
        return PayloadSignature(
            crc32: UInt32(littleEndian: file.loadUnaligned(fromByteOffset: record + 16, as: UInt32.self)),
            storedLength: Int(UInt32(littleEndian: file.loadUnaligned(fromByteOffset: record + 8, as: UInt32.self))),
            rawLength: Int(UInt32(littleEndian: file.loadUnaligned(fromByteOffset: record + 12, as: UInt32.self))))
    }
}
