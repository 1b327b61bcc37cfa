import Foundation
import Testing
import TilepackCore
@testable import TilepackPlan

/// The planner alone, on sizes made up per tile (no archive): the goals of issue 46 that are about
/// choosing (Specs/plan.md §2).
struct TilePlannerTests {
    /// A city-sized box: 0.3 degrees around Vienna.
    static let box = GeoBoundingBox(west: 16.2, south: 48.1, east: 16.5, north: 48.3)
    static let center = GeoCoordinate(latitude: 48.2, longitude: 16.35)

    /// Sizes that vary by place and zoom, deterministic: 2-30 kB.
    static func size(_ tile: TileCoordinate) -> Int {
        var h = UInt64(tile.zoom) &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(tile.x) &* 0xBF58_476D_1CE4_E5B9 ^ UInt64(tile.y) &* 0x94D0_49BB_1331_11EB
        h ^= h >> 31
        return 2_000 + Int(h % 28_000)
    }

    static func sizes(_ zooms: ClosedRange<Int>) throws -> AreaTileSizes {
        try AreaTileSizes.estimated(area: .boundingBox(box), zooms: zooms, size: size)
    }

    /// Bytes of every tile of the zooms up to `zoom`.
    static func bytes(_ sizes: AreaTileSizes, through zoom: Int) -> Int {
        sizes.levels.filter { $0.zoom <= zoom }.reduce(0) { $0 + $1.bytes }
    }

    @Test func theUniformPlanReachesTheDeepestCompleteZoomThatFitsAndStaysUnderTheBudget() throws {
        let sizes = try Self.sizes(8...16)
        for format in PlanOutputFormat.allCases {
            // Between "through 13" and "through 14" (with room for the file's own bytes).
            let budget = Self.bytes(sizes, through: 13) + (Self.bytes(sizes, through: 14) - Self.bytes(sizes, through: 13)) / 2
            let plan = TilePlanner.plan(sizes, budget: budget, format: format)
            #expect(plan.completeZoom == 13, "\(format)")
            #expect(plan.predictedSize <= budget, "\(format)")
            // The rest of the budget went to zoom 14 tiles, not left unused.
            #expect(plan.levels.first { $0.zoom == 14 }!.taken > 0, "\(format)")
            #expect(budget - plan.predictedSize < 64 * 1024, "\(format): \(budget - plan.predictedSize) bytes unused")
        }
    }

    /// Giving back keeps the longest prefix of what was taken that fits: by marginal costs alone it
    /// overshot on page-sized steps, down to no tile where the lowest zoom alone fits (a 66 kB
    /// budget took none of the sample's tiles, a 64 kB one its zoom 0).
    @Test func givingBackKeepsWhatFits() throws {
        let world = GeoBoundingBox(west: -180, south: -85, east: 180, north: 85)
        let sizes = try AreaTileSizes.estimated(area: .boundingBox(world), zooms: 0...4, size: Self.size)
        let top = sizes.levels[0]
        let alone = [PlannedTile(zoom: 0, x: 0, y: 0, length: top.lengths[0], stored: top.stored[0], content: top.contents[0])]
        for format in PlanOutputFormat.allCases {
            // The file of the zoom-0 tile alone, as the planner predicts it (metadata as its default).
            let fits = OutputSizeModel(format: format, metadataBytes: 1024).predict(alone)
            for budget in stride(from: fits, through: fits + 150_000, by: 1_000) {
                let plan = TilePlanner.plan(sizes, budget: budget, format: format)
                #expect(plan.predictedSize <= budget, "\(format) at \(budget)")
                #expect(plan.levels[0].taken == 1, "\(format): \(budget) bytes took no tile, the zoom-0 file (\(fits)) fits")
            }
        }
    }

    @Test func noTileIsTakenWithoutItsParent() throws {
        let sizes = try Self.sizes(8...16)
        let focus = try PlanFocus(points: [Self.center], radius: 500)
        let plan = TilePlanner.plan(sizes, budget: 40_000_000, format: .pmtiles, focus: focus)
        for zoom in 9...16 {
            let level = sizes.level(zoom)!
            for i in 0..<level.count {
                let tile = level.tile(i)
                if plan.contains(tile) {
                    let parent = TileCoordinate(uncheckedZoom: zoom - 1, x: tile.x / 2, y: tile.y / 2)
                    #expect(plan.contains(parent), "\(tile) without \(parent)")
                }
            }
        }
    }

    /// Issue 46's goal: a region whose uniform plan stops at least 3 zooms short of the deepest
    /// zoom; the focus area gets at least 2 zooms more with the same budget.
    @Test func aFocusGetsAtLeastTwoZoomsMoreThanTheUniformPlan() throws {
        let sizes = try Self.sizes(8...18)
        let budget = Self.bytes(sizes, through: 14) + 1_000_000
        let uniform = TilePlanner.plan(sizes, budget: budget, format: .mbtiles)
        let uniformZoom = try #require(uniform.completeZoom)
        #expect(uniformZoom == 14)
        #expect(18 - uniformZoom >= 3)
        let focused = TilePlanner.plan(sizes, budget: budget, format: .mbtiles, focus: try PlanFocus(points: [Self.center], radius: 300))
        #expect(focused.predictedSize <= budget)
        // The tile under the focus point, at uniform + 2, is taken.
        let point = try WebMercator.worldPoint(of: Self.center)
        let deeper = uniformZoom + 2
        let n = Double(1 << deeper)
        let under = TileCoordinate(uncheckedZoom: deeper, x: Int(point.x * n), y: Int(point.y * n))
        #expect(focused.contains(under), "the focus gets zoom \(focused.deepestZoom ?? -1), the uniform plan \(uniformZoom)")
        // And detail falls off: a corner of the box is shallower than the focus.
        #expect((focused.completeZoom ?? 0) < uniformZoom)
    }

    @Test func anEstimateKeepsItsMarginInsideTheBudget() throws {
        var sizes = try Self.sizes(8...15)
        sizes.relativeMargin = 0.1
        sizes.confidence = 0.95
        let budget = 30_000_000
        let plan = TilePlanner.plan(sizes, budget: budget, format: .pmtiles)
        #expect(!plan.exact)
        #expect(plan.margin > 0)
        #expect(plan.predictedSize + plan.margin <= budget)
    }
}
