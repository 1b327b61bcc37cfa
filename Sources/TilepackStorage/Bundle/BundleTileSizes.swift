import TilepackCore

extension BundleArchive: TileSizeReading {
    /// The first and last zoom of the index's zoom table that hold entries.
    public func zoomRange() throws -> ClosedRange<Int>? {
        let held = (0..<BundleFormat.zoomLevelCount).filter { zoomStarts[$0] < zoomStarts[$0 + 1] }
        guard let lowest = held.first, let deepest = held.last else { return nil }
        return lowest...deepest
    }

    /// From the index: per column of a range, a binary search for its first key, then the keys in
    /// order; each tile's payload record gives its length (and its stored length, an LZ4 block's).
    /// A tile's content is its payload number (tiles that share a payload share it).
    public func forEachTileSize(in ranges: [TileRange], _ body: (TileSizeRecord) throws -> Void) throws {
        for range in ranges where range.zoom < BundleFormat.zoomLevelCount {
            let entries = zoomStarts[range.zoom]..<zoomStarts[range.zoom + 1]
            guard !entries.isEmpty else { continue }
            for x in range.columns {
                let first = BundleFormat.key(of: TileCoordinate(uncheckedZoom: range.zoom, x: x, y: range.rows.lowerBound))
                let last = first + UInt64(range.rows.count - 1)
                var low = entries.lowerBound, high = entries.upperBound
                while low < high {
                    let middle = (low + high) / 2
                    if key(atEntry: middle) < first { low = middle + 1 } else { high = middle }
                }
                var entry = low
                while entry < entries.upperBound {
                    let key = key(atEntry: entry)
                    guard key <= last else { break }
                    let tile = TileCoordinate(uncheckedZoom: range.zoom, x: x, y: range.rows.lowerBound + Int(key - first))
                    let number = payloadNumber(ofEntry: entry)
                    let payload = try payload(number: number, tile: tile)
                    try body(TileSizeRecord(tile: tile, length: payload.rawLength, storedLength: payload.storedLength, content: UInt64(number)))
                    entry += 1
                }
            }
        }
    }
}
