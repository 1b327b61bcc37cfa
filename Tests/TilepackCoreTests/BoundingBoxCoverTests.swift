import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@Suite struct BoundingBoxCoverTests {
    /// The seed's Olympic Park box, `geoBoundingBoxWithTopLeft:(51.557, -0.042772) bottomRight:(51.525941, 0.028296)`.
    static let olympicPark = GeoBoundingBox(
        topLeft: GeoCoordinate(latitude: 51.557000, longitude: -0.042772),
        bottomRight: GeoCoordinate(latitude: 51.525941, longitude: 0.028296))

    @Test func topLeftBottomRightForm() {
        let box = Self.olympicPark
        #expect(box.west == -0.042772 && box.east == 0.028296 && box.north == 51.557 && box.south == 51.525941)
        #expect(box.topLeft == GeoCoordinate(latitude: 51.557, longitude: -0.042772))
        #expect(box.bottomRight == GeoCoordinate(latitude: 51.525941, longitude: 0.028296))
        #expect(GeoBoundingBox(topLeft: box.topLeft, bottomRight: box.bottomRight) == box)
        #expect(!box.crossesAntimeridian)
        #expect(isClose(box.center.latitude, (51.557 + 51.525941) / 2) && isClose(box.center.longitude, (-0.042772 + 0.028296) / 2))
        #expect(box.contains(box.center) && box.contains(box.topLeft) && box.contains(box.bottomRight))
        #expect(!box.contains(GeoCoordinate(latitude: 51.6, longitude: 0)))
    }

    /// Tile sets computed with mercantile 1.2.1 `tiles(-0.042772, 51.525941, 0.028296, 51.557, [z])`.
    @Test func olympicParkCoverMatchesMercantile() throws {
        let z14 = try Self.olympicPark.tileRanges(atZoom: 14)
        #expect(z14 == [try TileRange(zoom: 14, columns: 8190...8193, rows: 5444...5446)])
        let z16 = try Self.olympicPark.tileRanges(atZoom: 16)
        #expect(z16 == [try TileRange(zoom: 16, columns: 32760...32773, rows: 21777...21786)])
        let cover = try Self.olympicPark.cover(zooms: 14...16)
        #expect(cover.count(atZoom: 14) == 12 && cover.count(atZoom: 16) == 140)
        #expect(cover.count == 12 + cover.count(atZoom: 15) + 140)
        #expect(Array(cover).count == cover.count)
        #expect(Set(cover).count == cover.count)
    }

    /// The seed: "at level 3: 8 x 8 = 64 tiles, at level 4: 16 x 16 = 256 tiles".
    @Test func seedWorldCounts() throws {
        let world = try TileCover.world(zooms: 0...TileCoordinate.maximumZoom)
        #expect(world.count(atZoom: 3) == 64)
        #expect(world.count(atZoom: 4) == 256)
        #expect(world.count(atZoom: 0) == 1)
        #expect(world.count(atZoom: 20) == 1 << 40)
        #expect(world.count(atZoom: 30) == 1 << 60)
        // (4^31 - 1) / 3 without a loop over tiles, and without overflow.
        #expect(world.count == 1_537_228_672_809_129_301)
        #expect(world.ranges(atZoom: 30) == [try TileRange.world(zoom: 30)])
        // Enumeration is lazy: the first tiles of a 1.5e18-tile cover come at once.
        let firstFive = Array(world.prefix(5))
        #expect(firstFive.map(\.description) == ["0/0/0", "1/0/0", "1/0/1", "1/1/0", "1/1/1"])
        // A whole-globe box (latitudes to the poles) is the same world.
        let globe = try GeoBoundingBox(validatingWest: -180, south: -90, east: 180, north: 90).cover(zooms: 3...4)
        #expect(globe.count(atZoom: 3) == 64 && globe.count(atZoom: 4) == 256)
        #expect(Set(try TileCover.world(zooms: 3...3)).count == 64)
    }

    @Test func boxAcrossTheAntimeridian() throws {
        let box = try GeoBoundingBox(validatingWest: 170, south: -10, east: -170, north: 10)
        #expect(box.crossesAntimeridian)
        #expect(box.longitudeSpan == 20)
        #expect(box.antimeridianNote?.hasPrefix("the box crosses the antimeridian (west 170 > east -170)") == true)
        #expect(GeoBoundingBox(west: -170, south: -10, east: 170, north: 10).antimeridianNote == nil)
        #expect(box.center == GeoCoordinate(latitude: 0, longitude: 180))
        #expect(box.contains(GeoCoordinate(latitude: 0, longitude: 175)))
        #expect(box.contains(GeoCoordinate(latitude: 0, longitude: -175)))
        #expect(box.contains(GeoCoordinate(latitude: 0, longitude: 180)) && box.contains(GeoCoordinate(latitude: 0, longitude: -180)))
        #expect(!box.contains(GeoCoordinate(latitude: 0, longitude: 0)))
        // mercantile 1.2.1 `tiles(170, -10, -170, 10, [5])`: x 0 and 31, y 15 and 16 (4 tiles).
        let z5 = try box.tileRanges(atZoom: 5)
        #expect(z5 == [try TileRange(zoom: 5, columns: 31...31, rows: 15...16), try TileRange(zoom: 5, columns: 0...0, rows: 15...16)])
        // At zoom 1 the two parts meet (columns 1 and 0): one range of every column, not counted twice.
        #expect(try box.tileRanges(atZoom: 1) == [try TileRange(zoom: 1, columns: 0...1, rows: 0...1)])
        #expect(try box.tileRanges(atZoom: 0) == [try TileRange.world(zoom: 0)])
        let cover = try box.cover(zooms: 0...30)
        #expect(cover.count(atZoom: 5) == 4)
        // Each half spans 10 degrees: 2^z / 36 columns (rounded out) at every deep zoom.
        let z20 = try box.tileRanges(atZoom: 20)
        #expect(z20.count == 2 && z20[0].columns.upperBound == (1 << 20) - 1 && z20[1].columns.lowerBound == 0)
        #expect(z20[0].columns.count == z20[1].columns.count)
        #expect(cover.count(atZoom: 30) == cover.ranges(atZoom: 30).reduce(0) { $0 + $1.count })
        #expect(try box.intersects(TileCoordinate(zoom: 5, x: 31, y: 15)))
        #expect(try !box.intersects(TileCoordinate(zoom: 5, x: 16, y: 15)))
        // A box that crosses from 180 or to -180 does not really cross: one part, no stray column.
        let fromEdge = try GeoBoundingBox(validatingWest: 180, south: 0, east: -170, north: 10).tileRanges(atZoom: 5)
        #expect(fromEdge == [try TileRange(zoom: 5, columns: 0...0, rows: 15...15)])
        // A box 359.99 degrees wide across the antimeridian covers every column once.
        let almostAll = try GeoBoundingBox(validatingWest: 0.01, south: -1, east: 0, north: 1).tileRanges(atZoom: 3)
        #expect(almostAll.count == 1 && almostAll[0].columns == 0...7)
    }

    @Test func aTilesOwnBoxIsCoveredByThatTileAndItsDescendants() throws {
        var random = SplitMix64(seed: 7)
        for zoom in 0...TileCoordinate.maximumZoom {
            for _ in 0..<40 {
                let side = 1 << zoom
                let tile = try TileCoordinate(
                    zoom: zoom, x: Int.random(in: 0..<side, using: &random), y: Int.random(in: 0..<side, using: &random))
                let box = tile.boundingBox
                #expect(try box.tileRanges(atZoom: zoom) == [TileRange(tile: tile)], "\(tile)")
                #expect(try box.contains(tile) && box.intersects(tile))
                if zoom + 2 <= TileCoordinate.maximumZoom {
                    #expect(try box.tileRanges(atZoom: zoom + 2) == [tile.descendants(atZoom: zoom + 2)].compactMap { $0 })
                }
                if let parent = tile.parent {
                    #expect(try box.tileRanges(atZoom: zoom - 1) == [TileRange(tile: parent)])
                    #expect(try box.intersects(parent) && !box.contains(parent))
                }
                // Neighbours only touch the box along an edge: they do not intersect it.
                for (dx, dy) in [(1, 0), (-1, 0), (0, 1), (0, -1)] {
                    if let neighbour = TileCoordinate(validatingZoom: zoom, x: tile.x + dx, y: tile.y + dy) {
                        #expect(try !box.intersects(neighbour), "\(neighbour) beside \(tile)")
                    }
                }
            }
        }
    }

    /// Property: the cover's count equals its enumeration, every point of the box lies in a covered
    /// tile, and a tile is covered exactly when it intersects the box.
    @Test func randomBoxesCoverTheirPoints() throws {
        var random = SplitMix64(seed: 2024)
        for _ in 0..<150 {
            let zoom = Int.random(in: 0...9, using: &random)
            let west = Double.random(in: -180...180, using: &random)
            let east = Double.random(in: -180...180, using: &random)
            let south = Double.random(in: -84...84, using: &random)
            let north = Double.random(in: south...84, using: &random)
            let box = try GeoBoundingBox(validatingWest: west, south: south, east: east, north: north)
            let ranges = try box.tileRanges(atZoom: zoom)
            let tiles = ranges.flatMap { Array($0) }
            #expect(tiles.count == ranges.reduce(0) { $0 + $1.count })
            #expect(Set(tiles).count == tiles.count, "ranges overlap for \(box)")
            for _ in 0..<40 {
                let lonOffset = Double.random(in: 0...box.longitudeSpan, using: &random)
                var longitude = west + lonOffset
                if longitude > 180 { longitude -= 360 }
                let point = GeoCoordinate(latitude: Double.random(in: south...north, using: &random), longitude: longitude)
                #expect(box.contains(point))
                let tile = try WebMercator.tile(containing: point, zoom: zoom)
                #expect(tiles.contains(tile), "\(point) of \(box) lies in \(tile), not covered at \(zoom)")
            }
            if zoom <= 4 {
                // Against an independent test in degrees: the tile's box shares area with the box.
                let side = 1 << zoom
                for x in 0..<side {
                    for y in 0..<side {
                        let tile = try TileCoordinate(zoom: zoom, x: x, y: y)
                        let t = tile.boundingBox
                        let latitudes = t.south < north && t.north > south
                        let longitudes =
                            box.crossesAntimeridian
                            ? (t.east > west || t.west < east) : (t.west < east && t.east > west)
                        #expect(try box.intersects(tile) == (latitudes && longitudes), "\(tile) and \(box)")
                    }
                }
            }
        }
    }

    @Test func degenerateBoxes() throws {
        let point = GeoCoordinate(latitude: 48.8584, longitude: 2.2945)
        let dot = GeoBoundingBox(topLeft: point, bottomRight: point)
        for zoom in [0, 10, 30] {
            #expect(try dot.tileRanges(atZoom: zoom) == [TileRange(tile: WebMercator.tile(containing: point, zoom: zoom))])
        }
        // A zero-width box on the antimeridian: the last column, like a point at longitude 180.
        let meridian = try GeoBoundingBox(validatingWest: 180, south: -1, east: 180, north: 1)
        #expect(try meridian.tileRanges(atZoom: 3) == [TileRange(zoom: 3, columns: 7...7, rows: 3...4)])
        // Latitudes beyond the Mercator square are clamped.
        let polar = try GeoBoundingBox(validatingWest: -10, south: 86, east: 10, north: 90)
        #expect(try polar.tileRanges(atZoom: 4) == [TileRange(zoom: 4, columns: 7...8, rows: 0...0)])
    }

    @Test func rejectsBoxesThatAreNotBoxes() {
        #expect(throws: GeometryError.self) { try GeoBoundingBox(validatingWest: 0, south: 10, east: 1, north: 5) }
        #expect(throws: GeometryError.self) { try GeoBoundingBox(validatingWest: -181, south: 0, east: 1, north: 5) }
        #expect(throws: GeometryError.self) { try GeoBoundingBox(validatingWest: 0, south: -91, east: 1, north: 5) }
        #expect(throws: GeometryError.self) { try GeoBoundingBox(validatingWest: .nan, south: 0, east: 1, north: 5) }
        #expect(throws: GeometryError.self) { try GeoBoundingBox(west: 0, south: 0, east: 1, north: .infinity).tileRanges(atZoom: 2) }
        #expect(throws: GeometryError.zoomOutOfRange(31)) { try GeoBoundingBox.world.tileRanges(atZoom: 31) }
        #expect(throws: GeometryError.zoomOutOfRange(-1)) { try GeoBoundingBox.world.cover(zooms: -1...3) }
        #expect(!GeoBoundingBox.world.contains(GeoCoordinate(latitude: .nan, longitude: 0)))
    }

    @Test func tileRanges() throws {
        #expect(throws: GeometryError.self) { try TileRange(zoom: 2, columns: 0...4, rows: 0...1) }
        #expect(throws: GeometryError.self) { try TileRange(zoom: 2, columns: -1...1, rows: 0...1) }
        #expect(throws: GeometryError.zoomOutOfRange(31)) { try TileRange(zoom: 31, columns: 0...0, rows: 0...0) }
        let range = try TileRange(zoom: 3, columns: 2...3, rows: 5...7)
        #expect(range.count == 6)
        #expect(range.map(\.description) == ["3/2/5", "3/2/6", "3/2/7", "3/3/5", "3/3/6", "3/3/7"])
        #expect(Array(range) == Array(range).sorted())
        #expect(try range.covering(atZoom: 4) == TileRange(zoom: 4, columns: 4...7, rows: 10...15))
        #expect(try range.covering(atZoom: 1) == TileRange(zoom: 1, columns: 0...0, rows: 1...1))
        #expect(try range.covering(atZoom: 30).count == 6 << 54)
        #expect(range.boundingBox.west == -90 && range.boundingBox.east == 0)
        #expect(try range.contains(TileCoordinate(zoom: 3, x: 3, y: 7)) && !range.contains(TileCoordinate(zoom: 4, x: 3, y: 7)))
    }
}
