import Foundation

/// Hand-made PMTiles v3 files for hostile-input tests: a header and an uncompressed root
/// directory written field by field (no writer that would refuse the lie), then the tile data.
public enum HostilePMTiles {
    /// One directory entry as stored: `offset` is written as given (plus one, as the format
    /// stores it), or as 0 ("after the previous entry") when `nil`.
    public struct Entry {
        public var tileID: UInt64
        public var runLength: UInt64
        public var length: UInt64
        public var offset: UInt64?
        public init(tileID: UInt64, runLength: UInt64, length: UInt64, offset: UInt64?) {
            self.tileID = tileID
            self.runLength = runLength
            self.length = length
            self.offset = offset
        }
    }

    public static func varint(_ value: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
        return bytes
    }

    /// An uncompressed directory of `entries` (ids as deltas, in the spec's column order).
    public static func directory(_ entries: [Entry]) -> [UInt8] {
        var bytes = varint(UInt64(entries.count))
        var last: UInt64 = 0
        for entry in entries {
            bytes += varint(entry.tileID &- last)
            last = entry.tileID
        }
        for entry in entries { bytes += varint(entry.runLength) }
        for entry in entries { bytes += varint(entry.length) }
        for entry in entries { bytes += varint(entry.offset.map { $0 &+ 1 } ?? 0) }
        return bytes
    }

    /// The whole file: header, root `directory`, metadata `{}`, no leaves, `tileData`.
    /// - Parameters:
    ///   - tileCompression: header byte 98 (1 none, 2 gzip).
    ///   - tileType: header byte 99 (2 png).
    ///   - tileDataLength: the header's tile data length (by default the bytes given).
    public static func file(
        root: [UInt8], tileData: [UInt8], minZoom: UInt8 = 0, maxZoom: UInt8,
        tileCompression: UInt8 = 1, tileType: UInt8 = 2, addressedTiles: UInt64 = 0,
        tileDataLength: UInt64? = nil
    ) -> [UInt8] {
        let metadata = Array("{}".utf8)
        var header = Array("PMTiles".utf8) + [3]
        func put64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { header += $0 } }
        func put32(_ value: Int32) { withUnsafeBytes(of: value.littleEndian) { header += $0 } }
        let rootOffset: UInt64 = 127
        let metadataOffset = rootOffset + UInt64(root.count)
        let leafOffset = metadataOffset + UInt64(metadata.count)
        put64(rootOffset)
        put64(UInt64(root.count))
        put64(metadataOffset)
        put64(UInt64(metadata.count))
        put64(leafOffset)
        put64(0)
        put64(leafOffset)
        put64(tileDataLength ?? UInt64(tileData.count))
        put64(addressedTiles)
        put64(0)
        put64(0)
        header += [0, 1, tileCompression, tileType, minZoom, maxZoom]
        put32(-1_800_000_000)
        put32(-850_000_000)
        put32(1_800_000_000)
        put32(850_000_000)
        header.append(minZoom)
        put32(0)
        put32(0)
        precondition(header.count == 127)
        return header + root + metadata + tileData
    }

    /// The smallest PNG-looking tile bytes (the signature and a little more).
    public static let pngBytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0]

    /// 2^32 - 1 tiles in one run from tile id 0 (zooms 0 to 16), all the same 12 bytes: a file of
    /// under 200 bytes that addresses 4,294,967,295 tiles.
    public static func billionsRun() -> [UInt8] {
        let root = directory([Entry(tileID: 0, runLength: UInt64(UInt32.max), length: UInt64(pngBytes.count), offset: 0)])
        return file(root: root, tileData: pngBytes, maxZoom: 16)
    }
}
