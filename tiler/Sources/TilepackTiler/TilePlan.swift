import Foundation
import TilepackCore

/// What to cut: the zooms, the tiles of the deepest zoom, the tile size. Pure arithmetic on Web
/// Mercator (EPSG:3857), as gdal2tiles does it, testable without GDAL.
package struct TilePlan: Sendable, Hashable {
    /// Half the side of the Web Mercator square, in metres.
    package static let originShift = 20_037_508.342789244

    package var tileSize: Int
    package var zooms: ClosedRange<Int>
    /// The tiles of the deepest zoom that share area with the raster (and the `--bbox`).
    package var columns: ClosedRange<Int>
    package var rows: ClosedRange<Int>

    /// Metres per pixel at `zoom` for `tileSize`-pixel tiles.
    package static func resolution(zoom: Int, tileSize: Int) -> Double {
        2 * originShift / Double(tileSize) / Double(1 << zoom)
    }

    /// gdal2tiles' `ZoomForPixelSize`: the deepest zoom whose pixels are not smaller than
    /// `metres` (the zoom at which the raster is drawn at least at its own resolution).
    package static func zoom(forPixelSize metres: Double, tileSize: Int) -> Int {
        for zoom in 0...TileCoordinate.maximumZoom where metres > resolution(zoom: zoom, tileSize: tileSize) {
            return max(0, zoom - 1)
        }
        return TileCoordinate.maximumZoom
    }

    /// The extent in Web Mercator metres `(minX, minY, maxX, maxY)` of a longitude/latitude box.
    package static func mercator(_ box: GeoBoundingBox) -> (minX: Double, minY: Double, maxX: Double, maxY: Double) {
        func x(_ longitude: Double) -> Double { longitude * .pi / 180 * WebMercator.earthRadius }
        func y(_ latitude: Double) -> Double {
            let clamped = min(max(latitude, -WebMercator.maximumLatitude), WebMercator.maximumLatitude)
            return log(tan(.pi / 4 + clamped * .pi / 360)) * WebMercator.earthRadius
        }
        return (x(box.west), y(box.south), x(box.east), y(box.north))
    }

    /// The plan for a raster covering `extent` (Web Mercator metres) at `pixelSize` metres per
    /// pixel, `width` x `height` pixels once warped.
    /// - Parameters:
    ///   - zooms: the zooms asked for; nil: as gdal2tiles, from the raster's resolution (deepest)
    ///     down to the zoom where the whole raster fits one tile.
    ///   - minZoom, maxZoom: with `zooms` nil, one end asked for (`--min-zoom`, `--max-zoom`),
    ///     the other from the raster (never below the one given).
    ///   - clip: `--bbox`, in Web Mercator metres.
    package init(
        extent: (minX: Double, minY: Double, maxX: Double, maxY: Double), pixelSize: Double, width: Int, height: Int,
        tileSize: Int, zooms: ClosedRange<Int>?, minZoom: Int? = nil, maxZoom: Int? = nil,
        clip: (minX: Double, minY: Double, maxX: Double, maxY: Double)?
    ) throws(TilerError) {
        self.tileSize = tileSize
        let deepest = Self.zoom(forPixelSize: pixelSize, tileSize: tileSize)
        let shallowest = min(
            deepest, Self.zoom(forPixelSize: pixelSize * Double(max(width, height)) / Double(tileSize), tileSize: tileSize))
        let low = minZoom ?? min(shallowest, maxZoom ?? shallowest)
        self.zooms = zooms ?? low...max(low, maxZoom ?? deepest)
        var box = extent
        if let clip {
            box = (max(box.minX, clip.minX), max(box.minY, clip.minY), min(box.maxX, clip.maxX), min(box.maxY, clip.maxY))
            guard box.minX < box.maxX, box.minY < box.maxY else { throw .nothingToTile("the --bbox does not overlap the raster") }
        }
        let z = self.zooms.upperBound
        let span = Self.resolution(zoom: z, tileSize: tileSize) * Double(tileSize)
        let last = (1 << z) - 1
        func column(_ x: Double) -> Int { min(last, max(0, Int(((x + Self.originShift) / span).rounded(.down)))) }
        func row(_ y: Double) -> Int { min(last, max(0, Int(((Self.originShift - y) / span).rounded(.down)))) }
        // An edge exactly on a tile boundary does not reach into the next tile.
        let epsilon = span * 1e-9
        columns = column(box.minX)...column(box.maxX - epsilon)
        rows = row(box.maxY)...row(box.minY + epsilon)
    }

    /// The tiles at `zoom` (at most the deepest) that hold some of the deepest zoom's tiles.
    package func range(atZoom zoom: Int) -> (columns: ClosedRange<Int>, rows: ClosedRange<Int>) {
        let shift = zooms.upperBound - zoom
        return ((columns.lowerBound >> shift)...(columns.upperBound >> shift), (rows.lowerBound >> shift)...(rows.upperBound >> shift))
    }

    /// How many tiles each zoom has at most (blank ones are skipped later).
    package var tileCounts: [Int: Int] {
        var counts: [Int: Int] = [:]
        for zoom in zooms {
            let r = range(atZoom: zoom)
            counts[zoom] = r.columns.count * r.rows.count
        }
        return counts
    }

    /// The Web Mercator geotransform of tile (x, y) at the deepest zoom (GDAL's six numbers).
    package func geoTransform(column x: Int, row y: Int) -> [Double] {
        let resolution = Self.resolution(zoom: zooms.upperBound, tileSize: tileSize)
        let span = resolution * Double(tileSize)
        return [-Self.originShift + Double(x) * span, resolution, 0, Self.originShift - Double(y) * span, 0, -resolution]
    }

    /// The box of the deepest zoom's tiles, in degrees (for the metadata's `bounds`).
    package var bounds: GeoBoundingBox {
        let z = zooms.upperBound
        let nw = WebMercator.boundingBox(of: TileCoordinate(validatingZoom: z, x: columns.lowerBound, y: rows.lowerBound)!)
        let se = WebMercator.boundingBox(of: TileCoordinate(validatingZoom: z, x: columns.upperBound, y: rows.upperBound)!)
        return GeoBoundingBox(west: nw.west, south: se.south, east: se.east, north: nw.north)
    }
}

/// What `tilepack tile` reports when it cannot go on: each names the input or the option.
package enum TilerError: Error, CustomStringConvertible, Sendable {
    case gdal(path: String, reason: String)
    case unsupported(path: String, reason: String)
    case nothingToTile(String)
    case badOption(String)
    case output(String)

    package var description: String {
        switch self {
        case .gdal(let path, let reason): "\(path): \(reason)"
        case .unsupported(let path, let reason): "\(path): \(reason)"
        case .nothingToTile(let reason): "nothing to tile: \(reason)"
        case .badOption(let reason): reason
        case .output(let reason): reason
        }
    }
}
