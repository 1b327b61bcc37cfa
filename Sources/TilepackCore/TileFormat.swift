import Foundation

/// What a tile's bytes are, recognised from the bytes themselves (never from a file name).
public enum TileFormat: String, Hashable, Sendable, CaseIterable, Codable, CustomStringConvertible {
    case png
    /// JPEG; the MBTiles `format` value is `jpg`.
    case jpeg = "jpg"
    case webp
    case gif
    /// A Mapbox Vector Tile (protobuf), gzip-compressed or not; the MBTiles `format` value is `pbf`.
    case pbf
    /// A JSON document (martin's `json` tiles, UTFGrid).
    case json

    /// The MBTiles `format` metadata value (`png`, `jpg`, `webp`, `gif`, `pbf`, `json`).
    public var metadataValue: String { rawValue }

    /// Parses an MBTiles `format` value, accepting the common spellings (`jpeg`, `mvt`).
    public init?(metadataValue: String) {
        switch metadataValue.lowercased() {
        case "png": self = .png
        case "jpg", "jpeg": self = .jpeg
        case "webp": self = .webp
        case "gif": self = .gif
        case "pbf", "mvt": self = .pbf
        case "json", "geojson": self = .json
        default: return nil
        }
    }

    public var description: String { rawValue }

    /// The usual file extension for a tile of this format.
    public var fileExtension: String { rawValue }

    /// The MIME type served for this format.
    public var mimeType: String {
        switch self {
        case .png: "image/png"
        case .jpeg: "image/jpeg"
        case .webp: "image/webp"
        case .gif: "image/gif"
        case .pbf: "application/vnd.mapbox-vector-tile"
        case .json: "application/json"
        }
    }

    /// Whether the format is a raster image that decodes to a bitmap.
    public var isRaster: Bool {
        switch self {
        case .png, .jpeg, .webp, .gif: true
        case .pbf, .json: false
        }
    }

    /// Recognises a tile from its first bytes, or returns `nil` for bytes of no known format.
    ///
    /// PNG, JPEG, WebP and GIF by their signatures; gzip (`1f 8b`) as a compressed vector tile;
    /// JSON when the first non-blank byte is `{` or `[`; an uncompressed MVT when the bytes parse as
    /// a protobuf whose fields are all MVT tile fields (3 = layer, length-delimited).
    public static func sniff(_ bytes: UnsafeRawBufferPointer) -> TileFormat? {
        func at(_ i: Int) -> UInt8 { bytes[i] }
        let n = bytes.count
        if n >= 8, at(0) == 0x89, at(1) == 0x50, at(2) == 0x4E, at(3) == 0x47,
            at(4) == 0x0D, at(5) == 0x0A, at(6) == 0x1A, at(7) == 0x0A
        {
            return .png
        }
        if n >= 3, at(0) == 0xFF, at(1) == 0xD8, at(2) == 0xFF { return .jpeg }
        if n >= 12, at(0) == 0x52, at(1) == 0x49, at(2) == 0x46, at(3) == 0x46,
            at(8) == 0x57, at(9) == 0x45, at(10) == 0x42, at(11) == 0x50
        {
            return .webp
        }
        if n >= 6, at(0) == 0x47, at(1) == 0x49, at(2) == 0x46, at(3) == 0x38,
            at(4) == 0x37 || at(4) == 0x39, at(5) == 0x61
        {
            return .gif
        }
        if isGzip(bytes) { return .pbf }
        var i = 0
        while i < n, at(i) == 0x20 || at(i) == 0x09 || at(i) == 0x0A || at(i) == 0x0D { i += 1 }
        if i < n, at(i) == 0x7B || at(i) == 0x5B { return .json }
        if looksLikeMVT(bytes) { return .pbf }
        return nil
    }

    /// Whether the bytes are gzip-compressed (`1f 8b`): the one gzip sniff.
    public static func isGzip(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= 2 && bytes[0] == 0x1F && bytes[1] == 0x8B
    }

    /// An uncompressed MVT is a protobuf `Tile` message: only field 3 (`layers`), wire type 2.
    /// Checks every top-level field's key and that each length stays inside the buffer.
    private static func looksLikeMVT(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        var fields = 0
        func varint() -> UInt64? {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while i < bytes.count, shift < 64 {
                let b = bytes[i]
                i += 1
                result |= UInt64(b & 0x7F) << shift
                if b & 0x80 == 0 { return result }
                shift += 7
            }
            return nil
        }
        while i < bytes.count {
            guard let key = varint(), key == (3 << 3) | 2, let length = varint(),
                length <= UInt64(bytes.count - i)
            else { return false }
            i += Int(length)
            fields += 1
        }
        return fields > 0
    }
}

extension TileFormat {
    /// Recognises a tile from its first bytes.
    public static func sniff<Bytes: ContiguousBytes>(_ bytes: Bytes) -> TileFormat? {
        bytes.withUnsafeBytes { sniff($0) }
    }
}

/// What an archive's tile payloads are: encoded tiles of one format, or raw bitmaps.
public enum TileContent: Hashable, Sendable, CustomStringConvertible {
    /// Encoded tiles (PNG, JPEG, WebP, MVT, ...), as an MBTiles archive holds them.
    case encoded(TileFormat)
    /// Uncompressed pixels of a fixed size and format (a bundle written with `--encode raw-...`),
    /// served to a tile layer with no image decoding.
    case rawBitmap(RawBitmapLayout)

    public var description: String {
        switch self {
        case .encoded(let format): format.rawValue
        case .rawBitmap(let layout): "raw \(layout)"
        }
    }
}

/// The shape of a raw-bitmap payload: `width` x `height` pixels in `pixelFormat`, no row padding.
public struct RawBitmapLayout: Hashable, Sendable, CustomStringConvertible {
    public var pixelFormat: PixelFormat
    public var width: Int
    public var height: Int

    public init(pixelFormat: PixelFormat, width: Int, height: Int) {
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
    }

    /// The payload size of one tile, or `nil` on overflow.
    public var byteCount: Int? { pixelFormat.byteCount(width: width, height: height) }

    public var description: String { "\(pixelFormat) \(width)x\(height)" }
}
