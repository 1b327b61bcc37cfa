import Foundation
import TilepackCore
import TilepackStorage

/// What `tilepack info` shows about an archive. In JSON, bounds and the metadata's `bounds`,
/// `center` and zooms are numbers and its `json` key an object (see ``TileMetadata/jsonValues``).
package struct ArchiveInfo: Sendable, Encodable {
    package struct Level: Sendable, Codable, Hashable {
        package var zoom: Int
        package var tiles: Int
        package var bytes: Int
        /// Tile extent at this zoom: XYZ columns and rows.
        package var minX: Int, maxX: Int, minY: Int, maxY: Int
    }

    package var path: String
    package var format: TileArchiveFormat
    /// The MBTiles schema, or the bundle's content.
    package var layout: String
    /// What the payloads are: png, jpg, pbf, raw pixels, ...
    package var content: String?
    package var fileSize: Int
    package var metadata: [String: String]
    package var levels: [Level]
    package var tiles: Int
    package var tileBytes: Int
    /// Distinct tile contents (byte-identical tiles counted once).
    package var distinctTiles: Int
    /// `tiles / distinctTiles`: how much deduplication saves (1 = nothing).
    package var dedupRatio: Double
    /// The extent of the tiles at the highest zoom; `[west, south, east, north]` in JSON.
    package var bounds: GeoBoundingBox?
    /// The content identity (Specs/updates.md §1); `nil` for a PMTiles archive counted by runs.
    package var identity: String?

    private enum CodingKeys: String, CodingKey {
        case path, format, layout, content, fileSize, metadata, levels, tiles, tileBytes, distinctTiles, dedupRatio, bounds, identity
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(path, forKey: .path)
        try container.encode(format, forKey: .format)
        try container.encode(layout, forKey: .layout)
        try container.encodeIfPresent(content, forKey: .content)
        try container.encode(fileSize, forKey: .fileSize)
        try container.encode(TileMetadata(metadata).jsonValues, forKey: .metadata)
        try container.encode(levels, forKey: .levels)
        try container.encode(tiles, forKey: .tiles)
        try container.encode(tileBytes, forKey: .tileBytes)
        try container.encode(distinctTiles, forKey: .distinctTiles)
        try container.encode(dedupRatio, forKey: .dedupRatio)
        try container.encodeIfPresent(bounds.map { [$0.west, $0.south, $0.east, $0.north] }, forKey: .bounds)
        try container.encodeIfPresent(identity, forKey: .identity)
    }
}

/// Reads everything `info` reports, in one pass over the tiles.
package enum ArchiveInspector {
    /// The most tiles of a PMTiles archive visited one by one; past it, runs are counted as runs.
    static let maximumTilesVisited = 1 << 24

    package static func run(path: String) throws(OperationError) -> ArchiveInfo {
        let (archive, format) = try open(path)
        var statistics = TileStatistics()
        var identity: String?
        let metadata: TileMetadata
        do {
            metadata = try archive.metadata()
            if let pmtiles = archive as? PMTilesArchive,
                try pmtiles.zoomLevels().reduce(0, { $0 + $1.tileCount }) > Self.maximumTilesVisited
            {
                // Runs of many tiles: each run's bytes read once, its tiles counted as squares.
                let base = Int(pmtiles.header.tileDataOffset)
                try pmtiles.forEachRun { _, ids, offset, length in
                    try pmtiles.source.withBytes(offset: base + Int(offset), length: length) { bytes in
                        for square in PMTilesFormat.squares(of: ids) { statistics.take(square, bytes) }
                    }
                }
            } else {
                var content = ContentIdentity(metadata: ContentIdentity.metadataHash(metadata))
                try archive.forEachTile { tile, bytes in
                    statistics.take(TileRange(tile: tile), bytes)
                    content.add(tile, bytes)
                }
                identity = content.description
            }
        } catch {
            throw OperationError.wrapping(error, path: path)
        }
        let size = (archive as? PMTilesArchive)?.source.count ?? FileSystem.stat(path).map { Int($0.st_size) } ?? 0
        let (tiles, distinct) = (statistics.tiles, statistics.distinct)
        return ArchiveInfo(
            path: path, format: format, layout: layout(of: archive, format: format), content: archive.content.map { "\($0)" },
            fileSize: size, metadata: metadata.entries, levels: statistics.sortedLevels, tiles: tiles,
            tileBytes: statistics.bytesTotal, distinctTiles: distinct, dedupRatio: distinct > 0 ? Double(tiles) / Double(distinct) : 1,
            bounds: statistics.bounds, identity: identity)
    }

    /// The archive at `path` (local, or remote PMTiles) and its format.
    private static func open(_ path: String) throws(OperationError) -> (any TileArchive, TileArchiveFormat) {
        if ArchiveLocation.isRemote(path) {
            return (try ArchiveLocation.open(path), .pmtiles)
        }
        do {
            let format = try TileArchiveFormat.detect(path: path)
            return (try openTileArchive(path: path, bundleAccess: .positionalReads), format)
        } catch {
            throw OperationError(path: path, fault: .archive(error))
        }
    }

    /// How the archive stores its tiles, in a few words.
    private static func layout(of archive: any TileArchive, format: TileArchiveFormat) -> String {
        switch archive {
        case let mbtiles as MBTilesArchive: "MBTiles, \(mbtiles.schema.kind) schema"
        case let bundle as BundleArchive: "bundle, \(bundle.payloadCount) stored payloads"
        case let pmtiles as PMTilesArchive:
            "PMTiles v3, \(pmtiles.header.tileType) tiles, tile compression \(pmtiles.header.tileCompression), \(pmtiles.header.clustered ? "clustered" : "not clustered")"
        default: format.description
        }
    }
}

/// The counts `info` reports of an archive's tiles: per zoom and in all, with their bytes, the
/// distinct contents, and each zoom's extent.
private struct TileStatistics {
    var levels: [Int: ArchiveInfo.Level] = [:]
    var hashes: [Int: [Int]] = [:]  // content hash -> sizes, for a distinct count
    var distinct = 0
    var tiles = 0
    var bytesTotal = 0

    /// Counts `range`'s tiles (one tile, or a run's square), all holding `bytes`.
    mutating func take(_ range: TileRange, _ bytes: UnsafeRawBufferPointer) {
        let n = range.count
        tiles += n
        bytesTotal += n * bytes.count
        var level =
            levels[range.zoom]
            ?? ArchiveInfo.Level(
                zoom: range.zoom, tiles: 0, bytes: 0, minX: range.columns.lowerBound, maxX: range.columns.upperBound,
                minY: range.rows.lowerBound, maxY: range.rows.upperBound)
        level.tiles += n
        level.bytes += n * bytes.count
        level.minX = min(level.minX, range.columns.lowerBound)
        level.maxX = max(level.maxX, range.columns.upperBound)
        level.minY = min(level.minY, range.rows.lowerBound)
        level.maxY = max(level.maxY, range.rows.upperBound)
        levels[range.zoom] = level
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        let key = hasher.finalize()
        // A 64-bit hash and the length tell contents apart well enough for a statistic.
        if hashes[key]?.contains(bytes.count) != true {
            hashes[key, default: []].append(bytes.count)
            distinct += 1
        }
    }

    /// The zoom levels, lowest first.
    var sortedLevels: [ArchiveInfo.Level] { levels.keys.sorted().compactMap { levels[$0] } }

    /// The box of the deepest zoom's tiles.
    var bounds: GeoBoundingBox? {
        guard let top = sortedLevels.last,
            let nw = TileCoordinate(validatingZoom: top.zoom, x: top.minX, y: top.minY),
            let se = TileCoordinate(validatingZoom: top.zoom, x: top.maxX, y: top.maxY)
        else { return nil }
        let a = WebMercator.boundingBox(of: nw), b = WebMercator.boundingBox(of: se)
        return GeoBoundingBox(west: a.west, south: b.south, east: b.east, north: a.north)
    }
}
