import Foundation
internal import TilepackChecksum
import TilepackCore

/// The constants and byte layout of the `.tilepack` bundle format, version 1.0.
///
/// `Specs/bundle-format.md` is the normative description; this type mirrors it field by field.
@_spi(TilepackInternal) public enum BundleFormat {
    /// The 8 bytes every bundle starts with: `89 54 50 4B 0D 0A 1A 0A` ("\x89TPK\r\n\x1a\n").
    public static let magic: [UInt8] = [0x89, 0x54, 0x50, 0x4B, 0x0D, 0x0A, 0x1A, 0x0A]
    /// The major version this code reads and writes.
    public static let majorVersion: UInt16 = 1
    /// The minor version this code writes.
    public static let minorVersion: UInt16 = 0
    /// The size of the fixed header.
    public static let headerLength = 128
    /// Zoom levels 0...30 each have a count in the zoom table.
    public static let zoomLevelCount = TileCoordinate.maximumZoom + 1
    /// The size of the zoom table at the start of the index.
    public static let zoomTableLength = zoomLevelCount * 8
    /// The size of one payload record.
    public static let payloadRecordLength = 24
    /// Sections and payloads start at multiples of this.
    public static let alignment = 8
    /// The largest decompressed tile a bundle may hold: 64 MiB.
    public static let maximumTileLength = 1 << 26
    /// The largest metadata block: 16 MiB (``MetadataLimits/maximumBytes``).
    public static let maximumMetadataLength = MetadataLimits.maximumBytes
    /// The most tiles, and the most payloads, a bundle may hold: 2^32 - 1.
    public static let maximumCount = Int(UInt32.max)
    /// The largest raw-bitmap width or height.
    public static let maximumBitmapSide = 4096

    /// Payload codecs.
    public enum Codec: UInt8, Sendable {
        /// The payload is the tile's bytes.
        case stored = 0
        /// The payload is one LZ4 block (LZ4 block format, no frame) that decompresses to exactly
        /// the record's raw length.
        case lz4Block = 1
    }

    /// The key of a tile in the index: `(4^z - 1) / 3 + x * 2^z + y`.
    ///
    /// Keys of all tiles of zoom `z` lie in `base(z) ..< base(z + 1)`, and ordering by key is ordering
    /// by (zoom, x, y).
    @inlinable
    public static func key(of tile: TileCoordinate) -> UInt64 {
        zoomBase(tile.zoom) + (UInt64(tile.x) << UInt64(tile.zoom)) + UInt64(tile.y)
    }

    /// `(4^z - 1) / 3`: the number of tiles in all zoom levels below `z`.
    @inlinable
    public static func zoomBase(_ zoom: Int) -> UInt64 {
        ((1 as UInt64) << UInt64(2 * zoom) - 1) / 3
    }

    /// The tile of `key`, known to be at `zoom` (the caller found the zoom from the zoom table).
    @inlinable
    static func tile(key: UInt64, zoom: Int) -> TileCoordinate? {
        let base = zoomBase(zoom)
        guard key >= base else { return nil }
        let offset = key - base
        let side = (1 as UInt64) << UInt64(zoom)
        let x = offset >> UInt64(zoom)
        let y = offset & (side - 1)
        guard x < side else { return nil }
        return TileCoordinate(validatingZoom: zoom, x: Int(x), y: Int(y))
    }

    /// The position of (x, y) along the Hilbert curve that fills the 2^zoom x 2^zoom grid.
    public static func hilbertIndex(x: Int, y: Int, zoom: Int) -> UInt64 {
        var x = UInt64(x), y = UInt64(y)
        let n = (1 as UInt64) << UInt64(zoom)
        var d: UInt64 = 0
        var s = n >> 1
        while s > 0 {
            let rx: UInt64 = (x & s) != 0 ? 1 : 0
            let ry: UInt64 = (y & s) != 0 ? 1 : 0
            d += s * s * ((3 * rx) ^ ry)
            if ry == 0 {
                if rx == 1 {
                    x = s &- 1 &- x
                    y = s &- 1 &- y
                }
                swap(&x, &y)
            }
            // Keep only the bits below s (the rotation above may set higher ones through wrap-around).
            x &= s &- 1
            y &= s &- 1
            s >>= 1
        }
        return d
    }

    /// The order payloads are written in: zoom, then position on the Hilbert curve.
    public static func hilbertKey(of tile: TileCoordinate) -> UInt64 {
        zoomBase(tile.zoom) + hilbertIndex(x: tile.x, y: tile.y, zoom: tile.zoom)
    }

    /// CRC-32 (ISO-HDLC, the CRC of zlib, PNG and gzip) of `bytes`, continuing from `crc`.
    public static func crc32(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        CRC32.checksum(bytes, continuing: crc)
    }

    /// The content code of the header (byte 12 kind, byte 13 code, bytes 14-17 raw width and height).
    static func contentCodes(_ content: TileContent) -> (kind: UInt8, code: UInt8, width: UInt16, height: UInt16) {
        switch content {
        case .encoded(let format):
            let code: UInt8 =
                switch format {
                case .png: 1
                case .jpeg: 2
                case .webp: 3
                case .gif: 4
                case .pbf: 5
                case .json: 6
                }
            return (1, code, 0, 0)
        case .rawBitmap(let layout):
            let code: UInt8 =
                switch layout.pixelFormat {
                case .rgba8888: 1
                case .bgra8888: 2
                case .rgba8888Premultiplied: 3
                case .bgra8888Premultiplied: 4
                case .rgb888: 5
                case .rgb565: 6
                }
            return (2, code, UInt16(clamping: layout.width), UInt16(clamping: layout.height))
        }
    }

    static func content(kind: UInt8, code: UInt8, width: UInt16, height: UInt16) -> TileContent? {
        switch kind {
        case 1:
            guard width == 0, height == 0 else { return nil }
            let formats: [TileFormat] = [.png, .jpeg, .webp, .gif, .pbf, .json]
            guard (1...formats.count).contains(Int(code)) else { return nil }
            return .encoded(formats[Int(code) - 1])
        case 2:
            let formats: [PixelFormat] = [.rgba8888, .bgra8888, .rgba8888Premultiplied, .bgra8888Premultiplied, .rgb888, .rgb565]
            guard (1...formats.count).contains(Int(code)),
                (1...maximumBitmapSide).contains(Int(width)), (1...maximumBitmapSide).contains(Int(height))
            else { return nil }
            return .rawBitmap(RawBitmapLayout(pixelFormat: formats[Int(code) - 1], width: Int(width), height: Int(height)))
        default:
            return nil
        }
    }

    /// The index entry of `tile`: a binary search over the keys of its zoom level (`zoomStarts`:
    /// the first entry of each zoom and one past the last; `key`: an entry's key).
    @inline(__always)
    static func entry(of tile: TileCoordinate, zoomStarts: [Int], key: (Int) -> UInt64) -> Int? {
        let target = BundleFormat.key(of: tile)
        var low = zoomStarts[tile.zoom]
        var high = zoomStarts[tile.zoom + 1]
        while low < high {
            let middle = low + (high - low) / 2
            let found = key(middle)
            if found == target { return middle }
            if found < target { low = middle + 1 } else { high = middle }
        }
        return nil
    }

    /// `value` rounded up to a multiple of ``alignment``.
    @inlinable
    static func aligned(_ value: Int) -> Int { (value + alignment - 1) & ~(alignment - 1) }
}

/// The header fields of a bundle (bytes 0..<128), decoded.
struct BundleHeader: Equatable {
    var minorVersion: UInt16 = BundleFormat.minorVersion
    var contentKind: UInt8 = 0
    var contentCode: UInt8 = 0
    var rawWidth: UInt16 = 0
    var rawHeight: UInt16 = 0
    var minZoom: UInt8 = 0
    var maxZoom: UInt8 = 0
    var maxRawLength: UInt32 = 0
    var fileLength: UInt64 = 0
    var metadataLength: UInt64 = 0
    var indexOffset: UInt64 = 0
    var indexLength: UInt64 = 0
    var dataOffset: UInt64 = 0
    var dataLength: UInt64 = 0
    var tileCount: UInt64 = 0
    var payloadCount: UInt64 = 0
    var metadataCRC: UInt32 = 0
    var indexCRC: UInt32 = 0

    /// The header's 128 bytes, with its CRC in bytes 124..<128.
    func encoded() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: BundleFormat.headerLength)
        func put<T: FixedWidthInteger>(_ value: T, at offset: Int) {
            withUnsafeBytes(of: value.littleEndian) { raw in
                for (i, b) in raw.enumerated() { bytes[offset + i] = b }
            }
        }
        for (i, b) in BundleFormat.magic.enumerated() { bytes[i] = b }
        put(BundleFormat.majorVersion, at: 8)
        put(minorVersion, at: 10)
        put(contentKind, at: 12)
        put(contentCode, at: 13)
        put(rawWidth, at: 14)
        put(rawHeight, at: 16)
        put(minZoom, at: 18)
        put(maxZoom, at: 19)
        put(maxRawLength, at: 20)
        put(fileLength, at: 24)
        put(metadataLength, at: 32)
        put(indexOffset, at: 40)
        put(indexLength, at: 48)
        put(dataOffset, at: 56)
        put(dataLength, at: 64)
        put(tileCount, at: 72)
        put(payloadCount, at: 80)
        put(metadataCRC, at: 88)
        put(indexCRC, at: 92)
        let crc = bytes.withUnsafeBytes { BundleFormat.crc32(UnsafeRawBufferPointer(rebasing: $0[0..<124])) }
        put(crc, at: 124)
        return bytes
    }

    /// Decodes the fields (no validation beyond reading them).
    init(decoding bytes: UnsafeRawBufferPointer) {
        func get<T: FixedWidthInteger>(_ offset: Int, _: T.Type) -> T {
            T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
        }
        minorVersion = get(10, UInt16.self)
        contentKind = get(12, UInt8.self)
        contentCode = get(13, UInt8.self)
        rawWidth = get(14, UInt16.self)
        rawHeight = get(16, UInt16.self)
        minZoom = get(18, UInt8.self)
        maxZoom = get(19, UInt8.self)
        maxRawLength = get(20, UInt32.self)
        fileLength = get(24, UInt64.self)
        metadataLength = get(32, UInt64.self)
        indexOffset = get(40, UInt64.self)
        indexLength = get(48, UInt64.self)
        dataOffset = get(56, UInt64.self)
        dataLength = get(64, UInt64.self)
        tileCount = get(72, UInt64.self)
        payloadCount = get(80, UInt64.self)
        metadataCRC = get(88, UInt32.self)
        indexCRC = get(92, UInt32.self)
    }

    init() {}
}

/// The metadata block: a count, then (key, value) pairs as length-prefixed UTF-8, keys ascending.
enum BundleMetadataCoding {
    static func encode(_ metadata: TileMetadata) -> [UInt8] {
        // Ascending by the keys' UTF-8 bytes (not by Swift's String ordering).
        let pairs = metadata.entries.map { (Array($0.key.utf8), Array($0.value.utf8)) }
            .sorted { $0.0.lexicographicallyPrecedes($1.0) }
        var out: [UInt8] = []
        func putLength(_ n: Int) {
            withUnsafeBytes(of: UInt32(n).littleEndian) { out.append(contentsOf: $0) }
        }
        putLength(pairs.count)
        for (key, value) in pairs {
            putLength(key.count)
            out.append(contentsOf: key)
            putLength(value.count)
            out.append(contentsOf: value)
        }
        return out
    }

    /// Parses a block, or returns the reason it is malformed.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<TileMetadata, MetadataFault> {
        var position = 0
        func length() -> Int? {
            guard bytes.count - position >= 4 else { return nil }
            let n = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self))
            position += 4
            return Int(n)
        }
        func text(_ n: Int) -> String? {
            guard n <= bytes.count - position else { return nil }
            let slice = UnsafeRawBufferPointer(rebasing: bytes[position..<(position + n)])
            position += n
            return String(validating: slice.bindMemory(to: UInt8.self), as: UTF8.self)
        }
        guard let count = length() else { return .failure(.init("the block is shorter than its entry count")) }
        // Each entry takes at least 9 bytes: no count can ask for more entries than that allows.
        guard count <= (bytes.count - position) / 9 else {
            return .failure(.init("\(count) entries cannot fit in \(bytes.count) bytes"))
        }
        guard count <= MetadataLimits.maximumEntries else {
            return .failure(.init("\(count) entries, over the limit of \(MetadataLimits.maximumEntries)"))
        }
        var entries: [String: String] = [:]
        var previousKey: [UInt8]? = nil
        for i in 0..<count {
            guard let keyLength = length(), keyLength > 0, let key = text(keyLength) else {
                return .failure(.init("entry \(i): the key is empty, runs past the block or is not UTF-8"))
            }
            guard let valueLength = length(), let value = text(valueLength) else {
                return .failure(.init("entry \(i) ('\(key.prefix(40))'): the value runs past the block or is not UTF-8"))
            }
            let keyBytes = Array(key.utf8)
            if let previousKey, !previousKey.lexicographicallyPrecedes(keyBytes) {
                return .failure(.init("entry \(i) ('\(key.prefix(40))'): keys are not strictly ascending"))
            }
            previousKey = keyBytes
            entries[key] = value
        }
        guard position == bytes.count else {
            return .failure(.init("\(bytes.count - position) bytes follow the last entry"))
        }
        return .success(TileMetadata(entries))
    }

    struct MetadataFault: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }
    }
}
