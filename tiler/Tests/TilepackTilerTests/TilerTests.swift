import Foundation
import Testing
import TilepackCore
import TilepackImaging
import TilepackStorage
import TilepackTestSupport

@testable import TilepackTiler

let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample-utm.tif").path

/// Runs a program to its end; its status.
@discardableResult
func run(_ program: String, _ arguments: [String]) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}

@Suite struct TilePlanTests {
    /// gdal2tiles' `ZoomForPixelSize`: the deepest zoom whose pixels are not smaller.
    @Test func zoomForPixelSizeIsGdal2tiles() {
        #expect(abs(TilePlan.resolution(zoom: 0, tileSize: 256) - 156_543.033_928_041) < 1e-6)
        #expect(TilePlan.zoom(forPixelSize: 156_543.03, tileSize: 256) == 0)
        #expect(TilePlan.zoom(forPixelSize: 2.0, tileSize: 256) == 16)  // z16 is 2.39 m, z17 1.19 m
        #expect(TilePlan.zoom(forPixelSize: 1.0, tileSize: 256) == 17)
        #expect(TilePlan.zoom(forPixelSize: 1.0, tileSize: 512) == 16)
    }

    @Test func tilesOfABoxAndTheirParents() throws {
        // One tile of zoom 2 exactly: (1, 1), whose edges do not reach into the neighbours.
        let span = 2 * TilePlan.originShift / 4
        let plan = try TilePlan(
            extent: (-span, 0, 0, span), pixelSize: span / 256, width: 256, height: 256, tileSize: 256, zooms: 0...2, clip: nil)
        #expect(plan.columns == 1...1 && plan.rows == 1...1)
        #expect(plan.range(atZoom: 0).columns == 0...0 && plan.range(atZoom: 1).rows == 0...0)
        #expect(plan.tileCounts == [0: 1, 1: 1, 2: 1])
        #expect(throws: TilerError.self) {
            try TilePlan(
                extent: (-span, 0, 0, span), pixelSize: 1, width: 256, height: 256, tileSize: 256, zooms: nil,
                clip: (span, span, 2 * span, 2 * span))
        }
    }
}

@Suite struct ResamplingTests {
    static func solid(_ r: UInt8, _ g: UInt8, _ b: UInt8, _ a: UInt8, side: Int = 8) -> [UInt8] {
        (0..<(side * side)).flatMap { _ in [r, g, b, a] }
    }

    /// Four children of one colour make a parent of that colour, with every filter.
    @Test func aUniformMosaicStaysUniform() {
        let child = Self.solid(10, 200, 30, 255)
        for method in Resampling.allCases {
            let parent = method.parent(of: [child, child, child, child], side: 8)
            #expect(parent == child, "\(method)")
        }
    }

    /// Transparent pixels do not darken the data next to them (colours are alpha-weighted), and
    /// a missing child is transparent.
    @Test func alphaWeightedAndMissingChildren() {
        let red = Self.solid(255, 0, 0, 255)
        for method in Resampling.allCases {
            let parent = method.parent(of: [red, nil, nil, nil], side: 8)
            // The top-left quarter is red and opaque; the bottom-right quarter transparent.
            #expect(Array(parent[0..<4]) == [255, 0, 0, 255], "\(method)")
            #expect(parent[(7 * 8 + 7) * 4 + 3] == 0, "\(method)")
            // Every pixel with some alpha is pure red: no black bleeding in.
            for i in stride(from: 0, to: parent.count, by: 4) where parent[i + 3] > 0 {
                #expect(parent[i] == 255 && parent[i + 1] == 0 && parent[i + 2] == 0, "\(method) at \(i / 4)")
            }
        }
    }

    /// `average` is the mean of each 2x2 block; `near` its top-left pixel.
    @Test func averageAndNearOfABlock() {
        var child = [UInt8](repeating: 255, count: 2 * 2 * 4)
        for (i, v) in [0, 100, 200, 40].enumerated() { child[i * 4] = UInt8(v) }
        // A 2 px child: the parent's top-left pixel is the whole child halved.
        let average = Resampling.average.parent(of: [child, child, child, child], side: 2)
        #expect(average[0] == 85)  // (0 + 100 + 200 + 40) / 4 = 85
        let near = Resampling.near.parent(of: [child, child, child, child], side: 2)
        #expect(near[0] == 0)
    }
}

@Suite(.serialized) struct TilerTests {
    static func options(_ output: String, format: TileFormat = .png) throws -> TileOptions {
        var options = TileOptions(input: sample, output: output, encoding: try TileEncoding(format: format))
        options.threads = 2
        return options
    }

    /// The sample (UTM, 2 m pixels) into a bundle: the zooms gdal2tiles would choose, every tile
    /// decodable, transparent where the rotated UTM frame leaves no data.
    @Test func theSampleIntoABundle() throws {
        let dir = try TemporaryDirectory("tiler")
        let report = try Tiler.run(try Self.options(dir.file("s.tilepack")))
        #expect(report.zooms == 13...15)  // 2 m UTM pixels are 3 m in Web Mercator at 48° N: z15 (4.8 m) is the deepest not finer
        let archive = try BundleArchive(path: dir.file("s.tilepack"))
        let levels = try archive.zoomLevels()
        #expect(levels.map(\.zoom) == [13, 14, 15])
        #expect(levels.reduce(0) { $0 + $1.tileCount } == report.tiles)
        var transparentSomewhere = false
        var opaqueTile = false
        try archive.forEachTile { tile, bytes in
            let bitmap = try ImageDecoder.decode(bytes, pixelFormat: .rgba8888)
            #expect(bitmap.width == 256)
            if !TileEncoding.isOpaque(bitmap) { transparentSomewhere = true } else { opaqueTile = true }
        }
        #expect(transparentSomewhere && opaqueTile)
        let metadata = try archive.metadata()
        #expect(metadata.entries["minzoom"] == "13" && metadata.entries["maxzoom"] == "15" && metadata.entries["format"] == "png")
    }

    /// A tile of the deepest zoom is what GDAL's own gdalwarp draws for the same extent with the
    /// same resampling: an independent witness of the reprojection.
    @Test(.needs(.gdalwarp)) func theDeepestZoomMatchesGdalwarp() throws {
        let dir = try TemporaryDirectory("tiler-witness")
        var options = try Self.options(dir.file("s.mbtiles"))
        options.resampling = .bilinear
        options.zooms = 15...15
        _ = try Tiler.run(options)
        let archive = try MBTilesArchive(path: dir.file("s.mbtiles"))
        var tiles: [TileCoordinate] = []
        try archive.forEachTile { tile, _ in tiles.append(tile) }
        // A tile in the middle of the raster.
        tiles.sort { ($0.y, $0.x) < ($1.y, $1.x) }
        let tile = tiles[tiles.count / 2]
        let ours = try ImageDecoder.decode(try #require(try archive.tileData(at: tile)), pixelFormat: .rgba8888)
        let o = TilePlan.originShift, span = 2 * o / 32768
        let w = -o + Double(tile.x) * span, n = o - Double(tile.y) * span
        let witness = dir.file("witness.tif")
        #expect(
            try run(
                "/usr/bin/gdalwarp",
                [
                    "-q", "-t_srs", "EPSG:3857", "-te", "\(w)", "\(n - span)", "\(w + span)", "\(n)", "-ts", "256", "256", "-r", "bilinear",
                    "-dstalpha", "-of", "GTiff", sample, witness,
                ]) == 0)
        _ = try run("/usr/bin/gdal_translate", ["-q", "-of", "PNG", witness, dir.file("witness.png")])
        let theirs = try ImageDecoder.decode(Data(contentsOf: URL(fileURLWithPath: dir.file("witness.png"))), pixelFormat: .rgba8888)
        let psnr = try #require(peakSignalToNoise(ours, theirs))  // over the pixels both draw opaque
        #expect(psnr > 40, "PSNR \(psnr) dB against gdalwarp")
    }

    /// Samples that are not 8-bit need --range (named in the error); with it, they are drawn.
    @Test func sixteenBitNeedsARange() throws {
        let dir = try TemporaryDirectory("tiler-16")
        let sixteen = dir.file("dem.tif")
        #expect(
            try run("/usr/bin/gdal_translate", ["-q", "-ot", "UInt16", "-b", "1", "-scale", "0", "255", "0", "4000", sample, sixteen]) == 0)
        var options = try Self.options(dir.file("dem.pmtiles"))
        options.input = sixteen
        #expect {
            try Tiler.run(options)
        } throws: { error in
            "\(error)".contains("--range") && "\(error)".contains("UInt16") && "\(error)".contains(sixteen)
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("dem.pmtiles")))
        options.range = 0...4000
        options.zooms = 14...14
        let report = try Tiler.run(options)
        #expect(report.tiles > 0)
        #expect(try PMTilesArchive(path: dir.file("dem.pmtiles")).header.maxZoom == 14)
    }

    /// Not georeferenced, not a raster, an existing output: each refused by name, nothing written.
    @Test func refusalsNameTheFileAndLeaveNothing() throws {
        let dir = try TemporaryDirectory("tiler-refused")
        let plain = TestSupport.packageRoot.appendingPathComponent("samples/tiles/0/0/0.png").path
        var options = try Self.options(dir.file("a.tilepack"))
        options.input = plain
        #expect { try Tiler.run(options) } throws: { "\($0)".contains(plain) && "\($0)".contains("not georeferenced") }
        options.input = dir.file("missing.tif")
        #expect { try Tiler.run(options) } throws: { "\($0)".contains("missing.tif") }
        _ = FileManager.default.createFile(atPath: dir.file("a.tilepack"), contents: Data("keep".utf8))
        options.input = sample
        options.zooms = 13...13
        #expect { try Tiler.run(options) } throws: { "\($0)".contains("a.tilepack") }
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir.file("a.tilepack"))) == Data("keep".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["a.tilepack"])
    }

    /// `--index`: a bundle or PMTiles output gets its tile hash index beside it, what `tilepack
    /// index` makes of the archive; tiled again without it, the index of the archive replaced
    /// goes; an MBTiles output stores its content identity instead (as with import and convert).
    @Test func theTileHashIndexIsWrittenBesideABundleOrPMTilesOnRequest() throws {
        let dir = try TemporaryDirectory("tiler-index")
        for name in ["s.tilepack", "s.pmtiles", "s.mbtiles"] {
            let path = dir.file(name)
            let sidecar = TileHashIndex.sidecarName(of: path)
            var options = try Self.options(path)
            options.zooms = 13...14
            options.tileIndex = true
            _ = try Tiler.run(options)
            if name.hasSuffix(".mbtiles") {
                #expect(!FileManager.default.fileExists(atPath: sidecar))
                let archive = try openTileArchive(path: path)
                #expect(try archive.metadata()[ContentIdentity.metadataKey] == (try ContentIdentity.compute(archive).description))
                continue
            }
            let written = try TileHashIndex.decode(Array(Data(contentsOf: URL(fileURLWithPath: sidecar))), name: sidecar)
            let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
            // The tiler's writer made every payload: the index says the archive is canonical.
            #expect(written.canonical)
            #expect(
                written == (try TileHashIndex.build(try openTileArchive(path: path), archiveLength: UInt64(size), canonical: true)),
                "\(name)")
            #expect(written.hashes.count > 0)
            options.tileIndex = false
            options.overwrite = true
            _ = try Tiler.run(options)
            #expect(!FileManager.default.fileExists(atPath: sidecar), "\(name): the index of the archive replaced is left")
        }
    }

    /// A tree output, JPEG with a quality per zoom: files under z/x/y.jpg; the zoom given the
    /// lower quality is smaller than at 90, the others byte for byte the same.
    @Test func aTreeOfJPEGWithAQualityPerZoom() throws {
        let dir = try TemporaryDirectory("tiler-tree")
        var options = try Self.options(dir.file("tree"))
        options.encoding = try TileEncoding(format: .jpeg, quality: "0-14:90,15-:40")
        let mixed = try Tiler.run(options)
        let files = try FileManager.default.subpathsOfDirectory(atPath: dir.file("tree")).filter { $0.hasSuffix(".jpg") }
        #expect(files.count == mixed.tiles && files.contains { $0.hasPrefix("15/") })
        #expect(FileManager.default.fileExists(atPath: dir.file("tree/metadata.json")))
        options.output = dir.file("tree90")
        options.encoding = try TileEncoding(format: .jpeg, quality: "90")
        let ninety = try Tiler.run(options)
        #expect(mixed.bytesPerZoom[15]! < ninety.bytesPerZoom[15]! * 2 / 3)
        #expect(mixed.bytesPerZoom[14] == ninety.bytesPerZoom[14] && mixed.bytesPerZoom[13] == ninety.bytesPerZoom[13])
    }

    /// Without `--force`, a folder that appears at a tree output's name while the tiles are written
    /// is kept as it is: the output is refused at the end, naming it, and its staging folder goes
    /// (the tree was put in place over whatever was there); with `--force` it is replaced.
    @Test func aTreeOutputNeverReplacesAFolderThatAppearedWithoutForce() throws {
        let dir = try TemporaryDirectory("tiler-tree-race")
        let path = dir.file("tree")
        let tile = try TileCoordinate(zoom: 0, x: 0, y: 0)
        let metadata = TileMetadata(["name": "race", "format": "png"])
        for overwrite in [false, true] {
            let output = try TileOutput(destination: path, format: .png, metadata: metadata, overwrite: overwrite)
            try output.add(tile, bytes: Data(HostilePMTiles.pngBytes))
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: path + "/keep.txt", contents: Data("keep".utf8))
            if overwrite {
                try output.finish(metadata: metadata)
                #expect(try FileManager.default.contentsOfDirectory(atPath: path).sorted() == ["0", "metadata.json"])
            } else {
                #expect { try output.finish(metadata: metadata) } throws: { "\($0)".contains(path) }
                #expect(FileManager.default.contents(atPath: path + "/keep.txt") == Data("keep".utf8))
                #expect(try FileManager.default.contentsOfDirectory(atPath: path) == ["keep.txt"])
                try FileManager.default.removeItem(atPath: path)
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == (overwrite ? ["tree"] : []))
        }
    }
}

/// `--encoding terrarium|mapbox`: elevations in colours, lower zooms from the elevations.
@Suite(.serialized) struct ElevationTests {
    @Test func encodingsRoundTrip() {
        for encoding in ElevationEncoding.allCases {
            let heights: [Float] = [-412.5, 0, 8848.86, 1234.25, .nan]
            let rgba = encoding.rgba(heights)
            for (i, h) in heights.enumerated() {
                let back = encoding.elevation(r: rgba[i * 4], g: rgba[i * 4 + 1], b: rgba[i * 4 + 2], a: rgba[i * 4 + 3])
                if h.isNaN { #expect(back.isNaN) } else { #expect(abs(back - Double(h)) <= 0.05 + 1e-6, "\(encoding) \(h) -> \(back)") }
            }
        }
        // Terrarium's published example: 0 m is (128, 0, 0).
        #expect(Array(ElevationEncoding.terrarium.rgba([0])) == [128, 0, 0, 255])
        // terrain-RGB: 0 m is 100,000 tenths: (1, 134, 160).
        #expect(Array(ElevationEncoding.mapbox.rgba([0])) == [1, 134, 160, 255])
    }

    /// A DEM (float metres with nodata) into terrarium PNG tiles: the deepest zoom holds GDAL's own
    /// warped elevations (gdalwarp, same tile, bilinear) to terrarium's 1/256 m, and a parent pixel
    /// is the mean of its four children's elevations; a lossy format is refused with the reason.
    @Test(.needs(.gdalwarp)) func terrariumFromADEM() throws {
        let dir = try TemporaryDirectory("tiler-dem")
        let dem = dir.file("dem.tif")
        #expect(
            try run(
                "/usr/bin/gdal_translate",
                ["-q", "-ot", "Float32", "-b", "1", "-scale", "0", "255", "-100", "3000", "-a_nodata", "-9999", sample, dem])
                == 0)
        var options = TileOptions(input: dem, output: dir.file("dem.mbtiles"), encoding: try TileEncoding(format: .jpeg))
        options.elevation = .terrarium
        #expect { try Tiler.run(options) } throws: { "\($0)".contains("lossless") }
        options.encoding = try TileEncoding(format: .png)
        options.zooms = 14...15
        options.resampling = .bilinear
        options.threads = 2
        _ = try Tiler.run(options)
        let archive = try MBTilesArchive(path: dir.file("dem.mbtiles"))
        #expect(try archive.metadata().entries["encoding"] == "terrarium")
        var tiles: [TileCoordinate] = []
        try archive.forEachTile { tile, _ in if tile.zoom == 15 { tiles.append(tile) } }
        tiles.sort { ($0.y, $0.x) < ($1.y, $1.x) }
        let tile = tiles[tiles.count / 2]
        func elevations(_ t: TileCoordinate) throws -> [Double] {
            let bitmap = try ImageDecoder.decode(try #require(try archive.tileData(at: t)), pixelFormat: .rgba8888)
            return (0..<(256 * 256)).map { i in
                ElevationEncoding.terrarium.elevation(
                    r: bitmap.pixels[i * 4], g: bitmap.pixels[i * 4 + 1], b: bitmap.pixels[i * 4 + 2], a: bitmap.pixels[i * 4 + 3])
            }
        }
        let ours = try elevations(tile)
        let o = TilePlan.originShift, span = 2 * o / 32768
        let w = -o + Double(tile.x) * span, n = o - Double(tile.y) * span
        #expect(
            try run(
                "/usr/bin/gdalwarp",
                [
                    "-q", "-t_srs", "EPSG:3857", "-te", "\(w)", "\(n - span)", "\(w + span)", "\(n)", "-ts", "256", "256", "-r", "bilinear",
                    "-ot", "Float32", "-dstnodata", "nan", "-of", "ENVI", dem, dir.file("witness.img"),
                ]) == 0)
        let raw = try Data(contentsOf: URL(fileURLWithPath: dir.file("witness.img")))
        let theirs: [Float] = raw.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        #expect(theirs.count == ours.count)
        var compared = 0
        for i in ours.indices where !ours[i].isNaN && !theirs[i].isNaN {
            compared += 1
            #expect(abs(ours[i] - Double(theirs[i])) < 0.01, "pixel \(i): \(ours[i]) against gdalwarp's \(theirs[i])")
            if abs(ours[i] - Double(theirs[i])) >= 0.01 { break }
        }
        #expect(compared > 30_000)
        // The parent's pixel (0, 0) of a fully opaque area is its children's 2x2 mean (average): from elevations.
        var parentOptions = options
        parentOptions.output = dir.file("avg.mbtiles")
        parentOptions.resampling = .average
        _ = try Tiler.run(parentOptions)
        let averaged = try MBTilesArchive(path: dir.file("avg.mbtiles"))
        let parent = TileCoordinate(validatingZoom: 14, x: tile.x / 2, y: tile.y / 2)!
        let child = TileCoordinate(validatingZoom: 15, x: parent.x * 2, y: parent.y * 2)!
        func decode(_ archive: MBTilesArchive, _ t: TileCoordinate) throws -> [Double] {
            let bitmap = try ImageDecoder.decode(try #require(try archive.tileData(at: t)), pixelFormat: .rgba8888)
            return (0..<(256 * 256)).map { i in
                ElevationEncoding.terrarium.elevation(
                    r: bitmap.pixels[i * 4], g: bitmap.pixels[i * 4 + 1], b: bitmap.pixels[i * 4 + 2], a: bitmap.pixels[i * 4 + 3])
            }
        }
        let p = try decode(averaged, parent), c = try decode(averaged, child)
        // A pixel in the child's quarter where all four samples have data.
        func block(_ k: Int) -> [Double] {
            let top = 2 * k * 256 + 2 * k, bottom = (2 * k + 1) * 256 + 2 * k
            return [c[top], c[top + 1], c[bottom], c[bottom + 1]]
        }
        if let k = (0..<128).first(where: { block($0).allSatisfy { !$0.isNaN } }) {
            let mean: Double = block(k).reduce(0, +) / 4
            let got: Double = p[k * 256 + k]
            #expect(abs(got - mean) < 0.01, "parent \(got) against the children's mean \(mean)")
        } else {
            Issue.record("no child pixel block with data")
        }
    }
}
