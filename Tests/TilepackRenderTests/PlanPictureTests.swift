import Foundation
import Testing
import TileLayer
import TilepackCore
import TilepackImaging
import TilepackOperations
import TilepackPlan
import TilepackTestSupport

@testable import TilepackRender

/// `plan --png` (issue 46): the plan's area drawn by the tile layer core, the archive's planned
/// tiles under a tint of one colour per zoom.
@Suite struct PlanPictureTests {
    static let archive = TestSupport.fixture("node-mbtiles/plain_3.mbtiles")
    static let paris = GeoCoordinate(latitude: 48.85, longitude: 2.35)

    static func plan() throws -> TilePlan {
        try ArchivePlanning.plan(
            source: archive,
            request: PlanRequest(
                area: .boundingBox(GeoBoundingBox(west: -12.48, south: 34.6, east: 42.53, north: 71.52)), budget: 600_000,
                format: .mbtiles, focus: try PlanFocus(points: [paris], radius: 100_000)))
    }

    /// The pixel of `point` in a view of `zoom` centred on `center`, `size` big.
    static func pixel(_ point: GeoCoordinate, center: GeoCoordinate, zoom: Int, size: ViewportSize) -> (x: Int, y: Int) {
        func mercator(_ c: GeoCoordinate) -> (Double, Double) {
            let phi = c.latitude * .pi / 180
            return ((c.longitude + 180) / 360, (1 - log(tan(phi) + 1 / cos(phi)) / .pi) / 2)
        }
        let (px, py) = mercator(point), (cx, cy) = mercator(center)
        let scale = 256 * pow(2, Double(zoom))
        return (Int((px - cx) * scale) + size.width / 2, Int((py - cy) * scale) + size.height / 2)
    }

    /// The tint's colour for `zoom` over the view's background.
    static func tinted(_ zoom: Int) -> RGBA8 {
        let c = PlanPicture.colour(zoom: zoom), a = Double(PlanPicture.alpha) / 255
        func blend(_ over: UInt8, _ under: UInt8) -> UInt8 { UInt8((Double(over) * a + Double(under) * (1 - a)).rounded()) }
        return RGBA8(r: blend(c.r, 0xF2), g: blend(c.g, 0xEF), b: blend(c.b, 0xE9), a: 255)
    }

    static func close(_ a: RGBA8, _ b: RGBA8) -> Bool {
        abs(Int(a.r) - Int(b.r)) <= 3 && abs(Int(a.g) - Int(b.g)) <= 3 && abs(Int(a.b) - Int(b.b)) <= 3
    }

    @Test func eachPlaceIsTintedByTheDeepestZoomThePlanGivesIt() async throws {
        let plan = try Self.plan()
        #expect(plan.deepestZoom == 8 && plan.completeZoom == 5, "\(plan.levels)")
        let tint = try await PlanPicture.render(plan: plan, archive: nil, timeout: TestSupport.settleSeconds)
        let bitmap = tint.frame.bitmap
        let view = PlanPicture.view(of: try #require(plan.extent), side: 1024, zooms: 4...8)
        #expect(tint.zoom == 4 && bitmap.width == view.size.width && bitmap.height == view.size.height)
        let focus = Self.pixel(Self.paris, center: view.center, zoom: view.zoom, size: view.size)
        let north = Self.pixel(GeoCoordinate(latitude: 70, longitude: -10), center: view.center, zoom: view.zoom, size: view.size)
        let south = Self.pixel(GeoCoordinate(latitude: 30, longitude: 40), center: view.center, zoom: view.zoom, size: view.size)
        for (point, zoom) in [(focus, 8), (north, 5), (south, 4)] {
            let seen = bitmap.pixel(x: point.x, y: point.y)
            #expect(Self.close(seen, Self.tinted(zoom)), "at \(point): \(seen), zoom \(zoom)'s tint is \(Self.tinted(zoom))")
        }
        // Over the archive: its tiles under the tint, only those the plan takes.
        let map = try await PlanPicture.render(plan: plan, archive: Self.archive, timeout: TestSupport.settleSeconds)
        let drawn = map.frame.drawn.filter { $0.layerIndex == 0 }
        #expect(!drawn.isEmpty && drawn.allSatisfy { plan.contains($0.tile) || $0.isApproximate }, "\(drawn.prefix(5))")
        // The map shows through the tint (sea, borders): a good share of the pixels differ from the tint alone.
        var differ = 0
        for y in stride(from: 0, to: bitmap.height, by: 4) {
            for x in stride(from: 0, to: bitmap.width, by: 4) where !Self.close(map.frame.bitmap.pixel(x: x, y: y), bitmap.pixel(x: x, y: y)) {
                differ += 1
            }
        }
        #expect(differ * 10 > (bitmap.width / 4) * (bitmap.height / 4), "\(differ) sampled pixels differ")
    }
}
