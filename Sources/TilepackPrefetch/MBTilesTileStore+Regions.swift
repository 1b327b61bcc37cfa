import Foundation
import TilepackCore
import TilepackStorage

/// The regions recorded in the store (table `tilepack_regions`): what was asked for, and whether its
/// tiles are kept out of eviction and purges.
extension MBTilesTileStore {
    /// The region recorded under `key`, created (kept, with `request`) when there is none; an
    /// existing one is kept again and its request replaced.
    /// - Parameter commit: `false` leaves the row in the open batch (committed with the first
    ///   tiles: a fetch killed before that has nothing to resume anyway).
    package func region(key: String, request: String, status: String, commit: Bool = true) throws(TileArchiveError) -> TileRegionRecord {
        try withWritableState { state throws(TileArchiveError) in
            try state.beginIfNeeded(path: path)
            let connection = try state.open(path: path)
            let now = Date().timeIntervalSince1970
            let upsert = try connection.prepare(
                """
                INSERT INTO tilepack_regions (key, request, kept, status, created, updated) VALUES (?1, ?2, 1, ?3, ?4, ?4)
                ON CONFLICT (key) DO UPDATE SET request = excluded.request, kept = 1, status = excluded.status, updated = excluded.updated
                """)
            upsert.bind(1, text: key)
            upsert.bind(2, text: request)
            upsert.bind(3, text: status)
            upsert.bind(4, double: now)
            _ = try upsert.step()
            if commit { try state.commit(path: path) }
            guard let record = try Self.regions(connection, filter: "WHERE key = ?1", key: key).first else {
                throw TileArchiveError(path: path, fault: .database(code: 0, message: "the region just written is missing"))
            }
            return record
        }
    }

    /// Every recorded region, by id.
    package func regions() throws(TileArchiveError) -> [TileRegionRecord] {
        try withState { state throws(TileArchiveError) in
            let connection = try state.open(path: path)
            guard try connection.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'tilepack_regions'") ?? 0 > 0 else { return [] }
            return try Self.regions(connection, filter: "", key: nil)
        }
    }

    /// Sets a region's status (and, when given, whether it is kept). Returns false for an unknown id.
    @discardableResult
    /// - Parameter commit: `false` leaves the change in the open batch.
    package func updateRegion(id: Int, status: String? = nil, kept: Bool? = nil, commit: Bool = true) throws(TileArchiveError) -> Bool {
        try withWritableState { state throws(TileArchiveError) in
            try state.beginIfNeeded(path: path)
            let connection = try state.open(path: path)
            let update = try connection.prepare(
                "UPDATE tilepack_regions SET status = coalesce(?2, status), kept = coalesce(?3, kept), updated = ?4 WHERE id = ?1")
            update.bind(1, id)
            Self.bind(update, 2, status)
            if let kept { update.bind(3, kept ? 1 : 0) } else { update.bindNull(3) }
            update.bind(4, double: Date().timeIntervalSince1970)
            _ = try update.step()
            let changed = connection.changes > 0
            if commit { try state.commit(path: path) }
            return changed
        }
    }

    /// Deletes a region's record (its tiles stay until evicted or purged). Returns false for an unknown id.
    @discardableResult
    package func deleteRegion(id: Int) throws(TileArchiveError) -> Bool {
        try withWritableState { state throws(TileArchiveError) in
            try state.beginIfNeeded(path: path)
            let connection = try state.open(path: path)
            let delete = try connection.prepare("DELETE FROM tilepack_regions WHERE id = ?1")
            delete.bind(1, id)
            _ = try delete.step()
            let changed = connection.changes > 0
            try state.commit(path: path)
            return changed
        }
    }

    private static func regions(_ connection: SQLiteConnection, filter: String, key: String?) throws(TileArchiveError) -> [TileRegionRecord]
    {
        let statement = try connection.prepare(
            "SELECT id, key, request, kept, status, created, updated FROM tilepack_regions \(filter) ORDER BY id")
        if let key { statement.bind(1, text: key) }
        var result: [TileRegionRecord] = []
        while try statement.step() {
            result.append(
                TileRegionRecord(
                    id: Int(statement.int64(0)), key: statement.text(1) ?? "", request: statement.text(2) ?? "",
                    kept: statement.int64(3) != 0, status: statement.text(4) ?? "",
                    createdAt: statement.double(5), updatedAt: statement.double(6)))
        }
        return result
    }
}
