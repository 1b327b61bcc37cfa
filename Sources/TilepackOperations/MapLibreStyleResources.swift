import Foundation
import TilepackHTTP

/// A glyph range or a sprite file a MapLibre style needs with the network off, keyed by the URL
/// MapLibre Native asks for it (its `OfflineDownload` and `Resource::glyphs` / `spriteImage` /
/// `spriteJSON`; Specs/maplibre-offline.md).
package struct MapLibreStyleResource: Sendable, Hashable {
    /// The `kind` column of maplibre-native's `resources` table.
    package enum Kind: Int, Sendable, Hashable {
        case glyphs = 4
        case spriteImage = 5
        case spriteJSON = 6
    }

    /// The URL MapLibre requests, and the offline database's key.
    package var url: String
    package var kind: Kind
    /// For glyphs: the font stack (names joined by commas) and the range (`0-255`).
    package var fontStack: String?
    package var range: String?
    /// For a sprite file: what follows the sprite's base (`@2x.png`, `.json`) and the sprite's id
    /// (`default` for a style's single `sprite` URL).
    package var spriteSuffix: String?
    package var spriteID: String?
}

/// Where a style's glyphs and sprites are read from when they are not downloaded from the
/// style's own URLs: local files, for building an offline pack without the network.
package struct MapLibreAssetFiles: Sendable {
    /// A path with `{fontstack}` and `{range}`, e.g. `fonts/{fontstack}/{range}.pbf` (the layout of
    /// openmaptiles/fonts and font-maker).
    package var glyphs: String?
    /// The path of a sprite without its suffix, e.g. `sprites/basic` for `basic.json`, `basic.png`,
    /// `basic@2x.json`, `basic@2x.png`; with `{id}` for a style of several sprites.
    package var sprite: String?

    package init(glyphs: String? = nil, sprite: String? = nil) {
        self.glyphs = glyphs
        self.sprite = sprite
    }
}

/// The glyphs and sprites of a style, listed as MapLibre Native's offline download lists them
/// and loaded from the style's URLs or from local files.
package enum MapLibreStyleResources {
    /// The font stack MapLibre uses for a symbol layer with text and no `text-font`.
    package static let defaultFontStack = "Open Sans Regular,Arial Unicode MS Regular"

    /// The glyph ranges and sprite files `style` needs at `pixelRatio`, without ideographs (CJK
    /// unified ideographs and Hangul syllables, which MapLibre draws locally when a region says
    /// `include_ideographs: false`), and warnings for what cannot be listed (a `text-font`
    /// expression without literal font stacks, which MapLibre also cannot take offline).
    package static func list(style: [String: Any], pixelRatio: Int) -> (resources: [MapLibreStyleResource], warnings: [String]) {
        var resources: [MapLibreStyleResource] = []
        var warnings: [String] = []
        if let glyphs = style["glyphs"] as? String {
            var stacks = Set<String>()
            for case let layer as [String: Any] in style["layers"] as? [Any] ?? [] where layer["type"] as? String == "symbol" {
                let layout = layer["layout"] as? [String: Any] ?? [:]
                guard layout["text-field"] != nil else { continue }
                guard let font = layout["text-font"] else {
                    stacks.insert(defaultFontStack)
                    continue
                }
                let found = fontStacks(in: font)
                if found.isEmpty {
                    warnings.append(
                        "layer '\(layer["id"] as? String ?? "?")': its text-font has no literal font stack, so its glyphs are not stored (use a 'literal', 'step' or 'match' of font stacks)"
                    )
                }
                stacks.formUnion(found)
            }
            for stack in stacks.sorted() {
                for index in 0..<256 where !isIdeographRange(index) {
                    let range = "\(index * 256)-\(index * 256 + 255)"
                    let url = glyphs.replacingOccurrences(of: "{fontstack}", with: percentEncoded(stack))
                        .replacingOccurrences(of: "{range}", with: range)
                    resources.append(MapLibreStyleResource(url: url, kind: .glyphs, fontStack: stack, range: range))
                }
            }
        }
        var sprites: [(id: String, url: String)] = []
        if let sprite = style["sprite"] as? String {
            sprites.append(("default", sprite))
        } else if let list = style["sprite"] as? [Any] {
            for case let entry as [String: Any] in list {
                if let id = entry["id"] as? String, let url = entry["url"] as? String { sprites.append((id, url)) }
            }
        }
        let scale = pixelRatio > 1 ? "@2x" : ""
        for (id, base) in sprites {
            for (suffix, kind) in [(scale + ".json", MapLibreStyleResource.Kind.spriteJSON), (scale + ".png", .spriteImage)] {
                // The suffix goes before a query string, as MapLibre adds it.
                let parts = base.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
                let url = String(parts[0]) + suffix + (parts.count > 1 ? "?" + String(parts[1]) : "")
                resources.append(MapLibreStyleResource(url: url, kind: kind, spriteSuffix: suffix, spriteID: id))
            }
        }
        return (resources, warnings)
    }

    /// Font stacks in a `text-font` value: an array of font names, or the literal arrays of names
    /// an expression can give (`["literal", [...]]`, the outputs of `step`, `match` and `case`).
    /// An array whose first element is an expression operator (`["get", "font"]`) is an
    /// expression, as MapLibre parses it.
    static func fontStacks(in value: Any) -> Set<String> {
        if let names = value as? [String], let first = names.first, !expressionOperators.contains(first) {
            return [names.joined(separator: ",")]
        }
        return literalFontStacks(in: value)
    }

    /// The `["literal", [names]]` inside an expression.
    static func literalFontStacks(in value: Any) -> Set<String> {
        guard let expression = value as? [Any] else { return [] }
        if expression.first as? String == "literal", expression.count == 2, let names = expression[1] as? [String], !names.isEmpty {
            return [names.joined(separator: ",")]
        }
        var stacks = Set<String>()
        for element in expression.dropFirst() { stacks.formUnion(literalFontStacks(in: element)) }
        return stacks
    }

    /// The MapLibre style specification's expression operators that can begin a `text-font` value.
    static let expressionOperators: Set<String> = [
        "literal", "array", "at", "case", "coalesce", "concat", "config", "downcase", "feature-state", "format", "geometry-type",
        "get", "global-state", "has", "id", "in", "index-of", "interpolate", "let", "match", "properties", "slice", "step",
        "string", "to-string", "upcase", "var", "zoom",
    ]

    /// Ranges of CJK unified ideographs (U+4E00-U+9FFF) and Hangul syllables (U+AC00-U+D7AF),
    /// which MapLibre's `allowsFixedWidthGlyphGeneration` draws locally.
    static func isIdeographRange(_ index: Int) -> Bool {
        let first = index * 256, last = first + 255
        return (first <= 0x9FFF && last >= 0x4E00) || (first <= 0xD7AF && last >= 0xAC00)
    }

    /// MapLibre's `util::percentEncode`: every byte but the unreserved characters.
    static func percentEncoded(_ text: String) -> String {
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    /// What loading a style's resources gave: each resource's bytes, and the glyph ranges the
    /// font does not have (a 404, or no file), which MapLibre also draws without.
    package struct Loaded: Sendable {
        package var resources: [(MapLibreStyleResource, [UInt8])] = []
        package var missingGlyphRanges: [String] = []
    }

    /// Loads `resources` from local files (for the kinds `files` names) or from their URLs.
    ///
    /// A glyph range the font lacks (404 or no file) is skipped and listed; a missing sprite, an
    /// error answer, a body that is not a glyph PBF, sprite JSON or PNG, and a font stack that
    /// would leave the `--glyphs` folder are errors naming the URL or file.
    package static func load(
        _ resources: [MapLibreStyleResource], files: MapLibreAssetFiles, client: HTTPClient = .shared,
        retry: RetryPolicy = RetryPolicy(maximumAttempts: 4)
    ) async throws(OperationError) -> Loaded {
        // Where each one is read: local files at once, URLs afterwards, several at a time.
        var found: [(name: String, bytes: [UInt8]?)] = []
        var remote: [Int] = []
        for (index, resource) in resources.enumerated() {
            if resource.kind == .glyphs, let template = files.glyphs, let stack = resource.fontStack, let range = resource.range {
                guard !stack.contains("/"), !stack.contains("\0"), stack != "..", stack != "." else {
                    throw OperationError(path: template, fault: .badInput("the font stack '\(stack)' is not a folder name under --glyphs"))
                }
                let name = template.replacingOccurrences(of: "{fontstack}", with: stack).replacingOccurrences(of: "{range}", with: range)
                found.append((name, try readFile(name, optional: true)))
            } else if resource.kind != .glyphs, let base = files.sprite, let suffix = resource.spriteSuffix {
                let id = resource.spriteID ?? "default"
                guard base.contains("{id}") || id == "default" else {
                    throw OperationError(
                        path: base, fault: .badInput("the style has several sprites: put {id} in --sprite to name each one's files"))
                }
                guard !id.contains("/"), id != "..", id != "." else {
                    throw OperationError(path: base, fault: .badInput("the sprite id '\(id)' is not a file name under --sprite"))
                }
                let name = base.replacingOccurrences(of: "{id}", with: id) + suffix
                found.append((name, try readFile(name, optional: false)))
            } else {
                found.append((resource.url, nil))
                remote.append(index)
            }
        }
        for (index, bytes) in try await downloadAll(remote.map { resources[$0].url }, client: client, retry: retry).enumerated() {
            found[remote[index]].bytes = bytes
        }

        var loaded = Loaded()
        for (resource, (name, bytes)) in zip(resources, found) {
            guard let bytes else {
                guard resource.kind == .glyphs else {
                    throw OperationError(path: name, fault: .badInput("the style's sprite \(resource.url) was not found"))
                }
                loaded.missingGlyphRanges.append("\(resource.fontStack ?? "") \(resource.range ?? "")")
                continue
            }
            if let fault = contentFault(bytes, kind: resource.kind) {
                throw OperationError(path: name, fault: .badInput("\(fault) (for \(resource.url))"))
            }
            loaded.resources.append((resource, bytes))
        }
        return loaded
    }

    /// Requests in flight at once: a style of four font stacks is 520 glyph ranges, which one at a
    /// time would cost 520 round trips.
    static let concurrentDownloads = 6

    /// Downloads `urls` (``download(_:client:retry:)`` each), at most ``concurrentDownloads`` at a
    /// time; the answers in the order of `urls`. The first error stops the rest.
    static func downloadAll(_ urls: [String], client: HTTPClient, retry: RetryPolicy) async throws(OperationError) -> [[UInt8]?] {
        var answers = [[UInt8]?](repeating: nil, count: urls.count)
        do {
            try await withThrowingTaskGroup(of: (Int, [UInt8]?).self) { group in
                var next = 0
                func start() {
                    let index = next, url = urls[index]
                    next += 1
                    group.addTask { (index, try await download(url, client: client, retry: retry)) }
                }
                while next < min(urls.count, concurrentDownloads) { start() }
                while let (index, bytes) = try await group.next() {
                    answers[index] = bytes
                    if next < urls.count { start() }
                }
            }
        } catch let error as OperationError {
            throw error
        } catch {
            throw OperationError(path: "", fault: .io("\(error)"))
        }
        return answers
    }

    static func readFile(_ path: String, optional: Bool) throws(OperationError) -> [UInt8]? {
        guard FileManager.default.fileExists(atPath: path) else {
            if optional { return nil }
            throw OperationError(path: path, fault: .badInput("no such file"))
        }
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let size = attributes[.size] as? Int, size <= maximumBytes
        else {
            throw OperationError(path: path, fault: .badInput("not a readable file of at most \(maximumBytes) bytes"))
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw OperationError(path: path, fault: .badInput("could not be read"))
        }
        return [UInt8](data)
    }

    /// A glyph range is at most a few hundred kilobytes; a sprite sheet a few megabytes.
    static let maximumBytes = 32 << 20

    static func download(_ url: String, client: HTTPClient, retry: RetryPolicy) async throws(OperationError) -> [UInt8]? {
        guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme?.lowercased() ?? "") else {
            throw OperationError(path: url, fault: .badInput("not an http(s) URL; give the files with --glyphs or --sprite"))
        }
        let response: HTTPResponse
        do {
            response = try await client.send(HTTPRequest(url: parsed, maximumBodyBytes: maximumBytes), retry: retry)
        } catch {
            throw OperationError(path: url, fault: .io(error.reason))
        }
        if response.status == 404 { return nil }
        guard response.status == 200 else {
            throw OperationError(path: url, fault: .io("the server answered \(response.status)"))
        }
        return [UInt8](response.body)
    }

    /// Why `bytes` are not what a resource of `kind` holds, or nil: a glyph PBF starts with its
    /// `fontstacks` field (or is empty), sprite JSON is an object, a sprite image a PNG. An error
    /// page served with status 200 is caught here.
    static func contentFault(_ bytes: [UInt8], kind: MapLibreStyleResource.Kind) -> String? {
        switch kind {
        case .glyphs:
            return bytes.isEmpty || bytes[0] == 0x0A ? nil : "not a glyph PBF (it does not start with a font stack)"
        case .spriteJSON:
            return (try? JSONSerialization.jsonObject(with: Data(bytes))) is [String: Any] ? nil : "not a sprite index (a JSON object)"
        case .spriteImage:
            return bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) ? nil : "not a sprite image (a PNG)"
        }
    }
}
