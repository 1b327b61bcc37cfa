import TilepackCore

/// The most tiles a command writes one by one (`--max-tiles`): into MBTiles rows, a bundle's
/// index, a tree of files, a MapLibre offline database, a tile hash index. A PMTiles run stores
/// any number of tiles once, so such a count is not bounded by the size of what is read: a file
/// of 2 KB addresses 2^40 tiles, which would take days to write. Past the limit a command is
/// refused before it writes anything, naming the count, the limit and the option that raises it.
/// `convert` from PMTiles to PMTiles carries runs as runs and is not limited.
package enum TileCountLimit {
    /// The default of `--max-tiles`: more than every tile of zooms 0 to 14 (357,913,941).
    package static let defaultMaximum = 500_000_000

    /// Throws, before anything is written, when `count` tiles of `source` are more than `limit`;
    /// `writing` says what would write them one by one (`reading`: what would read each).
    package static func check(_ count: Int, limit: Int, source: String, writing: String, verb: String = "writes") throws(OperationError) {
        guard count > limit else { return }
        throw OperationError(
            path: source,
            fault: .badInput(
                "\(writing) \(verb) each of its \(count) tiles on its own: over the limit of \(limit) tiles (--max-tiles, default \(defaultMaximum)); give --max-tiles \(count) to write them all (a .pmtiles output of convert keeps a PMTiles archive's runs as runs). Nothing was written."
            ))
    }

    /// How many tiles of `archive` a selection of `zooms` and `bounds` offers: a PMTiles
    /// archive's counted from its runs as ranges and squares (never visiting a run's tiles);
    /// another archive's, `nil` (its tiles are stored one by one: reading them is bounded by its size).
    package static func count(of archive: any TileArchive, zooms: ClosedRange<Int>?, bounds: GeoBoundingBox?) throws(OperationError) -> Int? {
        guard let pmtiles = archive as? PMTilesArchive else { return nil }
        do {
            return try pmtiles.tileCount(in: TileSelection(zooms: zooms, bounds: bounds))
        } catch {
            throw OperationError.wrapping(error, path: archive.path)
        }
    }
}
