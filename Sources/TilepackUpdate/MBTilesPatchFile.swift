import Foundation
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage

/// martin's flat MBTiles patch layout (Specs/updates.md §3): a `tiles` table of whole tiles with
/// NULL `tile_data` for deleted tiles, `metadata` with NULL values for deleted keys and
/// `agg_tiles_hash_before_apply` / `agg_tiles_hash_after_apply`, `agg_tiles_hash` of the patch's
/// own rows; tilepack adds its identities in a table martin ignores, `tilepack_patch`.
extension TilePatch {
    /// Writes the patch as an MBTiles file martin's `mbtiles apply-patch` applies.
    public func writeMBTiles(to path: String, overwrite: Bool) throws(TileArchiveError) {
        let file = try AtomicFile(destination: path, overwrite: overwrite)
        do {
            let connection = try SQLiteConnection(
                filename: file.temporaryPath, archivePath: path, readOnly: false, uri: false, create: true)
            try connection.execute(
                """
                PRAGMA page_size = 4096; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
                CREATE TABLE metadata (name text, value text);
                CREATE UNIQUE INDEX name ON metadata (name);
                CREATE TABLE tiles (zoom_level integer, tile_column integer, tile_row integer, tile_data blob);
                CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row);
                CREATE TABLE tilepack_patch (name text PRIMARY KEY, value text);
                """)
            try connection.inTransaction(throwing: { try writeRows(connection) })
            try connection.execute("PRAGMA journal_mode = DELETE")
        } catch let error as TileArchiveError {
            throw error
        } catch {
            throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "\(error)"))
        }
        try file.commit()
    }

    /// The patch's rows: its metadata changes, its tiles (NULL data for a deletion), the patch's own
    /// `agg_tiles_hash` and tilepack's identities.
    private func writeRows(_ connection: SQLiteConnection) throws {
        let insertMetadata = try connection.prepare("INSERT INTO metadata (name, value) VALUES (?1, ?2)")
        func put(_ key: String, _ value: String?) throws(TileArchiveError) {
            insertMetadata.bind(1, text: key)
            if let value { insertMetadata.bind(2, text: value) } else { insertMetadata.bindNull(2) }
            _ = try insertMetadata.step()
            insertMetadata.reset()
        }
        for (key, value) in metadataChanges where !ContentIdentity.derivedKeys.contains(key) { try put(key, value) }
        if let aggregateHashBefore { try put("agg_tiles_hash_before_apply", aggregateHashBefore) }
        if let aggregateHashAfter { try put("agg_tiles_hash_after_apply", aggregateHashAfter) }
        // The rows in agg_tiles_hash's order (zoom, column, TMS row); NULL data for a deletion.
        var rows: [(zoom: Int, x: Int, row: Int, bytes: [UInt8]?)] = deletions.map { ($0.zoom, $0.x, $0.row(in: .tms), nil) }
        rows += tiles.map { ($0.coordinate.zoom, $0.coordinate.x, $0.coordinate.row(in: .tms), $0.bytes) }
        rows.sort { ($0.zoom, $0.x, $0.row) < ($1.zoom, $1.x, $1.row) }
        let insertTile = try connection.prepare(
            "INSERT INTO tiles (zoom_level, tile_column, tile_row, tile_data) VALUES (?1, ?2, ?3, ?4)")
        for row in rows {
            insertTile.bind(1, row.zoom)
            insertTile.bind(2, row.x)
            insertTile.bind(3, row.row)
            if let bytes = row.bytes {
                try bytes.withUnsafeBytes { buffer in
                    try insertTile.bind(4, blobNoCopy: buffer)
                    _ = try insertTile.step()
                }
            } else {
                insertTile.bindNull(4)
                _ = try insertTile.step()
            }
            insertTile.reset()
        }
        // martin: "a new agg_tiles_hash will be generated for the diff file itself" (NULL data adds nothing).
        try put(TileMetadata.Key.aggregateTilesHash, try MBTilesAggregateHash.compute(connection))
        let insertPatch = try connection.prepare("INSERT INTO tilepack_patch (name, value) VALUES (?1, ?2)")
        // agg_tiles_hash: NEW's, or empty when NEW carries none (the result carries exactly that).
        let carried = newAggregateHash ?? ""
        for (key, value) in [("before", before?.description), ("after", after?.description), ("content", content), ("agg_tiles_hash", carried)] {
            guard let value else { continue }
            insertPatch.bind(1, text: key)
            insertPatch.bind(2, text: value)
            _ = try insertPatch.step()
            insertPatch.reset()
        }
    }

    /// Reads an MBTiles patch: tilepack's (with its identities) or martin's own (without).
    /// - Throws: ``TilePatchError/Fault/binaryDiff(table:)`` for martin's `bsdiffraw*` patches,
    ///   `notAPatch` for an SQLite file without a `tiles` table.
    public static func readMBTiles(path: String) throws(TilePatchError) -> TilePatch {
        func fail(_ fault: TilePatchError.Fault) -> TilePatchError { TilePatchError(path: path, fault: fault) }
        do {
            let connection = try SQLiteConnection(filename: path, archivePath: path, readOnly: true, uri: false)
            let tables = try connection.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
            var names: Set<String> = []
            while try tables.step() { if let name = tables.text(0) { names.insert(name) } }
            if let binary = names.sorted().first(where: { $0.lowercased().hasPrefix("bsdiffraw") }) {
                throw fail(.binaryDiff(table: binary))
            }
            guard names.contains("tiles") else { throw fail(.notAPatch("an SQLite file without a 'tiles' table")) }
            var patch = TilePatch()
            patch.origin = .martin
            var carried: String?
            if names.contains("tilepack_patch") {
                let rows = try connection.prepare("SELECT name, value FROM tilepack_patch")
                while try rows.step() {
                    guard let name = rows.text(0), let value = rows.text(1) else { continue }
                    switch name {
                    case "before", "after":
                        guard let identity = ContentIdentity(value) else {
                            throw fail(.corrupt("its '\(name)' identity is not a tpid1 identity"))
                        }
                        if name == "before" { patch.before = identity } else { patch.after = identity }
                    case "content": patch.content = value
                    case "agg_tiles_hash": carried = value
                    default: break
                    }
                }
                guard patch.before != nil, patch.after != nil else { throw fail(.corrupt("its tilepack_patch table lacks an identity")) }
                patch.origin = .tilepack
            }
            if names.contains("metadata") {
                let rows = try connection.prepare("SELECT name, value FROM metadata ORDER BY name")
                var count = 0
                while try rows.step() {
                    count += 1
                    guard count <= MetadataLimits.maximumEntries else {
                        throw fail(.corrupt("more than \(MetadataLimits.maximumEntries) metadata rows"))
                    }
                    guard let name = rows.text(0) else { continue }
                    let value = rows.type(1) == .null ? nil : rows.text(1)
                    switch name {
                    case "agg_tiles_hash_before_apply": patch.aggregateHashBefore = value
                    case "agg_tiles_hash_after_apply": patch.aggregateHashAfter = value
                    case _ where ContentIdentity.derivedKeys.contains(name): break
                    default: patch.metadataChanges.append((name, value))
                    }
                }
            }
            // Without tilepack's row (martin's patches, tilepack's before it wrote one): what martin's apply sets.
            patch.newAggregateHash = carried.map { $0.isEmpty ? nil : $0 } ?? patch.aggregateHashAfter
            let rows = try connection.prepare("SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles")
            while try rows.step() {
                guard rows.type(0) == .integer, rows.type(1) == .integer, rows.type(2) == .integer,
                    let tile = try? TileCoordinate(zoom: Int(rows.int64(0)), x: Int(rows.int64(1)), row: Int(rows.int64(2)), scheme: .tms)
                else {
                    throw fail(
                        .corrupt(
                            "a tiles row that is no tile (\(rows.text(0) ?? "NULL")/\(rows.text(1) ?? "NULL")/\(rows.text(2) ?? "NULL"))"))
                }
                if rows.type(3) == .null {
                    patch.deletions.append(tile)
                } else {
                    patch.tiles.append(Tile(tile, bytes: Array(rows.bytes(3) ?? UnsafeRawBufferPointer(start: nil, count: 0))))
                }
            }
            patch.deletions.sort()
            patch.tiles.sort { $0.coordinate < $1.coordinate }
            return patch
        } catch let error as TilePatchError {
            throw error
        } catch let error as TileArchiveError {
            throw fail(.archive(error))
        } catch {
            throw fail(.corrupt("\(error)"))
        }
    }
}
