import Foundation
import TilepackCore
@_spi(TilepackInternal) internal import TilepackCompression

extension PMTilesWriter {
    /// The root directory and the leaf directories (gzip-compressed), so that the header and the
    /// root fit in the first ``PMTilesFormat/initialFetchLength`` bytes: the root alone when it
    /// fits, else leaves of `n` entries each, `n` growing by a fifth until the root of leaves fits.
    package static func directories(_ entries: [PMTilesFormat.Entry]) -> (root: [UInt8], leaves: [UInt8], leafCount: Int) {
        let budget = PMTilesFormat.initialFetchLength - PMTilesFormat.headerLength
        // Compressed only as far as the budget: a directory of many entries is given up on early.
        if let whole = PMTilesFormat.encodeDirectory(entries).withUnsafeBytes({ Gzip.compress($0, limit: budget) }) {
            return (whole, [], 0)
        }
        var leafSize = max(4096, entries.count / 3500)
        while true {
            // The leaves encoded and compressed on every core (each on its own: the same bytes
            // whichever thread makes them), then laid end to end in order.
            let size = leafSize
            let starts = Array(stride(from: 0, to: entries.count, by: size))
            // Each iteration writes its own element, read after all have returned.
            nonisolated(unsafe) let results = UnsafeMutableBufferPointer<[UInt8]>.allocate(capacity: starts.count)
            results.initialize(repeating: [])
            defer { results.deallocate() }
            DispatchQueue.concurrentPerform(iterations: starts.count) { i in
                let end = min(entries.count, starts[i] + size)
                results[i] = Gzip.compress(PMTilesFormat.encodeDirectory(Array(entries[starts[i]..<end])))
            }
            let packed = Array(results)
            _ = results.deinitialize()
            var leaves: [UInt8] = []
            leaves.reserveCapacity(packed.reduce(0) { $0 + $1.count })
            var rootEntries: [PMTilesFormat.Entry] = []
            for (start, leaf) in zip(starts, packed) {
                rootEntries.append(
                    PMTilesFormat.Entry(
                        tileID: entries[start].tileID, offset: UInt64(leaves.count), length: UInt32(leaf.count), runLength: 0))
                leaves += leaf
            }
            let root = Gzip.compress(PMTilesFormat.encodeDirectory(rootEntries))
            if root.count <= budget { return (root, leaves, rootEntries.count) }
            leafSize += leafSize / 5
        }
    }
}
