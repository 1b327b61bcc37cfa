import Foundation
import TilepackCore
import TilepackStorage

#if canImport(FoundationXML)
import FoundationXML
#endif

/// What a tile tree says about itself: gdal2tiles' `tilemapresource.xml` and mbutil's (or
/// gdal2tiles --xyz's) `metadata.json` at its root.
package struct TreeEvidence: Sendable, Equatable {
    /// The row scheme the tree declares, if it declares one.
    package var scheme: TileScheme?
    /// Which file declared ``scheme``.
    package var schemeSource: String?
    /// The tile format the tree declares.
    package var format: TileFormat?
    /// The tile size in pixels the tree declares.
    package var tileSize: Int?
    /// The folder layout the tree declares (`layout` in the `metadata.json` that export writes).
    package var layout: TileTreeLayout?
    /// The bounds the tree declares, as each file's numbers can be read (see ``DeclaredBounds``).
    package var bounds: DeclaredBounds?
    /// Metadata keys and values to carry into the archive (from `metadata.json`, or the title).
    package var metadata: [String: String] = [:]
    /// What was read, one line each, for the user.
    package var notes: [String] = []

    package init() {}

    /// The largest description file read: 16 MiB (real ones are a few kilobytes).
    static let maximumFileSize = 16 << 20

    /// Reads the description files at `root`. A missing file is no evidence; one that exists but
    /// cannot be read (no permission, a folder, a FIFO, a dangling link, too large) or parsed is
    /// an error naming it: the rows would otherwise be stored mirrored without a word.
    package static func read(root: String) throws(OperationError) -> TreeEvidence {
        var evidence = TreeEvidence()
        let xmlPath = root + "/tilemapresource.xml"
        if FileSystem.lstat(xmlPath) == nil && errno == ENAMETOOLONG {
            // The tree's fault, not the file's: no file below the root can be named.
            throw OperationError(
                path: root,
                fault: .badInput(
                    "the tree's path is too long: its files' paths (such as \(xmlPath.utf8.count) bytes for tilemapresource.xml) are longer than the system allows (\(PATH_MAX) bytes, \(NAME_MAX) for a name): move or link the tree to a shorter path"
                ))
        }
        if let data = try contents(xmlPath) {
            try evidence.readTileMapResource(data, path: xmlPath)
        }
        let jsonPath = root + "/metadata.json"
        if let data = try contents(jsonPath) {
            try evidence.readMetadataJSON(data, path: jsonPath)
        }
        return evidence
    }

    /// The file's bytes; `nil` when there is no such entry at all.
    private static func contents(_ path: String) throws(OperationError) -> Data? {
        let info = FileSystem.lstat(path)
        if info == nil && errno == ENOENT { return nil }
        if let info, (info.st_mode & S_IFMT) == S_IFREG, info.st_size > maximumFileSize {
            throw OperationError(
                path: path,
                fault: .badInput(
                    "describes the tree but is \(info.st_size) bytes, over the 16 MiB limit for a description file: fix or remove it; tilepack does not guess the row scheme without it"
                ))
        }
        do {
            return Data(try RegularFile.read(path, limit: maximumFileSize))
        } catch {
            throw OperationError(
                path: path,
                fault: .badInput(
                    "describes the tree but cannot be read (\(error.fault)): fix or remove it; tilepack does not guess the row scheme without it"
                ))
        }
    }

    /// gdal2tiles writes `tilemapresource.xml` (OSGeo TMS 1.0) only for TMS output: its presence
    /// means rows count from the south. A profile other than mercator is not a Web Mercator pyramid.
    mutating func readTileMapResource(_ data: Data, path: String) throws(OperationError) {
        // A DTD could declare entities (external ones read other files, nested ones blow up):
        // a TMS document has none, and one that declares any is refused, never resolved.
        for marker in ["<!DOCTYPE", "<!ENTITY"] where data.range(of: Data(marker.utf8)) != nil {
            throw OperationError(
                path: path,
                fault: .badInput(
                    "declares a DTD or entities (\(marker)): tilepack resolves no XML entities and refuses the file; a TMS TileMap document has none"
                ))
        }
        let delegate = TileMapParser()
        let parser = XMLParser(data: data)
        parser.shouldResolveExternalEntities = false
        parser.delegate = delegate
        guard parser.parse(), delegate.sawTileMap else {
            throw OperationError(
                path: path, fault: .badInput("not a TMS TileMap document: \(parser.parserError.map { "\($0)" } ?? "no <TileMap> element")"))
        }
        if let srs = delegate.srs?.uppercased(), !["EPSG:3857", "EPSG:900913", "OSGEO:41001", "EPSG:3785"].contains(srs) {
            throw OperationError(
                path: path,
                fault: .badInput("the tiles are in \(srs), not Web Mercator (EPSG:3857); tilepack stores Web Mercator pyramids only"))
        }
        scheme = .tms
        schemeSource = "tilemapresource.xml"
        notes.append("tilemapresource.xml (OSGeo TMS, as gdal2tiles writes it): rows counted from the south")
        if let ext = delegate.extensionName, let declared = TileFormat(metadataValue: ext) {
            format = declared
            notes.append("tilemapresource.xml: tile format \(declared)")
        }
        if let width = delegate.width, let size = Int(width) {
            tileSize = size
        }
        if let title = delegate.title, !title.isEmpty { metadata["name"] = title }
        bounds = DeclaredBounds(tileMapBox: delegate.boundingBox)
    }

    /// mbutil's `metadata.json`: an object of metadata keys. A `scheme` key declares the rows.
    mutating func readMetadataJSON(_ data: Data, path: String) throws(OperationError) {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw OperationError(path: path, fault: .badInput("not JSON: \(error.localizedDescription)"))
        }
        guard let dictionary = object as? [String: Any] else {
            throw OperationError(path: path, fault: .badInput("metadata.json must hold a JSON object"))
        }
        for (key, value) in dictionary {
            switch value {
            case let text as String: metadata[key] = text
            case let number as NSNumber: metadata[key] = number.stringValue
            default:
                // Nested objects and arrays (the `json` key, vector_layers) are kept as JSON text.
                guard JSONSerialization.isValidJSONObject(value),
                    let text = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
                else { continue }
                metadata[key] = String(decoding: text, as: UTF8.self)
            }
        }
        if let text = metadata.removeValue(forKey: "scheme") {
            guard let declared = TileScheme(rawValue: text.lowercased()) else {
                throw OperationError(path: path, fault: .badInput("scheme '\(text)' is neither xyz nor tms"))
            }
            if let scheme, scheme != declared {
                throw OperationError(
                    path: path, fault: .conflict("metadata.json says scheme \(declared), but \(schemeSource ?? "the tree") says \(scheme)"))
            }
            scheme = declared
            schemeSource = "metadata.json"
            notes.append("metadata.json: scheme \(declared)")
        }
        if let text = metadata.removeValue(forKey: "layout") {
            guard let declared = TileTreeLayout(rawValue: text.lowercased()) else {
                throw OperationError(path: path, fault: .badInput("layout '\(text)' is neither zxy nor zyx"))
            }
            layout = declared
            notes.append("metadata.json: layout \(declared)")
        }
        if let box = try? TileMetadata(metadata).bounds { bounds = DeclaredBounds(readings: [box], source: "metadata.json") }
        if let text = metadata["format"] {
            guard let declared = TileFormat(metadataValue: text) else {
                throw OperationError(path: path, fault: .badInput("format '\(text)' is not a tile format tilepack knows"))
            }
            format = declared
        }
        notes.append("metadata.json: \(metadata.count) metadata keys")
    }

    /// The layout to import with: the flag and the evidence must agree; either alone decides;
    /// neither means zxy.
    package func resolveLayout(flag: TileTreeLayout?) throws(OperationError) -> TileTreeLayout {
        if let flag, let layout, flag != layout {
            throw OperationError(
                path: "metadata.json",
                fault: .conflict(
                    "--layout \(flag) contradicts metadata.json, which says the tree is \(layout); drop --layout to use the file, or fix the file"
                ))
        }
        return flag ?? layout ?? .zxy
    }

    /// The scheme to import with: the flag and the evidence must agree; either alone decides;
    /// neither means XYZ.
    package func resolveScheme(flag: TileScheme?) throws(OperationError) -> TileScheme {
        switch (flag, scheme) {
        case (let flag?, let declared?) where flag != declared:
            throw OperationError(
                path: schemeSource ?? "",
                fault: .conflict(
                    "--scheme \(flag) says rows count from the \(flag == .tms ? "south" : "north"), but \(schemeSource ?? "the tree") says \(declared) (from the \(declared == .tms ? "south" : "north")); drop --scheme to use the file, or fix the file"
                ))
        case (let flag?, _): return flag
        case (nil, let declared?): return declared
        case (nil, nil): return .xyz
        }
    }
}

private final class TileMapParser: NSObject, XMLParserDelegate {
    var sawTileMap = false
    var srs: String?
    var title: String?
    var extensionName: String?
    var width: String?
    var boundingBox: [String: String] = [:]
    private var text = ""

    func parser(
        _ parser: XMLParser, didStartElement name: String, namespaceURI: String?,
        qualifiedName: String?, attributes: [String: String] = [:]
    ) {
        text = ""
        switch name {
        case "TileMap": sawTileMap = true
        case "BoundingBox": boundingBox = attributes
        case "TileFormat":
            extensionName = attributes["extension"]
            width = attributes["width"]
        default: break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
        switch name {
        case "SRS": srs = value
        case "Title": title = value
        default: break
        }
        text = ""
    }
}
