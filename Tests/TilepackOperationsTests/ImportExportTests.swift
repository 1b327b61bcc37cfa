import Foundation
import Testing
import TilepackCore
import TilepackImaging
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

@testable import TilepackOperations

@Suite struct ImportExportTests {
    static let layouts: [(TileTreeLayout, TileScheme)] = [(.zxy, .xyz), (.zxy, .tms), (.zyx, .xyz), (.zyx, .tms)]

    /// import -> archive -> export gives back every file byte for byte, for every layout and
    /// scheme and both archive formats (mbutil's export does not for zyx).
    @Test(arguments: ["mbtiles", "tilepack"])
    func roundTripsEveryLayoutAndSchemeByteForByte(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let tiles = TreeFixtures.tiles(0...2)
        for (layout, scheme) in Self.layouts {
            let tree = dir.file("tree-\(layout)-\(scheme)")
            let written = try TreeFixtures.writeTree(tree, tiles: tiles, layout: layout.rawValue, scheme: scheme)
            var options = ImportOptions()
            options.layout = layout
            options.scheme = scheme
            let archivePath = dir.file("out-\(layout)-\(scheme).\(ext)")
            let report = try TileImporter.run(source: tree, destination: archivePath, options: options)
            #expect(report.imported == tiles.count)
            #expect(report.skipped.isEmpty)
            #expect(report.format == "png")

            // The archive holds XYZ coordinates whatever the tree's scheme.
            let archive = try openTileArchive(path: archivePath)
            // Zooms, bounds and centre are derived from the tiles, so verify has nothing to warn about.
            let metadata = try archive.metadata()
            #expect(try metadata.minZoom == 0 && metadata.maxZoom == 2 && metadata.format == .png)
            #expect(try metadata.bounds != nil && metadata.center != nil)
            #expect(ArchiveVerifier.run(path: archivePath).exitCode(strict: true) == 0)
            for tile in tiles {
                #expect(try archive.tileData(at: tile) == written[tile], "\(tile) in \(layout)/\(scheme)")
            }

            var exportOptions = ExportOptions()
            exportOptions.layout = layout
            exportOptions.scheme = scheme
            let back = dir.file("back-\(layout)-\(scheme)")
            let exported = try TileExporter.run(archive: archive, to: back, options: exportOptions)
            #expect(exported.exported == tiles.count)
            for tile in tiles {
                let row = tile.row(in: scheme)
                let (a, b) = layout == .zxy ? (tile.x, row) : (row, tile.x)
                let data = try Data(contentsOf: URL(fileURLWithPath: "\(back)/\(tile.zoom)/\(a)/\(b).png"))
                #expect(data == written[tile])
            }
            // ... and the exported tree imports again to the same tiles (metadata.json carries the scheme).
            var again = ImportOptions()
            again.layout = layout
            let second = try TileImporter.run(source: back, destination: dir.file("again-\(layout)-\(scheme).\(ext)"), options: again)
            #expect(second.imported == tiles.count)
            #expect(second.scheme == scheme)
        }
    }

    /// A tree of many one-file folders: more folders than are kept open at once, so some
    /// files are opened by their folder and the rest by path; every tile arrives.
    @Test func manyOneFileFoldersAllImport() throws {
        let dir = try TemporaryDirectory()
        let tiles = try (0..<300).map { try TileCoordinate(zoom: 9, x: $0, y: 7) }
        let written = try TreeFixtures.writeTree(dir.file("tree"), tiles: tiles, content: { Data(try TreeFixtures.png($0, size: 8)) })
        for ext in ["mbtiles", "tilepack"] {
            let report = try TileImporter.run(source: dir.file("tree"), destination: dir.file("a.\(ext)"), options: ImportOptions())
            #expect(report.imported == 300 && report.skipped.isEmpty)
            let archive = try openTileArchive(path: dir.file("a.\(ext)"))
            for tile in tiles { #expect(try archive.tileData(at: tile) == written[tile]) }
        }
    }

    @Test func gdal2tilesTreeIsReadAsTMSAndAContradictingFlagIsAnError() throws {
        let dir = try TemporaryDirectory()
        let tiles = TreeFixtures.tiles(0...1)
        let written = try TreeFixtures.writeTree(dir.file("tree"), tiles: tiles, scheme: .tms)
        try TreeFixtures.write(
            """
            <?xml version="1.0" encoding="utf-8"?>
            <TileMap version="1.0.0" tilemapservice="http://tms.osgeo.org/1.0.0">
              <Title>relief.tif</Title><Abstract></Abstract><SRS>EPSG:3857</SRS>
              <BoundingBox minx="-20037508.34" miny="-20037508.34" maxx="20037508.34" maxy="20037508.34"/>
              <TileFormat width="256" height="256" mime-type="image/png" extension="png"/>
              <TileSets profile="mercator"><TileSet href="0" units-per-pixel="156543.03" order="0"/></TileSets>
            </TileMap>
            """, to: dir.file("tree/tilemapresource.xml"))

        let report = try TileImporter.run(source: dir.file("tree"), destination: dir.file("a.mbtiles"), options: ImportOptions())
        #expect(report.scheme == .tms)
        #expect(report.notes.contains { $0.contains("tilemapresource.xml") })
        let archive = try MBTilesArchive(path: dir.file("a.mbtiles"))
        for tile in tiles { #expect(try archive.tileData(at: tile) == written[tile]) }
        #expect(try archive.metadata().name == "relief.tif")

        var options = ImportOptions()
        options.scheme = .xyz
        #expect {
            try TileImporter.run(source: dir.file("tree"), destination: dir.file("b.mbtiles"), options: options)
        } throws: { error in
            "\(error)".contains("--scheme xyz") && "\(error)".contains("tilemapresource.xml says tms")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("b.mbtiles")))
    }

    @Test func skippedFilesAreReportedAndDamagedImagesCaught() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        try TreeFixtures.writeTree(tree, tiles: TreeFixtures.tiles(0...1))
        var damaged = try TreeFixtures.png(TileCoordinate(zoom: 1, x: 1, y: 1))
        damaged[damaged.count / 2] ^= 0xFF
        try damaged.write(to: URL(fileURLWithPath: "\(tree)/1/1/1.png"))
        try Data().write(to: URL(fileURLWithPath: "\(tree)/1/0/0.png"))
        try TreeFixtures.write("x", to: "\(tree)/Thumbs.db")
        let report = try TileImporter.run(source: tree, destination: dir.file("a.mbtiles"), options: ImportOptions())
        #expect(report.imported == 3)
        let reasons = Dictionary(uniqueKeysWithValues: report.skipped.map { (String($0.path.dropFirst(tree.count + 1)), $0.reason) })
        #expect(reasons["1/1/1.png"]?.contains("CRC") == true)
        #expect(reasons["1/0/0.png"]?.contains("empty") == true)
        #expect(reasons["Thumbs.db"] != nil)
        #expect(reasons.count == 3)
    }

    @Test func mixedFormatsStopTheImportUnlessAllowedAndLeaveNoFile() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        try TreeFixtures.writeTree(tree, tiles: TreeFixtures.tiles(0...1))
        try TreeFixtures.write("{\"type\": \"FeatureCollection\"}", to: "\(tree)/1/1/1.png")
        #expect {
            try TileImporter.run(source: tree, destination: dir.file("a.mbtiles"), options: ImportOptions())
        } throws: { "\($0)".contains("mixes formats") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["tree"])

        var options = ImportOptions()
        options.allowMixedFormats = true
        let report = try TileImporter.run(source: tree, destination: dir.file("a.mbtiles"), options: options)
        #expect(report.imported == 5)
    }

    @Test func existingOutputIsKeptUnlessForcedAndAppendAddsTiles() throws {
        let dir = try TemporaryDirectory()
        try TreeFixtures.writeTree(dir.file("low"), tiles: TreeFixtures.tiles(0...1))
        try TreeFixtures.writeTree(dir.file("high"), tiles: TreeFixtures.tiles(2...2))
        let out = dir.file("a.mbtiles")
        _ = try TileImporter.run(source: dir.file("low"), destination: out, options: ImportOptions())
        let before = try Data(contentsOf: URL(fileURLWithPath: out))
        #expect(throws: OperationError.self) {
            try TileImporter.run(source: dir.file("high"), destination: out, options: ImportOptions())
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == before)

        var append = ImportOptions()
        append.append = true
        _ = try TileImporter.run(source: dir.file("high"), destination: out, options: append)
        let archive = try MBTilesArchive(path: out)
        #expect(try archive.tileCount() == 21)
        let metadata = try archive.metadata()
        #expect(try metadata.maxZoom == 2)
        #expect(try metadata.minZoom == 0)
        #expect(ArchiveVerifier.run(path: out).exitCode(strict: true) == 0)

        var force = ImportOptions()
        force.writing.overwrite = true
        _ = try TileImporter.run(source: dir.file("high"), destination: out, options: force)
        #expect(try MBTilesArchive(path: out).tileCount() == 16)
    }

    @Test func metadataComesFromFlagsAndMetadataJSON() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        try TreeFixtures.writeTree(tree, tiles: TreeFixtures.tiles(0...1))
        try TreeFixtures.write(
            #"{"name": "From JSON", "description": "d", "attribution": "(c) json", "scheme": "xyz"}"#, to: "\(tree)/metadata.json")
        var options = ImportOptions()
        options.metadata = ["attribution": "(c) flag", "type": "overlay"]
        _ = try TileImporter.run(source: tree, destination: dir.file("a.mbtiles"), options: options)
        let metadata = try MBTilesArchive(path: dir.file("a.mbtiles")).metadata()
        #expect(metadata.name == "From JSON")
        #expect(metadata.attribution == "(c) flag")
        #expect(metadata.description == "d")
        #expect(try metadata.layerType == .overlay)
        #expect(try metadata.format == .png)
        #expect(try metadata.minZoom == 0 && metadata.maxZoom == 1)
    }

    /// Large tiles go into a bundle by a copy from their own files at the end, once their last
    /// change is old enough to be told from a later one (a file changed within the clock's tick
    /// goes through the spool): the bundle is byte-identical either way.
    @Test func largeTilesCopiedFromTheirFilesGiveTheSameBundleAsTheSpool() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        // 128 px noise: about 65 KB PNGs that LZ4 cannot shrink (stored as they are).
        try TreeFixtures.writeTree(tree, tiles: TreeFixtures.tiles(0...2)) { tile in
            var state = UInt64(tile.zoom * 1000 + tile.x * 31 + tile.y + 1)
            let pixels = (0..<(128 * 128 * 4)).map { _ in
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return UInt8(truncatingIfNeeded: state >> 33)
            }
            let bitmap = try #require(Bitmap(width: 128, height: 128, pixelFormat: .rgba8888, pixels: pixels))
            return try PNGEncoder.encode(bitmap)
        }
        // Written again just now: making the noise can take longer than the settling time on a
        // loaded machine, and then the first import would copy the early tiles too.
        let files = try #require(FileManager.default.enumerator(atPath: tree)?.allObjects as? [String])
        for file in files where file.hasSuffix(".png") {
            let url = URL(fileURLWithPath: "\(tree)/\(file)")
            try Data(contentsOf: url).write(to: url)
        }
        let sample = "\(tree)/2/1/1.png"
        var scratch: [UInt8] = []
        var version: FileVersion?
        _ = try FileReading.read(sample, scratch: &scratch, expectLarge: true, identity: &version)
        #expect(version == nil, "a file changed a moment ago is not known by its identity")
        _ = try TileImporter.run(source: tree, destination: dir.file("spooled.tilepack"), options: ImportOptions())

        Thread.sleep(forTimeInterval: Double(FileReading.settledSeconds) + 0.2)
        _ = try FileReading.read(sample, scratch: &scratch, expectLarge: true, identity: &version)
        #expect(version != nil)
        _ = try TileImporter.run(source: tree, destination: dir.file("copied.tilepack"), options: ImportOptions())
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: dir.file("copied.tilepack")))
                == Data(contentsOf: URL(fileURLWithPath: dir.file("spooled.tilepack"))))
        #expect(ArchiveVerifier.run(path: dir.file("copied.tilepack")).exitCode(strict: true) == 0)
    }

    /// `agg_tiles_hash` is written only when asked (`--agg-tiles-hash`), then right (computed
    /// while importing); an archive appended to keeps the promise it made (a true hash, or none);
    /// convert and extract carry one when their source does; verify is clean either way.
    @Test func aggTilesHashIsWrittenWhenAskedOrWhenTheSourceCarriesOne() throws {
        let dir = try TemporaryDirectory()
        try TreeFixtures.writeTree(dir.file("low"), tiles: TreeFixtures.tiles(0...1))
        try TreeFixtures.writeTree(dir.file("high"), tiles: TreeFixtures.tiles(2...2))
        let key = TileMetadata.Key.aggregateTilesHash
        func stored(_ name: String) throws -> String? { try MBTilesArchive(path: dir.file(name)).readMetadata()[key] }
        func computed(_ name: String) throws -> String { try MBTilesArchive(path: dir.file(name)).aggregateTilesHash() }
        func clean(_ name: String) -> Bool {
            let report = ArchiveVerifier.run(path: dir.file(name))
            return report.exitCode(strict: true) == 0 && report.findings.isEmpty
        }

        _ = try TileImporter.run(source: dir.file("low"), destination: dir.file("plain.mbtiles"), options: ImportOptions())
        #expect(try stored("plain.mbtiles") == nil)
        #expect(clean("plain.mbtiles"))
        var asked = ImportOptions()
        asked.writing.aggregateTilesHash = true
        _ = try TileImporter.run(source: dir.file("low"), destination: dir.file("hashed.mbtiles"), options: asked)
        #expect(try stored("hashed.mbtiles") == computed("hashed.mbtiles"))
        #expect(try stored("hashed.mbtiles") != MBTilesAggregateHash.empty)
        #expect(clean("hashed.mbtiles"))
        // The same tiles out of the hash's order (XYZ rows): computed at the end, the same hash.
        var xyzOrder = asked
        xyzOrder.deduplicate = true
        _ = try TileImporter.run(source: dir.file("low"), destination: dir.file("dedup.mbtiles"), options: xyzOrder)
        #expect(try stored("dedup.mbtiles") == stored("hashed.mbtiles"))

        var append = ImportOptions()
        append.append = true
        for name in ["plain.mbtiles", "hashed.mbtiles"] {
            _ = try TileImporter.run(source: dir.file("high"), destination: dir.file(name), options: append)
            #expect(try MBTilesArchive(path: dir.file(name)).tileCount() == 21)
            #expect(clean(name), "\(name)")
        }
        #expect(try stored("plain.mbtiles") == nil)
        #expect(try stored("hashed.mbtiles") == computed("hashed.mbtiles"))
        #expect(try computed("hashed.mbtiles") == computed("plain.mbtiles"))

        _ = try ArchiveConverter.run(
            source: dir.file("plain.mbtiles"), destination: dir.file("plain-copy.mbtiles"), options: ConvertOptions())
        _ = try ArchiveConverter.run(
            source: dir.file("hashed.mbtiles"), destination: dir.file("hashed-copy.mbtiles"), options: ConvertOptions())
        #expect(try stored("plain-copy.mbtiles") == nil)
        #expect(try stored("hashed-copy.mbtiles") == computed("hashed.mbtiles"))
        var extract = ExtractOptions()
        extract.maxZoom = 1
        _ = try TileExtractor.run(source: dir.file("plain.mbtiles"), destination: dir.file("plain-part.mbtiles"), options: extract)
        _ = try TileExtractor.run(source: dir.file("hashed.mbtiles"), destination: dir.file("hashed-part.mbtiles"), options: extract)
        #expect(try stored("plain-part.mbtiles") == nil)
        // The subset's own hash, not the source's.
        #expect(try stored("hashed-part.mbtiles") == computed("hashed-part.mbtiles"))
        #expect(try stored("hashed-part.mbtiles") != computed("hashed.mbtiles"))
        #expect(clean("hashed-part.mbtiles"))
    }
}
