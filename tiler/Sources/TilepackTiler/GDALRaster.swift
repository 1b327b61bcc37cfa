internal import CTilepackGDAL
import Foundation

/// GDAL, set up once per process: every driver registered, errors kept for the caller (not
/// printed), the block cache bounded so that memory stays flat however large the input.
enum GDAL {
    /// GDAL's block cache: 64 MiB (its default is 5 % of the machine's memory), enough for the source
    /// blocks of the subtrees the workers walk at once.
    static let cacheBytes: Int64 = 64 << 20

    private static let setUp: Void = {
        GDALAllRegister()
        CPLSetErrorHandler(CPLQuietErrorHandler)
        GDALSetCacheMax64(cacheBytes)
    }()

    static func initialize() { _ = setUp }

    /// GDAL's last error message on this thread, or `fallback`.
    static func lastError(_ fallback: String) -> String {
        guard let message = CPLGetLastErrorMsg(), message.pointee != 0 else { return fallback }
        return String(cString: message)
    }

    /// A NULL-terminated list of C strings for GDAL's `char **` options, freed by `body`'s end.
    static func withStringList<R>(_ strings: [String], _ body: (UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) throws -> R) rethrows
        -> R
    {
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        pointers.append(nil)
        defer { for p in pointers { free(p) } }
        return try pointers.withUnsafeMutableBufferPointer { try body($0.baseAddress!) }
    }
}

/// What the raster is, as GDAL reads it, and what has to be done before warping it.
struct RasterDescription: Sendable {
    var width: Int
    var height: Int
    var bandCount: Int
    /// The band holding alpha (1-based), 0 for none.
    var alphaBand: Int
    /// The colour bands (1-based): one (grey) or three (RGB).
    var colourBands: [Int]
    /// Whether the first band is paletted (expanded to RGBA before warping).
    var paletted: Bool
    /// GDAL's name of the first band's data type (`Byte`, `UInt16`, `Float32`, ...).
    var dataType: String
    var noData: Double?
    /// The extent once warped to Web Mercator (metres) and its pixel size there.
    var extent: (minX: Double, minY: Double, maxX: Double, maxY: Double)
    var pixelSize: Double
    var warpedWidth: Int
    var warpedHeight: Int
}

/// One opened raster made ready to be cut: the source, an in-memory VRT that expands a palette or
/// scales samples to bytes when needed (GDAL's translate), and the warper that draws any tile of
/// the deepest zoom from it (GDAL's warp operation into a one-tile in-memory dataset, through
/// the source-to-Web-Mercator transformer, approximated to an eighth of a pixel as gdalwarp
/// does). Not thread-safe: each worker thread opens its own.
final class TileWarper {
    let path: String
    private let source: UnsafeMutableRawPointer
    private var translated: UnsafeMutableRawPointer?
    private let memory: UnsafeMutableRawPointer
    private let projection: UnsafeMutableRawPointer
    private let transformer: UnsafeMutableRawPointer
    private let operation: UnsafeMutableRawPointer
    private let tileSize: Int
    private var bandMap: [Int32]

    /// Opens `path` and describes it (the worker's own handles are dropped afterwards).
    static func describe(path: String, range: ClosedRange<Double>?, elevation: Bool) throws(TilerError) -> RasterDescription {
        let warper = try TileWarper(path: path, tileSize: 256, resampling: .near, range: range, elevation: elevation)
        return try warper.description()
    }

    /// What the bands are: their count, the alpha band (0: none), the colour bands, whether the
    /// first is paletted, its data type's name and its no-data value.
    typealias Bands = (bands: Int, alpha: Int, colours: [Int], paletted: Bool, type: String, noData: Double?)
    private var info: Bands

    /// Whether the tiles are elevations (`--encoding`): band 1 warped as 32-bit floats, NaN
    /// where there is no data, instead of colours.
    let elevation: Bool

    init(path: String, tileSize: Int, resampling: Resampling, range: ClosedRange<Double>?, elevation: Bool = false) throws(TilerError) {
        GDAL.initialize()
        self.path = path
        self.tileSize = tileSize
        self.elevation = elevation
        guard let opened = GDALOpenEx(path, UInt32(GDAL_OF_RASTER | GDAL_OF_READONLY), nil, nil, nil) else {
            throw .gdal(path: path, reason: GDAL.lastError("GDAL cannot open it as a raster"))
        }
        source = opened
        var madeVRT: UnsafeMutableRawPointer?
        var failed = true
        defer {
            if failed {
                if let madeVRT { GDALClose(madeVRT) }
                GDALClose(opened)
            }
        }
        let prepared = try Self.readyBands(of: opened, path: path, range: range, elevation: elevation)
        madeVRT = prepared.vrt
        let ready = prepared.vrt ?? opened
        let bands = prepared.bands
        info = bands
        let colours =
            elevation ? [1] : bands.colours.count >= 3 ? Array(bands.colours.prefix(3)) : Array(bands.colours.prefix(1))
        guard !colours.isEmpty else {
            throw .unsupported(path: path, reason: "it has an alpha band and no colour band")
        }
        bandMap = colours.count == 3 ? [1, 2, 3, 4] : [1, 1, 1, 2]
        let transformers = try Self.webMercatorTransformers(of: ready, path: path)
        projection = transformers.projection
        transformer = transformers.approx
        func destroyTransformers() {
            GDALDestroyApproxTransformer(transformers.approx)
            GDALDestroyGenImgProjTransformer(transformers.projection)
        }
        guard let driver = GDALGetDriverByName("MEM"),
            let mem = GDALCreate(
                driver, "", Int32(tileSize), Int32(tileSize), Int32(elevation ? 1 : colours.count + 1), elevation ? GDT_Float32 : GDT_Byte,
                nil)
        else {
            destroyTransformers()
            throw .gdal(path: path, reason: GDAL.lastError("GDAL could not make an in-memory tile"))
        }
        memory = mem
        guard
            let op = Self.warpOperation(
                from: ready, into: mem, colours: colours, bands: bands, elevation: elevation, resampling: resampling,
                transformer: transformers.approx)
        else {
            GDALClose(mem)
            destroyTransformers()
            throw .gdal(path: path, reason: GDAL.lastError("GDAL could not set up the warp"))
        }
        operation = op
        translated = madeVRT
        failed = false
    }

    /// What the bands of `ds` are.
    private static func describeBands(_ ds: UnsafeMutableRawPointer) -> Bands {
        let count = Int(GDALGetRasterCount(ds))
        var alpha = 0
        var colours: [Int] = []
        for i in 1...max(1, count) where count > 0 {
            let band = GDALGetRasterBand(ds, Int32(i))
            if GDALGetRasterColorInterpretation(band) == GCI_AlphaBand { alpha = i } else { colours.append(i) }
        }
        let first = count > 0 ? GDALGetRasterBand(ds, 1) : nil
        let paletted =
            first.map { GDALGetRasterColorInterpretation($0) == GCI_PaletteIndex && GDALGetRasterColorTable($0) != nil } ?? false
        let type = first.map { String(cString: GDALGetDataTypeName(GDALGetRasterDataType($0))) } ?? "none"
        var has: Int32 = 0
        let value = first.map { GDALGetRasterNoDataValue($0, &has) } ?? 0
        return (count, alpha, colours, paletted, type, has != 0 ? value : nil)
    }

    /// The bands of `opened` checked (some band, georeferenced, colours or elevations as asked)
    /// and made ready to warp: through an in-memory VRT (GDAL's translate, returned) that expands
    /// a palette or scales samples to bytes when needed, else as they are (`vrt` nil).
    private static func readyBands(
        of opened: UnsafeMutableRawPointer, path: String, range: ClosedRange<Double>?, elevation: Bool
    ) throws(TilerError) -> (vrt: UnsafeMutableRawPointer?, bands: Bands) {
        let bands = describeBands(opened)
        guard bands.bands > 0 else { throw .unsupported(path: path, reason: "it has no raster band") }
        guard GDALGetSpatialRef(opened) != nil || GDALGetGCPCount(opened) > 0 else {
            throw .unsupported(
                path: path,
                reason: "it is not georeferenced (no coordinate system): assign one first, e.g. gdal_translate -a_srs EPSG:4326 -a_ullr ..."
            )
        }
        var translate: [String] = []
        if elevation {
            guard !bands.paletted else {
                throw .unsupported(path: path, reason: "its first band is paletted (colours), not elevations: --encoding needs a DEM")
            }
        } else if bands.paletted {
            translate = ["-expand", "rgba"]
        } else if bands.type != "Byte" {
            guard let range else {
                throw .unsupported(
                    path: path,
                    reason:
                        "its samples are \(bands.type), not 8-bit: give the values to draw from black to white with --range MIN,MAX (e.g. --range 0,4000 for a 16-bit image), or --encoding terrarium|mapbox for elevations"
                )
            }
            translate = ["-ot", "Byte", "-scale", "\(range.lowerBound)", "\(range.upperBound)", "1", "255"]
            if bands.noData != nil { translate += ["-a_nodata", "0"] }
        }
        guard !translate.isEmpty else { return (nil, bands) }
        let made: UnsafeMutableRawPointer? = GDAL.withStringList(["-of", "VRT"] + translate) { argv in
            guard let options = GDALTranslateOptionsNew(argv, nil) else { return nil }
            defer { GDALTranslateOptionsFree(options) }
            var usageError: Int32 = 0
            return GDALTranslate("", opened, options, &usageError)
        }
        guard let made else {
            throw .gdal(path: path, reason: GDAL.lastError("GDAL could not prepare its bands (\(translate.joined(separator: " ")))"))
        }
        return (made, describeBands(made))
    }

    /// The transformer from the source's pixels to Web Mercator, then to the tile's pixels, and
    /// its approximation to an eighth of a pixel (as gdalwarp does); the caller destroys both.
    private static func webMercatorTransformers(
        of ready: UnsafeMutableRawPointer, path: String
    ) throws(TilerError) -> (projection: UnsafeMutableRawPointer, approx: UnsafeMutableRawPointer) {
        let projectionArg: UnsafeMutableRawPointer? = GDAL.withStringList(["DST_SRS=EPSG:3857"]) { options in
            GDALCreateGenImgProjTransformer2(ready, nil, options)
        }
        guard let projectionArg else {
            throw .gdal(path: path, reason: GDAL.lastError("GDAL cannot transform its coordinates to Web Mercator"))
        }
        guard let approx = GDALCreateApproxTransformer(GDALGenImgProjTransform, projectionArg, 0.125) else {
            GDALDestroyGenImgProjTransformer(projectionArg)
            throw .gdal(path: path, reason: GDAL.lastError("GDAL could not make an approximate transformer"))
        }
        return (projectionArg, approx)
    }

    /// GDAL's warp operation drawing `colours` of `ready` (and its alpha, or elevations of band
    /// 1) into the one-tile dataset `mem` through `transformer`; nil when GDAL cannot set it up.
    private static func warpOperation(
        from ready: UnsafeMutableRawPointer, into mem: UnsafeMutableRawPointer, colours: [Int], bands: Bands, elevation: Bool,
        resampling: Resampling, transformer approx: UnsafeMutableRawPointer
    ) -> UnsafeMutableRawPointer? {
        let options = GDALCreateWarpOptions()!
        defer { GDALDestroyWarpOptions(options) }
        options.pointee.hSrcDS = ready
        options.pointee.hDstDS = mem
        options.pointee.nBandCount = Int32(colours.count)
        options.pointee.panSrcBands = CPLMalloc(MemoryLayout<Int32>.size * colours.count).assumingMemoryBound(to: Int32.self)
        options.pointee.panDstBands = CPLMalloc(MemoryLayout<Int32>.size * colours.count).assumingMemoryBound(to: Int32.self)
        for (i, band) in colours.enumerated() {
            options.pointee.panSrcBands[i] = Int32(band)
            options.pointee.panDstBands[i] = Int32(i + 1)
        }
        options.pointee.nSrcAlphaBand = Int32(elevation ? 0 : bands.alpha)
        options.pointee.nDstAlphaBand = Int32(elevation ? 0 : colours.count + 1)
        if elevation {
            // No data stays NaN in the tile (INIT_DEST=NO_DATA), whatever the source calls it.
            options.pointee.eWorkingDataType = GDT_Float32
            options.pointee.padfDstNoDataReal = CPLMalloc(MemoryLayout<Double>.size).assumingMemoryBound(to: Double.self)
            options.pointee.padfDstNoDataReal[0] = .nan
        }
        if bands.alpha == 0 || elevation, let noData = bands.noData {
            options.pointee.padfSrcNoDataReal = CPLMalloc(MemoryLayout<Double>.size * colours.count).assumingMemoryBound(to: Double.self)
            for i in colours.indices { options.pointee.padfSrcNoDataReal[i] = noData }
        }
        options.pointee.eResampleAlg = resampling.gdalAlgorithm
        options.pointee.pfnTransformer = GDALApproxTransform
        options.pointee.pTransformerArg = approx
        options.pointee.papszWarpOptions = CSLSetNameValue(options.pointee.papszWarpOptions, "INIT_DEST", elevation ? "NO_DATA" : "0")
        return GDALCreateWarpOperation(options)
    }

    deinit {
        GDALDestroyWarpOperation(operation)
        GDALClose(memory)
        GDALDestroyApproxTransformer(transformer)
        GDALDestroyGenImgProjTransformer(projection)
        if let translated { GDALClose(translated) }
        GDALClose(source)
    }

    /// The raster's bands and its extent in Web Mercator (GDAL's suggested warp output).
    func description() throws(TilerError) -> RasterDescription {
        let ready = translated ?? source
        var transform = [Double](repeating: 0, count: 6)
        var pixels: Int32 = 0, lines: Int32 = 0
        guard GDALSuggestedWarpOutput(ready, GDALGenImgProjTransform, projection, &transform, &pixels, &lines) == CE_None else {
            throw .gdal(path: path, reason: GDAL.lastError("GDAL cannot find its extent in Web Mercator"))
        }
        let minX = transform[0], maxY = transform[3]
        let maxX = minX + Double(pixels) * transform[1], minY = maxY + Double(lines) * transform[5]
        return RasterDescription(
            width: Int(GDALGetRasterXSize(source)), height: Int(GDALGetRasterYSize(source)), bandCount: info.bands, alphaBand: info.alpha,
            colourBands: info.colours, paletted: info.paletted, dataType: info.type, noData: info.noData,
            extent: (minX, minY, maxX, maxY), pixelSize: transform[1], warpedWidth: Int(pixels), warpedHeight: Int(lines))
    }

    /// The elevations of the tile whose Web Mercator geotransform is `geoTransform` (NaN where
    /// there is no data), into `values` (`tileSize`² floats).
    func warp(geoTransform: [Double], into values: inout [Float]) throws(TilerError) {
        precondition(elevation)
        var transform = geoTransform
        GDALSetGenImgProjTransformerDstGeoTransform(projection, &transform)
        CPLErrorReset()
        guard GDALChunkAndWarpImage(operation, 0, 0, Int32(tileSize), Int32(tileSize)) == CE_None else {
            throw .gdal(path: path, reason: GDAL.lastError("GDAL could not warp a tile"))
        }
        let size = Int32(tileSize)
        var band: Int32 = 1
        let status = values.withUnsafeMutableBytes { raw in
            GDALDatasetRasterIO(memory, GF_Read, 0, 0, size, size, raw.baseAddress, size, size, GDT_Float32, 1, &band, 4, size * 4, 0)
        }
        guard status == CE_None else { throw .gdal(path: path, reason: GDAL.lastError("GDAL could not read a warped tile")) }
    }

    /// The tile whose Web Mercator geotransform is `geoTransform`, as straight RGBA (transparent
    /// where the raster has no data), into `rgba` (`tileSize`² × 4 bytes).
    func warp(geoTransform: [Double], into rgba: inout [UInt8]) throws(TilerError) {
        var transform = geoTransform
        GDALSetGenImgProjTransformerDstGeoTransform(projection, &transform)
        CPLErrorReset()
        guard GDALChunkAndWarpImage(operation, 0, 0, Int32(tileSize), Int32(tileSize)) == CE_None else {
            throw .gdal(path: path, reason: GDAL.lastError("GDAL could not warp a tile"))
        }
        let size = Int32(tileSize)
        let status = rgba.withUnsafeMutableBytes { raw in
            bandMap.withUnsafeMutableBufferPointer { map in
                GDALDatasetRasterIO(
                    memory, GF_Read, 0, 0, size, size, raw.baseAddress, size, size, GDT_Byte, 4, map.baseAddress, 4, size * 4, 1)
            }
        }
        guard status == CE_None else { throw .gdal(path: path, reason: GDAL.lastError("GDAL could not read a warped tile")) }
    }
}

extension Resampling {
    /// The warper's algorithm of the same name.
    var gdalAlgorithm: GDALResampleAlg {
        switch self {
        case .near: GRA_NearestNeighbour
        case .bilinear: GRA_Bilinear
        case .cubic: GRA_Cubic
        case .lanczos: GRA_Lanczos
        case .average: GRA_Average
        }
    }
}
