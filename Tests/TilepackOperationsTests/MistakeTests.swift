import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

/// Issue 13, "The CLI catches mistakes": the operations behind the commands stop a user's
/// mistake with an error that says what happened, and report what they found plainly.
@Suite struct MistakeTests {
    /// Central Europe, and the tiles of zooms 5-6 that cover it.
    static let box = GeoBoundingBox(west: 5, south: 45, east: 15, north: 55)
    static func boxTiles() throws -> [TileCoordinate] { Array(try TileCover(boundingBox: box, zooms: 5...6)) }

    static func writeTreeWithBounds(_ root: String, layout: String, scheme: TileScheme, metadata: String? = nil) throws {
        try TreeFixtures.writeTree(root, tiles: try boxTiles(), layout: layout, scheme: scheme)
        try TreeFixtures.write(metadata ?? #"{"name": "europe", "bounds": "5,45,15,55"}"#, to: root + "/metadata.json")
    }

    static func importError(_ tree: String, _ destination: String, _ options: ImportOptions = ImportOptions()) -> OperationError? {
        do {
            _ = try TileImporter.run(source: tree, destination: destination, options: options)
            return nil
        } catch {
            return error
        }
    }

    // MARK: 3. Wrong layout or scheme

    @Test(arguments: ["mbtiles", "tilepack"])
    func tilesOutsideTheDeclaredBoundsNameTheLikelyFlag(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        // A TMS tree read as XYZ lands in the southern hemisphere.
        try Self.writeTreeWithBounds(dir.file("tms"), layout: "zxy", scheme: .tms)
        let tms = try #require(Self.importError(dir.file("tms"), dir.file("tms.\(ext)")))
        #expect(tms.description.contains("--scheme tms") && !tms.description.contains("--layout zyx"), "\(tms)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("tms.\(ext)")))
        // A zyx tree read as zxy swaps columns and rows.
        try Self.writeTreeWithBounds(dir.file("zyx"), layout: "zyx", scheme: .xyz)
        let zyx = try #require(Self.importError(dir.file("zyx"), dir.file("zyx.\(ext)")))
        #expect(zyx.description.contains("--layout zyx") && !zyx.description.contains("--scheme tms"), "\(zyx)")
        #expect(zyx.description.contains("metadata.json"))

        // With the right flags the same trees import.
        var options = ImportOptions()
        options.scheme = .tms
        #expect(
            try TileImporter.run(source: dir.file("tms"), destination: dir.file("ok1.\(ext)"), options: options).imported
                == Self.boxTiles().count)
        options = ImportOptions()
        options.layout = .zyx
        #expect(
            try TileImporter.run(source: dir.file("zyx"), destination: dir.file("ok2.\(ext)"), options: options).imported
                == Self.boxTiles().count)
    }

    @Test func boundsThatNoReadingExplainsAreANoteNotAnError() throws {
        // Bounds in the Pacific: no layout or scheme puts European tiles there; the file is wrong.
        let dir = try TemporaryDirectory()
        try Self.writeTreeWithBounds(dir.file("t"), layout: "zxy", scheme: .xyz, metadata: #"{"name": "x", "bounds": "-170,-10,-160,0"}"#)
        let report = try TileImporter.run(source: dir.file("t"), destination: dir.file("t.mbtiles"), options: ImportOptions())
        #expect(try report.imported == Self.boxTiles().count)
        #expect(report.notes.filter { $0.contains("check the bounds") }.count == 1, "\(report.notes)")
    }

    @Test func gdal2tilesBoundingBoxIsChecked() throws {
        // tilemapresource.xml says TMS; the tree is zyx: its tiles fall outside the BoundingBox.
        let dir = try TemporaryDirectory()
        try TreeFixtures.writeTree(dir.file("t"), tiles: try Self.boxTiles(), layout: "zyx", scheme: .tms)
        try TreeFixtures.write(
            """
            <?xml version="1.0" encoding="utf-8"?>
            <TileMap version="1.0.0" tilemapservice="http://tms.osgeo.org/1.0.0">
              <Title>t</Title><SRS>EPSG:3857</SRS>
              <BoundingBox minx="5.0" miny="45.0" maxx="15.0" maxy="55.0"/>
              <TileFormat width="256" height="256" mime-type="image/png" extension="png"/>
            </TileMap>
            """, to: dir.file("t/tilemapresource.xml"))
        let error = try #require(Self.importError(dir.file("t"), dir.file("t.mbtiles")))
        #expect(error.description.contains("--layout zyx") && error.description.contains("tilemapresource.xml"), "\(error)")
        var options = ImportOptions()
        options.layout = .zyx
        #expect(try TileImporter.run(source: dir.file("t"), destination: dir.file("t.mbtiles"), options: options).imported > 0)
    }

    @Test func exportRecordsTheLayoutAndImportUsesIt() throws {
        let dir = try TemporaryDirectory()
        try TreeFixtures.writeTree(dir.file("t"), tiles: TreeFixtures.tiles(0...2))
        _ = try TileImporter.run(source: dir.file("t"), destination: dir.file("a.mbtiles"), options: ImportOptions())
        var exportOptions = ExportOptions()
        exportOptions.layout = .zyx
        exportOptions.scheme = .tms
        _ = try TileExporter.run(archive: try openTileArchive(path: dir.file("a.mbtiles")), to: dir.file("out"), options: exportOptions)
        let json =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir.file("out/metadata.json")))) as? [String: Any]
        #expect(json?["layout"] as? String == "zyx" && json?["scheme"] as? String == "tms")

        // No flags: the tree's own description decides, and the tiles come back where they were.
        let report = try TileImporter.run(source: dir.file("out"), destination: dir.file("b.mbtiles"), options: ImportOptions())
        #expect(report.layout == .zyx && report.scheme == .tms)
        let a = try openTileArchive(path: dir.file("a.mbtiles")), b = try openTileArchive(path: dir.file("b.mbtiles"))
        for tile in TreeFixtures.tiles(0...2) { #expect(try a.tileData(at: tile) == b.tileData(at: tile), "\(tile)") }
        #expect(try b.metadata().entries["layout"] == nil)

        // A --layout that contradicts the file is an error, as for --scheme.
        var options = ImportOptions()
        options.layout = .zxy
        let error = try #require(Self.importError(dir.file("out"), dir.file("c.mbtiles"), options))
        #expect(error.description.contains("--layout zxy") && error.description.contains("zyx"), "\(error)")
    }

    // MARK: 4. Filters that select nothing

    @Test(arguments: ["mbtiles", "tilepack"])
    func filtersThatSelectNothingAreAClearError(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        try TreeFixtures.writeTree(dir.file("t"), tiles: TreeFixtures.tiles(0...2))
        var options = ImportOptions()
        options.minZoom = 9
        let zoom = try #require(Self.importError(dir.file("t"), dir.file("z.\(ext)"), options))
        #expect(zoom.description.contains("no tile of the tree passes --min-zoom 9; the tree holds zooms 0-2"), "\(zoom)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("z.\(ext)")))

        try TreeFixtures.writeTree(dir.file("europe"), tiles: try Self.boxTiles())
        options = ImportOptions()
        options.bounds = GeoBoundingBox(west: -80, south: -40, east: -70, north: -30)
        let box = try #require(Self.importError(dir.file("europe"), dir.file("b.\(ext)"), options))
        #expect(box.description.contains("no tile of the tree passes --bbox") && box.description.contains("zooms 5-6"), "\(box)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("b.\(ext)")))
    }

    @Test func aTreeWithoutTilesIsAClearError() throws {
        let dir = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.file("t/3"), withIntermediateDirectories: true)
        let error = try #require(Self.importError(dir.file("t"), dir.file("t.mbtiles")))
        #expect(error.description.contains("no tile files"), "\(error)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("t.mbtiles")))
    }

    // MARK: 5. import given an archive

    @Test func importGivenAnArchiveSaysWhatItIs() throws {
        let dir = try TemporaryDirectory()
        let mbtiles = try #require(Self.importError(TestSupport.fixture("martin/world_cities.mbtiles"), dir.file("a.tilepack")))
        #expect(mbtiles.description.contains("MBTiles archive") && mbtiles.description.contains("tilepack convert"), "\(mbtiles)")
        let pmtiles = try #require(Self.importError(TestSupport.fixture("pmtiles/test_fixture_1.pmtiles"), dir.file("a.tilepack")))
        #expect(pmtiles.description.contains("PMTiles"), "\(pmtiles)")
    }

    // MARK: 2. One coordinate order

    @Test func coordinatesAreWrittenLongitudeFirst() {
        #expect(GeoCoordinate(latitude: 51.54, longitude: -0.01).description == "-0.01,51.54")
        #expect(GeoBoundingBox(west: -10, south: 40, east: 8, north: 47).description == "-10.0,40.0,8.0,47.0")
    }

    // MARK: 6. Tiles named the same way, as numbers in JSON

    @Test func findingsGiveTilesAsNumbersWithXYZRows() throws {
        let report = ArchiveVerifier.run(path: TestSupport.fixture("martin/invalid_zoomed_world_cities.mbtiles"))
        let finding = try #require(report.findings.first { $0.check == "hash" && $0.tile != nil })
        // Stored as 6/10/39 in TMS rows: XYZ row 24, the TMS row an extra field.
        #expect(finding.tile == TileReference(zoom: 6, column: 10, tmsRow: 39))
        #expect(finding.tile?.y == 24 && finding.description.contains("tile 6/10/24 (TMS row 39)"), "\(finding)")
        let json = try JSONSerialization.jsonObject(with: JSONReport.encode(finding)) as? [String: Any]
        let tile = try #require(json?["tile"] as? [String: Any])
        #expect(tile["z"] as? Int == 6 && tile["x"] as? Int == 10 && tile["y"] as? Int == 24 && tile["tmsRow"] as? Int == 39)
    }

    // MARK: 7. verify's progress has a total

    @Test func verifyProgressHasATotal() {
        let totals = Locked<[Int?]>([])
        _ = ArchiveVerifier.run(
            path: TestSupport.fixture("node-mbtiles/plain_3.mbtiles"), progress: { p in totals.withLock { $0.append(p.total) } })
        let seen = totals.withLock { $0 }
        #expect(!seen.isEmpty && seen.allSatisfy { $0 == 2621 }, "\(seen)")
    }

    // MARK: 8. verify's verdict and raw bundles

    @Test func strictVerdictWithWarningsIsFailed() {
        let report = ArchiveVerifier.run(path: TestSupport.fixture("node-mbtiles/unindexed.mbtiles"))
        #expect(report.errorCount == 0 && report.warningCount > 0)
        #expect(report.verdict(strict: false) == "OK")
        #expect(report.verdict(strict: true) == "FAILED")
        #expect(ArchiveVerifier.run(path: TestSupport.fixture("pmtiles/empty.pmtiles")).verdict(strict: false) == "not a usable archive")
    }

    @Test func aRawBitmapBundleIsNotSaidToHoldNoTiles() throws {
        let dir = try TemporaryDirectory()
        try TreeFixtures.writeTree(dir.file("t"), tiles: TreeFixtures.tiles(0...1))
        var options = ImportOptions()
        options.encode = .rgba8888
        _ = try TileImporter.run(source: dir.file("t"), destination: dir.file("raw.tilepack"), options: options)
        let report = ArchiveVerifier.run(path: dir.file("raw.tilepack"))
        #expect(report.tiles == 5)
        #expect(!report.findings.contains { $0.message.contains("no tiles") }, "\(report.findings)")
        #expect(report.exitCode(strict: true) == 0, "\(report.findings)")
    }

    // MARK: 9. convert names an unnamed archive

    @Test(arguments: ["mbtiles", "tilepack"])
    func convertNamesAnUnnamedArchiveAfterItsFile(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        // A bundle with tiles and no metadata at all: named after the file.
        let unnamed = dir.file("unnamed tiles.bundle")
        let writer = try BundleWriter(destination: unnamed, content: .encoded(.png))
        let tiles = TreeFixtures.tiles(0...1)
        for tile in tiles { try writer.addTile(at: tile, data: try TreeFixtures.png(tile)) }
        _ = try writer.finish()
        #expect(try openTileArchive(path: unnamed).metadata().name == nil)
        let report = try ArchiveConverter.run(source: unnamed, destination: dir.file("out.\(ext)"), options: ConvertOptions())
        #expect(report.notes.contains { $0.contains("named 'unnamed tiles'") }, "\(report.notes)")
        #expect(try openTileArchive(path: dir.file("out.\(ext)")).metadata().name == "unnamed tiles")
        #expect(report.tiles == tiles.count)

        // The two empty fixtures (one without a name) hold no tiles and no format either: a
        // bundle can hold that; MBTiles must name a format, and the error says why.
        for empty in ["with spaces", "geocoder_data"] {
            let path = TestSupport.fixture("node-mbtiles/\(empty).mbtiles")
            do {
                _ = try ArchiveConverter.run(source: path, destination: dir.file("\(empty).\(ext)"), options: ConvertOptions())
                #expect(ext == "tilepack", "an MBTiles file without a format was written")
                #expect(
                    try openTileArchive(path: dir.file("\(empty).\(ext)")).metadata().name
                        == (empty == "with spaces" ? empty : "ne-countries"))
            } catch {
                #expect(ext == "mbtiles" && "\(error)".contains("holds no tiles and declares no format"), "\(error)")
            }
        }
        // Every other readable node-mbtiles fixture converts.
        for name in ["plain_1", "plain_2", "plain_3", "plain_4", "unindexed", "some-empty-tiles"] {
            _ = try ArchiveConverter.run(
                source: TestSupport.fixture("node-mbtiles/\(name).mbtiles"),
                destination: dir.file("\(name).\(ext)"), options: ConvertOptions())
        }
    }

    // MARK: 11. JSON: numbers, objects, no escaped slashes

    @Test func infoJSONGivesNumbersAndObjects() throws {
        let info = try ArchiveInspector.run(path: TestSupport.fixture("martin/world_cities.mbtiles"))
        let data = try JSONReport.encode(info)
        let text = String(decoding: data, as: UTF8.self)
        #expect(!text.contains("\\/"), "escaped slash")
        #expect(text.contains(TestSupport.fixture("martin/world_cities.mbtiles")))
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let bounds = try #require(json["bounds"] as? [Double])
        #expect(bounds.count == 4 && bounds[0] < bounds[2] && bounds[1] < bounds[3])
        let metadata = try #require(json["metadata"] as? [String: Any])
        #expect(metadata["bounds"] as? [Double] == [-123.12359, -37.818085, 174.763027, 59.352706])
        #expect(metadata["center"] as? [Double] == [-75.9375, 38.788894, 6])
        #expect(metadata["maxzoom"] as? Int == 6)
        let layers = (metadata["json"] as? [String: Any])?["vector_layers"] as? [[String: Any]]
        #expect(layers?.first?["id"] as? String == "cities")
        #expect(metadata["name"] as? String == "Major cities from Natural Earth data")
    }

    @Test func slashesAreNotEscapedInTheMetadataImportKeepsOrExportWrites() throws {
        let dir = try TemporaryDirectory()
        try TreeFixtures.writeTree(dir.file("t"), tiles: TreeFixtures.tiles(0...1))
        try TreeFixtures.write(
            #"{"name": "t", "attribution": "https://osm.org/copyright", "json": {"tiles": ["https://a/{z}/{x}/{y}.png"]}}"#,
            to: dir.file("t/metadata.json"))
        _ = try TileImporter.run(source: dir.file("t"), destination: dir.file("a.mbtiles"), options: ImportOptions())
        let metadata = try openTileArchive(path: dir.file("a.mbtiles")).metadata()
        #expect(metadata.json == #"{"tiles":["https://a/{z}/{x}/{y}.png"]}"#)
        _ = try TileExporter.run(archive: try openTileArchive(path: dir.file("a.mbtiles")), to: dir.file("out"), options: ExportOptions())
        let text = try String(contentsOfFile: dir.file("out/metadata.json"), encoding: .utf8)
        #expect(text.contains("https://osm.org/copyright") && !text.contains("\\/"), "\(text)")
    }
}
