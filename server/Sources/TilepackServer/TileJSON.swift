import Foundation
import TilepackCore

/// TileJSON 3.0.0 documents of archives (https://github.com/mapbox/tilejson-spec/tree/master/3.0.0).
enum TileJSON {
    /// The tile URL template of an archive: `{base}/{name}/{z}/{x}/{y}.{ext}` plus `query`.
    static func tileTemplate(_ generation: ArchiveGeneration, base: String, query: String) -> String {
        "\(base)/\(percentEncodedSegment(generation.name))/{z}/{x}/{y}.\(generation.extensions.first ?? "bin")\(query)"
    }

    /// The center: the metadata's `center` when it parses, else the middle of the bounds at the
    /// lowest zoom; the zoom is clamped into the archive's zooms.
    static func center(_ generation: ArchiveGeneration) -> (longitude: Double, latitude: Double, zoom: Int) {
        let zooms = generation.zooms ?? 0...0
        if let value = try? generation.metadata.center {
            return (
                value.coordinate.longitude, value.coordinate.latitude,
                min(max(value.zoom ?? zooms.lowerBound, zooms.lowerBound), zooms.upperBound)
            )
        }
        let box = generation.bounds
        var longitude = (box.west + box.east) / 2
        if box.west > box.east { longitude = longitude > 0 ? longitude - 180 : longitude + 180 }
        return (longitude, (box.south + box.north) / 2, zooms.lowerBound)
    }

    /// The `vector_layers` of the metadata's `json` value, if it has them.
    static func vectorLayers(_ generation: ArchiveGeneration) -> [Any]? {
        guard let text = generation.metadata.json, let data = text.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return object["vector_layers"] as? [Any]
    }

    /// The document, as UTF-8 JSON with sorted keys.
    static func document(_ generation: ArchiveGeneration, base: String, query: String) -> [UInt8] {
        let zooms = generation.zooms ?? 0...0
        let box = generation.bounds
        let center = center(generation)
        var document: [String: Any] = [
            "tilejson": "3.0.0",
            "tiles": [tileTemplate(generation, base: base, query: query)],
            "name": generation.metadata.name ?? generation.name,
            "scheme": "xyz",
            "minzoom": zooms.lowerBound,
            "maxzoom": zooms.upperBound,
            "bounds": [box.west, box.south, box.east, box.north],
            "center": [center.longitude, center.latitude, center.zoom] as [Any],
        ]
        if let format = generation.servedFormat { document["format"] = format.metadataValue }
        if let attribution = generation.metadata.attribution { document["attribution"] = attribution }
        if let description = generation.metadata.description { document["description"] = description }
        if let version = generation.metadata.version { document["version"] = version }
        if let layers = vectorLayers(generation) {
            document["vector_layers"] = layers
        } else if generation.isVector {
            // Required by TileJSON 3.0.0 for vector tiles; the archive does not say which layers it has.
            document["vector_layers"] = [Any]()
        }
        let data =
            (try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return [UInt8](data)
    }
}
