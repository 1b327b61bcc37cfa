import Foundation
import TilepackCore

/// The PMTiles metadata (a JSON object) as tilepack's ``TileMetadata`` (MBTiles-style text
/// entries), both ways, so that an MBTiles -> PMTiles -> MBTiles round trip keeps every key.
///
/// Written: every entry as a JSON string, except `json`, whose `vector_layers` and `tilestats`
/// members become top-level members (where MapLibre and the PMTiles tools look for them); any
/// other members of `json` stay in a `json` string. Read: string members as they are;
/// `vector_layers` and `tilestats` gathered back into `json`; any other value as its JSON text.
/// Keys the header holds (bounds, center, zooms, format) are filled from the header when the
/// JSON lacks them.
enum PMTilesMetadata {
    static let liftedKeys = ["vector_layers", "tilestats"]

    struct Fault: Error { var reason: String }

    static func encode(_ metadata: TileMetadata) -> [UInt8] {
        var object: [String: Any] = [:]
        for key in metadata.keys where key != TileMetadata.Key.json {
            object[key] = metadata[key]
        }
        if let text = metadata.json {
            if let data = text.data(using: .utf8),
                var inner = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
                liftedKeys.allSatisfy({ object[$0] == nil })
            {
                for key in liftedKeys {
                    if let value = inner.removeValue(forKey: key) { object[key] = value }
                }
                if !inner.isEmpty, let rest = try? JSONSerialization.data(withJSONObject: inner, options: [.sortedKeys]) {
                    object[TileMetadata.Key.json] = String(decoding: rest, as: UTF8.self)
                }
            } else {
                object[TileMetadata.Key.json] = text
            }
        }
        // Sorted keys: the same metadata always gives the same bytes.
        let data =
            (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return Array(data)
    }

    static func decode(_ bytes: [UInt8]) -> Result<TileMetadata, Fault> {
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: Data(bytes), options: [])
        } catch {
            return .failure(Fault(reason: "not JSON (\(bytes.count) bytes)"))
        }
        guard let object = parsed as? [String: Any] else { return .failure(Fault(reason: "JSON, but not an object")) }
        var metadata = TileMetadata()
        var lifted: [String: Any] = [:]
        var json: [String: Any]?
        for (key, value) in object {
            if liftedKeys.contains(key) {
                lifted[key] = value
            } else if let text = value as? String {
                if key == TileMetadata.Key.json, let data = text.data(using: .utf8),
                    let inner = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
                {
                    json = inner
                } else {
                    metadata[key] = text
                }
            } else if let data = try? JSONSerialization.data(
                withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes])
            {
                metadata[key] = String(decoding: data, as: UTF8.self)
            }
        }
        if !lifted.isEmpty || json != nil {
            var merged = json ?? [:]
            for (key, value) in lifted { merged[key] = value }
            if let data = try? JSONSerialization.data(withJSONObject: merged, options: [.sortedKeys, .withoutEscapingSlashes]) {
                metadata.json = String(decoding: data, as: UTF8.self)
            }
        } else if let text = object[TileMetadata.Key.json] as? String {
            metadata.json = text
        }
        return .success(metadata)
    }

    /// Adds the keys the header answers (bounds, center, minzoom, maxzoom, format) when absent.
    static func fillFromHeader(_ metadata: inout TileMetadata, header: PMTilesHeader) {
        func degrees(_ e7: Int32) -> Double { Double(e7) / 1e7 }
        if metadata[TileMetadata.Key.minZoom] == nil { metadata.setMinZoom(Int(header.minZoom)) }
        if metadata[TileMetadata.Key.maxZoom] == nil { metadata.setMaxZoom(Int(header.maxZoom)) }
        let box = GeoBoundingBox(
            west: degrees(header.minLonE7), south: degrees(header.minLatE7),
            east: degrees(header.maxLonE7), north: degrees(header.maxLatE7))
        if metadata[TileMetadata.Key.bounds] == nil, box.west >= -180, box.east <= 180, box.south >= -90, box.north <= 90,
            box.south <= box.north, box.west < box.east
        {
            metadata.setBounds(box)
        }
        if metadata[TileMetadata.Key.center] == nil, abs(degrees(header.centerLonE7)) <= 180, abs(degrees(header.centerLatE7)) <= 90,
            Int(header.centerZoom) <= TileCoordinate.maximumZoom, metadata[TileMetadata.Key.bounds] != nil
        {
            metadata.setCenter(
                GeoCoordinate(latitude: degrees(header.centerLatE7), longitude: degrees(header.centerLonE7)), zoom: Int(header.centerZoom))
        }
        if metadata[TileMetadata.Key.format] == nil, let format = header.tileType.tileFormat {
            metadata.setFormat(format)
        }
    }
}
