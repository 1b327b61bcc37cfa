import TilepackCore

extension PMTilesArchive: TileSizeReading {
    /// The header's zooms (`nil` for an archive that addresses no tile).
    public func zoomRange() throws -> ClosedRange<Int>? {
        guard header.addressedTiles > 0 || root.count > 0 else { return nil }
        guard header.minZoom <= header.maxZoom, Int(header.maxZoom) <= TileCoordinate.maximumZoom else {
            throw TileArchiveError(
                path: path, fault: .corrupt("the header's zooms \(header.minZoom)...\(header.maxZoom) are not a range of zooms"))
        }
        return Int(header.minZoom)...Int(header.maxZoom)
    }

    /// From the directories alone: a leaf directory is read only when the ids it spans meet a
    /// range (its id span cut into Hilbert squares, each compared with the ranges), so a planet
    /// read remotely costs the root and the leaves under the area. A run's tiles are cut as
    /// squares too; a tile's content is its offset in the tile data section (tiles that share
    /// bytes share it).
    public func forEachTileSize(in ranges: [TileRange], _ body: (TileSizeRecord) throws -> Void) throws {
        let byZoom = Dictionary(grouping: ranges, by: \.zoom)
        func meets(_ ids: Range<UInt64>) -> Bool {
            PMTilesFormat.split(byZoom: ids).contains { part in
                guard let wanted = byZoom[part.zoom] else { return false }
                return PMTilesFormat.squares(of: part.ids).contains { square in
                    wanted.contains { Self.intersection(square, $0) != nil }
                }
            }
        }
        func walk(_ directory: PMTilesDirectory, depth: Int, end: UInt64) throws {
            try checkDepth(depth)
            for i in 0..<directory.count {
                let entry = directory[i]
                let next = i + 1 < directory.count ? directory[i + 1].tileID : end
                guard entry.tileID < next else {
                    throw TileArchiveError(path: path, fault: .corrupt("tile id \(entry.tileID) is out of order in a directory"))
                }
                if entry.runLength == 0 {
                    if meets(entry.tileID..<next) { try walk(try leaf(at: i, in: directory), depth: depth + 1, end: next) }
                    continue
                }
                let ids = entry.tileID..<(entry.tileID + UInt64(entry.runLength))
                for part in PMTilesFormat.split(byZoom: ids) {
                    guard let wanted = byZoom[part.zoom] else { continue }
                    for square in PMTilesFormat.squares(of: part.ids) {
                        for range in wanted {
                            guard let cut = Self.intersection(square, range) else { continue }
                            for tile in cut {
                                try body(TileSizeRecord(tile: tile, length: Int(entry.length), content: entry.offset))
                            }
                        }
                    }
                }
            }
        }
        try walk(root, depth: 0, end: PMTilesFormat.idLimit)
    }
}
