import Foundation
import TilepackCore

/// Fits metadata read from an archive written elsewhere to the format it is written into, so that
/// a conversion never fails over a value: what the destination constrains is mapped where the
/// meaning is clear, or dropped, each with a note naming the key and the value; what it can hold
/// is kept as it is.
///
/// Only MBTiles constrains values (the MBTiles 1.3 rules `MBTilesMetadataValidator` checks); a
/// bundle and PMTiles hold any key and any text, so for them nothing changes. The decisions:
/// - `type`: `overlay` or `baselayer` in any case or with spaces is that value; `raster` and
///   `vector` (QGIS, rio-pmtiles, some PMTiles tools) say what the tiles are, which MBTiles says in
///   `format`, not whether the layer is a base layer or an overlay, so they are dropped (the key
///   is optional). Any other value is dropped.
/// - `bounds`, `center`: a JSON array (TileJSON's form) becomes the comma-separated text; a
///   longitude past ±180 or a latitude past ±90 by up to a degree (rounding) is clamped to the edge
///   it names; further past (gdal2tiles' latitude-first box), a south above the north, or a value
///   that does not parse, is dropped (the writer derives it from the tiles).
///   A center zoom out of range is dropped from the center.
/// - `minzoom`, `maxzoom`: not a whole zoom, or a minimum above the maximum: dropped (derived).
/// - `format`: a known format spelled otherwise (`jpeg`, `PNG`) gets MBTiles' spelling; an unknown
///   one is dropped when the tiles say what they are.
/// - `json`: not JSON, or not an object: dropped. `vector_layers` entries with malformed members
///   lose those members; an entry with no string `id` is dropped; vector tiles with no
///   `vector_layers` get an empty list (MBTiles requires the key for pbf).
/// - any other key MBTiles refuses: dropped.
///
/// Used by every writer of archives from others' metadata: convert, extract and merge
/// (TilepackOperations, `fitted(_:for:)`) and a sync (TilepackRemote).
package enum MetadataMapping {
    /// `metadata` as an MBTiles file can hold it, and a note for every value changed or dropped.
    package static func fittedToMBTiles(_ metadata: TileMetadata) -> (metadata: TileMetadata, notes: [String]) {
        typealias Key = TileMetadata.Key
        var fit = Fitting(metadata: metadata)
        fitSpellings(&fit)
        fitBounds(&fit)
        fitCenter(&fit)
        fitZooms(&fit)
        fitJSON(&fit.metadata, notes: &fit.notes, show: Fitting.show)

        // Whatever else MBTiles still refuses (a rule added later): dropped, never a failed write.
        for issue in MBTilesMetadataValidator.validate(fit.metadata) where issue.severity == .error {
            guard let key = issue.key, key != Key.name, key != Key.format, fit.metadata[key] != nil else { continue }
            fit.drop(key, issue.message)
        }
        return (fit.metadata, fit.notes)
    }

    /// The metadata being fitted and the notes on what changed.
    private struct Fitting {
        var metadata: TileMetadata
        var notes: [String] = []

        /// A value as a note quotes it: on one line, at most 60 characters.
        static func show(_ value: String) -> String {
            let flat = value.replacingOccurrences(of: "\n", with: " ")
            return flat.count > 60 ? "'\(flat.prefix(60))...'" : "'\(flat)'"
        }

        mutating func drop(_ key: String, _ why: String) {
            guard let value = metadata[key] else { return }
            notes.append("metadata '\(key)' is \(Self.show(value)), \(why): not written to MBTiles")
            metadata[key] = nil
        }

        mutating func map(_ key: String, to value: String, _ why: String) {
            guard let old = metadata[key], old != value else { return }
            notes.append("metadata '\(key)' is \(Self.show(old)), \(why): written as \(Self.show(value))")
            metadata[key] = value
        }
    }

    /// Spellings MBTiles fixes: `format` and `type`.
    private static func fitSpellings(_ fit: inout Fitting) {
        typealias Key = TileMetadata.Key
        if let text = fit.metadata[Key.format], let format = TileFormat(metadataValue: text.trimmingCharacters(in: .whitespaces)) {
            fit.map(Key.format, to: format.metadataValue, "MBTiles spells that format '\(format.metadataValue)'")
        } else if fit.metadata[Key.format] != nil {
            fit.drop(Key.format, "not a format MBTiles names (the tiles' own format is written)")
        }
        if let text = fit.metadata[Key.type], (try? fit.metadata.layerType) == nil {
            let folded = text.trimmingCharacters(in: .whitespaces).lowercased()
            if let type = TileMetadata.LayerType(rawValue: folded) {
                fit.map(Key.type, to: type.rawValue, "MBTiles spells it in lower case")
            } else if folded == "raster" || folded == "vector" {
                fit.drop(
                    Key.type,
                    "which says what the tiles are (MBTiles says that in 'format'), not whether the layer is an overlay or a baselayer, the two values MBTiles allows"
                )
            } else {
                fit.drop(Key.type, "not overlay or baselayer, the two values MBTiles allows")
            }
        }
    }

    private static func fitBounds(_ fit: inout Fitting) {
        let key = TileMetadata.Key.bounds
        guard let text = fit.metadata[key] else { return }
        guard let numbers = numbers(text) else { return fit.drop(key, "not numbers separated by commas") }
        guard numbers.count == 4 else { return fit.drop(key, "not four numbers west,south,east,north") }
        guard let west = clamp(numbers[0], 180), let south = clamp(numbers[1], 90), let east = clamp(numbers[2], 180),
            let north = clamp(numbers[3], 90)
        else {
            return fit.drop(key, "past the edges of the world by more than a degree (latitude and longitude swapped?)")
        }
        let box = [west, south, east, north]
        guard box[1] <= box[3] else { return fit.drop(key, "its south is above its north") }
        var fitted = TileMetadata()
        fitted.setBounds(GeoBoundingBox(west: box[0], south: box[1], east: box[2], north: box[3]))
        if (try? fit.metadata.bounds) == nil {
            fit.map(key, to: fitted[key]!, "past the edges of the world or not in MBTiles' form")
        }
    }

    private static func fitCenter(_ fit: inout Fitting) {
        let key = TileMetadata.Key.center
        guard let text = fit.metadata[key] else { return }
        guard let numbers = numbers(text) else { return fit.drop(key, "not numbers separated by commas") }
        guard numbers.count == 2 || numbers.count == 3 else { return fit.drop(key, "not longitude,latitude,zoom") }
        guard (try? fit.metadata.center) == nil else { return }
        var fitted = TileMetadata()
        let zoom = numbers.count == 3 ? numbers[2] : nil
        guard let longitude = clamp(numbers[0], 180), let latitude = clamp(numbers[1], 90) else {
            return fit.drop(key, "past the edges of the world by more than a degree (latitude and longitude swapped?)")
        }
        let coordinate = GeoCoordinate(latitude: latitude, longitude: longitude)
        if let zoom, zoom.rounded() == zoom, (0...Double(TileCoordinate.maximumZoom)).contains(zoom) {
            fitted.setCenter(coordinate, zoom: Int(zoom))
        } else {
            fitted.setCenter(coordinate, zoom: 0)
            fitted[key] = String(fitted[key]!.dropLast(2))
        }
        fit.map(key, to: fitted[key]!, "past the edges of the world, a zoom out of range, or not in MBTiles' form")
    }

    /// `minzoom` and `maxzoom`: each a whole zoom, the minimum not above the maximum.
    private static func fitZooms(_ fit: inout Fitting) {
        typealias Key = TileMetadata.Key
        for key in [Key.minZoom, Key.maxZoom] where fit.metadata[key] != nil {
            let readable: Bool
            do {
                _ = try key == Key.minZoom ? fit.metadata.minZoom : fit.metadata.maxZoom
                readable = true
            } catch { readable = false }
            if !readable { fit.drop(key, "not a whole zoom in 0...\(TileCoordinate.maximumZoom) (the tiles' own is written)") }
        }
        if let low = (try? fit.metadata.minZoom) ?? nil, let high = (try? fit.metadata.maxZoom) ?? nil, low > high {
            fit.drop(Key.minZoom, "above maxzoom \(high) (the tiles' own is written)")
            fit.drop(Key.maxZoom, "below minzoom \(low) (the tiles' own is written)")
        }
    }

    /// The numbers of `text`: `1,2,3` or a JSON array `[1, 2, 3]`; nil when any is not a finite number.
    private static func numbers(_ text: String) -> [Double]? {
        var body = text.trimmingCharacters(in: .whitespaces)
        if body.hasPrefix("[") && body.hasSuffix("]") { body = String(body.dropFirst().dropLast()) }
        var result: [Double] = []
        for part in body.split(separator: ",", omittingEmptySubsequences: false) {
            guard let value = Double(part.trimmingCharacters(in: .whitespaces)), value.isFinite else { return nil }
            result.append(value)
        }
        return result
    }

    /// `value` within `-limit...limit`: past it by up to a degree (the rounding of tile edges,
    /// 180.0000001), the edge; further, nil (no clear meaning).
    private static func clamp(_ value: Double, _ limit: Double) -> Double? {
        abs(value) <= limit + 1 ? min(max(value, -limit), limit) : nil
    }

    private static func fitJSON(_ metadata: inout TileMetadata, notes: inout [String], show: (String) -> String) {
        let key = TileMetadata.Key.json
        let isVector = ((try? metadata.format) ?? nil) == .pbf
        guard let text = metadata.json else {
            if isVector {
                metadata.json = #"{"vector_layers":[]}"#
                notes.append(
                    "metadata has no 'json' with 'vector_layers', which MBTiles requires for vector tiles: written as an empty list")
            }
            return
        }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) as? [String: Any]
        else {
            notes.append("metadata 'json' is \(show(text)), not a JSON object: not written to MBTiles")
            metadata.json = nil
            if isVector { fitJSON(&metadata, notes: &notes, show: show) }
            return
        }
        var fitted = object
        var changes: [String] = []
        if let layers = object["vector_layers"] {
            var kept: [[String: Any]] = []
            for (i, value) in ((layers as? [Any]) ?? []).enumerated() {
                guard var layer = value as? [String: Any], layer["id"] is String else {
                    changes.append("vector_layers[\(i)] has no string id (dropped)")
                    continue
                }
                let fields = layer["fields"] as? [String: Any] ?? [:]
                if layer["fields"] != nil && !(layer["fields"] is [String: Any]) {
                    changes.append("vector_layers[\(i)].fields is no object")
                }
                var strings: [String: String] = [:]
                for (name, type) in fields {
                    if let type = type as? String {
                        strings[name] = type
                    } else {
                        changes.append("vector_layers[\(i)].fields.\(name) is no string")
                    }
                }
                layer["fields"] = strings
                for member in ["minzoom", "maxzoom"]
                where layer[member] != nil && !(layer[member] is NSNumber && !isBoolean(layer[member]!)) {
                    changes.append("vector_layers[\(i)].\(member) is no number")
                    layer[member] = nil
                }
                if let description = layer["description"], !(description is String) {
                    changes.append("vector_layers[\(i)].description is no string")
                    layer["description"] = nil
                }
                kept.append(layer)
            }
            if !(layers is [Any]) { changes.append("vector_layers is no array") }
            fitted["vector_layers"] = kept
        } else if isVector {
            fitted["vector_layers"] = [Any]()
            changes.append("no vector_layers, which MBTiles requires for vector tiles (an empty list written)")
        }
        guard !changes.isEmpty,
            let data = try? JSONSerialization.data(withJSONObject: fitted, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return }
        notes.append("metadata '\(key)': \(changes.joined(separator: "; ")): written without what MBTiles refuses")
        metadata.json = String(decoding: data, as: UTF8.self)
    }

    private static func isBoolean(_ value: Any) -> Bool {
        guard let number = value as? NSNumber else { return false }
        return String(cString: number.objCType) == "c"
    }
}
