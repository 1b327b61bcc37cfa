import Foundation
import TilepackCore

/// One finding of `MBTilesMetadataValidator`.
public struct MBTilesMetadataIssue: Hashable, Sendable, CustomStringConvertible {
    public enum Severity: String, Hashable, Sendable, Comparable {
        /// Breaks a MUST of MBTiles 1.3: the writer refuses to write it.
        case error
        /// Breaks a SHOULD, or disagrees with the tiles: reported, written anyway.
        case warning

        public static func < (a: Severity, b: Severity) -> Bool { a == .error && b == .warning }
    }

    public enum Kind: String, Hashable, Sendable {
        /// A key the spec requires (error) or recommends (warning) is absent.
        case missing
        /// A value does not parse as what its key promises.
        case malformed
        /// Values contradict each other (minzoom > maxzoom, center outside bounds).
        case inconsistent
        /// A value contradicts the tiles (zooms, bounds, format).
        case disagreesWithTiles
    }

    public var severity: Severity
    public var kind: Kind
    /// The metadata key concerned, or `nil` for the archive as a whole.
    public var key: String?
    public var message: String

    public init(_ severity: Severity, _ kind: Kind, key: String?, _ message: String) {
        self.severity = severity
        self.kind = kind
        self.key = key
        self.message = message
    }

    public var description: String { "\(severity): \(message)" }
}

/// The MBTiles 1.3 metadata rules (see Specs/mbtiles.md for the list and why each is an error or a warning).
package enum MBTilesMetadataValidator {
    /// Tolerance in degrees when comparing bounds with tile extents (writers round to ~1e-7).
    static let tolerance = 1e-6

    /// Checks `metadata`, and when `content` is given, its agreement with the tiles.
    package static func validate(_ metadata: TileMetadata, content: TileContentSummary? = nil) -> [MBTilesMetadataIssue] {
        var issues = Issues()
        let format = checkRequired(metadata, &issues)
        let values = parseValues(metadata, &issues)
        checkConsistency(values, &issues)
        // json: an object; for vector tiles it must list the vector_layers.
        checkJSON(metadata.json, isVector: format == .pbf) { issues.error($0, $1, $2) }
        if let content { checkAgreement(values, format: format, content: content, &issues) }
        return issues.list.sorted { ($0.severity, $0.key ?? "") < ($1.severity, $1.key ?? "") }
    }

    /// The issues found so far, in the order found.
    private struct Issues {
        var list: [MBTilesMetadataIssue] = []

        mutating func error(_ kind: MBTilesMetadataIssue.Kind, _ key: String?, _ message: String) {
            list.append(MBTilesMetadataIssue(.error, kind, key: key, message))
        }

        mutating func warning(_ kind: MBTilesMetadataIssue.Kind, _ key: String?, _ message: String) {
            list.append(MBTilesMetadataIssue(.warning, kind, key: key, message))
        }
    }

    /// The values the rules compare, each `nil` when absent or malformed.
    private struct Values {
        var bounds: GeoBoundingBox?
        var center: (coordinate: GeoCoordinate, zoom: Int?)?
        var minZoom: Int?
        var maxZoom: Int?
    }

    /// Required: name and format. Returns the format when it is one MBTiles names.
    private static func checkRequired(_ metadata: TileMetadata, _ issues: inout Issues) -> TileFormat? {
        typealias Key = TileMetadata.Key
        if (metadata.name ?? "").trimmingCharacters(in: .whitespaces).isEmpty {
            issues.error(.missing, Key.name, "metadata 'name' is required and missing")
        }
        guard let text = metadata[Key.format] else {
            issues.error(.missing, Key.format, "metadata 'format' is required and missing")
            return nil
        }
        guard let parsed = TileFormat(metadataValue: text) else {
            issues.warning(
                .malformed, Key.format, "metadata 'format' is '\(text.prefix(40))', not one of png, jpg, webp, pbf (or gif, json)")
            return nil
        }
        if parsed.metadataValue != text {
            issues.warning(.malformed, Key.format, "metadata 'format' is '\(text)'; MBTiles spells it '\(parsed.metadataValue)'")
        }
        return parsed
    }

    /// Well-formed values: each key that does not parse is an error, each recommended key missing a warning.
    private static func parseValues(_ metadata: TileMetadata, _ issues: inout Issues) -> Values {
        typealias Key = TileMetadata.Key
        func parse<T>(_ key: String, _ read: () throws(TileMetadataError) -> T?) -> T? {
            do { return try read() } catch {
                issues.list.append(MBTilesMetadataIssue(.error, .malformed, key: key, error.description))
                return nil
            }
        }
        let bounds = parse(Key.bounds) { () throws(TileMetadataError) in try metadata.bounds }
        let center = parse(Key.center) { () throws(TileMetadataError) in try metadata.center }
        let minZoom = parse(Key.minZoom) { () throws(TileMetadataError) in try metadata.minZoom }
        let maxZoom = parse(Key.maxZoom) { () throws(TileMetadataError) in try metadata.maxZoom }
        _ = parse(Key.type) { () throws(TileMetadataError) in try metadata.layerType }
        for key in [Key.bounds, Key.center, Key.minZoom, Key.maxZoom] where metadata[key] == nil {
            issues.warning(.missing, key, "metadata '\(key)' is recommended and missing")
        }
        if let version = metadata.version, Double(version.trimmingCharacters(in: .whitespaces)) == nil {
            issues.warning(.malformed, Key.version, "metadata 'version' is '\(version.prefix(40))'; MBTiles 1.3 makes it a number")
        }
        return Values(bounds: bounds, center: center, minZoom: minZoom, maxZoom: maxZoom)
    }

    /// Consistency between values: the zooms' order, the bounds' sides, the center within both.
    private static func checkConsistency(_ values: Values, _ issues: inout Issues) {
        typealias Key = TileMetadata.Key
        let (bounds, minZoom, maxZoom) = (values.bounds, values.minZoom, values.maxZoom)
        if let minZoom, let maxZoom, minZoom > maxZoom {
            issues.error(.inconsistent, Key.minZoom, "metadata 'minzoom' \(minZoom) is greater than 'maxzoom' \(maxZoom)")
        }
        if let bounds, bounds.west > bounds.east {
            issues.warning(
                .inconsistent, Key.bounds,
                "metadata 'bounds' has west \(bounds.west) > east \(bounds.east) (crosses the antimeridian; many readers do not support that)"
            )
        }
        guard let center = values.center else { return }
        if let bounds, bounds.west <= bounds.east, !contains(bounds, center.coordinate) {
            issues.warning(
                .inconsistent, Key.center,
                "metadata 'center' \(center.coordinate.longitude),\(center.coordinate.latitude) is outside 'bounds'")
        }
        if let zoom = center.zoom, let minZoom, let maxZoom, minZoom <= maxZoom, !(minZoom...maxZoom).contains(zoom) {
            issues.warning(
                .inconsistent, Key.center, "metadata 'center' zoom \(zoom) is outside minzoom...maxzoom (\(minZoom)...\(maxZoom))")
        }
    }

    /// Agreement with the tiles: their zooms, their extent, their format.
    private static func checkAgreement(_ values: Values, format: TileFormat?, content: TileContentSummary, _ issues: inout Issues) {
        typealias Key = TileMetadata.Key
        guard !content.levels.isEmpty else {
            issues.warning(.disagreesWithTiles, nil, "the archive holds no tiles")
            return
        }
        if let minZoom = values.minZoom, let tilesMin = content.minZoom, minZoom != tilesMin {
            issues.warning(
                .disagreesWithTiles, Key.minZoom, "metadata 'minzoom' is \(minZoom) but the lowest zoom with tiles is \(tilesMin)")
        }
        if let maxZoom = values.maxZoom, let tilesMax = content.maxZoom, maxZoom != tilesMax {
            issues.warning(
                .disagreesWithTiles, Key.maxZoom, "metadata 'maxzoom' is \(maxZoom) but the highest zoom with tiles is \(tilesMax)")
        }
        if let bounds = values.bounds, bounds.west <= bounds.east,
            let level = content.levels.first(where: { !covers($0.extent, bounds) })
        {
            issues.warning(
                .disagreesWithTiles, Key.bounds,
                "metadata 'bounds' reaches outside the tiles of zoom \(level.zoom) (they cover \(level.extent))")
        }
        if let format, let sniffed = content.sniffedFormat, sniffed != format {
            issues.warning(.disagreesWithTiles, Key.format, "metadata 'format' is \(format) but the tiles are \(sniffed)")
        }
    }

    private static func contains(_ box: GeoBoundingBox, _ point: GeoCoordinate) -> Bool {
        point.longitude >= box.west - tolerance && point.longitude <= box.east + tolerance
            && point.latitude >= box.south - tolerance && point.latitude <= box.north + tolerance
    }

    private static func covers(_ outer: GeoBoundingBox, _ inner: GeoBoundingBox) -> Bool {
        inner.west >= outer.west - tolerance && inner.east <= outer.east + tolerance
            && inner.south >= outer.south - tolerance && inner.north <= outer.north + tolerance
    }

    private static func checkJSON(
        _ text: String?, isVector: Bool, error: (MBTilesMetadataIssue.Kind, String?, String) -> Void
    ) {
        let key = TileMetadata.Key.json
        guard let text else {
            if isVector { error(.missing, key, "metadata 'json' with 'vector_layers' is required when format is pbf") }
            return
        }
        guard let data = text.data(using: .utf8),
            let parsed = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        else {
            error(.malformed, key, "metadata 'json' is not valid JSON")
            return
        }
        guard let object = parsed as? [String: Any] else {
            error(.malformed, key, "metadata 'json' is \(jsonKind(parsed)), expected a JSON object")
            return
        }
        guard isVector || object["vector_layers"] != nil else { return }
        guard let layersValue = object["vector_layers"] else {
            error(.missing, key, "metadata 'json' has no 'vector_layers' (required when format is pbf)")
            return
        }
        guard let layers = layersValue as? [Any] else {
            error(.malformed, key, "metadata 'json' 'vector_layers' is \(jsonKind(layersValue)), expected an array")
            return
        }
        for (i, layerValue) in layers.enumerated() {
            let path = "vector_layers[\(i)]"
            guard let layer = layerValue as? [String: Any] else {
                error(.malformed, key, "metadata 'json' \(path) is \(jsonKind(layerValue)), expected an object")
                continue
            }
            if let id = layer["id"] {
                if jsonKind(id) != "a string" {
                    error(.malformed, key, "metadata 'json' \(path).id is \(jsonKind(id)), expected a string")
                }
            } else {
                error(.missing, key, "metadata 'json' \(path) has no 'id'")
            }
            if let fields = layer["fields"] {
                if let fields = fields as? [String: Any] {
                    for (name, type) in fields where jsonKind(type) != "a string" {
                        error(
                            .malformed, key,
                            "metadata 'json' \(path).fields.\(name) is \(jsonKind(type)), expected a string (the attribute type)")
                    }
                } else {
                    error(.malformed, key, "metadata 'json' \(path).fields is \(jsonKind(fields)), expected an object")
                }
            } else {
                error(.missing, key, "metadata 'json' \(path) has no 'fields'")
            }
            for zoomKey in ["minzoom", "maxzoom"] {
                if let value = layer[zoomKey], jsonKind(value) != "a number" {
                    error(.malformed, key, "metadata 'json' \(path).\(zoomKey) is \(jsonKind(value)), expected a number")
                }
            }
            if let description = layer["description"], jsonKind(description) != "a string" {
                error(.malformed, key, "metadata 'json' \(path).description is \(jsonKind(description)), expected a string")
            }
        }
    }

    /// "a string", "an array", ... for a JSONSerialization value (NSNumber booleans included).
    static func jsonKind(_ value: Any) -> String {
        switch value {
        case is [Any]: return "an array"
        case is [String: Any]: return "an object"
        case is NSNull: return "null"
        case let number as NSNumber:
            // JSON booleans come back as NSNumber with the objCType of a C char.
            if String(cString: number.objCType) == "c" { return "a boolean" }
            return "a number"
        case is String: return "a string"
        default: return "a value"
        }
    }
}
