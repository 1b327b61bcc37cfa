import Testing
import TilepackCore
import TilepackTestSupport

@Suite struct TileRelationTests {
    /// mercantile 1.2.1 README: `parent(486, 332, 10) == Tile(243, 166, 9)` and its children.
    @Test func parentAndChildrenMatchMercantile() throws {
        let tile = try TileCoordinate(zoom: 10, x: 486, y: 332)
        let parent = try #require(tile.parent)
        #expect(parent == (try TileCoordinate(zoom: 9, x: 243, y: 166)))
        #expect(parent.children.map(\.description) == ["10/486/332", "10/487/332", "10/486/333", "10/487/333"])
        #expect(parent.children.map(\.quadkey) == ["0313102310", "0313102311", "0313102312", "0313102313"])
    }

    @Test func edgesOfThePyramid() throws {
        let root = try TileCoordinate(zoom: 0, x: 0, y: 0)
        #expect(root.parent == nil)
        #expect(root.children.map(\.description) == ["1/0/0", "1/1/0", "1/0/1", "1/1/1"])
        #expect(root.ancestor(atZoom: 0) == root && root.ancestor(atZoom: -1) == nil)
        #expect(root.descendants(atZoom: 30)?.count == 1 << 60)
        let deepest = try TileCoordinate(zoom: 30, x: (1 << 30) - 1, y: 12345)
        #expect(deepest.children.isEmpty)
        #expect(deepest.descendants(atZoom: 31) == nil)
        #expect(deepest.ancestor(atZoom: 0) == root)
        #expect(deepest.ancestor(atZoom: 31) == nil)
        #expect(deepest.ancestor(atZoom: 20) == (try TileCoordinate(zoom: 20, x: (1 << 20) - 1, y: 12)))
    }

    /// Property: parent/children/ancestor/descendants agree at every zoom.
    @Test func relationsAreConsistent() throws {
        var random = SplitMix64(seed: 99)
        for zoom in 0...TileCoordinate.maximumZoom {
            for _ in 0..<60 {
                let side = 1 << zoom
                let tile = try TileCoordinate(
                    zoom: zoom, x: Int.random(in: 0..<side, using: &random), y: Int.random(in: 0..<side, using: &random))
                for child in tile.children {
                    #expect(child.parent == tile)
                    #expect(tile.contains(child) && !child.contains(tile))
                }
                #expect(Set(tile.children).count == (zoom < 30 ? 4 : 0))
                if let parent = tile.parent { #expect(parent.children.contains(tile)) }
                var walker = tile
                for ancestorZoom in stride(from: zoom, through: 0, by: -1) {
                    #expect(tile.ancestor(atZoom: ancestorZoom) == walker)
                    #expect(walker.descendants(atZoom: zoom)?.contains(tile) == true)
                    #expect(walker.descendants(atZoom: zoom)?.count == 1 << (2 * (zoom - ancestorZoom)))
                    #expect(walker.contains(tile))
                    // The ancestor's box contains the tile's box.
                    let outer = walker.boundingBox, inner = tile.boundingBox
                    #expect(
                        outer.west <= inner.west && inner.east <= outer.east && outer.south <= inner.south && inner.north <= outer.north)
                    walker = walker.parent ?? walker
                }
            }
        }
    }

    @Test func subsquareInAncestor() throws {
        // 3/5/2 inside 1/1/0: the ancestor is split 4 x 4; the tile is column 1, row 2.
        let tile = try TileCoordinate(zoom: 3, x: 5, y: 2)
        let square = try #require(tile.subsquare(inAncestorAtZoom: 1))
        #expect(square.ancestor == (try TileCoordinate(zoom: 1, x: 1, y: 0)))
        #expect(square.levelsDown == 2 && square.divisions == 4 && square.column == 1 && square.row == 2)
        #expect(try square.pixelRegion(tileSize: 256) == PixelSquare(x: 64, y: 128, size: 64))
        #expect(try square.pixelRegion(tileSize: 512) == PixelSquare(x: 128, y: 256, size: 128))
        #expect(square.unitRegion == (0.25, 0.5, 0.25))
        // Itself at its own zoom: the whole tile.
        let whole = try #require(tile.subsquare(inAncestorAtZoom: 3))
        #expect(try whole.pixelRegion(tileSize: 256) == PixelSquare(x: 0, y: 0, size: 256))
        #expect(tile.subsquare(inAncestorAtZoom: 4) == nil && tile.subsquare(inAncestorAtZoom: -1) == nil)
        // Smaller than a pixel: 9 levels down in a 256-pixel tile.
        let deep = try TileCoordinate(zoom: 30, x: (1 << 30) - 1, y: 0)
        let tiny = try #require(deep.subsquare(inAncestorAtZoom: 21))
        #expect(try tiny.pixelRegion(tileSize: 256) == nil)
        #expect(try tiny.pixelRegion(tileSize: 512) == PixelSquare(x: 511, y: 0, size: 1))
        #expect(tiny.unitRegion == (511.0 / 512, 0, 1.0 / 512))
        #expect(throws: GeometryError.invalidTileSize(300)) { try square.pixelRegion(tileSize: 300) }
        // Property: the square's pixel box is the tile's place inside the ancestor, at every depth.
        var random = SplitMix64(seed: 5)
        for _ in 0..<500 {
            let zoom = Int.random(in: 0...30, using: &random)
            let side = 1 << zoom
            let t = try TileCoordinate(zoom: zoom, x: Int.random(in: 0..<side, using: &random), y: Int.random(in: 0..<side, using: &random))
            let ancestorZoom = Int.random(in: 0...zoom, using: &random)
            let s = try #require(t.subsquare(inAncestorAtZoom: ancestorZoom))
            #expect(s.ancestor.x * s.divisions + s.column == t.x && s.ancestor.y * s.divisions + s.row == t.y)
            if let pixels = try s.pixelRegion(tileSize: 256) {
                #expect(pixels.size * s.divisions == 256 && pixels.x + pixels.size <= 256 && pixels.y + pixels.size <= 256)
            } else {
                #expect(s.levelsDown > 8)
            }
        }
    }

    /// Bing Maps Tile System: tile (3, 5) at level 3 has quadkey "213"; mercantile: 10/486/332 is "0313102310".
    @Test func quadkeysOfPublishedExamples() throws {
        let bing = try TileCoordinate(zoom: 3, x: 3, y: 5)
        #expect(bing.quadkey == "213")
        #expect(try TileCoordinate(quadkey: "213") == bing)
        #expect(try TileCoordinate(zoom: 10, x: 486, y: 332).quadkey == "0313102310")
        #expect(try TileCoordinate(quadkey: "0313102310") == TileCoordinate(zoom: 10, x: 486, y: 332))
        // mercantile 1.2.1: quadkey(tile(151.2153, -33.8568, 12)) == "311230133002".
        #expect(try TileCoordinate(zoom: 12, x: 3768, y: 2457).quadkey == "311230133002")
        #expect(try TileCoordinate(zoom: 0, x: 0, y: 0).quadkey == "")
        #expect(try TileCoordinate(quadkey: "") == TileCoordinate(zoom: 0, x: 0, y: 0))
        let corner = try TileCoordinate(zoom: 30, x: (1 << 30) - 1, y: (1 << 30) - 1)
        #expect(corner.quadkey == String(repeating: "3", count: 30))
        #expect(try TileCoordinate(quadkey: String(repeating: "3", count: 30)) == corner)
    }

    @Test func badQuadkeysThrow() {
        #expect(throws: QuadkeyError.invalidDigit("0124", character: "4", offset: 3)) { try TileCoordinate(quadkey: "0124") }
        #expect(throws: QuadkeyError.invalidDigit("a", character: "a", offset: 0)) { try TileCoordinate(quadkey: "a") }
        #expect(throws: QuadkeyError.invalidDigit("01é2", character: "é", offset: 2)) { try TileCoordinate(quadkey: "01é2") }
        #expect(throws: QuadkeyError.invalidDigit("12 ", character: " ", offset: 2)) { try TileCoordinate(quadkey: "12 ") }
        #expect(throws: QuadkeyError.invalidDigit("-1", character: "-", offset: 0)) { try TileCoordinate(quadkey: "-1") }
        let combining = "10\u{301}"
        #expect(throws: QuadkeyError.invalidDigit(combining, character: "0\u{301}", offset: 1)) { try TileCoordinate(quadkey: combining) }
        #expect(throws: QuadkeyError.invalidDigit("٣", character: "٣", offset: 0)) { try TileCoordinate(quadkey: "٣") }
        let long = String(repeating: "0", count: 31)
        #expect(throws: QuadkeyError.tooLong(long, length: 31)) { try TileCoordinate(quadkey: long) }
        let huge = String(repeating: "1", count: 100_000)
        #expect(throws: QuadkeyError.tooLong(huge, length: 100_000)) { try TileCoordinate(quadkey: huge) }
        #expect("\(QuadkeyError.invalidDigit("0124", character: "4", offset: 3))".contains("offset 3"))
    }

    @Test func quadkeysRoundTrip() throws {
        var random = SplitMix64(seed: 1234)
        for zoom in 0...TileCoordinate.maximumZoom {
            for _ in 0..<100 {
                let side = 1 << zoom
                let tile = try TileCoordinate(
                    zoom: zoom, x: Int.random(in: 0..<side, using: &random), y: Int.random(in: 0..<side, using: &random))
                let key = tile.quadkey
                #expect(key.count == zoom)
                #expect(try TileCoordinate(quadkey: key) == tile)
                if let parent = tile.parent { #expect(key.hasPrefix(parent.quadkey)) }
            }
        }
    }
}
