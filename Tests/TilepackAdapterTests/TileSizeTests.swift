import Foundation
import Testing
import TileLayer
import TilepackAdapter
import TilepackCore
import TilepackImaging
import TilepackStorage
import TilepackTestSupport

/// 256-pixel archives served to 512-pixel layers and 512-pixel archives to 256-pixel layers.
@Suite struct TileSizeTests {
    @Test func a512LayerMergesFourArchiveChildrenPixelForPixel() throws {
        let dir = try TemporaryDirectory("adapter")
        let path = dir.file("labels.mbtiles")
        try writeMBTiles(path, tiles: allTiles(0...2))
        let reader = try ArchiveTileReader(path: path)
        #expect(reader.archiveTileSize == 256)
        for parent in allTiles(0...1) {
            let merged = try #require(try reader.bitmap(at: parent, tileSize: 512))
            #expect(merged.width == 512)
            for (index, child) in parent.children.enumerated() {
                let part = try crop(merged, x: (index % 2) * 256, y: (index / 2) * 256, size: 256)
                #expect(part == labelledTile(child), "quadrant \(index) of \(parent) is not \(child)")
            }
        }
    }

    @Test func a512LayerScalesTheTileUpWhereChildrenAreMissing() throws {
        let dir = try TemporaryDirectory("adapter")
        let path = dir.file("partial.tilepack")
        // 1/0/0 and only one of its children (2/1/0, north-east); 1/1/1 with no children at all.
        try writeBundle(path, tiles: [tile(1, 0, 0), tile(2, 1, 0), tile(1, 1, 1)])
        let reader = try ArchiveTileReader(path: path)

        let mixed = try #require(try reader.bitmap(at: tile(1, 0, 0), tileSize: 512))
        #expect(try crop(mixed, x: 256, y: 0, size: 256) == labelledTile(tile(2, 1, 0)))
        let parent = labelledTile(tile(1, 0, 0))
        for (column, row) in [(0, 0), (0, 1), (1, 1)] {
            let expected = try parent.subSquare(levelsDown: 1, column: column, row: row, outputSize: 256)
            #expect(try crop(mixed, x: column * 256, y: row * 256, size: 256) == expected)
        }

        let scaled = try #require(try reader.bitmap(at: tile(1, 1, 1), tileSize: 512))
        #expect(scaled == labelledTile(tile(1, 1, 1)).resized(width: 512, height: 512))

        // hasTile: the tile or any child; nothing for a tile with neither.
        #expect(reader.hasTile(tile(1, 0, 0), tileSize: 512))
        #expect(reader.hasTile(tile(1, 1, 1), tileSize: 512))
        #expect(reader.hasTile(tile(0, 0, 0), tileSize: 512))  // its children 1/0/0 and 1/1/1 exist
        #expect(!reader.hasTile(tile(1, 1, 0), tileSize: 512))
        #expect(try reader.bitmap(at: tile(1, 1, 0), tileSize: 512) == nil)
    }

    @Test func a256LayerCutsA512ArchiveTileIntoQuarters() throws {
        let dir = try TemporaryDirectory("adapter")
        let path = dir.file("big.mbtiles")
        try writeMBTiles(path, tiles: allTiles(0...1), size: 512)
        let reader = try ArchiveTileReader(path: path)
        #expect(reader.archiveTileSize == 512)
        for child in allTiles(1...2) {
            let parent = try #require(child.parent)
            let quarter = try #require(try reader.bitmap(at: child, tileSize: 256))
            let expected = try crop(labelledTile(parent, size: 512), x: (child.x % 2) * 256, y: (child.y % 2) * 256, size: 256)
            #expect(quarter == expected, "\(child) is not the right quarter of \(parent)")
        }
        // Zoom 0 has no parent: the 512 tile scaled down.
        #expect(
            try reader.bitmap(at: tile(0, 0, 0), tileSize: 256) == labelledTile(tile(0, 0, 0), size: 512).resized(width: 256, height: 256))
        #expect(reader.hasTile(tile(2, 3, 3), tileSize: 256))
        #expect(!reader.hasTile(tile(3, 0, 0), tileSize: 256))
    }

    @Test func retinaAndStandardLayersShowTheSameMapFromEitherArchive() async throws {
        let dir = try TemporaryDirectory("adapter")
        let small = dir.file("256.tilepack"), big = dir.file("512.mbtiles")
        try writeBundle(small, tiles: allTiles(0...2))
        try writeMBTiles(big, tiles: allTiles(0...1), size: 512)

        func render(_ path: String, tileSize: Int) async throws -> MapFrame {
            let source = try ArchiveTileSource(path: path)
            let view = worldView(zoom: 2, layer: source.makeLayer(tileSize: tileSize))
            return await view.render(timeout: TestSupport.settleSeconds)
        }
        // 256 archive: the 256 layer draws zoom 2 tiles, the 512 layer draws zoom 1 merged from them.
        let small256 = try await render(small, tileSize: 256)
        let small512 = try await render(small, tileSize: 512)
        #expect(small256.drawn.count == 16 && small512.drawn.count == 4)
        #expect(small512.drawn.allSatisfy { $0.tile.zoom == 1 && !$0.isApproximate })
        #expect(small256.bitmap == small512.bitmap)
        // 512 archive: the 512 layer draws zoom 1 tiles as stored, the 256 layer draws their quarters.
        let big512 = try await render(big, tileSize: 512)
        let big256 = try await render(big, tileSize: 256)
        #expect(big256.drawn.count == 16 && big512.drawn.count == 4)
        #expect(big256.bitmap == big512.bitmap)
        for t in allTiles(1...1) {
            #expect(try crop(big512.bitmap, x: t.x * 512, y: t.y * 512, size: 512) == labelledTile(t, size: 512))
        }
    }

    @Test func webpFixtureOf512PixelsServesA256Layer() throws {
        let path = TestSupport.fixture("martin/webp.mbtiles")
        let reader = try ArchiveTileReader(path: path)
        #expect(reader.archiveTileSize == 512)
        let whole = try #require(try reader.bitmap(at: tile(0, 0, 0)))
        #expect(whole.width == 512 && whole.height == 512)
        let decoded = try #require(try MBTilesArchive(path: path).tileData(at: tile(0, 0, 0)))
        #expect(whole == (try ImageDecoder.decode(decoded, pixelFormat: .rgba8888)))
        for child in tile(0, 0, 0).children {
            let quarter = try #require(try reader.bitmap(at: child, tileSize: 256))
            #expect(quarter == (try crop(whole, x: child.x * 256, y: child.y * 256, size: 256)))
        }
        #expect(try reader.bitmap(at: tile(0, 0, 0), tileSize: 512) == whole)
    }
}
