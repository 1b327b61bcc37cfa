import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@Suite struct WebMercatorTests {
    /// mercantile 1.2.1 README: `bounds(486, 332, 10)` and `ul(486, 332, 10)`.
    @Test func tileBoundsMatchMercantile() throws {
        let tile = try TileCoordinate(zoom: 10, x: 486, y: 332)
        let box = tile.boundingBox
        #expect(box.west == -9.140625)
        #expect(box.east == -8.7890625)
        #expect(isClose(box.north, 53.33087298301705, tolerance: 1e-12))
        #expect(isClose(box.south, 53.12040528310657, tolerance: 1e-12))
        // mercantile.tile(*ul(486, 332, 10), 10) == Tile(486, 332, 10): a tile's corner lies in it.
        #expect(try WebMercator.tile(containing: WebMercator.northWestCorner(of: tile), zoom: 10) == tile)
    }

    /// Points whose tiles were computed with mercantile 1.2.1 `tile(lng, lat, zoom)`.
    @Test(arguments: [
        (13.377704, 52.516275, 18, 140_813, 85_975),  // Brandenburg Gate
        (-74.0445, 40.6892, 16, 19_288, 24_645),  // Statue of Liberty
        (151.2153, -33.8568, 12, 3_768, 2_457),  // Sydney Opera House
        (-0.042772, 51.557, 14, 8_190, 5_444),  // the seed's Olympic Park, top-left
    ])
    func tilesMatchMercantile(longitude: Double, latitude: Double, zoom: Int, x: Int, y: Int) throws {
        let tile = try TileCoordinate(containing: GeoCoordinate(latitude: latitude, longitude: longitude), zoom: zoom)
        #expect(tile == (try TileCoordinate(zoom: zoom, x: x, y: y)))
    }

    /// The OSM wiki's zoom-level table: a zoom-0 tile spans 360 x 170.1022 degrees, zoom 1 180 x 85.0511.
    @Test func zoomTableOfTheOSMWiki() throws {
        let world = try TileCoordinate(zoom: 0, x: 0, y: 0).boundingBox
        #expect(world.longitudeSpan == 360)
        #expect(isClose(world.latitudeSpan, 170.1022, tolerance: 1e-4))
        let quarter = try TileCoordinate(zoom: 1, x: 1, y: 0).boundingBox
        #expect(quarter.west == 0 && quarter.east == 180 && quarter.south == 0)
        #expect(isClose(quarter.north, 85.0511, tolerance: 1e-4))
        #expect(isClose(quarter.north, WebMercator.maximumLatitude, tolerance: 1e-8))
    }

    /// OSM wiki: 156 543.03 m/pixel at zoom 0; Bing Maps Tile System: 78 271.5170 m/pixel at level 1
    /// (a 512-pixel world, which is zoom 0 with 512-pixel tiles or zoom 1 with 256-pixel tiles).
    @Test func groundResolution() throws {
        #expect(isClose(try WebMercator.metresPerPixel(latitude: 0, zoom: 0), 156_543.03, tolerance: 0.01))
        #expect(isClose(try WebMercator.metresPerPixel(latitude: 0, zoom: 1), 78_271.5170, tolerance: 1e-4))
        #expect(isClose(try WebMercator.metresPerPixel(latitude: 0, zoom: 0, tileSize: 512), 78_271.5170, tolerance: 1e-4))
        #expect(isClose(try WebMercator.metresPerPixel(latitude: 60, zoom: 1), 78_271.5170 / 2, tolerance: 1e-4))
    }

    @Test func longitude180IsTheLastColumnAndMinus180TheFirst() throws {
        for zoom in [0, 1, 7, 20, 30] {
            let last = (1 << zoom) - 1
            let east = try WebMercator.tile(containing: GeoCoordinate(latitude: 10, longitude: 180), zoom: zoom)
            let west = try WebMercator.tile(containing: GeoCoordinate(latitude: 10, longitude: -180), zoom: zoom)
            #expect(east.x == last)
            #expect(west.x == 0)
            #expect(east.y == west.y)
            #expect(east.boundingBox.east == 180 && west.boundingBox.west == -180)
        }
        // A longitude beyond 180 wraps: 190 is -170.
        #expect(
            try WebMercator.tile(containing: GeoCoordinate(latitude: 0, longitude: 190), zoom: 3)
                == WebMercator.tile(containing: GeoCoordinate(latitude: 0, longitude: -170), zoom: 3))
        #expect(try WebMercator.tile(containing: GeoCoordinate(latitude: 0, longitude: -540), zoom: 4).x == 0)
    }

    @Test func latitudeBeyondTheMercatorLimitIsClamped() throws {
        for zoom in [0, 5, 30] {
            let last = (1 << zoom) - 1
            for latitude in [85.06, 89.9, 90] {
                #expect(try WebMercator.tile(containing: GeoCoordinate(latitude: latitude, longitude: 0), zoom: zoom).y == 0)
                #expect(try WebMercator.tile(containing: GeoCoordinate(latitude: -latitude, longitude: 0), zoom: zoom).y == last)
            }
            #expect(
                try WebMercator.tile(containing: GeoCoordinate(latitude: -WebMercator.maximumLatitude, longitude: 0), zoom: zoom).y == last)
        }
        let top = try WebMercator.worldPoint(of: GeoCoordinate(latitude: 90, longitude: 0))
        #expect(top.y == 0 && top.x == 0.5)
        #expect(try WebMercator.worldPoint(of: GeoCoordinate(latitude: -90, longitude: 180)) == MercatorPoint(x: 1, y: 1))
    }

    @Test func rejectsImpossibleInput() {
        #expect(throws: GeometryError.latitudeOutOfRange(90.5)) {
            try WebMercator.tile(containing: GeoCoordinate(latitude: 90.5, longitude: 0), zoom: 3)
        }
        #expect(throws: GeometryError.self) {
            try WebMercator.tile(containing: GeoCoordinate(latitude: .nan, longitude: 0), zoom: 3)
        }
        #expect(throws: GeometryError.self) {
            try WebMercator.worldPoint(of: GeoCoordinate(latitude: 0, longitude: .infinity))
        }
        #expect(throws: GeometryError.zoomOutOfRange(31)) {
            try WebMercator.tile(containing: GeoCoordinate(latitude: 0, longitude: 0), zoom: 31)
        }
        #expect(throws: GeometryError.zoomOutOfRange(-1)) {
            try WebMercator.tilePoint(of: GeoCoordinate(latitude: 0, longitude: 0), zoom: -1)
        }
        for size in [0, -256, 1, 8, 300, 8192, 1 << 17] {
            #expect(throws: GeometryError.invalidTileSize(size)) {
                try WebMercator.pixelPoint(of: GeoCoordinate(latitude: 0, longitude: 0), zoom: 1, tileSize: size)
            }
        }
    }

    @Test func pixelsFor256And512AndOtherPowersOfTwo() throws {
        let origin = GeoCoordinate(latitude: 0, longitude: 0)
        #expect(try WebMercator.pixelPoint(of: origin, zoom: 0) == MercatorPoint(x: 128, y: 128))
        #expect(try WebMercator.pixelPoint(of: origin, zoom: 0, tileSize: 512) == MercatorPoint(x: 256, y: 256))
        #expect(try WebMercator.pixelPoint(of: origin, zoom: 3, tileSize: 16) == MercatorPoint(x: 64, y: 64))
        let (tile, pixel) = try WebMercator.tileAndPixel(of: origin, zoom: 1, tileSize: 512)
        #expect(tile == (try TileCoordinate(zoom: 1, x: 1, y: 1)))
        #expect(pixel == MercatorPoint(x: 0, y: 0))
        // The Brandenburg Gate at zoom 18 with 256 and 512-pixel tiles: the same tile, pixels scaled by 2.
        let gate = GeoCoordinate(latitude: 52.516275, longitude: 13.377704)
        let small = try WebMercator.tileAndPixel(of: gate, zoom: 18, tileSize: 256)
        let large = try WebMercator.tileAndPixel(of: gate, zoom: 18, tileSize: 512)
        #expect(small.tile == large.tile)
        #expect(isClose(large.pixel.x, 2 * small.pixel.x, tolerance: 1e-6) && isClose(large.pixel.y, 2 * small.pixel.y, tolerance: 1e-6))
        #expect((0..<256).contains(small.pixel.x) && (0..<256).contains(small.pixel.y))
        // Longitude 180 is the right edge of the last tile, not pixel 0 of a tile beyond the world.
        let edge = try WebMercator.tileAndPixel(of: GeoCoordinate(latitude: 0, longitude: 180), zoom: 2, tileSize: 256)
        #expect(edge.tile.x == 3 && edge.pixel.x == 256)
    }

    /// lon/lat -> tile -> bounding box contains the point; lon/lat -> pixel -> lon/lat, at every zoom.
    @Test func roundTripsAtEveryZoom() throws {
        var random = SplitMix64(seed: 0x7111_e9ac)
        for zoom in 0...TileCoordinate.maximumZoom {
            for _ in 0..<300 {
                let point = GeoCoordinate(
                    latitude: Double.random(in: -85.05...85.05, using: &random),
                    longitude: Double.random(in: -180...180, using: &random))
                let tile = try WebMercator.tile(containing: point, zoom: zoom)
                let box = tile.boundingBox
                // Exact containment, allowing only the documented edge tolerance (4 micrometres).
                let slack = 1e-10
                #expect(point.longitude >= box.west - slack && point.longitude <= box.east + slack, "\(point) in \(tile)")
                #expect(point.latitude >= box.south - slack && point.latitude <= box.north + slack, "\(point) in \(tile)")
                for tileSize in [256, 512] {
                    let pixel = try WebMercator.pixelPoint(of: point, zoom: zoom, tileSize: tileSize)
                    let back = try WebMercator.coordinate(atPixel: pixel, zoom: zoom, tileSize: tileSize)
                    #expect(
                        isClose(back.latitude, point.latitude, tolerance: 1e-9) && isClose(back.longitude, point.longitude, tolerance: 1e-9)
                    )
                    let column = pixel.x / Double(tileSize)
                    #expect(column >= Double(tile.x) - 1e-3 && column <= Double(tile.x + 1))
                }
            }
        }
    }

    /// Every tile's corners project back onto whole tile numbers, at every zoom up to 30.
    @Test func tileCornersProjectBackExactly() throws {
        var random = SplitMix64(seed: 42)
        for zoom in 0...TileCoordinate.maximumZoom {
            for _ in 0..<100 {
                let side = 1 << zoom
                let tile = try TileCoordinate(
                    zoom: zoom, x: Int.random(in: 0..<side, using: &random), y: Int.random(in: 0..<side, using: &random))
                #expect(try WebMercator.tile(containing: WebMercator.northWestCorner(of: tile), zoom: zoom) == tile)
                let point = try WebMercator.tilePoint(of: WebMercator.northWestCorner(of: tile), zoom: zoom)
                #expect(point.x == Double(tile.x))
                #expect(abs(point.y - Double(tile.y)) <= Double(side) * WebMercator.edgeTolerance)
            }
        }
    }

    @Test func worldPointInverseWrapsAndClamps() {
        #expect(WebMercator.coordinate(atWorldPoint: MercatorPoint(x: 1, y: 0.5)) == GeoCoordinate(latitude: 0, longitude: 180))
        #expect(WebMercator.coordinate(atWorldPoint: MercatorPoint(x: 0, y: 0.5)) == GeoCoordinate(latitude: 0, longitude: -180))
        #expect(WebMercator.coordinate(atWorldPoint: MercatorPoint(x: 1.25, y: 0.5)).longitude == -90)
        #expect(WebMercator.coordinate(atWorldPoint: MercatorPoint(x: -0.25, y: 0.5)).longitude == 90)
        #expect(
            isClose(
                WebMercator.coordinate(atWorldPoint: MercatorPoint(x: 0.5, y: -3)).latitude, WebMercator.maximumLatitude, tolerance: 1e-8))
    }
}
