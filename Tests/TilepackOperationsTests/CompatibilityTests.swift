import Foundation
import Testing
@_spi(TilepackInternal) import TilepackCompression
import TilepackCore
import TilepackOperations
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

/// Archives and metadata from other tools convert into every format (issue 31).
@Suite struct MetadataMappingTests {
    static let outputs = ["mbtiles", "pmtiles", "tilepack"]

    /// Every archive of `Tests/Fixtures/` (and the sample bundle) that tilepack opens.
    static var archives: [String] {
        var paths: [String] = []
        for folder in ["martin", "mbutil", "node-mbtiles", "pmtiles"] {
            let dir = TestSupport.fixturesRoot.appendingPathComponent(folder)
            for name in (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? [] where !name.hasSuffix(".md") {
                paths.append("\(folder)/\(name)")
            }
        }
        return paths.sorted()
    }

    /// Conversions that fail for their tiles, never for metadata, and what they say: a NULL tile
    /// (a diff file, a damaged one), bytes of no known format, a row outside its zoom; and an
    /// empty archive with no format into MBTiles, which must name one (nothing to take it from).
    static let failsForItsTiles: [String: (outputs: Set<String>, says: String)] = [
        "node-mbtiles/corrupt_null_tile.mbtiles": (Set(outputs), "has NULL data"),
        "martin/world_cities_diff.mbtiles": (Set(outputs), "has NULL data"),
        "martin/world_cities_bindiff.mbtiles": (Set(outputs), "has NULL data"),
        "martin/invalid-tile-format.mbtiles": (Set(outputs), "is of no known format"),
        "martin/invalid-tile-idx.mbtiles": (Set(outputs), "row 64 is outside 0..<64 at zoom 6"),
        "node-mbtiles/geocoder_data.mbtiles": (["mbtiles"], "holds no tiles and declares no format"),
        "node-mbtiles/with spaces.mbtiles": (["mbtiles"], "holds no tiles and declares no format"),
        "pmtiles/test_fixture_mlt.pmtiles": (["mbtiles"], "holds no tiles and declares no format"),
    ]

    /// Every fixture that opens converts into every output format whatever its metadata, and
    /// the bundle and PMTiles outputs keep every key of the source.
    @Test(arguments: archives)
    func everyFixtureConvertsToEveryFormat(_ fixture: String) throws {
        let path = fixture.hasPrefix("/") ? fixture : TestSupport.fixture(fixture)
        guard let source = try? ArchiveLocation.open(path) else { return }  // not an archive: exit 2, tested in VerifyTests
        let original = try source.metadata()
        let dir = try TemporaryDirectory()
        for output in Self.outputs {
            let destination = dir.file("out.\(output)")
            do {
                let report = try ArchiveConverter.run(source: path, destination: destination, options: ConvertOptions())
                #expect(Self.failsForItsTiles[fixture]?.outputs.contains(output) != true, "\(fixture) -> \(output) was expected to fail")
                #expect(report.tiles == (try source.tileCount()))
                let written = try ArchiveLocation.open(destination).metadata()
                if output == "mbtiles" {
                    let verify = ArchiveVerifier.run(path: destination)
                    #expect(!verify.findings.contains { $0.check == "metadata" && $0.severity == .error }, "\(fixture): \(verify.findings)")
                    for warning in report.warnings { #expect(warning.hasPrefix("metadata"), "\(warning)") }
                } else {
                    #expect(report.warnings.isEmpty, "\(fixture) -> \(output): \(report.warnings)")
                    for key in original.keys where !(key == TileMetadata.Key.name && original.name == "") {
                        Self.expectSameValue(written[key], original[key], "\(fixture) -> \(output): \(key)")
                    }
                }
            } catch {
                let expected = Self.failsForItsTiles[fixture]
                #expect(expected?.outputs.contains(output) == true, "\(fixture) -> \(output): \(error)")
                #expect("\(error)".contains(expected?.says ?? "(no failure expected)"), "\(fixture) -> \(output): \(error)")
            }
        }
    }

    @Test func theSampleBundleConvertsToEveryFormat() throws {
        try everyFixtureConvertsToEveryFormat(TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path)
    }

    /// Equal text, or equal JSON (PMTiles writes `json` as an object).
    static func expectSameValue(_ a: String?, _ b: String?, _ comment: String) {
        if a == b { return }
        if let a, let b, let x = try? JSONSerialization.jsonObject(with: Data(a.utf8)) as? NSDictionary,
            let y = try? JSONSerialization.jsonObject(with: Data(b.utf8)) as? NSDictionary, x == y
        {
            return
        }
        Issue.record("\(comment): \(a ?? "nil") != \(b ?? "nil")")
    }

    /// Metadata as each tool writes it, the quirks included.
    static let flavours: [(tool: String, tiles: TileFormat, metadata: [String: String])] = [
        (
            // gdal2tiles' tilemapresource.xml as a tree importer carries it: its BoundingBox puts
            // the latitude first (minx is the south), the rows are TMS, the profile named.
            "gdal2tiles", .png,
            [
                "name": "mt-whitney", "description": "", "format": "png", "type": "overlay", "version": "1.0.0",
                "srs": "EPSG:3857", "profile": "mercator", "scheme": "tms", "bounds": "36.4,-118.4,36.7,-118.1",
                "origin": "-20037508.342789,-20037508.342789", "minzoom": "8", "maxzoom": "15",
            ]
        ),
        (
            // QGIS' Generate XYZ tiles, converted by the PMTiles tools: usgs-mt-whitney's metadata.
            "QGIS", .webp,
            [
                "attribution": "Created by QGIS algorithm: Generate XYZ tiles (Directory)", "description": "", "format": "webp",
                "maxzoom": "15", "minzoom": "8", "name": "", "profile": "mercator", "scheme": "xyz", "tileSize": "512",
                "tilejson": "1.0.99", "type": "raster", "version": "1.0.0", "volatile": "0",
            ]
        ),
        (
            "tippecanoe", .pbf,
            [
                "name": "cities.mbtiles", "description": "cities.mbtiles", "version": "2", "minzoom": "0", "maxzoom": "6",
                "center": "-122.41,37.77,6", "bounds": "-180,-85.051129,180,85.051129",
                "antimeridian_adjusted_bounds": "-180,-85.051129,180,85.051129", "type": "overlay", "format": "pbf",
                "generator": "tippecanoe v2.5.0", "generator_options": "tippecanoe -o cities.mbtiles -z6 cities.geojson",
                "strategies": #"[{"dropped_by_rate":2},{}]"#,
                "json":
                    #"{"vector_layers":[{"id":"cities","description":"","minzoom":0,"maxzoom":6,"fields":{"name":"String","pop":"Number"}}],"tilestats":{"layerCount":1,"layers":[{"layer":"cities","count":2,"geometry":"Point"}]}}"#,
            ]
        ),
        (
            // planetiler: HTML attribution, its own namespaced keys, a field typed as an object.
            "planetiler", .pbf,
            [
                "name": "OpenMapTiles", "description": "A tileset showcasing all layers in OpenMapTiles.",
                "attribution": #"<a href="https://www.openmaptiles.org/" target="_blank">&copy; OpenMapTiles</a>"#, "version": "3.15.0",
                "type": "baselayer", "format": "pbf", "minzoom": "0", "maxzoom": "14", "bounds": "-180,-85.05113,180,85.05113",
                "center": "0,0,0", "planetiler:version": "0.8.2", "planetiler:githash": "2c0d3e4",
                "planetiler:buildtime": "2024-07-01T00:00:00Z",
                "planetiler:osm:osmosisreplicationtime": "2024-07-01T20:21:50Z",
                "json":
                    #"{"vector_layers":[{"id":"water","fields":{"class":"String","intermittent":{"type":"Number"}},"minzoom":0,"maxzoom":14},{"fields":{}}]}"#,
            ]
        ),
        (
            // martin-cp from a TileJSON source, written to PMTiles: numbers and arrays, not text;
            // the hash and its algorithm; a type spelled with capitals.
            "martin", .pbf,
            [
                "name": "world_cities", "format": "PBF", "type": "Overlay", "bounds": "[-123.12,-37.82,174.76,59.94]",
                "center": "[-75.7,45.4,9]", "minzoom": "0.0", "maxzoom": "40", "agg_tiles_hash": "84792BF4EE9AEDDC5B1A60E707011FEE",
                "hash_algorithm": "md5", "tilejson": "3.0.0",
            ]
        ),
    ]

    /// Tile 0/0/0 of a fixture: a gzip-compressed vector tile, a WebP or a PNG.
    static func tile(_ format: TileFormat) throws -> [UInt8] {
        let fixture =
            switch format {
            case .pbf: "martin/world_cities.mbtiles"
            case .webp: "martin/webp.mbtiles"
            default: "node-mbtiles/plain_1.mbtiles"
            }
        let archive = try MBTilesArchive(path: TestSupport.fixture(fixture))
        return try #require(try archive.tileData(at: TileCoordinate(zoom: 0, x: 0, y: 0))).map { $0 }
    }

    /// Metadata as gdal2tiles, QGIS, tippecanoe, planetiler and martin write it converts into
    /// every format: MBTiles gets what it allows, mapped or dropped with a warning naming key and
    /// value; the bundle and PMTiles keep every key as it was.
    @Test(arguments: flavours.indices)
    func toolMetadataConvertsToEveryFormat(_ index: Int) throws {
        let flavour = Self.flavours[index]
        let dir = try TemporaryDirectory()
        let source = dir.file("\(flavour.tool).pmtiles")
        let writer = try PMTilesWriter(destination: source, metadata: TileMetadata(flavour.metadata))
        try writer.addTile(at: TileCoordinate(zoom: 0, x: 0, y: 0), bytes: try Self.tile(flavour.tiles))
        try writer.finish()
        var warnings: [String] = []
        for output in Self.outputs {
            let destination = dir.file("out.\(output)")
            let report = try ArchiveConverter.run(source: source, destination: destination, options: ConvertOptions())
            #expect(report.tiles == 1)
            let written = try ArchiveLocation.open(destination).metadata()
            if output == "mbtiles" {
                warnings = report.warnings
                let verify = ArchiveVerifier.run(path: destination)
                #expect(
                    !verify.findings.contains { $0.check == "metadata" && $0.severity == .error }, "\(flavour.tool): \(verify.findings)")
                #expect(!verify.findings.contains { $0.check == "hash" }, "\(flavour.tool): \(verify.findings)")
                #expect(
                    try MBTilesArchive(path: destination).metadata()[TileMetadata.Key.hashAlgorithm]
                        == (flavour.tool == "martin" ? "md5" : nil))
            } else {
                #expect(report.warnings.isEmpty)
                for (key, value) in flavour.metadata where !(key == "name" && value.isEmpty) {
                    Self.expectSameValue(written[key], value, "\(flavour.tool) -> \(output): \(key)")
                }
            }
        }
        let mbtiles = try MBTilesArchive(path: dir.file("out.mbtiles")).metadata()
        switch flavour.tool {
        case "gdal2tiles":
            // Latitude first: no clear meaning as west,south,east,north, so dropped and derived from the tiles.
            #expect(warnings.contains { $0.contains("'bounds' is '36.4,-118.4,36.7,-118.1'") }, "\(warnings)")
            #expect(mbtiles["bounds"] != "36.4,-118.4,36.7,-118.1")
            #expect(mbtiles["scheme"] == "tms" && mbtiles["profile"] == "mercator")
        case "QGIS":
            #expect(warnings.contains { $0.hasPrefix("metadata 'type' is 'raster'") && $0.contains("not written") }, "\(warnings)")
            #expect(mbtiles["type"] == nil && mbtiles["name"] == "QGIS" && mbtiles["tileSize"] == "512")
        case "tippecanoe":
            #expect(warnings.isEmpty, "\(warnings)")
            #expect(mbtiles["strategies"] == flavour.metadata["strategies"])
        case "planetiler":
            #expect(warnings.count == 1 && warnings[0].contains("vector_layers[0].fields.intermittent"), "\(warnings)")
            #expect(warnings[0].contains("vector_layers[1] has no string id"))
            #expect(mbtiles["planetiler:githash"] == "2c0d3e4")
            let json = try #require(mbtiles.json.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
            let layers = try #require(json["vector_layers"] as? [[String: Any]])
            #expect(layers.count == 1 && (layers[0]["fields"] as? [String: String]) == ["class": "String"])
        case "martin":
            #expect(mbtiles["format"] == "pbf" && mbtiles["type"] == "overlay")
            #expect(mbtiles["bounds"] == "-123.12,-37.82,174.76,59.94" && mbtiles["center"] == "-75.7,45.4,9")
            #expect(mbtiles["minzoom"] == "0.0" && mbtiles["maxzoom"] == "0")
            #expect(warnings.contains { $0.hasPrefix("metadata 'maxzoom' is '40'") }, "\(warnings)")
            #expect(warnings.contains { $0.hasPrefix("metadata 'format' is 'PBF'") && $0.contains("written as 'pbf'") }, "\(warnings)")
            // The hash is the written tiles' own, by the algorithm named beside it.
            #expect(mbtiles["agg_tiles_hash"] == (try MBTilesArchive(path: dir.file("out.mbtiles")).aggregateTilesHash()))
        default: Issue.record("no expectations for \(flavour.tool)")
        }
    }

    /// The usgs PMTiles of the issue converts into MBTiles with a warning naming 'type' and 'raster'.
    @Test func theQGISFileOfTheIssueConverts() throws {
        let dir = try TemporaryDirectory()
        let report = try ArchiveConverter.run(
            source: TestSupport.fixture("pmtiles/usgs-mt-whitney-8-15-webp-512.pmtiles"), destination: dir.file("out.mbtiles"),
            options: ConvertOptions())
        #expect(report.tiles == 50)
        #expect(report.warnings.contains { $0.hasPrefix("metadata 'type' is 'raster'") }, "\(report.warnings)")
        #expect(ArchiveVerifier.run(path: dir.file("out.mbtiles")).errorCount == 0)
    }

    /// The mapping's own rules, without a file.
    @Test func mappingRules() {
        typealias M = MetadataMapping
        var metadata = TileMetadata([
            "name": "x", "type": " BaseLayer ", "bounds": "-180.0000001,-85.1,180.0000001,85.1", "center": "200,0,3", "minzoom": "9",
            "maxzoom": "3", "format": "jpeg", "json": "[1,2]",
        ])
        let (fitted, notes) = M.fitted(metadata, for: .mbtiles)
        #expect(fitted["type"] == "baselayer")
        #expect(fitted["bounds"] == "-180,-85.1,180,85.1")
        #expect(fitted["center"] == nil && fitted["minzoom"] == nil && fitted["maxzoom"] == nil && fitted["json"] == nil)
        #expect(fitted["format"] == "jpg")
        #expect(notes.count == 7, "\(notes)")
        #expect(MBTilesMetadataValidator.validate(fitted).filter { $0.severity == .error }.isEmpty)
        // Nothing changes for the formats that hold any text.
        #expect(M.fitted(metadata, for: .bundle).metadata == metadata && M.fitted(metadata, for: .pmtiles).notes.isEmpty)
        // Vector tiles with no vector_layers get an empty list.
        metadata = TileMetadata(["name": "v", "format": "pbf"])
        let vector = M.fitted(metadata, for: .mbtiles)
        #expect(vector.metadata.json == #"{"vector_layers":[]}"# && vector.notes.count == 1)
    }
}

/// `hash_algorithm` (martin #2985): written, read, and an algorithm tilepack does not compute is not checked.
@Suite struct HashAlgorithmTests {
    static func setMetadata(_ path: String, _ key: String, _ value: String?) throws {
        let connection = try SQLiteConnection(filename: path, archivePath: path, readOnly: false, uri: false, create: false)
        try connection.execute("DELETE FROM metadata WHERE name = '\(key)'")
        if let value { try connection.execute("INSERT INTO metadata (name, value) VALUES ('\(key)', '\(value)')") }
    }

    @Test func writtenAsMD5BesideTheHashAndForDeduplicatedIDs() throws {
        let dir = try TemporaryDirectory()
        let fixture = TestSupport.fixture("node-mbtiles/plain_1.mbtiles")
        var options = ConvertOptions()
        _ = try ArchiveConverter.run(source: fixture, destination: dir.file("plain.mbtiles"), options: options)
        #expect(try MBTilesArchive(path: dir.file("plain.mbtiles")).metadata()[TileMetadata.Key.hashAlgorithm] == nil)
        options.writing.aggregateTilesHash = true
        _ = try ArchiveConverter.run(source: fixture, destination: dir.file("hashed.mbtiles"), options: options)
        let hashed = try MBTilesArchive(path: dir.file("hashed.mbtiles")).metadata()
        #expect(hashed[TileMetadata.Key.hashAlgorithm] == "md5" && hashed[TileMetadata.Key.aggregateTilesHash] != nil)
        options = ConvertOptions()
        options.deduplicate = true
        _ = try ArchiveConverter.run(source: fixture, destination: dir.file("dedup.mbtiles"), options: options)
        #expect(try MBTilesArchive(path: dir.file("dedup.mbtiles")).metadata()[TileMetadata.Key.hashAlgorithm] == "md5")
        // A source's other algorithm does not survive into a file whose hashes are MD5.
        try FileManager.default.copyItem(atPath: TestSupport.fixture("martin/world_cities.mbtiles"), toPath: dir.file("fnv.mbtiles"))
        try Self.setMetadata(dir.file("fnv.mbtiles"), TileMetadata.Key.hashAlgorithm, "fnv1a")
        _ = try ArchiveConverter.run(source: dir.file("fnv.mbtiles"), destination: dir.file("again.mbtiles"), options: ConvertOptions())
        let again = try MBTilesArchive(path: dir.file("again.mbtiles"))
        #expect(try again.metadata()[TileMetadata.Key.hashAlgorithm] == "md5")
        #expect(ArchiveVerifier.run(path: dir.file("again.mbtiles")).errorCount == 0)
    }

    /// bad_hash.mbtiles' stored hash is wrong: an error with MD5 (named or not), a warning and no
    /// check with an algorithm tilepack does not compute.
    @Test(arguments: [(nil, true), ("MD5", true), (" md5 ", true), ("fnv1a", false), ("xxh64", false)] as [(String?, Bool)])
    func verifyChecksOnlyWhatItComputes(_ algorithm: String?, _ checked: Bool) throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("bad.mbtiles")
        try FileManager.default.copyItem(atPath: TestSupport.fixture("martin/invalid_zoomed_world_cities.mbtiles"), toPath: path)
        try Self.setMetadata(path, TileMetadata.Key.hashAlgorithm, algorithm)
        let report = ArchiveVerifier.run(path: path)
        let hashErrors = report.findings.filter { $0.check == "hash" && $0.severity == .error }
        if checked {
            // The stored agg_tiles_hash and the tile_hash of 6/10/39 are both wrong.
            #expect(hashErrors.count == 2, "\(report.findings)")
        } else {
            #expect(hashErrors.isEmpty, "\(report.findings)")
            #expect(
                report.findings.contains {
                    $0.severity == .warning && $0.message == "unsupported hash algorithm \(algorithm!), not checked"
                })
            #expect(report.exitCode(strict: false) == 0)
        }
    }

    @Test func pmtilesCarryingAnotherAlgorithmIsNotChecked() throws {
        let dir = try TemporaryDirectory()
        let writer = try PMTilesWriter(
            destination: dir.file("x.pmtiles"),
            metadata: TileMetadata(["name": "x", "agg_tiles_hash": "0123456789ABCDEF", "hash_algorithm": "fnv1a"]))
        try writer.addTile(at: TileCoordinate(zoom: 0, x: 0, y: 0), bytes: try MetadataMappingTests.tile(.png))
        try writer.finish()
        let report = ArchiveVerifier.run(path: dir.file("x.pmtiles"))
        #expect(!report.findings.contains { $0.check == "hash" && $0.severity == .error }, "\(report.findings)")
        #expect(report.findings.contains { $0.message == "unsupported hash algorithm fnv1a, not checked" })
    }
}

/// PMTiles tilepack writes are readable by MapLibre Native (gzip or no compression only).
@Suite struct MapLibreCompressionTests {
    static func mixedVectorTiles() throws -> [(TileCoordinate, [UInt8])] {
        let gzipped = try MetadataMappingTests.tile(.pbf)
        let plain = try #require(
            try MBTilesArchive(path: TestSupport.fixture("martin/uncompressed_mvt.mbtiles")).tileData(
                at: TileCoordinate(zoom: 0, x: 0, y: 0))
        ).map { $0 }
        #expect(gzipped.starts(with: [0x1F, 0x8B]) && !plain.starts(with: [0x1F, 0x8B]))
        return [(try TileCoordinate(zoom: 0, x: 0, y: 0), gzipped), (try TileCoordinate(zoom: 1, x: 0, y: 0), plain)]
    }

    @Test(arguments: [false, true])
    func mixedVectorTilesAreGzippedUnlessAskedToKeepThem(_ keep: Bool) throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("mixed.pmtiles")
        let writer = try PMTilesWriter(destination: path, metadata: TileMetadata(["name": "m", "agg_tiles_hash": "AB", "format": "pbf"]))
        writer.keepsMixedTileCompression = keep
        let tiles = try Self.mixedVectorTiles()
        for (tile, bytes) in tiles { try writer.addTile(at: tile, bytes: bytes) }
        let summary = try writer.finish()
        let archive = try PMTilesArchive(path: path)
        #expect(archive.header.internalCompression == .gzip)
        #expect(archive.header.tileCompression == (keep ? .unknown : .gzip))
        #expect(summary.gzippedContents == (keep ? 0 : 1))
        for (tile, bytes) in tiles {
            let stored = try #require(try archive.tileData(at: tile)).map { $0 }
            if keep {
                #expect(stored == bytes)
            } else {
                #expect(stored.starts(with: [0x1F, 0x8B]))
                let inflated = try stored.withUnsafeBytes { try Gzip.decompress($0, limit: 1 << 24).get() }
                let original =
                    bytes.starts(with: [0x1F, 0x8B]) ? try bytes.withUnsafeBytes { try Gzip.decompress($0, limit: 1 << 24).get() } : bytes
                #expect(inflated == original)
            }
        }
        // The hash described the old bytes: dropped with them.
        #expect(try archive.metadata()[TileMetadata.Key.aggregateTilesHash] == (keep ? "AB" : nil))
        let report = ArchiveVerifier.run(path: path)
        #expect(report.findings.contains { $0.message.hasPrefix("MapLibre Native could not read this file") } == keep, "\(report.findings)")
    }

    /// The commands' `--keep-mixed-compression` reaches the writer: a convert of mixed vector
    /// tiles keeps their bytes (and says `unknown`) only when asked.
    @Test(arguments: [false, true])
    func convertKeepsMixedCompressionOnlyWhenAsked(_ keep: Bool) throws {
        let dir = try TemporaryDirectory()
        let writer = try PMTilesWriter(destination: dir.file("mixed.pmtiles"), metadata: TileMetadata(["name": "m", "format": "pbf"]))
        writer.keepsMixedTileCompression = true
        let tiles = try Self.mixedVectorTiles()
        for (tile, bytes) in tiles { try writer.addTile(at: tile, bytes: bytes) }
        _ = try writer.finish()
        var options = ConvertOptions()
        options.writing.keepsMixedTileCompression = keep
        _ = try ArchiveConverter.run(source: dir.file("mixed.pmtiles"), destination: dir.file("out.pmtiles"), options: options)
        let archive = try PMTilesArchive(path: dir.file("out.pmtiles"))
        #expect(archive.header.tileCompression == (keep ? .unknown : .gzip))
        #expect(try archive.tileData(at: tiles[1].0).map { [UInt8]($0) } == (keep ? tiles[1].1 : nil) || !keep)
    }

    /// A fixture's header rewritten to say its tiles are brotli, zstd or unknown: verify says MapLibre Native could not read it
    /// (directories in those tilepack cannot read either, and says so).
    @Test(arguments: [(98, 3), (98, 4), (98, 0)] as [(Int, UInt8)])
    func verifyWarnsAboutCompressionsMapLibreCannotRead(_ offset: Int, _ value: UInt8) throws {
        let dir = try TemporaryDirectory()
        var bytes = try Data(contentsOf: TestSupport.fixturesRoot.appendingPathComponent("pmtiles/test_fixture_1.pmtiles"))
        let original = ArchiveVerifier.run(path: TestSupport.fixture("pmtiles/test_fixture_1.pmtiles"))
        #expect(!original.findings.contains { $0.message.hasPrefix("MapLibre Native could not read") })
        bytes[offset] = value
        try bytes.write(to: URL(fileURLWithPath: dir.file("x.pmtiles")))
        let report = ArchiveVerifier.run(path: dir.file("x.pmtiles"))
        #expect(
            report.findings.contains { $0.severity == .warning && $0.message.hasPrefix("MapLibre Native could not read this file") },
            "\(report.findings)")
    }
}
