import Foundation

/// What a request path asks for. Parsing never touches the file system: names are only looked up
/// in the archive table afterwards, and anything that is not one of these shapes is `notFound`.
enum Route: Equatable, Sendable {
    /// `/`
    case index
    /// `/_/health`
    case health
    /// `/_/metrics`
    case metrics
    /// `/_/leaflet/<file>`: one of the files read from the Leaflet folder at start.
    case leaflet(String)
    /// `/{name}.json`
    case tileJSON(name: Substring)
    /// `/{name}/`
    case preview(name: Substring)
    /// `/{name}` without the slash: redirected to the preview.
    case previewWithoutSlash(name: Substring)
    /// `/{name}/{z}/{x}/{y}.{ext}`; `coordinate` is `nil` when the numbers are not a tile of
    /// zoom 0-30 (outside every archive: 404).
    case tile(name: Substring, zoom: Int, x: Int, y: Int, fileExtension: Substring)
    case notFound(String)

    /// Parses the path of a request target (`/a/b?query`); the query is ignored here. The path is
    /// cut at its bytes (RFC 3986 paths are bytes, and this runs for every tile request), not at
    /// grapheme clusters.
    init(target: String) {
        self = Self.plainTile(target) ?? Route(splitting: target)
    }

    /// The parse of every shape: the path cut into `%`-decoded segments.
    init(splitting target: String) {
        let slash = UInt8(ascii: "/")
        let end = target.utf8.firstIndex(of: UInt8(ascii: "?")) ?? target.endIndex
        let path = target[..<end]
        guard path.utf8.first == slash else {
            self = .notFound("the request target is not a path")
            return
        }
        var segments: [Substring] = []
        segments.reserveCapacity(4)
        var start = path.utf8.index(after: path.startIndex)
        while true {
            let stop = path.utf8[start...].firstIndex(of: slash) ?? path.endIndex
            guard let segment = Self.percentDecoded(path[start..<stop]) else {
                self = .notFound("the path has a malformed %-escape")
                return
            }
            segments.append(segment)
            if stop == path.endIndex { break }
            start = path.utf8.index(after: stop)
        }
        switch segments.count {
        case 1 where segments[0].isEmpty:
            self = .index
        case 1 where Self.hasJSONSuffix(segments[0]):
            self = .tileJSON(name: segments[0][..<segments[0].utf8.index(segments[0].endIndex, offsetBy: -5)])
        case 1:
            self = .previewWithoutSlash(name: segments[0])
        case 2 where Self.isUnderscore(segments[0]) && segments[1].utf8.elementsEqual("health".utf8):
            self = .health
        case 2 where Self.isUnderscore(segments[0]) && segments[1].utf8.elementsEqual("metrics".utf8):
            self = .metrics
        case 3... where Self.isUnderscore(segments[0]) && segments[1].utf8.elementsEqual("leaflet".utf8):
            self = .leaflet(segments[2...].joined(separator: "/"))
        case 2 where segments[1].isEmpty && !Self.isUnderscore(segments[0]):
            self = .preview(name: segments[0])
        case 4 where !Self.isUnderscore(segments[0]):
            let last = segments[3]
            guard let dot = last.utf8.lastIndex(of: UInt8(ascii: ".")),
                let zoom = Self.number(segments[1]), let x = Self.number(segments[2]), let y = Self.number(last[..<dot])
            else {
                self = .notFound("not a tile path: tiles are /{name}/{z}/{x}/{y}.{extension}")
                return
            }
            self = .tile(name: segments[0], zoom: zoom, x: x, y: y, fileExtension: last[last.utf8.index(after: dot)...])
        default:
            self = .notFound("no such path")
        }
    }

    /// The common case in one pass over the bytes, without splitting: `/{name}/{z}/{x}/{y}.{ext}`
    /// with no `%`-escape, a name that is not `_`, and numbers ``number(_:)`` takes (anything
    /// else, `nil`: the general parse decides). The same answer as the general parse, sooner.
    private static func plainTile(_ target: String) -> Route? {
        let utf8 = target.utf8
        let found = utf8.withContiguousStorageIfAvailable { bytes -> (first: Int, second: Int, third: Int, dot: Int, end: Int)? in
            // Offsets of the four slashes and the last dot of the path, and where it ends.
            guard bytes.first == UInt8(ascii: "/") else { return nil }
            var slashes = (0, 0, 0, 0), count = 1, dot = -1, end = bytes.count
            var index = 1
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "?") {
                    end = index
                    break
                }
                if byte == UInt8(ascii: "%") { return nil }
                if byte == UInt8(ascii: "/") {
                    switch count {
                    case 1: slashes.1 = index
                    case 2: slashes.2 = index
                    case 3: slashes.3 = index
                    default: return nil
                    }
                    count += 1
                } else if byte == UInt8(ascii: "."), count == 4 {
                    dot = index
                }
                index += 1
            }
            guard count == 4, dot > slashes.3 + 1 else { return nil }
            return (slashes.1, slashes.2, slashes.3, dot, end)
        }
        guard let (first, second, third, dot, end) = found ?? nil, first > 1 else { return nil }
        func part(_ from: Int, _ to: Int) -> Substring {
            target[utf8.index(utf8.startIndex, offsetBy: from)..<utf8.index(utf8.startIndex, offsetBy: to)]
        }
        let name = part(1, first)
        guard !isUnderscore(name), let zoom = number(part(first + 1, second)), let x = number(part(second + 1, third)),
            let y = number(part(third + 1, dot))
        else { return nil }
        return .tile(name: name, zoom: zoom, x: x, y: y, fileExtension: part(dot + 1, end))
    }

    private static func isUnderscore(_ segment: Substring) -> Bool {
        segment.utf8.count == 1 && segment.utf8.first == UInt8(ascii: "_")
    }

    private static func hasJSONSuffix(_ segment: Substring) -> Bool {
        let suffix = ".json".utf8
        return segment.utf8.count >= suffix.count && segment.utf8.suffix(suffix.count).elementsEqual(suffix)
    }

    /// A non-negative decimal number of at most 10 digits (no sign, no spaces).
    static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 10 else { return nil }
        var value = 0
        for byte in text.utf8 {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

    /// The segment with `%XX` escapes decoded, or `nil` for a malformed escape or bytes that are
    /// not UTF-8. A decoded `/` stays inside its segment, so `%2F` cannot add a level.
    static func percentDecoded(_ segment: Substring) -> Substring? {
        guard segment.utf8.contains(UInt8(ascii: "%")) else { return segment }
        var bytes: [UInt8] = []
        var iterator = segment.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        return Substring(text)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}

/// `%`-escapes a name for use as one path segment of a URL: everything but RFC 3986's unreserved
/// ASCII characters.
func percentEncodedSegment(_ name: String) -> String {
    name.addingPercentEncoding(withAllowedCharacters: unreservedCharacters) ?? ""
}

private let unreservedCharacters = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
