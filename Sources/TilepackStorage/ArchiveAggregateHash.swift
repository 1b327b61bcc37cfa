import TilepackCore
internal import TilepackChecksum

extension MBTilesAggregateHash {
    /// `agg_tiles_hash` of any archive's tiles: what an MBTiles file holding them stores (MD5 over
    /// zoom, column and TMS row as decimal text, then the bytes, ordered by zoom, column, TMS row).
    /// Lets `verify` check the hash a PMTiles archive or bundle carries in its metadata.
    public static func compute(_ archive: any TileArchive) throws -> String {
        var tiles: [TileCoordinate] = []
        try archive.forEachTile { tile, _ in tiles.append(tile) }
        tiles.sort { ($0.zoom, $0.x, $0.row(in: .tms)) < ($1.zoom, $1.x, $1.row(in: .tms)) }
        let md5 = Digest(.md5)
        for tile in tiles {
            var text = "\(tile.zoom)\(tile.x)\(tile.row(in: .tms))"
            text.withUTF8 { md5.update(UnsafeRawBufferPointer($0)) }
            _ = try archive.withTileBytes(at: tile) { md5.update($0) }
        }
        return hex(md5.finalize())
    }
}
