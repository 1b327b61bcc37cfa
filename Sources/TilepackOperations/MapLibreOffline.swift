import Foundation
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage

/// Options of ``MapLibreOfflineExporter`` (Specs/maplibre-offline.md).
package struct MapLibreOfflineOptions: Sendable {
    /// The style URL the app opens the map with: the style is stored under it.
    package var styleURL: String
    /// The style to store (a JSON document); `nil`: a raster style made for the archive.
    package var style: Data?
    /// The style's source that the archive's tiles fill.
    package var sourceName = "tilepack"
    /// The pixel ratio MapLibre asks tiles for (1, 2 or 3).
    package var pixelRatio = 1
    package var bounds: GeoBoundingBox?
    package var region: GeoRegion?
    package var minZoom: Int?
    package var maxZoom: Int?
    package var overwrite = false
    /// The most tiles written (`--max-tiles`, default 500,000,000): a PMTiles selection of more
    /// (counted from its runs) is refused before the database is made.
    package var maximumTiles = TileCountLimit.defaultMaximum
    /// The style's glyph ranges and sprite files (``MapLibreStyleResources/load(_:files:client:retry:)``),
    /// stored as resources under the URLs MapLibre asks for them.
    package var styleAssets = MapLibreStyleResources.Loaded()

    package init(styleURL: String) { self.styleURL = styleURL }
}

/// What an offline export wrote.
package struct MapLibreOfflineReport: Sendable, Codable {
    package var destination: String
    package var tiles = 0
    package var bytes = 0
    package var tileURLTemplate = ""
    package var tileJSONURL: String?
    /// Glyph ranges and sprite files stored, and the glyph ranges the font lacks.
    package var glyphRanges = 0
    package var spriteFiles = 0
    package var missingGlyphRanges = 0
    package var seconds = 0.0
}

/// Writes an archive's tiles as a MapLibre Native offline database (the `offline_schema.sql` of
/// maplibre-native at `user_version` 6): one region, its tiles keyed by the source's URL template,
/// and the style and the source's TileJSON as resources, so that an app that side-loads the file
/// (`MLNOfflineStorage addContentsOfURL:`, `OfflineManager.mergeOfflineRegions`) shows the region
/// with the network off.
package enum MapLibreOfflineExporter {
    package static func run(source: String, destination: String, options: MapLibreOfflineOptions) throws(OperationError)
        -> MapLibreOfflineReport
    {
        let start = DispatchTime.now().uptimeNanoseconds
        try OutputIsInput.refuse(output: destination, inputs: [source])
        guard let styleBase = URL(string: options.styleURL), styleBase.scheme != nil else {
            throw OperationError(path: "", fault: .badInput("--style-url '\(options.styleURL)' is not an absolute URL"))
        }
        guard (1...3).contains(options.pixelRatio) else {
            throw OperationError(path: "", fault: .badInput("--pixel-ratio \(options.pixelRatio) is not 1, 2 or 3"))
        }
        if options.region != nil && options.bounds != nil {
            throw OperationError(path: "", fault: .badInput("give a box (--bbox) or a region (--region), not both"))
        }
        let input = try ArchiveLocation.open(source)
        let (metadata, levels) = try TileExtractor.metadataAndLevels(input, path: source)
        guard case .encoded(let format) = input.content ?? .encoded((try? metadata.format) ?? .png) else {
            throw OperationError(path: source, fault: .badInput("raw-bitmap tiles are not images MapLibre reads (convert them to PNG)"))
        }
        let zooms = levels.map(\.zoom).filter { ($0 >= (options.minZoom ?? 0)) && ($0 <= (options.maxZoom ?? TileCoordinate.maximumZoom)) }
        guard let minZoom = zooms.min(), let maxZoom = zooms.max() else {
            throw OperationError(path: source, fault: .badInput("no zoom of the archive lies in the zooms asked for"))
        }
        let box = options.region?.boundingBox ?? options.bounds ?? ((try? metadata.bounds) ?? nil) ?? GeoBoundingBox.world
        var covers: [Int: RegionCover] = [:]
        if let region = options.region {
            do {
                for zoom in zooms { covers[zoom] = try RegionCover(region: region, zoom: zoom) }
            } catch {
                throw OperationError(path: "", fault: .badInput("\(error)"))
            }
        }

        // The style and where its source's tiles are.
        let name = options.sourceName
        let directory = styleBase.deletingLastPathComponent().absoluteString
        var tileJSONURL: String? = directory + "\(name).json"
        var template = directory + "\(name)/{z}/{x}/{y}.\(format.fileExtension)"
        let isVector = format == .pbf
        var style: [String: Any]
        if let data = options.style {
            guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
                throw OperationError(path: "", fault: .badInput("the style is not a JSON object"))
            }
            guard let sources = object["sources"] as? [String: Any], let ours = sources[name] as? [String: Any] else {
                throw OperationError(path: "", fault: .badInput("the style has no source '\(name)' (name it with --source)"))
            }
            if let tiles = ours["tiles"] as? [String], let first = tiles.first {
                template = first
                tileJSONURL = nil
            } else if let url = ours["url"] as? String {
                tileJSONURL = url
            } else {
                throw OperationError(path: "", fault: .badInput("the style's source '\(name)' has neither a url nor tiles"))
            }
            style = object
        } else {
            guard !isVector else {
                throw OperationError(
                    path: source,
                    fault: .badInput("vector tiles need a style that draws them: give one with --style FILE (and --source NAME)"))
            }
            style = [
                "version": 8, "name": metadata.name ?? name,
                "sources": [name: ["type": "raster", "url": tileJSONURL!, "tileSize": 256]],
                "layers": [["id": name, "type": "raster", "source": name]],
            ]
        }
        var tileJSON: [String: Any] = [
            "tilejson": "3.0.0", "tiles": [template], "scheme": "xyz", "minzoom": minZoom, "maxzoom": maxZoom,
            "bounds": [box.west, box.south, box.east, box.north], "name": metadata.name ?? name,
        ]
        if let attribution = metadata.attribution { tileJSON["attribution"] = attribution }
        if let json = metadata.json, let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any],
            let layers = object["vector_layers"]
        {
            tileJSON["vector_layers"] = layers
        }
        let definition: [String: Any] = [
            "style_url": options.styleURL, "bounds": [box.south, box.west, box.north, box.east], "min_zoom": Double(minZoom),
            "max_zoom": Double(maxZoom), "pixel_ratio": Double(options.pixelRatio), "include_ideographs": false,
        ]
        func json(_ object: Any) -> [UInt8] {
            Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data())
        }

        // A PMTiles archive's zooms and box as ranges of its runs: counted before anything is
        // written, and read without visiting the tiles of a run outside them.
        let selection = TileSelection(zooms: minZoom...maxZoom, bounds: options.bounds ?? options.region?.boundingBox)
        if let count = try TileCountLimit.count(of: input, zooms: selection.zooms, bounds: selection.bounds) {
            try TileCountLimit.check(
                count, limit: options.maximumTiles, source: source, writing: "export into the MapLibre offline database \(destination)")
        }
        var report = MapLibreOfflineReport(destination: destination)
        report.tileURLTemplate = template
        report.tileJSONURL = tileJSONURL
        do {
            let file = try AtomicFile(destination: destination, overwrite: options.overwrite)
            do {
                let db = try SQLiteConnection(
                    filename: file.temporaryPath, archivePath: destination, readOnly: false, uri: false, create: true)
                try db.execute("PRAGMA journal_mode = DELETE; PRAGMA foreign_keys = ON; BEGIN")
                try db.execute(schema)
                let now = Int(Date().timeIntervalSince1970)
                let region = try db.prepare("INSERT INTO regions (definition, description) VALUES (?1, ?2)")
                region.bind(1, text: String(decoding: json(definition), as: UTF8.self))
                let description = json(["name": metadata.name ?? name, "writer": "tilepack"])
                try stepBinding(region, 2, description)
                let regionID = try db.scalarInt("SELECT last_insert_rowid()") ?? 1
                var resources: [(String, Int, [UInt8])] = [(options.styleURL, 1, json(style))]
                if let tileJSONURL { resources.append((tileJSONURL, 2, json(tileJSON))) }
                for (asset, bytes) in options.styleAssets.resources {
                    resources.append((asset.url, asset.kind.rawValue, bytes))
                    if asset.kind == .glyphs { report.glyphRanges += 1 } else { report.spriteFiles += 1 }
                }
                report.missingGlyphRanges = options.styleAssets.missingGlyphRanges.count
                let resource = try db.prepare(
                    "INSERT INTO resources (url, kind, data, compressed, accessed) VALUES (?1, ?2, ?3, 0, ?4)")
                let link = try db.prepare("INSERT INTO region_resources (region_id, resource_id) VALUES (?1, last_insert_rowid())")
                for (url, kind, data) in resources {
                    resource.bind(1, text: url)
                    resource.bind(2, kind)
                    resource.bind(4, now)
                    try stepBinding(resource, 3, data)
                    resource.reset()
                    link.bind(1, Int(regionID))
                    _ = try link.step()
                    link.reset()
                }
                let tile = try db.prepare(
                    "INSERT INTO tiles (url_template, pixel_ratio, z, x, y, data, compressed, accessed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7)"
                )
                let tileLink = try db.prepare("INSERT INTO region_tiles (region_id, tile_id) VALUES (?1, last_insert_rowid())")
                let minimum = minZoom, maximum = maxZoom, bounds = options.bounds
                func store(_ coordinate: TileCoordinate, _ bytes: UnsafeRawBufferPointer) throws {
                    guard (minimum...maximum).contains(coordinate.zoom) else { return }
                    if let bounds, (try? bounds.intersects(coordinate)) != true { return }
                    if !covers.isEmpty, covers[coordinate.zoom]?.contains(coordinate) != true { return }
                    // Stored as MapLibre keeps an HTTP body: the tile itself, not its gzip wrapping.
                    var body = Array(bytes)
                    if TileFormat.isGzip(bytes), case .success(let inflated) = Gzip.decompress(bytes, limit: 1 << 26) { body = inflated }
                    tile.bind(1, text: template)
                    tile.bind(2, options.pixelRatio)
                    tile.bind(3, coordinate.zoom)
                    tile.bind(4, coordinate.x)
                    tile.bind(5, coordinate.y)
                    tile.bind(7, now)
                    try stepBinding(tile, 6, body)
                    tile.reset()
                    tileLink.bind(1, Int(regionID))
                    _ = try tileLink.step()
                    tileLink.reset()
                    report.tiles += 1
                    report.bytes += body.count
                }
                if let selective = input as? any SelectiveTileReading {
                    try selective.forEachTile(in: selection, where: { _ in true }, store)
                } else {
                    try input.forEachTile(store)
                }
                try db.execute("COMMIT; PRAGMA user_version = 6")
            }
            try file.commit()
        } catch let error as OperationError {
            throw error
        } catch {
            throw OperationError.wrapping(error, path: destination)
        }
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    /// Binds `bytes` (not copied) as parameter `index` and steps the statement while they are valid.
    static func stepBinding(_ statement: SQLiteStatement, _ index: Int32, _ bytes: [UInt8]) throws(TileArchiveError) {
        try bytes.withUnsafeBytes { raw in
            Result { () throws(TileArchiveError) in
                try statement.bind(index, blobNoCopy: raw)
                _ = try statement.step()
            }
        }.get()
    }

    /// maplibre-native's `offline_schema.sql`, as Specs/maplibre-offline.md quotes it.
    static let schema = """
        CREATE TABLE resources (
          id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
          url TEXT NOT NULL,
          kind INTEGER NOT NULL,
          expires INTEGER,
          modified INTEGER,
          etag TEXT,
          data BLOB,
          compressed INTEGER NOT NULL DEFAULT 0,
          accessed INTEGER NOT NULL,
          must_revalidate INTEGER NOT NULL DEFAULT 0,
          UNIQUE (url)
        );
        CREATE TABLE tiles (
          id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
          url_template TEXT NOT NULL,
          pixel_ratio INTEGER NOT NULL,
          z INTEGER NOT NULL,
          x INTEGER NOT NULL,
          y INTEGER NOT NULL,
          expires INTEGER,
          modified INTEGER,
          etag TEXT,
          data BLOB,
          compressed INTEGER NOT NULL DEFAULT 0,
          accessed INTEGER NOT NULL,
          must_revalidate INTEGER NOT NULL DEFAULT 0,
          UNIQUE (url_template, pixel_ratio, z, x, y)
        );
        CREATE TABLE regions (
          id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
          definition TEXT NOT NULL,
          description BLOB
        );
        CREATE TABLE region_resources (
          region_id INTEGER NOT NULL REFERENCES regions(id) ON DELETE CASCADE,
          resource_id INTEGER NOT NULL REFERENCES resources(id),
          UNIQUE (region_id, resource_id)
        );
        CREATE TABLE region_tiles (
          region_id INTEGER NOT NULL REFERENCES regions(id) ON DELETE CASCADE,
          tile_id INTEGER NOT NULL REFERENCES tiles(id),
          UNIQUE (region_id, tile_id)
        );
        CREATE INDEX resources_accessed ON resources (accessed);
        CREATE INDEX tiles_accessed ON tiles (accessed);
        CREATE INDEX region_resources_resource_id ON region_resources (resource_id);
        CREATE INDEX region_tiles_tile_id ON region_tiles (tile_id);
        """
}
