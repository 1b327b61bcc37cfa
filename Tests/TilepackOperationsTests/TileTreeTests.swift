import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackTestSupport

@Suite struct TileTreeTests {
    @Test func walksInNumericOrderAndFlipsTMSRows() throws {
        let dir = try TemporaryDirectory()
        let tiles = TreeFixtures.tiles(0...2)
        try TreeFixtures.writeTree(dir.path, tiles: tiles, scheme: .tms, content: { _ in Data([1]) })
        let found = TileTreeWalker(root: dir.path, scheme: .tms).compactMap { entry -> TileCoordinate? in
            if case .tile(let file) = entry { return file.tile } else { return nil }
        }
        #expect(found == tiles.sorted())
    }

    @Test func ordersRowsAsAskedWithinAFolder() throws {
        let dir = try TemporaryDirectory()
        try TreeFixtures.writeTree(dir.path, tiles: TreeFixtures.tiles(2...2), content: { _ in Data([1]) })
        var walker = TileTreeWalker(root: dir.path)
        walker.rowOrder = .tms
        let found = walker.compactMap { entry -> TileCoordinate? in if case .tile(let f) = entry { f.tile } else { nil } }
        #expect(found.map { [$0.x, $0.row(in: .tms)] } == (0..<4).flatMap { x in (0..<4).map { [x, $0] } })
    }

    @Test func readsZYXLayout() throws {
        let dir = try TemporaryDirectory()
        let tiles = TreeFixtures.tiles(3...3)
        try TreeFixtures.writeTree(dir.path, tiles: tiles, layout: "zyx", content: { _ in Data([1]) })
        let found = Set(
            TileTreeWalker(root: dir.path, layout: .zyx).compactMap { entry -> TileCoordinate? in
                if case .tile(let file) = entry { return file.tile } else { return nil }
            })
        #expect(found == Set(tiles))
        // Each file is found at the path its coordinate names.
        for case .tile(let file) in TileTreeWalker(root: dir.path, layout: .zyx) {
            #expect(file.path.hasSuffix("/\(file.tile.zoom)/\(file.tile.y)/\(file.tile.x).png"))
        }
    }

    @Test func reportsEveryStrayFileWithAReason() throws {
        let dir = try TemporaryDirectory()
        try TreeFixtures.writeTree(dir.path, tiles: TreeFixtures.tiles(1...1), content: { _ in Data([1]) })
        let root = dir.path
        try TreeFixtures.write("x", to: "\(root)/.DS_Store")
        try TreeFixtures.write("x", to: "\(root)/1/0/Thumbs.db")
        try TreeFixtures.write("x", to: "\(root)/1/0/noextension")
        try TreeFixtures.write("x", to: "\(root)/1/0/abc.png")
        try TreeFixtures.write("x", to: "\(root)/1/0/5.png")  // row 5 at zoom 1: out of range
        try TreeFixtures.write("x", to: "\(root)/1/7/0.png")  // column 7 at zoom 1
        try TreeFixtures.write("x", to: "\(root)/40/0/0.png")  // zoom 40
        try TreeFixtures.write("x", to: "\(root)/tiles/0/0.png")  // non-numeric folder
        try TreeFixtures.write("x", to: "\(root)/1/readme.txt")  // file at the column level
        try FileManager.default.createSymbolicLink(atPath: "\(root)/1/0/9.png", withDestinationPath: "\(root)/missing")
        try TreeFixtures.write("<TileMap/>", to: "\(root)/tilemapresource.xml")  // read as evidence, not a tile

        var skipped: [String: String] = [:]
        var tiles = 0
        for entry in TileTreeWalker(root: root) {
            switch entry {
            case .tile: tiles += 1
            case .skipped(let file): skipped[String(file.path.dropFirst(root.count + 1))] = file.reason
            case .filtered: Issue.record("nothing is filtered here")
            }
        }
        #expect(tiles == 4)
        #expect(skipped[".DS_Store"]?.contains("stray") == true)
        #expect(skipped["1/0/Thumbs.db"]?.contains("not a number") == true)
        #expect(skipped["1/0/noextension"]?.contains("no file extension") == true)
        #expect(skipped["1/0/abc.png"]?.contains("not a number") == true)
        #expect(skipped["1/0/5.png"]?.contains("row 5") == true)
        #expect(skipped["1/7/0.png"]?.contains("column 7") == true)
        #expect(skipped["40/0/0.png"]?.contains("zoom 40") == true)
        #expect(skipped["tiles"]?.contains("not a number") == true)
        #expect(skipped["1/readme.txt"]?.contains("stray") == true)
        #expect(skipped["1/0/9.png"]?.contains("unreadable") == true)
        #expect(skipped.count == 10)
    }

    @Test func symlinkLoopsAreReportedNotFollowedForever() throws {
        let dir = try TemporaryDirectory()
        try TreeFixtures.writeTree(dir.path, tiles: TreeFixtures.tiles(1...1), content: { _ in Data([1]) })
        // 1/5 -> the zoom folder itself, and 2 -> the root: both lead back into the tree.
        try FileManager.default.createSymbolicLink(atPath: "\(dir.path)/1/5", withDestinationPath: "\(dir.path)/1")
        try FileManager.default.createSymbolicLink(atPath: "\(dir.path)/2", withDestinationPath: dir.path)
        let entries = Array(TileTreeWalker(root: dir.path))
        let tiles = entries.filter { if case .tile = $0 { true } else { false } }
        #expect(tiles.count == 4)
        let reasons = entries.compactMap { entry -> String? in if case .skipped(let f) = entry { f.reason } else { nil } }
        #expect(!reasons.isEmpty)
        #expect(entries.count < 40)
    }

    @Test func filtersByZoomAndBox() throws {
        let dir = try TemporaryDirectory()
        try TreeFixtures.writeTree(dir.path, tiles: TreeFixtures.tiles(0...3), content: { _ in Data([1]) })
        // The north-east quarter of the world, zooms 1-2.
        let walker = TileTreeWalker(
            root: dir.path, minZoom: 1, maxZoom: 2,
            bounds: GeoBoundingBox(west: 10, south: 10, east: 170, north: 80))
        var kept: [TileCoordinate] = []
        var filtered = 0
        for entry in walker {
            switch entry {
            case .tile(let file): kept.append(file.tile)
            case .filtered: filtered += 1
            case .skipped(let file): Issue.record("unexpected skip \(file)")
            }
        }
        #expect(
            kept.sorted() == [
                TileCoordinate(validatingZoom: 1, x: 1, y: 0)!,
                TileCoordinate(validatingZoom: 2, x: 2, y: 0)!, TileCoordinate(validatingZoom: 2, x: 2, y: 1)!,
                TileCoordinate(validatingZoom: 2, x: 3, y: 0)!, TileCoordinate(validatingZoom: 2, x: 3, y: 1)!,
            ])
        #expect(filtered == 85 - kept.count)
    }
}
