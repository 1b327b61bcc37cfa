import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

@testable import TilepackPlan

/// The parts that make planning fast (issue 46's speed goal) give what the plain ways give: an
/// MBTiles read a column a query, the links between levels by index, the candidates ordered a
/// bucket at a time, the MBTiles pages counted from the taken mask.
struct PlanSpeedPartsTests {
    /// A pentagon with a square hole (two runs in the hole's columns) crossing no antimeridian.
    static let region = try! GeoRegion(polygons: [
        [
            [
                GeoCoordinate(latitude: -60, longitude: -150), GeoCoordinate(latitude: -60, longitude: 120),
                GeoCoordinate(latitude: 20, longitude: 150), GeoCoordinate(latitude: 75, longitude: 0),
                GeoCoordinate(latitude: 40, longitude: -160), GeoCoordinate(latitude: -60, longitude: -150),
            ],
            [
                GeoCoordinate(latitude: -20, longitude: -40), GeoCoordinate(latitude: -20, longitude: 40),
                GeoCoordinate(latitude: 30, longitude: 40), GeoCoordinate(latitude: 30, longitude: -40),
                GeoCoordinate(latitude: -20, longitude: -40),
            ],
        ]
    ])

    static let areas: [PlanArea] = [
        .region(region),
        .route([GeoCoordinate(latitude: 10, longitude: -100), GeoCoordinate(latitude: 50, longitude: 20)], radius: 300_000),
        .boundingBox(GeoBoundingBox(west: 170, south: -30, east: -150, north: 40)),
    ]

    @Test func columnSpansAreExactlyTheCoversTiles() throws {
        for area in Self.areas {
            for zoom in 0...7 {
                let cover = try area.cover(atZoom: zoom)
                var expected: [UInt64] = []
                cover.forEach { x, y in expected.append(UInt64(x) << 32 | UInt64(y)) }
                expected.sort()
                var spanned: [UInt64] = []
                for span in cover.columnSpans { for y in span.rows { spanned.append(UInt64(span.x) << 32 | UInt64(y)) } }
                // In the order the spans come: ascending and without repeats.
                #expect(spanned == expected, "\(area) at zoom \(zoom): \(spanned.count) tiles spanned of \(expected.count)")
            }
        }
    }

    /// What the reader gives: the same tiles, sizes and contents as the archive's generic size
    /// reader over the covers' rectangles with each tile tested against the area.
    @Test func anMBTilesReadByColumnsGivesWhatItsIndexHolds() throws {
        for name in ["plain_1", "plain_3", "unindexed", "some-empty-tiles"] {
            let archive = try MBTilesArchive(path: TestSupport.fixture("node-mbtiles/\(name).mbtiles"))
            let zooms = try #require(try archive.zoomRange())
            for area in Self.areas {
                let sizes = try AreaTileSizes.read(from: archive, area: area, zooms: zooms)
                var expected: [Int: [(key: UInt64, length: Int, content: UInt64?)]] = [:]
                let covers = try zooms.map { try area.cover(atZoom: $0) }
                try archive.forEachTileSize(in: covers.flatMap(\.frame)) { record in
                    guard covers[record.tile.zoom - zooms.lowerBound].contains(x: record.tile.x, y: record.tile.y) else { return }
                    expected[record.tile.zoom, default: []].append(
                        (UInt64(record.tile.x) << 32 | UInt64(record.tile.y), record.length, record.content))
                }
                for level in sizes.levels {
                    let want = (expected[level.zoom] ?? []).sorted { $0.key < $1.key }
                    #expect(level.keys == want.map(\.key), "\(name), \(area), zoom \(level.zoom)")
                    #expect(level.lengths == want.map(\.length) && level.stored == level.lengths, "\(name), zoom \(level.zoom)")
                    let contents = zip(want, level.contents).map { $0.content ?? $1 }
                    #expect(level.contents == contents, "\(name), zoom \(level.zoom): contents")
                    let unknown = level.contents.filter { $0 >= 1 << 63 }
                    #expect(Set(unknown).count == unknown.count, "\(name), zoom \(level.zoom): unknown contents are unique")
                }
            }
        }
    }

    @Test func aNullTileInTheAreaIsAnErrorNamingTheFileAndTile() throws {
        let path = TestSupport.fixture("node-mbtiles/corrupt_null_tile.mbtiles")
        let archive = try MBTilesArchive(path: path)
        let world = PlanArea.boundingBox(GeoBoundingBox(west: -180, south: -85, east: 180, north: 85))
        #expect {
            try AreaTileSizes.read(from: archive, area: world, zooms: 0...4)
        } throws: { error in
            guard let error = error as? TileArchiveError, case .nullTile = error.fault else { return false }
            return error.path == path
        }
    }

    /// Levels with holes (a tile in three left out), so that some parents are missing.
    static func sparseLevels() throws -> [AreaTileSizes.Level] {
        let full = try AreaTileSizes.estimated(area: .region(region), zooms: 2...7) { $0.x * 7 + $0.y }
        return full.levels.map { level in
            var sparse = AreaTileSizes.Level(zoom: level.zoom)
            for i in level.keys.indices where (level.keys[i] >> 32 &+ level.keys[i] &* 5) % 3 != 0 {
                sparse.append(key: level.keys[i], length: level.lengths[i], stored: level.stored[i], content: nil)
            }
            return sparse
        }
    }

    @Test func linksAreTheParentsAndChildrenByCoordinates() throws {
        let levels = try Self.sparseLevels()
        var links = PlanLinks(levels: levels)
        for level in levels.indices {
            let above = level > 0 ? Dictionary(uniqueKeysWithValues: levels[level - 1].keys.enumerated().map { ($1, $0) }) : [:]
            var children: [Int: [Int]] = [:]
            for (i, key) in levels[level].keys.enumerated() {
                let parent = above[(key >> 33) << 32 | (key & 0xFFFF_FFFF) >> 1] ?? -1
                #expect(Int(links.parents[level][i]) == parent, "zoom \(levels[level].zoom), tile \(i)")
                if parent >= 0 { children[parent, default: []].append(i) }
            }
            guard level > 0 else { continue }
            links.linkChildren(of: level - 1, levels: levels)
            let (start, list) = try #require(links.children[level - 1])
            for parent in levels[level - 1].keys.indices {
                #expect(
                    Array(list[start[parent]..<start[parent + 1]]) == children[parent] ?? [], "zoom \(levels[level - 1].zoom), \(parent)")
            }
        }
    }

    /// The order is a stable sort by priority, highest first; a bucket whose cheapest tile does
    /// not fit is passed over, and no tile that fits is.
    @Test func candidatesComeInTheOrderOfAStableSort() {
        var rng = PlanRandom(seed: 47)
        // Few distinct priorities (ties), over several octaves, and some unique ones.
        let values = (0..<40).map { _ in Double.random(in: 1e-9...1e-3, using: &rng) }
        var priorities: [Double] = [], costs: [Int] = []
        for k in 0..<20_000 {
            priorities.append(k % 7 == 0 ? Double.random(in: 1e-9...1e-3, using: &rng) : values[Int.random(in: 0..<40, using: &rng)])
            costs.append(Int.random(in: 100...3_000, using: &rng))
        }
        let items = Array(0..<priorities.count).map { $0 * 3 }
        let expected = priorities.indices.sorted { priorities[$0] > priorities[$1] || (priorities[$0] == priorities[$1] && $0 < $1) }
        var order = CandidateOrder(priorities: priorities, items: items, costs: costs)
        var seen: [Int] = []
        while let head = order.peek(remaining: .max) {
            seen.append(head.item / 3)
            #expect(head.priority == priorities[head.item / 3] && head.cost == costs[head.item / 3])
            order.advance()
        }
        #expect(seen == expected)
        // With 150 bytes left, only tiles of buckets holding one that cheap come, in order.
        var tight = CandidateOrder(priorities: priorities, items: items, costs: costs)
        var offered: [Int] = []
        while let head = tight.peek(remaining: 150) {
            offered.append(head.item / 3)
            tight.advance()
        }
        let came = Set(offered)
        #expect(offered == expected.filter { came.contains($0) })
        #expect(expected.filter { costs[$0] <= 150 }.allSatisfy { came.contains($0) })
        #expect(offered.count < expected.count)
    }

    @Test func mbtilesPagesFromTheTakenMaskAreThoseOfTheTiles() throws {
        let levels = try Self.sparseLevels()
        var offsets = [0]
        for level in levels { offsets.append(offsets.last! + level.count) }
        var rng = PlanRandom(seed: 46)
        for share in [1, 2, 5] {
            // Lengths from 10 bytes to past a page (overflow pages), a tile in `share` taken.
            var sized = levels
            for l in sized.indices { sized[l].lengths = sized[l].lengths.map { _ in 10 + Int(rng.next() % 12_000) } }
            let taken = (0..<offsets.last!).map { _ in rng.next() % UInt64(share) == 0 }
            var tiles: [PlannedTile] = []
            for (l, level) in sized.enumerated() {
                for i in level.keys.indices where taken[offsets[l] + i] {
                    let key = level.keys[i]
                    tiles.append(
                        PlannedTile(
                            zoom: level.zoom, x: Int(key >> 32), y: Int(key & 0xFFFF_FFFF), length: level.lengths[i], stored: 0, content: 0)
                    )
                }
            }
            tiles.shuffle()
            let fromMask = MBTilesPages.bytes(of: sized, offsets: offsets, taken: taken, pageSize: 8192)
            #expect(fromMask == MBTilesPages.bytes(of: tiles, pageSize: 8192), "one tile in \(share)")
        }
    }
}
