import Foundation
import TilepackCore

/// Any JSON value: what a JSON report holds where its shape is not fixed (archive metadata).
package enum JSONValue: Sendable, Hashable, Codable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case array([JSONValue])
    case object([String: JSONValue])
    case null

    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        case .null: try container.encodeNil()
        }
    }
}

extension TileMetadata {
    /// The metadata as JSON reports give it: `bounds` and `center` as arrays of numbers,
    /// `minzoom` and `maxzoom` as numbers, `json` as the object it holds; every other key, and a
    /// value that does not parse, as its text.
    package var jsonValues: [String: JSONValue] {
        var values = entries.mapValues(JSONValue.string)
        if let box = try? bounds { values[Key.bounds] = .array([box.west, box.south, box.east, box.north].map(JSONValue.number)) }
        if let center = try? center {
            let numbers = [center.coordinate.longitude, center.coordinate.latitude] + (center.zoom.map { [Double($0)] } ?? [])
            values[Key.center] = .array(numbers.map(JSONValue.number))
        }
        if let zoom = try? minZoom { values[Key.minZoom] = .number(Double(zoom)) }
        if let zoom = try? maxZoom { values[Key.maxZoom] = .number(Double(zoom)) }
        if let text = json, let object = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) {
            values[Key.json] = object
        }
        return values
    }
}

/// The one way tilepack writes a JSON report: pretty, keys sorted, slashes not escaped.
package enum JSONReport {
    package static func encode<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }
}
