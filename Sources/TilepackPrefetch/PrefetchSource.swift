import Foundation
import TilepackCore

/// The tile server a prefetcher downloads from: a URL template as `MKTileOverlay` takes it.
///
/// `{x}`, `{y}`, `{-y}`, `{z}`, `{scale}` and `{s}` are expanded by Core's `TileURLTemplate`
/// (the one place that knows templates); `scheme: .tms` counts `{y}` rows from the south (the
/// overlay's `geometryFlipped`); `{-y}` is the TMS row in either scheme.
public struct PrefetchSource: Hashable, Sendable {
    /// The template, e.g. `https://{s}.tiles.example/{z}/{x}/{y}@{scale}x.png`.
    public var urlTemplate: String
    /// How the server numbers rows: `xyz` (north = 0, the default) or `tms`.
    public var scheme: TileScheme
    /// The screen scale put into `{scale}`: 1, 2 or 3.
    public var scale: Int
    /// What `{s}` stands for.
    public var subdomains: [String]
    /// The width and height every raster tile must have, in pixels (Core's `TileSize` rule);
    /// default ``TileSize/default`` times `scale`.
    /// A decodable image of another size (a "blocked" or placeholder image) is refused.
    public var tileSize: Int?
    /// The format every tile must have; `nil` takes the template's file extension (`.png`,
    /// `.jpg`, `.webp`, `.pbf`, `.mvt`, ...), else the store's format, else the first tile's
    /// (an archive holds one format). So a JSON error page is refused from a `.png` template.
    public var format: TileFormat?
    /// Where the server names the version of its tiles: a TileJSON (its `version`) or any
    /// document whose ETag changes with the tiles (used when it has no `version`). Read when a
    /// fetch begins and again before a refresh is switched in: a refresh that saw the version
    /// change starts again, so the store never holds tiles of two versions. `{version}` in the
    /// template is replaced by it. `nil`: the server names no version (Specs/prefetch.md).
    public var versionURL: String?

    public init(
        urlTemplate: String, scheme: TileScheme = .xyz, scale: Int = 1, subdomains: [String] = ["a", "b", "c"],
        tileSize: Int? = nil, format: TileFormat? = nil
    ) {
        self.urlTemplate = urlTemplate
        self.scheme = scheme
        self.scale = scale
        self.subdomains = subdomains
        self.tileSize = tileSize
        self.format = format
    }

    /// The template's placeholder for the version named at ``versionURL``.
    public static let versionPlaceholder = "{version}"

    /// The format named by the template's file extension, if any.
    public var formatFromExtension: TileFormat? {
        let path = urlTemplate.split(separator: "?", maxSplits: 1).first.map(String.init) ?? urlTemplate
        guard let last = path.split(separator: "/").last, let dot = last.lastIndex(of: ".") else { return nil }
        let ext = last[last.index(after: dot)...].lowercased()
        guard !ext.contains("{") else { return nil }
        return TileFormat(metadataValue: ext)
    }

    /// The expected raster tile size.
    public var expectedTileSize: Int { tileSize ?? TileSize.default * scale }

    /// Servers whose tile usage policy forbids bulk downloading: the host and its subdomains.
    /// (<https://operations.osmfoundation.org/policies/tiles/>: "Bulk downloading is strongly
    /// discouraged"; offline prefetch is named as prohibited.)
    public static let bulkDownloadForbiddenHosts = ["tile.openstreetmap.org"]

    /// Why the source is unusable (invalid parameters), or `nil`.
    public var invalidReason: String? {
        guard (1...3).contains(scale) else { return "the scale \(scale) is not 1, 2 or 3" }
        if let versionURL {
            guard let url = URL(string: versionURL), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
                url.host != nil
            else { return "the version URL is not an http(s) URL: \(versionURL)" }
        } else if urlTemplate.contains(Self.versionPlaceholder) {
            return "the URL template has \(Self.versionPlaceholder) but no version URL names the version"
        }
        if let fault = template(version: nil).fault { return fault }
        if let tileSize, let reason = TileSize.invalidReason(tileSize) { return reason }
        if subdomains.isEmpty || subdomains.contains(where: \.isEmpty) { return "a subdomain is empty" }
        guard let url = url(for: TileCoordinate(uncheckedZoom: 0, x: 0, y: 0)),
            let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme), url.host != nil
        else { return "the URL template does not make http(s) URLs: \(urlTemplate)" }
        return nil
    }

    /// Why the source's policy forbids bulk downloads (operation not allowed), or `nil`.
    public var forbiddenReason: String? {
        for host in hosts {
            let name = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "."))
            for forbidden in Self.bulkDownloadForbiddenHosts where name == forbidden || name.hasSuffix("." + forbidden) {
                return "\(name) forbids bulk downloading in its tile usage policy"
            }
        }
        return nil
    }

    /// The hosts the template's URLs go to (one per subdomain when it uses `{s}`).
    public var hosts: [String] {
        var result: [String] = []
        for x in 0..<max(1, subdomains.count) {
            if let host = url(for: TileCoordinate(uncheckedZoom: 30, x: x, y: 0))?.host, !result.contains(host) {
                result.append(host)
            }
        }
        return result
    }

    /// The URL of `tile` (XYZ); `{version}` is given `version` ("0" when `nil`, to check the template).
    public func url(for tile: TileCoordinate, version: String? = nil) -> URL? {
        TemplateURLs(source: self, version: version).url(for: tile)
    }

    var template: TileURLTemplate { TileURLTemplate(urlTemplate) }

    /// The template with `{version}` replaced by `version`, percent-encoded as a path segment.
    func template(version: String?) -> TileURLTemplate {
        guard urlTemplate.contains(Self.versionPlaceholder) else { return template }
        let value =
            (version ?? "0").addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#")))
            ?? "0"
        return TileURLTemplate(urlTemplate.replacingOccurrences(of: Self.versionPlaceholder, with: value))
    }

    var key: String { "\(urlTemplate)|\(scheme)|\(scale)" }
}

/// The URLs of one source's tiles, its template parsed once (a fetch asks for every tile's).
struct TemplateURLs: Sendable {
    let source: PrefetchSource
    let template: TileURLTemplate

    init(source: PrefetchSource, version: String? = nil) {
        self.source = source
        template = source.template(version: version)
    }

    func url(for tile: TileCoordinate) -> URL? {
        template.url(
            z: tile.zoom, x: tile.x, y: tile.y, scheme: source.scheme, scale: Double(source.scale),
            subdomains: source.subdomains)
    }
}
