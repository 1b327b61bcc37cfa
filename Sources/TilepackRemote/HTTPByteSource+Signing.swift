import Foundation
import TilepackStorage

/// A signed tree's nodes and tile ids fetched in few requests (Specs/signing.md §5): all in one
/// multi-range request (`Range: bytes=a-b,c-d,...`) where the server answers several ranges
/// (nginx); where it answers one range a request (S3), neighbours up to 32 KiB apart joined, as a
/// request costs more than that many bytes. The first batch asks with its first two ranges to
/// learn which.
extension HTTPByteSource: RangeBatchReading {
    /// The gap below which ranges are joined for a server that answers one range a request.
    package static let singleRangeGap = 32 << 10

    package func readBatch(_ ranges: [Range<Int>], _ body: (Range<Int>, Data) throws -> Void) throws {
        var rest = ranges[...]
        if answersMultipleRanges == nil, rest.count > 1 {
            try fetch(ranges: Array(rest.prefix(2)), body)
            rest = rest.dropFirst(2)
        }
        guard !rest.isEmpty else { return }
        if answersMultipleRanges != false { return try fetch(ranges: Array(rest), body) }
        var joined: [Range<Int>] = []
        for range in rest {
            if let last = joined.last, range.lowerBound <= last.upperBound + Self.singleRangeGap {
                joined[joined.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
            } else {
                joined.append(range)
            }
        }
        try fetch(ranges: joined) { part, data in
            let bytes = [UInt8](data)
            for range in rest where part.contains(range.lowerBound) && range.upperBound <= part.upperBound {
                try body(range, Data(bytes[(range.lowerBound - part.lowerBound)..<(range.upperBound - part.lowerBound)]))
            }
        }
    }
}
