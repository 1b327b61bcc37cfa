import Foundation
import TilepackCore

/// The JSON documents a MapLibre offline database stores beside its tiles (Specs/maplibre-offline.md):
/// the style (the one given, or a raster style made for the archive), the source's TileJSON, the
/// region's definition and description, and where the source's tiles are.
struct OfflineDocuments {
    /// The style, as stored under the style URL.
    var style: [String: Any]
    /// The source's TileJSON, stored under ``tileJSONURL``.
    var tileJSON: [String: Any]
    /// Where the style's source's TileJSON is; nil when the style lists the tiles itself.
    var tileJSONURL: String?
    /// The URL template the tiles are keyed by.
    var template: String
    /// The region's definition (`regions.definition`).
    var definition: [String: Any]
    /// The region's description (`regions.description`).
    var description: [String: Any]

    init(
        options: MapLibreOfflineOptions, styleBase: URL, format: TileFormat, metadata: TileMetadata, zooms: ClosedRange<Int>,
        box: GeoBoundingBox, source: String
    ) throws(OperationError) {
        let name = options.sourceName
        let directory = styleBase.deletingLastPathComponent().absoluteString
        tileJSONURL = directory + "\(name).json"
        template = directory + "\(name)/{z}/{x}/{y}.\(format.fileExtension)"
        if let data = options.style {
            style = try Self.givenStyle(data, name: name, template: &template, tileJSONURL: &tileJSONURL)
        } else {
            guard format != .pbf else {
                throw OperationError(
                    path: source,
                    fault: .badInput("vector tiles need a style that draws them: give one with --style FILE (and --source NAME)"))
            }
            style = [
                "version": 8, "name": metadata.name ?? name,
                "sources": [name: ["type": "raster", "url": tileJSONURL!, "tileSize": 256]],
                "layers": [["id": name, "type": "raster", "source": name]],
            ]
        }
        tileJSON = [
            "tilejson": "3.0.0", "tiles": [template], "scheme": "xyz", "minzoom": zooms.lowerBound, "maxzoom": zooms.upperBound,
            "bounds": [box.west, box.south, box.east, box.north], "name": metadata.name ?? name,
        ]
        if let attribution = metadata.attribution { tileJSON["attribution"] = attribution }
        if let json = metadata.json, let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any],
            let layers = object["vector_layers"]
        {
            tileJSON["vector_layers"] = layers
        }
        definition = [
            "style_url": options.styleURL, "bounds": [box.south, box.west, box.north, box.east], "min_zoom": Double(zooms.lowerBound),
            "max_zoom": Double(zooms.upperBound), "pixel_ratio": Double(options.pixelRatio), "include_ideographs": false,
        ]
        description = ["name": metadata.name ?? name, "writer": "tilepack"]
    }

    /// The style given (`--style`): its source `name` says where the tiles are, by a `tiles`
    /// template (then no TileJSON is stored) or a TileJSON `url`.
    private static func givenStyle(
        _ data: Data, name: String, template: inout String, tileJSONURL: inout String?
    ) throws(OperationError) -> [String: Any] {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw OperationError(path: "", fault: .badInput("the style is not a JSON object"))
        }
        guard let sources = object["sources"] as? [String: Any], let ours = sources[name] as? [String: Any] else {
            throw OperationError(path: "", fault: .badInput("the style has no source '\(name)' (name it with --source)"))
        }
        if let tiles = ours["tiles"] as? [String], let first = tiles.first {
            template = first
            tileJSONURL = nil
        } else if let url = ours["url"] as? String {
            tileJSONURL = url
        } else {
            throw OperationError(path: "", fault: .badInput("the style's source '\(name)' has neither a url nor tiles"))
        }
        return object
    }

    /// A document's bytes: sorted keys, slashes as they are.
    static func json(_ object: Any) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data())
    }
}
