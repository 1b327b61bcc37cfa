import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

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
        try TreeFixtures.write("""
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
        force.overwrite = true
        _ = try TileImporter.run(source: dir.file("high"), destination: out, options: force)
        #expect(try MBTilesArchive(path: out).tileCount() == 16)
    }

    @Test func metadataComesFromFlagsAndMetadataJSON() throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        try TreeFixtures.writeTree(tree, tiles: TreeFixtures.tiles(0...1))
        try TreeFixtures.write(#"{"name": "From JSON", "description": "d", "attribution": "(c) json", "scheme": "xyz"}"#, to: "\(tree)/metadata.json")
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
        // The hash computed while importing is the hash of the file.
        #expect(metadata[TileMetadata.Key.aggregateTilesHash] == (try MBTilesArchive(path: dir.file("a.mbtiles")).aggregateTilesHash()))
    }
}
