import Foundation
import TilepackCore
import TilepackStorage

extension ArchiveVerifier {
    // MARK: MBTiles

    /// MBTiles: the schema (triggers, indexes, duplicated tiles, map rows without images, tables
    /// that are not MBTiles), every row as stored (coordinates, NULL data, content), `tile_hash`,
    /// `agg_tiles_hash`, SQLite's integrity check (on a worker, beside the rest) and the metadata.
    static func verifyMBTiles(
        path: String, options: VerifyOptions, pool: WorkerPool, collector: inout Collector,
        progress: ProgressHandler?, start: UInt64
    ) {
        let archive: MBTilesArchive
        do {
            archive = try MBTilesArchive(path: path)
        } catch {
            switch error.fault {
            case .notAnArchive, .missingTable:
                collector.report.usable = false
            default:
                break
            }
            // An SQLite file that cannot be opened is a damaged container (exit 1); one without
            // MBTiles tables is not an archive at all (exit 2).
            collector.add(VerifyFinding(.error, "container", error.fault.description))
            return
        }
        collector.report.layout = archive.schema.kind.description
        // SQLite's integrity check reads the whole file on one thread: it runs beside the per-tile
        // checks (as the pool's first job, so the threads stay as many as the cores). The
        // aggregate hash is computed from the rows as they are read when they come in its order,
        // else by a pass of its own at the end.
        let storedMetadata = try? archive.readMetadata()
        // Hashes of a function tilepack does not compute (tippecanoe's fnv1a, xxh64) are not checked.
        let unsupportedAlgorithm = storedMetadata?.unsupportedHashAlgorithm
        if let unsupportedAlgorithm {
            collector.add(
                VerifyFinding(
                    .warning, "hash", "unsupported hash algorithm \(unsupportedAlgorithm), not checked", key: TileMetadata.Key.hashAlgorithm
                ))
        }
        let storedHash = unsupportedAlgorithm == nil ? storedMetadata?[TileMetadata.Key.aggregateTilesHash] : nil
        let integrity = Locked<Result<[String], TileArchiveError>?>(nil)
        let integrityDone = DispatchGroup()
        integrityDone.enter()
        pool.submit {
            defer { integrityDone.leave() }
            let result = Result { () throws(TileArchiveError) in try archive.integrityCheck() }
            integrity.withLock { $0 = result }
        }
        defer { integrityDone.wait() }
        var hasher = storedHash == nil ? nil : MBTilesAggregateHasher()
        checkSchema(of: archive, collector: &collector)
        var checker = ContentChecker(options: options, pool: pool, progress: progress, start: start)
        checkRows(of: archive, hasher: &hasher, checker: &checker, collector: &collector)
        if unsupportedAlgorithm == nil { checkTileHashes(of: archive, collector: &collector) }
        if let stored = storedHash { checkAggregateHash(stored, of: archive, hasher: hasher, collector: &collector) }
        integrityDone.wait()
        switch integrity.withLock({ $0 }) {
        case .success(let problems):
            for problem in problems { collector.add(VerifyFinding(.error, "container", "SQLite integrity_check: \(problem)")) }
        case .failure(let error):
            collector.add(VerifyFinding(.error, "container", "SQLite integrity_check failed: \(error.fault)"))
        case nil:
            break
        }
        let metadata: TileMetadata
        do {
            metadata = try archive.readMetadata()
        } catch {
            collector.add(VerifyFinding(.error, "metadata", "cannot read the metadata: \(error.fault)"))
            return
        }
        let summary = try? archive.contentSummary()
        checkMetadata(metadata, summary: summary, checker: checker, collector: &collector)
    }

    /// What the schema lets happen: a recovered journal, triggers, missing unique indexes (and the
    /// tiles stored twice), map rows without images, tables that are not MBTiles, no metadata.
    private static func checkSchema(of archive: MBTilesArchive, collector: inout Collector) {
        let schema = archive.schema
        if let recovery = archive.recovery {
            collector.add(VerifyFinding(.warning, "container", recovery))
        }
        if !schema.triggers.isEmpty {
            collector.add(
                VerifyFinding(
                    .warning, "schema",
                    "triggers (\(schema.triggers.joined(separator: ", "))) run on every write and may change or drop rows: tilepack does not append to this file"
                ))
        }
        if !schema.hasUniqueIndex {
            collector.add(
                VerifyFinding(
                    .warning, "schema",
                    "no unique index on (zoom_level, tile_column, tile_row) of '\(schema.coordinateTable)': a tile may be stored twice and every lookup scans the table"
                ))
        }
        if !schema.hasUniqueImageIndex {
            collector.add(
                VerifyFinding(
                    .warning, "schema",
                    "no unique index on tile_id of 'images': an image may be stored twice, and the tiles view then gives each of its tiles twice"
                ))
        }
        if !schema.tilesAreUnique {
            do {
                for duplicate in try archive.duplicateTiles(limit: maximumListed + 1) {
                    collector.add(
                        VerifyFinding(
                            .error, "tile", "stored in \(duplicate.rowCount) rows; readers may return any of them",
                            tile: TileReference(duplicate.zoomLevel, duplicate.tileColumn, duplicate.tileRow)))
                }
            } catch {
                collector.add(VerifyFinding(.error, "container", "looking for duplicated tiles failed: \(error.fault)"))
            }
        }
        do {
            for orphan in try archive.orphanedMapRows(limit: maximumListed + 1) {
                let label = TileReference(orphan.zoomLevel, orphan.tileColumn, orphan.tileRow)
                if orphan.tileID == .null {
                    collector.add(
                        VerifyFinding(
                            .warning, "tile", "the map row names no image (tile_id NULL) and no grid: it is missing from the tiles view",
                            tile: label))
                } else {
                    collector.add(
                        VerifyFinding(
                            .error, "tile",
                            "the map row names tile_id \(orphan.tileID), which no images row holds: the tile is missing from the tiles view",
                            tile: label))
                }
            }
        } catch {
            collector.add(VerifyFinding(.error, "container", "looking for map rows without images failed: \(error.fault)"))
        }
        if !schema.extraTables.isEmpty {
            collector.add(VerifyFinding(.warning, "schema", "tables that are not MBTiles: \(schema.extraTables.joined(separator: ", "))"))
        }
        if !schema.hasMetadataTable {
            collector.add(VerifyFinding(.warning, "schema", "no metadata table"))
        }
    }

    /// Every row as stored: coordinates, NULL data, content (decoded by `checker`'s workers),
    /// each added to the aggregate hash when it is computed as the rows come.
    private static func checkRows(
        of archive: MBTilesArchive, hasher: inout MBTilesAggregateHasher?, checker: inout ContentChecker, collector: inout Collector
    ) {
        if checker.progress != nil { checker.total = try? archive.tileCount() }
        do {
            try archive.forEachRawRow { row in
                collector.report.tiles += 1
                hasher?.add(row)
                if let problem = row.coordinateProblem {
                    collector.add(VerifyFinding(.error, "tile", problem, tile: TileReference(row.zoomLevel, row.tileColumn, row.tileRow)))
                    return
                }
                guard let tile = row.tile else { return }
                let label = TileReference(tile, tmsRow: tile.row(in: .tms))
                guard let data = row.tileData else {
                    collector.add(VerifyFinding(.error, "tile", "tile_data is NULL", tile: label))
                    return
                }
                checker.add(tile: tile, label: label, bytes: data, collector: &collector)
            }
        } catch {
            collector.add(VerifyFinding(.error, "container", "reading the tiles failed: \(error)"))
        }
        checker.finish(collector: &collector)
    }

    /// Each row's `tile_hash` (a `tiles_with_hash` schema) against the MD5 of its data.
    private static func checkTileHashes(of archive: MBTilesArchive, collector: inout Collector) {
        do {
            try archive.checkTileHashes { mismatch in
                let tile = TileReference(mismatch.zoomLevel, mismatch.tileColumn, mismatch.tileRow)
                let stored = tile == nil ? " (stored as \(mismatch.zoomLevel)/\(mismatch.tileColumn)/\(mismatch.tileRow))" : ""
                collector.add(
                    VerifyFinding(
                        .error, "hash",
                        "tile_hash is \(mismatch.declared ?? "NULL"), the MD5 of tile_data is \(mismatch.computed ?? "NULL")\(stored)",
                        tile: tile))
            }
        } catch {
            collector.add(VerifyFinding(.error, "hash", "checking tile_hash failed: \(error)"))
        }
    }

    /// `agg_tiles_hash` against the tiles' hash: the one `hasher` computed as the rows came, or a
    /// pass of its own.
    private static func checkAggregateHash(
        _ stored: String, of archive: MBTilesArchive, hasher: MBTilesAggregateHasher?, collector: inout Collector
    ) {
        let hash =
            hasher?.finalize().map { Result<String, TileArchiveError>.success($0) }
            ?? Result { () throws(TileArchiveError) in try archive.aggregateTilesHash() }
        switch hash {
        case .success(let computed) where computed.uppercased() != stored.uppercased():
            collector.add(
                VerifyFinding(
                    .error, "hash", "agg_tiles_hash is \(stored), the tiles hash to \(computed)",
                    key: TileMetadata.Key.aggregateTilesHash))
        case .success:
            break
        case .failure(let error):
            collector.add(VerifyFinding(.error, "hash", "computing agg_tiles_hash failed: \(error.fault)"))
        }
    }
}
