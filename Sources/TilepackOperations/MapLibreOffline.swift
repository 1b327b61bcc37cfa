import Foundation
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage
@_spi(TilepackInternal) import TilepackCompression

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
        let covers = try TileExtractor.regionCovers(options.region, zooms: zooms) ?? [:]
        let documents = try OfflineDocuments(
            options: options, styleBase: styleBase, format: format, metadata: metadata, zooms: minZoom...maxZoom, box: box,
            source: source)
        // A PMTiles archive's zooms and box as ranges of its runs: counted before anything is
        // written, and read without visiting the tiles of a run outside them.
        let selection = TileSelection(zooms: minZoom...maxZoom, bounds: options.bounds ?? options.region?.boundingBox)
        if let count = try TileCountLimit.count(of: input, zooms: selection.zooms, bounds: selection.bounds) {
            try TileCountLimit.check(
                count, limit: options.maximumTiles, source: source, writing: "export into the MapLibre offline database \(destination)")
        }
        var report = MapLibreOfflineReport(destination: destination)
        report.tileURLTemplate = documents.template
        report.tileJSONURL = documents.tileJSONURL
        do {
            let file = try AtomicFile(destination: destination, overwrite: options.overwrite)
            do {
                let db = try SQLiteConnection(
                    filename: file.temporaryPath, archivePath: destination, readOnly: false, uri: false, create: true)
                try db.execute("PRAGMA journal_mode = DELETE; PRAGMA foreign_keys = ON")
                try db.inTransaction(throwing: {
                    try db.execute(schema)
                    let now = Int(Date().timeIntervalSince1970)
                    let regionID = try insertRegion(db, documents: documents, options: options, now: now, report: &report)
                    let writer = try OfflineTileWriter(db, regionID: regionID, template: documents.template, options: options, now: now)
                    let zoomRange = minZoom...maxZoom, bounds = options.bounds
                    func store(_ coordinate: TileCoordinate, _ bytes: UnsafeRawBufferPointer) throws {
                        guard zoomRange.contains(coordinate.zoom) else { return }
                        if let bounds, (try? bounds.intersects(coordinate)) != true { return }
                        if !covers.isEmpty, covers[coordinate.zoom]?.contains(coordinate) != true { return }
                        try writer.store(coordinate, bytes, report: &report)
                    }
                    if let selective = input as? any SelectiveTileReading {
                        try selective.forEachTile(in: selection, where: { _ in true }, store)
                    } else {
                        try input.forEachTile(store)
                    }
                })
                try db.execute("PRAGMA user_version = 6")
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

    /// Inserts the region and its resources (the style, the TileJSON, the style's glyphs and
    /// sprites); returns the region's id.
    private static func insertRegion(
        _ db: SQLiteConnection, documents: OfflineDocuments, options: MapLibreOfflineOptions, now: Int,
        report: inout MapLibreOfflineReport
    ) throws(TileArchiveError) -> Int {
        let region = try db.prepare("INSERT INTO regions (definition, description) VALUES (?1, ?2)")
        region.bind(1, text: String(decoding: OfflineDocuments.json(documents.definition), as: UTF8.self))
        try stepBinding(region, 2, OfflineDocuments.json(documents.description))
        let regionID = Int(try db.scalarInt("SELECT last_insert_rowid()") ?? 1)
        var resources: [(String, Int, [UInt8])] = [(options.styleURL, 1, OfflineDocuments.json(documents.style))]
        if let tileJSONURL = documents.tileJSONURL { resources.append((tileJSONURL, 2, OfflineDocuments.json(documents.tileJSON))) }
        for (asset, bytes) in options.styleAssets.resources {
            resources.append((asset.url, asset.kind.rawValue, bytes))
            if asset.kind == .glyphs { report.glyphRanges += 1 } else { report.spriteFiles += 1 }
        }
        report.missingGlyphRanges = options.styleAssets.missingGlyphRanges.count
        let resource = try db.prepare("INSERT INTO resources (url, kind, data, compressed, accessed) VALUES (?1, ?2, ?3, 0, ?4)")
        let link = try db.prepare("INSERT INTO region_resources (region_id, resource_id) VALUES (?1, last_insert_rowid())")
        for (url, kind, data) in resources {
            resource.bind(1, text: url)
            resource.bind(2, kind)
            resource.bind(4, now)
            try stepBinding(resource, 3, data)
            resource.reset()
            link.bind(1, regionID)
            _ = try link.step()
            link.reset()
        }
        return regionID
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

/// Stores tiles in an offline database's `tiles` table, each linked to the region.
private struct OfflineTileWriter {
    let tile: SQLiteStatement
    let tileLink: SQLiteStatement
    let regionID: Int
    let template: String
    let pixelRatio: Int
    let now: Int

    init(_ db: SQLiteConnection, regionID: Int, template: String, options: MapLibreOfflineOptions, now: Int) throws(TileArchiveError) {
        tile = try db.prepare(
            "INSERT INTO tiles (url_template, pixel_ratio, z, x, y, data, compressed, accessed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7)")
        tileLink = try db.prepare("INSERT INTO region_tiles (region_id, tile_id) VALUES (?1, last_insert_rowid())")
        self.regionID = regionID
        self.template = template
        self.pixelRatio = options.pixelRatio
        self.now = now
    }

    /// Stores a tile as MapLibre keeps an HTTP body: the tile itself, not its gzip wrapping.
    func store(_ coordinate: TileCoordinate, _ bytes: UnsafeRawBufferPointer, report: inout MapLibreOfflineReport) throws {
        var body = Array(bytes)
        if TileFormat.isGzip(bytes), case .success(let inflated) = Gzip.decompress(bytes, limit: 1 << 26) { body = inflated }
        tile.bind(1, text: template)
        tile.bind(2, pixelRatio)
        tile.bind(3, coordinate.zoom)
        tile.bind(4, coordinate.x)
        tile.bind(5, coordinate.y)
        tile.bind(7, now)
        try MapLibreOfflineExporter.stepBinding(tile, 6, body)
        tile.reset()
        tileLink.bind(1, regionID)
        _ = try tileLink.step()
        tileLink.reset()
        report.tiles += 1
        report.bytes += body.count
    }
}
