import Foundation

/// An archive's metadata: the MBTiles `metadata` table's name/value pairs, with typed accessors.
///
/// Every key is kept as its text (`entries`), so keys tilepack does not know survive a round trip.
/// The typed accessors parse on read and throw ``TileMetadataError`` when a value is not what its
/// key promises (bounds that do not parse, a zoom that is not a whole number); a missing key is `nil`.
public struct TileMetadata: Hashable, Sendable {
    /// Every key and its text value.
    public var entries: [String: String]

    public init(_ entries: [String: String] = [:]) {
        self.entries = entries
    }

    /// The well-known keys of MBTiles 1.3.
    public enum Key {
        public static let name = "name"
        public static let format = "format"
        public static let bounds = "bounds"
        public static let center = "center"
        public static let minZoom = "minzoom"
        public static let maxZoom = "maxzoom"
        public static let attribution = "attribution"
        public static let description = "description"
        public static let type = "type"
        public static let version = "version"
        public static let json = "json"
        /// martin's aggregate hash of the tiles table.
        public static let aggregateTilesHash = "agg_tiles_hash"
        /// The function of `agg_tiles_hash` and the per-tile hashes (martin): absent means `md5`.
        public static let hashAlgorithm = "hash_algorithm"
    }

    /// The one hash function tilepack computes for `agg_tiles_hash` and per-tile hashes, as
    /// `hash_algorithm` names it.
    public static let computedHashAlgorithm = "md5"

    /// `hash_algorithm` when it names a function other than MD5 (compared without case or
    /// surrounding spaces, as martin reads it); `nil` when absent or MD5, whose hashes tilepack checks.
    public var unsupportedHashAlgorithm: String? {
        guard let text = entries[Key.hashAlgorithm] else { return nil }
        return text.trimmingCharacters(in: .whitespaces).lowercased() == Self.computedHashAlgorithm ? nil : text
    }

    public subscript(key: String) -> String? {
        get { entries[key] }
        set { entries[key] = newValue }
    }

    /// The keys in a stable (sorted) order.
    public var keys: [String] { entries.keys.sorted() }

    public var name: String? {
        get { entries[Key.name] }
        set { entries[Key.name] = newValue }
    }
    public var attribution: String? {
        get { entries[Key.attribution] }
        set { entries[Key.attribution] = newValue }
    }
    public var description: String? {
        get { entries[Key.description] }
        set { entries[Key.description] = newValue }
    }
    public var version: String? {
        get { entries[Key.version] }
        set { entries[Key.version] = newValue }
    }
    /// The `json` value: a JSON object as text (vector_layers for vector tiles).
    public var json: String? {
        get { entries[Key.json] }
        set { entries[Key.json] = newValue }
    }

    /// The `format` value parsed into a ``TileFormat``; `nil` when absent.
    public var format: TileFormat? {
        get throws(TileMetadataError) {
            try parsedValue(Key.format, expected: "png, jpg, webp, gif, pbf or json") { TileFormat(metadataValue: $0) }
        }
    }

    /// The `type` value: `overlay` or `baselayer`.
    public var layerType: LayerType? {
        get throws(TileMetadataError) { try parsedValue(Key.type, expected: "overlay or baselayer") { LayerType(rawValue: $0) } }
    }

    /// `bounds`: `west,south,east,north` in degrees.
    public var bounds: GeoBoundingBox? {
        get throws(TileMetadataError) {
            guard let text = entries[Key.bounds] else { return nil }
            let numbers = try Self.numbers(text, key: Key.bounds, count: 4, expected: "west,south,east,north")
            let box = GeoBoundingBox(west: numbers[0], south: numbers[1], east: numbers[2], north: numbers[3])
            guard (-180...180).contains(box.west), (-180...180).contains(box.east),
                (-90...90).contains(box.south), (-90...90).contains(box.north), box.south <= box.north
            else {
                throw .malformed(key: Key.bounds, value: text, expected: "longitudes in -180...180, latitudes in -90...90, south <= north")
            }
            return box
        }
    }

    /// `center`: `longitude,latitude,zoom` (the zoom is optional in files written by old tools).
    public var center: (coordinate: GeoCoordinate, zoom: Int?)? {
        get throws(TileMetadataError) {
            guard let text = entries[Key.center] else { return nil }
            let parts = text.split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count == 2 || parts.count == 3 else {
                throw .malformed(key: Key.center, value: text, expected: "longitude,latitude,zoom")
            }
            let numbers = try Self.numbers(
                parts.prefix(2).joined(separator: ","), key: Key.center, count: 2, expected: "longitude,latitude,zoom")
            guard (-180...180).contains(numbers[0]), (-90...90).contains(numbers[1]) else {
                throw .malformed(key: Key.center, value: text, expected: "a longitude in -180...180 and a latitude in -90...90")
            }
            var zoom: Int?
            if parts.count == 3 {
                guard let z = Self.zoom(String(parts[2])) else {
                    throw .malformed(
                        key: Key.center, value: text, expected: "a zoom in 0...\(TileCoordinate.maximumZoom) as the third number")
                }
                zoom = z
            }
            return (GeoCoordinate(latitude: numbers[1], longitude: numbers[0]), zoom)
        }
    }

    /// `minzoom`, a whole number in `0...TileCoordinate.maximumZoom`.
    public var minZoom: Int? {
        get throws(TileMetadataError) { try zoomValue(Key.minZoom) }
    }

    /// `maxzoom`, a whole number in `0...TileCoordinate.maximumZoom`.
    public var maxZoom: Int? {
        get throws(TileMetadataError) { try zoomValue(Key.maxZoom) }
    }

    /// Sets `bounds` in the MBTiles text form.
    public mutating func setBounds(_ box: GeoBoundingBox?) {
        entries[Key.bounds] = box.map {
            "\(Self.format($0.west)),\(Self.format($0.south)),\(Self.format($0.east)),\(Self.format($0.north))"
        }
    }

    /// Sets `center` in the MBTiles text form `longitude,latitude,zoom`.
    public mutating func setCenter(_ coordinate: GeoCoordinate?, zoom: Int) {
        entries[Key.center] = coordinate.map { "\(Self.format($0.longitude)),\(Self.format($0.latitude)),\(zoom)" }
    }

    public mutating func setFormat(_ format: TileFormat?) { entries[Key.format] = format?.metadataValue }
    public mutating func setMinZoom(_ zoom: Int?) { entries[Key.minZoom] = zoom.map(String.init) }
    public mutating func setMaxZoom(_ zoom: Int?) { entries[Key.maxZoom] = zoom.map(String.init) }
    public mutating func setLayerType(_ type: LayerType?) { entries[Key.type] = type?.rawValue }

    /// `overlay` or `baselayer`.
    public enum LayerType: String, Sendable, Hashable, CaseIterable {
        case overlay
        case baselayer
    }

    private func zoomValue(_ key: String) throws(TileMetadataError) -> Int? {
        try parsedValue(key, expected: "a whole number in 0...\(TileCoordinate.maximumZoom)") { Self.zoom($0) }
    }

    /// `key`'s value as `parse` reads it: `nil` when the key is absent, `malformed` (saying what
    /// was `expected`) when `parse` cannot read it.
    private func parsedValue<Value>(_ key: String, expected: String, _ parse: (String) -> Value?) throws(TileMetadataError) -> Value? {
        guard let text = entries[key] else { return nil }
        guard let value = parse(text) else { throw .malformed(key: key, value: text, expected: expected) }
        return value
    }

    /// Accepts `5` and, as some writers store it, `5.0`.
    private static func zoom(_ text: String) -> Int? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let z = Int(trimmed), (0...TileCoordinate.maximumZoom).contains(z) { return z }
        if let d = Double(trimmed), d.rounded() == d, (0...Double(TileCoordinate.maximumZoom)).contains(d) { return Int(d) }
        return nil
    }

    private static func numbers(_ text: String, key: String, count: Int, expected: String) throws(TileMetadataError) -> [Double] {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        var result: [Double] = []
        for part in parts {
            guard let value = Double(part.trimmingCharacters(in: .whitespaces)), value.isFinite else {
                throw .malformed(key: key, value: text, expected: expected)
            }
            result.append(value)
        }
        guard result.count == count else { throw .malformed(key: key, value: text, expected: expected) }
        return result
    }

    /// Shortest text that reads back as the same Double (Swift's description), without `.0` noise.
    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}

/// A metadata value that is not what its key promises.
public enum TileMetadataError: Error, Hashable, Sendable, CustomStringConvertible {
    case malformed(key: String, value: String, expected: String)

    public var description: String {
        switch self {
        case .malformed(let key, let value, let expected):
            "metadata '\(key)' is '\(value.prefix(80))', expected \(expected)"
        }
    }
}
