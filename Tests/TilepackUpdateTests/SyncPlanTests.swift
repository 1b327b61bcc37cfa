import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackUpdate

/// The sync plan's join rule (Specs/updates.md §8.1): the bytes fetched stay within the bound (1.15x
/// the changed bytes), no unit passes 8 MiB, every changed byte is in a unit, and the budget goes to
/// the smallest gaps first, so that scattered small tiles become few units.
@Suite struct SyncPlanTests {
    /// Ranges of `count` tiles of 200-2,199 bytes, each after a gap of 0-`gap` bytes.
    static func scattered(count: Int, gap: Int, seed: UInt64) -> [Range<Int>] {
        var state = seed
        func next() -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(state >> 33)
        }
        var at = 0
        return (0..<count).map { _ in
            at += next() % (gap + 1)
            let range = at..<(at + 200 + next() % 2000)
            at = range.upperBound
            return range
        }
    }

    static func check(_ plan: SyncPlan, ranges: [Range<Int>], bound: Double = SyncPlan.defaultBound) {
        var changed = 0, end = 0
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            changed += max(0, range.upperBound - max(range.lowerBound, end))
            end = max(end, range.upperBound)
        }
        #expect(plan.changedBytes == changed)
        #expect(Double(plan.fetchBytes) <= bound * Double(changed), "\(plan.fetchBytes) bytes for \(changed) changed")
        #expect(plan.units.allSatisfy { $0.length <= SyncPlan.maximumUnitBytes && $0.length > 0 })
        for (a, b) in zip(plan.units, plan.units.dropFirst()) { #expect(a.range.upperBound <= b.offset) }
        for range in ranges {
            var at = range.lowerBound
            while at < range.upperBound, let unit = plan.unit(containing: at) { at = unit.range.upperBound }
            #expect(at >= range.upperBound, "\(range) is not in the units")
        }
        #expect(plan.units.enumerated().allSatisfy { $0.offset == $0.element.id })
    }

    @Test(arguments: [(0, 1), (300, 2), (3000, 3), (40_000, 4)])
    func theBytesFetchedStayWithinTheBoundAndNoUnitPasses8MiB(_ gap: Int, _ seed: UInt64) throws {
        let ranges = Self.scattered(count: 5000, gap: gap, seed: seed)
        let plan = SyncPlan(objectLength: ranges.last!.upperBound, etag: "\"e\"", index: "id", ranges: ranges.shuffled())
        Self.check(plan, ranges: ranges)
        // The budget is spent: fewer units than ranges wherever gaps are small against it.
        if gap <= 300 { #expect(plan.units.count < ranges.count / 5, "\(plan.units.count) units") }
        let tight = SyncPlan(objectLength: ranges.last!.upperBound, etag: nil, index: "id", ranges: ranges, bound: 1.01)
        Self.check(tight, ranges: ranges, bound: 1.01)
    }

    @Test func aLongRangeIsSplitAndUnitsNeverPassTheirLimit() {
        // 20 MiB of one tile run, then small tiles 1 byte apart: no unit over 8 MiB.
        let ranges = [0..<(20 << 20)] + (0..<100).map { (20 << 20) + 1 + 2 * $0..<((20 << 20) + 2 + 2 * $0) }
        let plan = SyncPlan(objectLength: 21 << 20, etag: nil, index: "id", ranges: ranges)
        Self.check(plan, ranges: ranges)
        #expect(plan.units.count == 3)
    }

    @Test func aGapLongerThanTheLimitIsNotJoined() {
        let ranges = [0..<1000, 1500..<2500, 2600..<3600]
        let plan = SyncPlan(objectLength: 4000, etag: nil, index: "id", ranges: ranges, maximumGap: 200)
        #expect(plan.units.map(\.range) == [0..<1000, 1500..<3600])
        #expect(plan.units[1].rangeHeader == "bytes=1500-3599")
        #expect(plan.units[1].wantedBytes == 2000)
        #expect(plan.unit(containing: 1200) == nil)
        #expect(plan.unit(containing: 2550)?.id == 1)
    }

    @Test func aPlanIsKeptAsJSONAndABadOneIsRefusedByName() throws {
        let ranges = Self.scattered(count: 300, gap: 500, seed: 9)
        let plan = SyncPlan(objectLength: ranges.last!.upperBound, etag: "\"abc\"", index: "id", ranges: ranges)
        #expect(try SyncPlan.decode(plan.encoded(), name: "p.json") == plan)
        try #require(plan.units.count > 2)
        var bad = plan
        bad.units[1].offset = bad.units[0].offset
        #expect(throws: TileArchiveError.self) { try SyncPlan.decode(bad.encoded(), name: "p.json") }
        do {
            _ = try SyncPlan.decode(Data("{}".utf8), name: "p.json")
            Issue.record("not refused")
        } catch { #expect("\(error)".contains("p.json")) }
    }
}
