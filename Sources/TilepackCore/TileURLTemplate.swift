import Foundation

/// A tile URL template, `https://{s}.tiles.example/{z}/{x}/{y}@{scale}x.png`: the one place in
/// tilepack that parses, checks, expands and recognises templates (the tile layer's
/// `URLTemplateTileSource`, prefetch's `PrefetchSource` and `render` all use it).
///
/// Placeholders, as MKTileOverlay, Leaflet, OpenLayers and QGIS write them:
/// - `{z}`, `{x}`: the zoom and the column;
/// - `{y}`: the row in the template's scheme (XYZ, from the north; TMS, from the south, when the
///   caller's scheme says so: MKTileOverlay's `geometryFlipped`);
/// - `{-y}`: the TMS row (`2^z - 1 - y`, from the south) whatever the scheme, as Leaflet defines it;
/// - `{scale}`: the screen scale (`1`, `2`, `1.5`);
/// - `{s}`: one of the subdomains, `subdomains[(x + y) % count]` with the XYZ row, as Leaflet picks them.
///
/// Any other brace is kept as it is. A template is parsed once; expanding it is one pass over its
/// parts (a bulk download expands one for every tile).
public struct TileURLTemplate: Hashable, Sendable, CustomStringConvertible {
    /// The template as given.
    public let text: String
    private let parts: [Part]

    private enum Part: Hashable, Sendable {
        case literal(String)
        case zoom, column, row, tmsRow, scale, subdomain
    }

    private static let placeholders: [String: Part] = [
        "z": .zoom, "x": .column, "y": .row, "-y": .tmsRow, "scale": .scale, "s": .subdomain,
    ]

    /// Parses `text`; never fails (an overlay takes any template): ``fault`` says whether it can
    /// name every tile.
    public init(_ text: String) {
        self.text = text
        var parts: [Part] = []
        var literal = ""
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            literal += rest[..<open]
            let afterOpen = rest.index(after: open)
            if let close = rest[afterOpen...].prefix(7).firstIndex(of: "}"),
                let part = Self.placeholders[String(rest[afterOpen..<close])]
            {
                if !literal.isEmpty { parts.append(.literal(literal)) }
                literal = ""
                parts.append(part)
                rest = rest[rest.index(after: close)...]
            } else {
                literal.append("{")
                rest = rest[afterOpen...]
            }
        }
        literal += rest
        if !literal.isEmpty { parts.append(.literal(literal)) }
        self.parts = parts
    }

    /// Parses `text` and checks that it names every tile.
    /// - Throws: ``TileURLTemplateError`` naming the template and the placeholder it lacks.
    public init(validating text: String) throws(TileURLTemplateError) {
        self.init(text)
        if let missing { throw TileURLTemplateError(template: text, missing: missing) }
    }

    /// The placeholder a template needs to name every tile and lacks (`{z}`, `{x}`, or
    /// `{y} or {-y}`), or `nil` when it has them all.
    public var missing: String? {
        if !parts.contains(.zoom) { return "{z}" }
        if !parts.contains(.column) { return "{x}" }
        if !parts.contains(.row) && !parts.contains(.tmsRow) { return "{y} or {-y}" }
        return nil
    }

    /// Why the template cannot name every tile ("the URL template T has no {z}"), or `nil`.
    public var fault: String? { missing.map { TileURLTemplateError(template: text, missing: $0).description } }

    /// Whether `text` is a template that names every tile: what `render` takes as a URL layer.
    public static func recognises(_ text: String) -> Bool { TileURLTemplate(text).missing == nil }

    /// Whether the template has `{s}`.
    public var usesSubdomains: Bool { parts.contains(.subdomain) }

    /// The template with its placeholders replaced for the tile `z/x/y` (`y` counted from the
    /// north), `{y}` in `scheme`'s rows, `{scale}` without a fraction when whole, `{s}` one of
    /// `subdomains` (empty: `{s}` is kept).
    public func expand(z: Int, x: Int, y: Int, scheme: TileScheme = .xyz, scale: Double = 1, subdomains: [String] = []) -> String {
        var output = ""
        output.reserveCapacity(text.utf8.count + 24)
        for part in parts {
            switch part {
            case .literal(let literal): output += literal
            case .zoom: output += String(z)
            case .column: output += String(x)
            case .row: output += String(scheme.flipIfTMS(row: y, zoom: z))
            case .tmsRow: output += String(TileScheme.tms.flipIfTMS(row: y, zoom: z))
            case .scale: output += scale.rounded() == scale && abs(scale) < 1e15 ? String(Int(scale)) : String(scale)
            case .subdomain: output += subdomains.isEmpty ? "{s}" : subdomains[Int((x &+ y).magnitude % UInt(subdomains.count))]
            }
        }
        return output
    }

    /// ``expand(z:x:y:scheme:scale:subdomains:)`` as a URL: a path starting with `/` is a file;
    /// `nil` when the result is not a URL.
    public func url(z: Int, x: Int, y: Int, scheme: TileScheme = .xyz, scale: Double = 1, subdomains: [String] = []) -> URL? {
        let expanded = expand(z: z, x: x, y: y, scheme: scheme, scale: scale, subdomains: subdomains)
        return expanded.hasPrefix("/") ? URL(fileURLWithPath: expanded) : URL(string: expanded)
    }

    public var description: String { text }
}

/// A URL template that cannot name every tile.
public struct TileURLTemplateError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The template as given.
    public var template: String
    /// The placeholder it lacks: `{z}`, `{x}` or `{y} or {-y}`.
    public var missing: String

    public var description: String { "the URL template \(template) has no \(missing)" }
}
