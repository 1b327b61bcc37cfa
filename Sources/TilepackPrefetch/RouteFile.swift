import Foundation
import TilepackCore

#if canImport(FoundationXML)
import FoundationXML
#endif

/// Why a route file cannot be read.
package struct RouteFileError: Error, Hashable, Sendable, CustomStringConvertible {
    package var path: String
    package var reason: String

    package var description: String { "\(path): \(reason)" }
}

/// Reads a route (a polyline) for a corridor fetch: GeoJSON (a LineString or MultiLineString
/// geometry, a Feature holding one, or a FeatureCollection whose line features are joined in
/// order) or GPX (the points of its tracks, else of its routes). Coordinates are checked: every
/// point must be a latitude in -90...90 and a longitude in -180...180.
package enum RouteFile {
    /// The largest route file read: 64 MiB.
    package static let maximumBytes = 64 << 20

    package static func read(path: String) throws(RouteFileError) -> [GeoCoordinate] {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw RouteFileError(path: path, reason: FileManager.default.fileExists(atPath: path) ? "cannot be opened" : "no such file")
        }
        defer { try? handle.close() }
        let data: Data
        do {
            data = try handle.read(upToCount: maximumBytes + 1) ?? Data()
        } catch {
            throw RouteFileError(path: path, reason: "reading failed: \(error)")
        }
        guard data.count <= maximumBytes else { throw RouteFileError(path: path, reason: "larger than \(maximumBytes) bytes") }
        return try parse(data, path: path)
    }

    /// Parses GeoJSON or GPX, told apart by the first non-blank byte (`{` or `<`).
    package static func parse(_ data: Data, path: String = "route") throws(RouteFileError) -> [GeoCoordinate] {
        let first = data.first { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D || $0 == 0xEF || $0 == 0xBB || $0 == 0xBF) }
        let points: [GeoCoordinate]
        switch first {
        case UInt8(ascii: "{"): points = try geoJSON(data, path: path)
        case UInt8(ascii: "<"): points = try gpx(data, path: path)
        default: throw RouteFileError(path: path, reason: "neither GeoJSON nor GPX")
        }
        guard !points.isEmpty else { throw RouteFileError(path: path, reason: "the route has no points") }
        for point in points where !((-90...90).contains(point.latitude) && (-180...180).contains(point.longitude)) {
            throw RouteFileError(path: path, reason: "\(point) is not a latitude,longitude")
        }
        return points
    }

    static func geoJSON(_ data: Data, path: String) throws(RouteFileError) -> [GeoCoordinate] {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw RouteFileError(path: path, reason: "not JSON: \(error.localizedDescription)")
        }
        guard let root = object as? [String: Any] else { throw RouteFileError(path: path, reason: "GeoJSON must be an object") }
        var points: [GeoCoordinate] = []
        try collect(root, into: &points, path: path)
        return points
    }

    private static func collect(_ object: [String: Any], into points: inout [GeoCoordinate], path: String) throws(RouteFileError) {
        switch object["type"] as? String {
        case "FeatureCollection":
            for feature in object["features"] as? [[String: Any]] ?? [] { try collect(feature, into: &points, path: path) }
        case "Feature":
            if let geometry = object["geometry"] as? [String: Any] { try collect(geometry, into: &points, path: path) }
        case "LineString":
            points += try positions(object["coordinates"], path: path)
        case "MultiLineString":
            for line in object["coordinates"] as? [Any] ?? [] { points += try positions(line, path: path) }
        case "GeometryCollection":
            for geometry in object["geometries"] as? [[String: Any]] ?? [] { try collect(geometry, into: &points, path: path) }
        case "Point", "MultiPoint", "Polygon", "MultiPolygon":
            return  // not a route
        default:
            throw RouteFileError(path: path, reason: "not a GeoJSON object (type \(object["type"].map { "\($0)" } ?? "missing"))")
        }
    }

    /// GeoJSON positions are `[longitude, latitude, (altitude)]`.
    private static func positions(_ value: Any?, path: String) throws(RouteFileError) -> [GeoCoordinate] {
        guard let list = value as? [[Any]] else {
            throw RouteFileError(path: path, reason: "a LineString's coordinates are not a list of positions")
        }
        var result: [GeoCoordinate] = []
        for position in list {
            guard position.count >= 2, let longitude = (position[0] as? NSNumber)?.doubleValue,
                let latitude = (position[1] as? NSNumber)?.doubleValue, longitude.isFinite, latitude.isFinite
            else { throw RouteFileError(path: path, reason: "a position is not [longitude, latitude]") }
            result.append(GeoCoordinate(latitude: latitude, longitude: longitude))
        }
        return result
    }

    static func gpx(_ data: Data, path: String) throws(RouteFileError) -> [GeoCoordinate] {
        let delegate = GPXReader()
        let parser = XMLParser(data: data)
        parser.shouldResolveExternalEntities = false
        parser.delegate = delegate
        guard parser.parse() else {
            throw RouteFileError(path: path, reason: "not well-formed XML: \(parser.parserError?.localizedDescription ?? "unknown error")")
        }
        if let bad = delegate.invalid { throw RouteFileError(path: path, reason: bad) }
        // Some XML parsers accept a document cut short: the root must have been closed.
        guard delegate.depth == 0, delegate.sawRoot else {
            throw RouteFileError(path: path, reason: "not well-formed XML: the document ends inside an element")
        }
        return delegate.track.isEmpty ? delegate.route : delegate.track
    }

    private final class GPXReader: NSObject, XMLParserDelegate {
        var track: [GeoCoordinate] = []
        var route: [GeoCoordinate] = []
        var invalid: String?
        var depth = 0
        var sawRoot = false

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            depth -= 1
        }

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            depth += 1
            sawRoot = true
            let local = name.split(separator: ":").last.map(String.init) ?? name
            guard local == "trkpt" || local == "rtept" else { return }
            guard let latitude = attributes["lat"].flatMap(Double.init), let longitude = attributes["lon"].flatMap(Double.init),
                latitude.isFinite, longitude.isFinite
            else {
                if invalid == nil { invalid = "a \(local) without numeric lat and lon" }
                return
            }
            let point = GeoCoordinate(latitude: latitude, longitude: longitude)
            if local == "trkpt" { track.append(point) } else { route.append(point) }
        }
    }
}
