import TilepackCore
@_spi(TilepackInternal) import TilepackStorage

/// The format a plan's output is written in: its size is what the budget caps.
public enum PlanOutputFormat: String, Hashable, Sendable, Codable, CaseIterable {
    case mbtiles, bundle, pmtiles

    /// The format an output path's extension names (`.mbtiles`, `.tilepack`, `.pmtiles`).
    public init?(path: String) {
        guard let format = TileArchiveFormat.allCases.first(where: { path.lowercased().hasSuffix($0.fileExtension) }) else { return nil }
        switch format {
        case .mbtiles: self = .mbtiles
        case .bundle: self = .bundle
        case .pmtiles: self = .pmtiles
        }
    }
}

/// One chosen tile as the size model sees it.
struct PlannedTile {
    var zoom: Int
    var x: Int
    var y: Int
    var length: Int
    var stored: Int
    var content: UInt64
}

/// What an output file of each format costs for its tiles (`Specs/plan.md` §3): the marginal
/// cost the planner compares while choosing, and the prediction of the whole file it checks at
/// the end.
struct OutputSizeModel {
    let format: PlanOutputFormat
    /// The metadata as the source holds it, in bytes (the output's is within a few hundred of it).
    let metadataBytes: Int
    /// MBTiles: the page size tilepack's writer uses.
    static let pageSize = 8192
    /// Bytes kept free for what the tiles do not decide (metadata the writer derives, SQLite's
    /// schema and metadata pages, a PMTiles header): part of the fixed cost.
    static let slack = 4096

    /// What a file of no tiles costs.
    var fixed: Int {
        switch format {
        // The schema page, the metadata table's and its name index's: the tiles' two roots are
        // ``MBTilesPages``' (an extract of one small tile is 5 pages).
        case .mbtiles: return 3 * Self.pageSize + 2 * metadataBytes + Self.slack
        case .bundle: return BundleFormat.headerLength + metadataBytes + BundleFormat.zoomTableLength + 16 + Self.slack
        case .pmtiles: return PMTilesFormat.headerLength + metadataBytes + Self.slack
        }
    }

    /// What taking one more tile adds, on average: its bytes (once per content where the format
    /// shares them), its index or directory entry and, for SQLite, its page's unused end.
    func marginal(length: Int, stored: Int, newContent: Bool) -> Int {
        switch format {
        case .mbtiles:
            let cell = MBTilesPages.tableCell(payload: length + 12)
            let page = Self.pageSize - 8
            // On average half a cell of a leaf page is left unused when the next cell does not fit.
            let waste = cell.local < page ? (cell.local + 2) * (cell.local + 2) / (2 * page) : 0
            return cell.local + 2 + waste + cell.overflowPages * Self.pageSize + 24
        case .bundle:
            return 12 + (newContent ? BundleFormat.payloadRecordLength + (stored + 7) / 8 * 8 : 0)
        case .pmtiles:
            return 4 + (newContent ? length : 0)
        }
    }

    /// The size of the file written with `tiles` (in any order).
    func predict(_ tiles: [PlannedTile]) -> Int {
        switch format {
        case .mbtiles: return fixed + MBTilesPages.bytes(of: tiles, pageSize: Self.pageSize)
        case .bundle: return fixed + Self.bundleBytes(tiles)
        case .pmtiles: return fixed + Self.pmtilesBytes(tiles)
        }
    }

    /// The size of the file written with the tiles `taken` marks (by offset in the levels).
    func predict(_ levels: [AreaTileSizes.Level], offsets: [Int], taken: [Bool]) -> Int {
        guard format != .mbtiles else {
            return fixed + MBTilesPages.bytes(of: levels, offsets: offsets, taken: taken, pageSize: Self.pageSize)
        }
        var tiles: [PlannedTile] = []
        for (index, level) in levels.enumerated() {
            for i in level.keys.indices where taken[offsets[index] + i] {
                let key = level.keys[i]
                tiles.append(
                    PlannedTile(
                        zoom: level.zoom, x: Int(key >> 32), y: Int(key & 0xFFFF_FFFF), length: level.lengths[i], stored: level.stored[i],
                        content: level.contents[i]))
            }
        }
        return predict(tiles)
    }

    /// The index (keys, payload numbers, records) and the payloads, each at a multiple of 8.
    static func bundleBytes(_ tiles: [PlannedTile]) -> Int {
        var seen = Set<UInt64>()
        var data = 0
        for tile in tiles where seen.insert(tile.content).inserted { data += (tile.stored + 7) / 8 * 8 }
        return (12 * tiles.count + 7) / 8 * 8 + BundleFormat.payloadRecordLength * seen.count + data
    }

    /// The tile data (each content once) and the directories the writer makes of the entries.
    static func pmtilesBytes(_ tiles: [PlannedTile]) -> Int {
        let sorted = tiles.map { (PMTilesFormat.tileID(of: TileCoordinate(uncheckedZoom: $0.zoom, x: $0.x, y: $0.y)), $0) }
            .sorted { $0.0 < $1.0 }
        var placed: [UInt64: UInt64] = [:]
        var data: UInt64 = 0
        var entries: [PMTilesFormat.Entry] = []
        for (id, tile) in sorted {
            let offset: UInt64
            if let known = placed[tile.content] {
                offset = known
            } else {
                offset = data
                placed[tile.content] = data
                data += UInt64(tile.length)
            }
            if var last = entries.last, last.tileID + UInt64(last.runLength) == id, last.offset == offset {
                last.runLength += 1
                entries[entries.count - 1] = last
            } else {
                entries.append(PMTilesFormat.Entry(tileID: id, offset: offset, length: UInt32(tile.length), runLength: 1))
            }
        }
        guard !entries.isEmpty else { return 0 }
        let directories = PMTilesWriter.directories(entries)
        return Int(data) + directories.root.count + directories.leaves.count
    }
}
