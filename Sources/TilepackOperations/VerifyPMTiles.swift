import Foundation
import TilepackCore
import TilepackRemote
import TilepackStorage

extension ArchiveVerifier {
    /// The most tiles of a PMTiles archive visited one by one; past it, runs are checked as runs.
    static let maximumTilesVisited: UInt64 = 1 << 24

    /// PMTiles: the header and every directory (order, bounds, depth; checked as they are read),
    /// the header's counts and zooms against the directories, clustering, every tile decoded, the
    /// metadata. A v2 archive or another spec version is not a usable archive (exit 2).
    /// - Parameter opened: the archive when it is already open (a remote one), else it is opened from `path`.
    static func verifyPMTiles(
        path: String, opened: PMTilesArchive?, options: VerifyOptions, pool: WorkerPool, collector: inout Collector,
        progress: ProgressHandler?, start: UInt64
    ) {
        let archive: PMTilesArchive
        do throws(TileArchiveError) {
            if let opened {
                archive = opened
            } else {
                archive = try PMTilesArchive(path: path)
            }
        } catch {
            let fault: TileArchiveError.Fault? = error.fault
            switch fault {
            case .notAnArchive?, .unsupportedVersion?: collector.report.usable = false
            default: break
            }
            collector.add(VerifyFinding(.error, "container", fault?.description ?? "\(error)"))
            return
        }
        let header = archive.header
        collector.report.layout =
            "v3, \(header.tileType) tiles, tile compression \(header.tileCompression), internal compression \(header.internalCompression), \(header.clustered ? "clustered" : "not clustered")"

        // MapLibre Native reads directories and tiles compressed with gzip or not at all, and
        // refuses the file at its header otherwise (unknown included).
        let readable: Set<PMTilesFormat.Compression> = [.none, .gzip]
        if !readable.contains(header.internalCompression) || !readable.contains(header.tileCompression) {
            collector.add(
                VerifyFinding(
                    .warning, "container",
                    "MapLibre Native could not read this file: its directories are compressed with \(header.internalCompression) and its tiles with \(header.tileCompression), and MapLibre Native reads only gzip or none for each"
                ))
        }

        // The directories: every entry, counted as the header counts them.
        guard let addressed = checkDirectories(of: archive, collector: &collector) else { return }
        // Every tile: tile types tilepack cannot decode (AVIF, MLT, ...) are only counted.
        var checker = ContentChecker(options: options, pool: pool, progress: progress, start: start)
        checkTiles(of: archive, addressed: addressed, checker: &checker, collector: &collector)
        let metadata: TileMetadata
        do {
            metadata = try archive.metadata()
        } catch {
            collector.add(
                VerifyFinding(
                    .error, "metadata", "cannot read the metadata: \((error as? TileArchiveError)?.fault.description ?? "\(error)")"))
            return
        }
        // A hash carried over from MBTiles (convert keeps it): the tiles must still hash to it.
        checkAggregateHash(of: archive, metadata: metadata, addressed: addressed, collector: &collector)
        let levels = checker.levels.keys.sorted().compactMap { checker.levels[$0] }
        var summary = TileContentSummary(levels: levels, format: (try? metadata.format) ?? nil)
        summary.sniffedFormat = checker.formats.keys.sorted { checker.formats[$0]! > checker.formats[$1]! }.first
        checkMetadata(metadata, summary: summary, checker: checker, collector: &collector)
    }

    /// Every directory entry, its counts against the header's, clustering and the zooms; the
    /// tiles the directories address, or nil when they cannot be read.
    private static func checkDirectories(of archive: PMTilesArchive, collector: inout Collector) -> UInt64? {
        let header = archive.header
        var addressed: UInt64 = 0
        var entries: UInt64 = 0
        var contents = Set<UInt64>()
        var expectedOffset: UInt64 = 0
        var gaps = 0
        var zooms: ClosedRange<Int>?
        do {
            try archive.forEachEntry { entry in
                addressed += UInt64(entry.runLength)
                entries += 1
                if contents.insert(entry.offset).inserted {
                    if entry.offset != expectedOffset { gaps += 1 }
                    expectedOffset = entry.offset + UInt64(entry.length)
                }
            }
            let levels = try archive.zoomLevels()
            if let first = levels.first, let last = levels.last { zooms = first.zoom...last.zoom }
        } catch {
            collector.add(
                VerifyFinding(.error, "container", "directories: \((error as? TileArchiveError)?.fault.description ?? "\(error)")"))
            return nil
        }
        for (what, declared, counted) in [
            ("addressed tiles", header.addressedTiles, addressed),
            ("tile entries", header.tileEntries, entries),
            ("tile contents", header.tileContents, UInt64(contents.count)),
        ]
        where declared != 0 && declared != counted {
            collector.add(VerifyFinding(.warning, "container", "the header counts \(declared) \(what), the directories \(counted)"))
        }
        if header.clustered && gaps > 0 {
            collector.add(
                VerifyFinding(.error, "container", "the header says clustered, but \(gaps) tile contents are not in tile-id order"))
        }
        if let zooms, zooms != Int(header.minZoom)...Int(header.maxZoom) {
            collector.add(
                VerifyFinding(
                    .warning, "container",
                    "the header's zooms are \(header.minZoom)...\(header.maxZoom), the tiles' \(zooms.lowerBound)...\(zooms.upperBound)"))
        }
        return addressed
    }

    /// Every tile decoded (or, past ``maximumTilesVisited``, each run's bytes once), tiles the
    /// header calls gzip-compressed checked for gzip, and the header's tile type against them.
    private static func checkTiles(
        of archive: PMTilesArchive, addressed: UInt64, checker: inout ContentChecker, collector: inout Collector
    ) {
        let header = archive.header
        let decodable = header.tileType.tileFormat != nil || header.tileType == .unknown
        if !decodable && addressed > 0 {
            collector.add(
                VerifyFinding(
                    .warning, "tile", "tiles of type \(header.tileType) are not decoded (tilepack decodes png, jpeg, webp and mvt)"))
        }
        if header.tileCompression == .brotli || header.tileCompression == .zstd {
            collector.add(
                VerifyFinding(
                    .warning, "tile",
                    "tiles compressed with \(header.tileCompression) are not decoded (tilepack decodes gzip or uncompressed tiles)"))
        }
        let checksContent =
            decodable && (header.tileCompression == .none || header.tileCompression == .gzip || header.tileCompression == .unknown)
        // Tiles the header calls gzip-compressed must be gzip (a reader inflates them first).
        var notGzip = 0
        var firstNotGzip: TileCoordinate?
        func check(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer) {
            if header.tileCompression == .gzip, bytes.count < 2 || bytes[0] != 0x1F || bytes[1] != 0x8B {
                notGzip += 1
                if firstNotGzip == nil { firstNotGzip = tile }
            }
            if checksContent { checker.add(tile: tile, label: TileReference(tile), bytes: bytes, collector: &collector) }
        }
        do {
            if addressed <= Self.maximumTilesVisited {
                try archive.forEachTile { tile, bytes in
                    collector.report.tiles += 1
                    check(tile, bytes)
                }
            } else {
                // Runs of many tiles (ocean, or a hostile file's billions): each run's bytes are
                // checked once, its other tiles counted as squares, never visited one by one.
                let base = Int(header.tileDataOffset)
                try archive.forEachRun { _, ids, offset, length in
                    collector.report.tiles += ids.count
                    let first = PMTilesFormat.tile(ofID: ids.lowerBound)!
                    try archive.source.withBytes(offset: base + Int(offset), length: length) { check(first, $0) }
                    for square in PMTilesFormat.squares(of: (ids.lowerBound + 1)..<ids.upperBound) { checker.count(square) }
                }
            }
        } catch {
            collector.add(
                VerifyFinding(
                    .error, "container", "reading the tiles failed: \((error as? TileArchiveError)?.fault.description ?? "\(error)")"))
        }
        checker.finish(collector: &collector)
        if notGzip > 0, let firstNotGzip {
            collector.add(
                VerifyFinding(
                    .error, "tile",
                    "the header says tiles are gzip-compressed, but \(notGzip) tiles are not gzip (no gzip magic 1f 8b), the first \(TileReference(firstNotGzip))"
                ))
        }
        if let declared = header.tileType.tileFormat, let (sniffed, count) = checker.formats.max(by: { $0.value < $1.value }),
            sniffed != declared
        {
            collector.add(VerifyFinding(.error, "tile", "the header's tile type is \(header.tileType), but \(count) tiles are \(sniffed)"))
        }
    }

    /// `agg_tiles_hash` (carried over from MBTiles) against the tiles, unless its algorithm is not
    /// one tilepack computes or the archive addresses too many tiles to hash one by one.
    private static func checkAggregateHash(
        of archive: PMTilesArchive, metadata: TileMetadata, addressed: UInt64, collector: inout Collector
    ) {
        if let algorithm = metadata.unsupportedHashAlgorithm {
            collector.add(
                VerifyFinding(.warning, "hash", "unsupported hash algorithm \(algorithm), not checked", key: TileMetadata.Key.hashAlgorithm)
            )
        } else if metadata[TileMetadata.Key.aggregateTilesHash] != nil, addressed > Self.maximumTilesVisited {
            collector.add(
                VerifyFinding(
                    .warning, "hash",
                    "agg_tiles_hash is not checked: the archive addresses \(addressed) tiles, over the \(Self.maximumTilesVisited) verify hashes one by one",
                    key: TileMetadata.Key.aggregateTilesHash))
        } else if let stored = metadata[TileMetadata.Key.aggregateTilesHash] {
            do {
                let computed = try MBTilesAggregateHash.compute(archive)
                if computed.uppercased() != stored.uppercased() {
                    collector.add(
                        VerifyFinding(
                            .error, "hash", "agg_tiles_hash is \(stored), the tiles hash to \(computed)",
                            key: TileMetadata.Key.aggregateTilesHash))
                }
            } catch {
                collector.add(VerifyFinding(.error, "hash", "computing agg_tiles_hash failed: \(error)"))
            }
        }
    }
}
