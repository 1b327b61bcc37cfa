import Foundation
import TilepackCore
import TilepackStorage

/// One transfer unit of a ``SyncPlan`` (Specs/updates.md §8.1): a plain HTTP range of the
/// published object, `Range: bytes=FIRST-LAST`, that any downloader can run and save to a file.
/// It holds the stored bytes of one or more tiles to fetch and the gaps between them.
public struct TransferUnit: Sendable, Hashable, Codable, Identifiable {
    /// Its place in the plan (0, 1, ...), ascending with ``offset``.
    public var id: Int
    /// Its first byte in the object.
    public var offset: Int
    /// Its length in bytes (at most ``SyncPlan/maximumUnitBytes``).
    public var length: Int
    /// The bytes of tiles to fetch it holds (the rest are the gaps it spans).
    public var wantedBytes: Int

    public init(id: Int, offset: Int, length: Int, wantedBytes: Int) {
        self.id = id
        self.offset = offset
        self.length = length
        self.wantedBytes = wantedBytes
    }

    /// The bytes of the object it is.
    public var range: Range<Int> { offset..<(offset + length) }
    /// The value of its `Range` header: `bytes=FIRST-LAST` (RFC 9110 §14.1.2).
    public var rangeHeader: String { "bytes=\(offset)-\(offset + length - 1)" }
}

/// What a sync fetches (Specs/updates.md §8.1): the byte ranges of the remote tiles whose hash the
/// local copy lacks, joined into ``TransferUnit``s, with what binds it to the published version
/// (the object's length and ETag, the tile index's identity). A value an app can hold, persist
/// (`Codable`) and hand to its own downloader: each unit is one plain range request, run in any
/// order, saved to a file and delivered back to the sync (its journal, `LOCAL.tpsync`), which
/// checks the tiles against the index's hashes before anything replaces the local copy.
///
/// Joining: two neighbouring ranges are fetched as one unit, gap and all, when the gap between
/// them is at most `maximumGap` bytes (an argument of the initializer), the unit stays within
/// ``maximumUnitBytes``, and all the gaps joined stay within `(bound - 1)` times the changed
/// bytes; the smallest gaps are joined
/// first, which gives the fewest units the budget allows. So the bytes fetched are at most
/// `bound` times the changed bytes.
public struct SyncPlan: Sendable, Hashable, Codable {
    /// A unit is at most 8 MiB: one background download, one staging record batch.
    public static let maximumUnitBytes = 8 << 20
    /// The bytes fetched are at most this many times the tiles' own bytes.
    public static let defaultBound = 1.15

    /// The published object's length.
    public var objectLength: Int
    /// The object's ETag when the server sends one (a downloader sends it as `If-Match`).
    public var etag: String?
    /// The identity of the tile index the plan was made from (Specs/updates.md §1).
    public var index: String
    /// The stored bytes of the tiles to fetch (each distinct range once).
    public var changedBytes: Int
    /// The units, ascending and disjoint.
    public var units: [TransferUnit]

    /// The bytes the units fetch, gaps included.
    public var fetchBytes: Int { units.reduce(0) { $0 + $1.length } }

    /// Joins `ranges` (the stored bytes of the tiles to fetch, in any order, overlaps allowed)
    /// into units.
    /// - Parameters:
    ///   - bound: the bytes fetched stay within this many times the changed bytes (at least 1).
    ///   - maximumUnitBytes: no unit is longer (a longer tile range is split).
    ///   - maximumGap: no gap longer than this is joined (`nil`: any the budget allows). A
    ///     downloader whose requests cost bytes (headers) passes what one costs, so that a join
    ///     never costs more bytes than the request it saves; a background download, whose
    ///     requests cost time, leaves it `nil` for the fewest units.
    public init(
        objectLength: Int, etag: String?, index: String, ranges: [Range<Int>], bound: Double = defaultBound,
        maximumUnitBytes: Int = maximumUnitBytes, maximumGap: Int? = nil
    ) {
        self.objectLength = objectLength
        self.etag = etag
        self.index = index
        let pieces = Self.normalized(ranges, maximumUnitBytes: max(1, maximumUnitBytes))
        changedBytes = pieces.reduce(0) { $0 + $1.count }
        let budget = Int((max(1, bound) - 1) * Double(changedBytes))
        units = Self.join(pieces, budget: budget, maximumUnitBytes: max(1, maximumUnitBytes), maximumGap: maximumGap ?? Int.max)
    }

    /// The unit that holds byte `offset` of the object.
    public func unit(containing offset: Int) -> TransferUnit? {
        var low = 0, high = units.count
        while low < high {
            let middle = (low + high) / 2
            if units[middle].offset <= offset { low = middle + 1 } else { high = middle }
        }
        guard low > 0, units[low - 1].range.contains(offset) else { return nil }
        return units[low - 1]
    }

    /// The plan as JSON (its keys sorted): what the journal records and an app persists.
    public func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)) ?? Data()
    }

    /// A plan from ``encoded()``'s bytes; `name` (the file or key it was read from) names a fault.
    public static func decode(_ data: Data, name: String) throws(TileArchiveError) -> SyncPlan {
        let plan: SyncPlan
        do { plan = try JSONDecoder().decode(SyncPlan.self, from: data) } catch {
            throw TileArchiveError(path: name, fault: .corrupt("not a sync plan: \(error)"))
        }
        var end = 0
        for (i, unit) in plan.units.enumerated() {
            guard unit.id == i, unit.offset >= end, unit.length > 0, unit.length <= maximumUnitBytes, unit.wantedBytes <= unit.length,
                unit.offset <= plan.objectLength - unit.length
            else { throw TileArchiveError(path: name, fault: .corrupt("the sync plan's unit \(i) is not a range of the object in order")) }
            end = unit.range.upperBound
        }
        return plan
    }

    /// Sorted, overlaps merged, each at most `maximumUnitBytes` long.
    static func normalized(_ ranges: [Range<Int>], maximumUnitBytes: Int) -> [Range<Int>] {
        var merged: [Range<Int>] = []
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) where !range.isEmpty {
            if let last = merged.last, range.lowerBound <= last.upperBound {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
        return merged.flatMap { range in
            stride(from: range.lowerBound, to: range.upperBound, by: maximumUnitBytes).map {
                $0..<min($0 + maximumUnitBytes, range.upperBound)
            }
        }
    }

    /// Joins neighbours across their gaps, smallest first, while the gaps joined stay within
    /// `budget` bytes and each unit within `maximumUnitBytes`.
    static func join(_ pieces: [Range<Int>], budget: Int, maximumUnitBytes: Int, maximumGap: Int) -> [TransferUnit] {
        guard !pieces.isEmpty else { return [] }
        // Each piece's group: its first and last piece, kept at the group's ends.
        var first = Array(pieces.indices), last = Array(pieces.indices)
        let gaps = (0..<(pieces.count - 1)).map { (gap: pieces[$0 + 1].lowerBound - pieces[$0].upperBound, at: $0) }
        var spent = 0
        for (gap, at) in gaps.sorted(by: { ($0.gap, $0.at) < ($1.gap, $1.at) }) {
            guard gap <= maximumGap, spent + gap <= budget else { break }
            let low = first[at], high = last[at + 1]
            guard pieces[high].upperBound - pieces[low].lowerBound <= maximumUnitBytes else { continue }
            spent += gap
            last[low] = high
            first[high] = low
        }
        var units: [TransferUnit] = []
        var i = 0
        while i < pieces.count {
            let end = last[i]
            let wanted = pieces[i...end].reduce(0) { $0 + $1.count }
            let offset = pieces[i].lowerBound
            units.append(TransferUnit(id: units.count, offset: offset, length: pieces[end].upperBound - offset, wantedBytes: wanted))
            i = end + 1
        }
        return units
    }
}
