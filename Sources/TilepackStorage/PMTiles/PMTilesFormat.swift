import Foundation
import TilepackCore

/// The PMTiles v3 layout (see `Specs/pmtiles.md`): the 127-byte header, tile ids, varints and
/// directories. Pure functions over bytes, shared by the reader and the writer.
public enum PMTilesFormat {
    /// `PMTiles`, then the spec version byte.
    public static let magic: [UInt8] = Array("PMTiles".utf8)
    public static let version: UInt8 = 3
    public static let headerLength = 127
    /// The first request of a reader: the header and the root directory fit in these bytes.
    public static let initialFetchLength = 16384
    /// The deepest chain of directories a reader follows (root, then leaves of leaves).
    public static let maximumDirectoryDepth = 4
    /// The largest directory (decompressed) or metadata a reader accepts.
    public static let maximumDirectoryLength = 1 << 25
    public static let maximumMetadataLength = 1 << 24
    /// The largest tile a reader accepts.
    public static let maximumTileLength = 1 << 26

    /// Compression of directories, metadata or tiles (header bytes 97 and 98).
    public enum Compression: UInt8, Sendable, Hashable, Codable, CustomStringConvertible {
        case unknown = 0, none = 1, gzip = 2, brotli = 3, zstd = 4
        public var description: String {
            switch self {
            case .unknown: "unknown"
            case .none: "none"
            case .gzip: "gzip"
            case .brotli: "brotli"
            case .zstd: "zstd"
            }
        }
    }

    /// The tile type (header byte 99). Unknown values are kept as their number.
    public struct TileType: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        public var rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let unknown = TileType(rawValue: 0)
        public static let mvt = TileType(rawValue: 1)
        public static let png = TileType(rawValue: 2)
        public static let jpeg = TileType(rawValue: 3)
        public static let webp = TileType(rawValue: 4)
        public static let avif = TileType(rawValue: 5)
        public static let mlt = TileType(rawValue: 6)

        public var description: String {
            switch rawValue {
            case 0: "unknown"
            case 1: "mvt"
            case 2: "png"
            case 3: "jpeg"
            case 4: "webp"
            case 5: "avif"
            case 6: "mlt"
            default: "type \(rawValue)"
            }
        }

        /// The tile format tilepack knows for this type, if any.
        public var tileFormat: TileFormat? {
            switch rawValue {
            case 1: .pbf
            case 2: .png
            case 3: .jpeg
            case 4: .webp
            default: nil
            }
        }

        /// The type of tiles of `format` (JSON and GIF have none: unknown).
        public init(_ format: TileFormat) {
            switch format {
            case .pbf: self = .mvt
            case .png: self = .png
            case .jpeg: self = .jpeg
            case .webp: self = .webp
            case .gif, .json: self = .unknown
            }
        }
    }

    // MARK: Tile ids

    /// The tile id: the tiles of all lower zooms, then the position on the zoom's Hilbert curve.
    public static func tileID(of tile: TileCoordinate) -> UInt64 {
        BundleFormat.hilbertKey(of: tile)
    }

    /// The first id of `zoom`: `(4^zoom - 1) / 3`.
    static func firstID(ofZoom zoom: Int) -> UInt64 { BundleFormat.zoomBase(zoom) }

    /// One past the last id tilepack can address (zoom ``TileCoordinate/maximumZoom``).
    static let idLimit: UInt64 = firstID(ofZoom: TileCoordinate.maximumZoom + 1)

    /// The zoom of a tile id below `idLimit`.
    static func zoom(ofID id: UInt64) -> Int {
        var zoom = 0
        while zoom < TileCoordinate.maximumZoom, firstID(ofZoom: zoom + 1) <= id { zoom += 1 }
        return zoom
    }

    /// The tile of an id, or `nil` for an id beyond zoom ``TileCoordinate/maximumZoom``.
    public static func tile(ofID id: UInt64) -> TileCoordinate? {
        guard id < idLimit else { return nil }
        let zoom = zoom(ofID: id)
        var position = id - firstID(ofZoom: zoom)
        var x: UInt64 = 0, y: UInt64 = 0
        var s: UInt64 = 1
        let n: UInt64 = 1 << UInt64(zoom)
        while s < n {
            let rx = 1 & (position >> 1)
            let ry = 1 & (position ^ rx)
            if ry == 0 {
                if rx == 1 {
                    x = s - 1 - x
                    y = s - 1 - y
                }
                swap(&x, &y)
            }
            x += s * rx
            y += s * ry
            position >>= 2
            s <<= 1
        }
        return TileCoordinate(validatingZoom: zoom, x: Int(x), y: Int(y))
    }

    // MARK: Varints

    static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// Reads varints from a buffer, never past its end.
    struct VarintReader {
        let bytes: UnsafeRawBufferPointer
        var position = 0

        init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        var remaining: Int { bytes.count - position }

        mutating func next() -> UInt64? {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while position < bytes.count {
                let byte = bytes[position]
                position += 1
                if shift == 63 && byte > 1 { return nil }  // more than 64 bits
                result |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return result }
                shift += 7
                if shift > 63 { return nil }
            }
            return nil
        }
    }

    // MARK: Directories

    /// One directory entry: a run of `runLength` tiles with the same bytes (`runLength > 0`), or a
    /// leaf directory (`runLength == 0`).
    public struct Entry: Hashable, Sendable {
        public var tileID: UInt64
        public var offset: UInt64
        public var length: UInt32
        public var runLength: UInt32

        public init(tileID: UInt64, offset: UInt64, length: UInt32, runLength: UInt32) {
            self.tileID = tileID
            self.offset = offset
            self.length = length
            self.runLength = runLength
        }
    }

    /// Serialises entries (uncompressed): count, id deltas, run lengths, lengths, offsets (0 for an
    /// entry that follows its predecessor, else offset + 1).
    public static func encodeDirectory(_ entries: [Entry]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(entries.count * 6 + 8)
        appendVarint(UInt64(entries.count), to: &bytes)
        var last: UInt64 = 0
        for entry in entries {
            appendVarint(entry.tileID - last, to: &bytes)
            last = entry.tileID
        }
        for entry in entries { appendVarint(UInt64(entry.runLength), to: &bytes) }
        for entry in entries { appendVarint(UInt64(entry.length), to: &bytes) }
        for (i, entry) in entries.enumerated() {
            if i > 0, entry.offset == entries[i - 1].offset + UInt64(entries[i - 1].length) {
                appendVarint(0, to: &bytes)
            } else {
                appendVarint(entry.offset + 1, to: &bytes)
            }
        }
        return bytes
    }

    /// Parses a decompressed directory, checking everything a lookup relies on: ids strictly
    /// ascending and below `idLimit`, runs that do not overlap the next entry, lengths above
    /// zero, tiles inside `tileDataLength` and leaves inside `leafDataLength`, no trailing bytes.
    static func decodeDirectory(_ bytes: UnsafeRawBufferPointer, tileDataLength: UInt64, leafDataLength: UInt64)
        -> Result<[Entry], DirectoryFault>
    {
        var reader = VarintReader(bytes)
        guard let declared = reader.next() else { return .failure(DirectoryFault("the entry count is not a varint")) }
        // Each entry takes at least four bytes (four varints).
        guard declared <= UInt64(reader.remaining / 4) else {
            return .failure(DirectoryFault("declares \(declared) entries in \(bytes.count) bytes"))
        }
        let count = Int(declared)
        var entries = [Entry](repeating: Entry(tileID: 0, offset: 0, length: 0, runLength: 0), count: count)
        var id: UInt64 = 0
        for i in 0..<count {
            guard let delta = reader.next() else { return .failure(DirectoryFault("entry \(i): tile id delta is not a varint")) }
            let (sum, overflow) = id.addingReportingOverflow(delta)
            guard !overflow, sum < idLimit else {
                return .failure(DirectoryFault("entry \(i): tile id is beyond zoom \(TileCoordinate.maximumZoom)"))
            }
            if i > 0, delta == 0 { return .failure(DirectoryFault("entry \(i): tile ids are not strictly ascending")) }
            id = sum
            entries[i].tileID = id
        }
        for i in 0..<count {
            guard let run = reader.next(), run <= UInt64(UInt32.max) else {
                return .failure(DirectoryFault("entry \(i): run length is not a 32-bit varint"))
            }
            entries[i].runLength = UInt32(run)
        }
        for i in 0..<count {
            guard let length = reader.next(), length > 0, length <= UInt64(UInt32.max) else {
                return .failure(DirectoryFault("entry \(i): length is zero or not a 32-bit varint"))
            }
            entries[i].length = UInt32(length)
        }
        for i in 0..<count {
            guard let value = reader.next() else { return .failure(DirectoryFault("entry \(i): offset is not a varint")) }
            if value == 0 {
                guard i > 0 else {
                    return .failure(DirectoryFault("entry 0: offset 0 means 'after the previous entry', and there is none"))
                }
                let (after, overflow) = entries[i - 1].offset.addingReportingOverflow(UInt64(entries[i - 1].length))
                guard !overflow else {
                    return .failure(
                        DirectoryFault(
                            "entry \(i): follows entry \(i - 1) (offset \(entries[i - 1].offset), \(entries[i - 1].length) bytes), past 2^64"
                        ))
                }
                entries[i].offset = after
            } else {
                entries[i].offset = value - 1
            }
        }
        guard reader.remaining == 0 else {
            return .failure(DirectoryFault("\(reader.remaining) bytes follow the last entry"))
        }
        if let fault = checkPlaces(of: entries, tileDataLength: tileDataLength, leafDataLength: leafDataLength) {
            return .failure(fault)
        }
        return .success(entries)
    }

    /// The first entry that lies outside its section (`tileDataLength` for tiles, `leafDataLength`
    /// for leaves), whose run overlaps the next entry, or that is over the size limits.
    private static func checkPlaces(of entries: [Entry], tileDataLength: UInt64, leafDataLength: UInt64) -> DirectoryFault? {
        let count = entries.count
        for (i, entry) in entries.enumerated() {
            let limit = entry.runLength == 0 ? leafDataLength : tileDataLength
            guard entry.offset <= limit, UInt64(entry.length) <= limit - entry.offset else {
                let what = entry.runLength == 0 ? "leaf directory" : "tile data"
                return DirectoryFault(
                    "entry \(i): \(entry.length) bytes at offset \(entry.offset) lie outside the \(what) section (\(limit) bytes)")
            }
            if entry.runLength > 0 {
                let end = entry.tileID + UInt64(entry.runLength)
                let next = i + 1 < count ? entries[i + 1].tileID : idLimit
                guard end <= next else {
                    return DirectoryFault("entry \(i): a run of \(entry.runLength) tiles from id \(entry.tileID) overlaps the next entry")
                }
                guard Int(entry.length) <= maximumTileLength else {
                    return DirectoryFault("entry \(i): a tile of \(entry.length) bytes, over the limit of \(maximumTileLength)")
                }
            } else {
                guard Int(entry.length) <= maximumDirectoryLength else {
                    return DirectoryFault("entry \(i): a leaf directory of \(entry.length) bytes, over the limit of \(maximumDirectoryLength)")
                }
            }
        }
        return nil
    }

    /// The tiles of the ids `ids` (inside one zoom, below `idLimit`) as the fewest aligned squares:
    /// a block of `4^k` ids starting at a multiple of `4^k` on the zoom's Hilbert curve is the square
    /// of side `2^k` under one tile of zoom `zoom - k`. A run of any length is at most `6 * zoom + 1`
    /// squares, so counts, extents and filters work on runs without visiting their tiles.
    public static func squares(of ids: Range<UInt64>) -> [TileRange] {
        guard !ids.isEmpty, ids.upperBound <= idLimit else { return [] }
        let zoom = zoom(ofID: ids.lowerBound)
        let first = firstID(ofZoom: zoom)
        var position = ids.lowerBound - first
        let end = min(ids.upperBound, firstID(ofZoom: zoom + 1)) - first
        var squares: [TileRange] = []
        while position < end {
            var k = 0
            while k < zoom, position % (UInt64(1) << UInt64(2 * (k + 1))) == 0, position + (UInt64(1) << UInt64(2 * (k + 1))) <= end {
                k += 1
            }
            let corner = tile(ofID: first + position)!
            let side = 1 << k
            let x = (corner.x >> k) << k, y = (corner.y >> k) << k
            squares.append(TileRange(uncheckedZoom: zoom, columns: x...(x + side - 1), rows: y...(y + side - 1)))
            position += UInt64(1) << UInt64(2 * k)
        }
        return squares
    }

    /// `ids` cut at the zoom boundaries: one range of ids per zoom it touches.
    public static func split(byZoom ids: Range<UInt64>) -> [(zoom: Int, ids: Range<UInt64>)] {
        var parts: [(zoom: Int, ids: Range<UInt64>)] = []
        var id = ids.lowerBound
        let end = min(ids.upperBound, idLimit)
        while id < end {
            let zoom = zoom(ofID: id)
            let zoomEnd = min(end, firstID(ofZoom: zoom + 1))
            parts.append((zoom, id..<zoomEnd))
            id = zoomEnd
        }
        return parts
    }

    struct DirectoryFault: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }
    }
}

/// The PMTiles v3 header (127 bytes, little-endian).
public struct PMTilesHeader: Hashable, Sendable {
    public var rootOffset: UInt64 = 0
    public var rootLength: UInt64 = 0
    public var metadataOffset: UInt64 = 0
    public var metadataLength: UInt64 = 0
    public var leafOffset: UInt64 = 0
    public var leafLength: UInt64 = 0
    public var tileDataOffset: UInt64 = 0
    public var tileDataLength: UInt64 = 0
    public var addressedTiles: UInt64 = 0
    public var tileEntries: UInt64 = 0
    public var tileContents: UInt64 = 0
    public var clustered = false
    public var internalCompression: PMTilesFormat.Compression = .gzip
    public var tileCompression: PMTilesFormat.Compression = .none
    public var tileType: PMTilesFormat.TileType = .unknown
    public var minZoom: UInt8 = 0
    public var maxZoom: UInt8 = 0
    public var minLonE7: Int32 = 0
    public var minLatE7: Int32 = 0
    public var maxLonE7: Int32 = 0
    public var maxLatE7: Int32 = 0
    public var centerZoom: UInt8 = 0
    public var centerLonE7: Int32 = 0
    public var centerLatE7: Int32 = 0

    public init() {}

    /// Decodes the fields of a header whose magic and version were checked; throws for a byte
    /// outside the spec's values.
    init(decoding bytes: UnsafeRawBufferPointer) throws(PMTilesFormat.DirectoryFault) {
        func u64(_ at: Int) -> UInt64 { UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self)) }
        func i32(_ at: Int) -> Int32 { Int32(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: Int32.self)) }
        rootOffset = u64(8)
        rootLength = u64(16)
        metadataOffset = u64(24)
        metadataLength = u64(32)
        leafOffset = u64(40)
        leafLength = u64(48)
        tileDataOffset = u64(56)
        tileDataLength = u64(64)
        addressedTiles = u64(72)
        tileEntries = u64(80)
        tileContents = u64(88)
        guard bytes[96] <= 1 else { throw .init("clustered byte is \(bytes[96]), not 0 or 1") }
        clustered = bytes[96] == 1
        guard let directories = PMTilesFormat.Compression(rawValue: bytes[97]) else {
            throw .init("internal compression \(bytes[97]) is not one the spec defines (0-4)")
        }
        guard let tiles = PMTilesFormat.Compression(rawValue: bytes[98]) else {
            throw .init("tile compression \(bytes[98]) is not one the spec defines (0-4)")
        }
        internalCompression = directories
        tileCompression = tiles
        tileType = PMTilesFormat.TileType(rawValue: bytes[99])
        minZoom = bytes[100]
        maxZoom = bytes[101]
        minLonE7 = i32(102)
        minLatE7 = i32(106)
        maxLonE7 = i32(110)
        maxLatE7 = i32(114)
        centerZoom = bytes[118]
        centerLonE7 = i32(119)
        centerLatE7 = i32(123)
    }

    /// The 127 header bytes.
    public func encoded() -> [UInt8] {
        var bytes = PMTilesFormat.magic + [PMTilesFormat.version]
        func put<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        put(rootOffset)
        put(rootLength)
        put(metadataOffset)
        put(metadataLength)
        put(leafOffset)
        put(leafLength)
        put(tileDataOffset)
        put(tileDataLength)
        put(addressedTiles)
        put(tileEntries)
        put(tileContents)
        bytes.append(clustered ? 1 : 0)
        bytes.append(internalCompression.rawValue)
        bytes.append(tileCompression.rawValue)
        bytes.append(tileType.rawValue)
        bytes.append(minZoom)
        bytes.append(maxZoom)
        put(minLonE7)
        put(minLatE7)
        put(maxLonE7)
        put(maxLatE7)
        bytes.append(centerZoom)
        put(centerLonE7)
        put(centerLatE7)
        assert(bytes.count == PMTilesFormat.headerLength)
        return bytes
    }
}
