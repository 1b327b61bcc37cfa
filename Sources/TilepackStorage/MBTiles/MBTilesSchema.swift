import Foundation
import TilepackCore

/// How an MBTiles file stores its tiles. Every kind is read through the `tiles` table or view.
package enum MBTilesSchemaKind: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// A real `tiles` table (the MBTiles spec's schema; tippecanoe, GDAL, martin `flat`).
    case flat
    /// martin's `flat-with-hash`: a `tiles_with_hash` table with a `tile_hash` column (upper-case
    /// hex MD5 of `tile_data`) behind a `tiles` view.
    case flatWithHash
    /// Deduplicated: `map` (coordinates and `tile_id`) and `images` (`tile_id`, `tile_data`)
    /// joined by a `tiles` view. mbutil and TileMill call it "compressed"/"dedup", martin calls it
    /// `normalized`; both spell it the same way.
    case normalized
    /// A `tiles` view over tables tilepack does not recognise; read through the view.
    case otherView

    package var description: String {
        switch self {
        case .flat: "flat"
        case .flatWithHash: "flat-with-hash"
        case .normalized: "normalized (map + images)"
        case .otherView: "tiles view of unrecognised tables"
        }
    }
}

/// What schema detection found in an MBTiles file: everything `verify` needs to judge the layout.
package struct MBTilesSchema: Hashable, Sendable {
    package var kind: MBTilesSchemaKind
    /// The table that holds the coordinates: `tiles`, `tiles_with_hash` or `map`.
    package var coordinateTable: String
    /// Whether a UNIQUE index (or primary key) covers exactly (zoom_level, tile_column, tile_row)
    /// of ``coordinateTable``. Without one, duplicates are possible and lookups scan the table.
    package var hasUniqueIndex: Bool
    /// Whether an index of ``coordinateTable`` has the columns zoom_level, tile_column, tile_row
    /// in this order (tilepack's `tile_index`, and most files'): lookups by zoom, then column,
    /// then row are seeks.
    package var hasIndexInCoordinateOrder = false
    /// For the normalized schema: whether a UNIQUE index (or the primary key) covers `images.tile_id`.
    /// Without one an image may be stored twice, and the `tiles` view then gives its tiles twice.
    /// `true` for the other schemas.
    package var hasUniqueImageIndex = true
    /// Whether the `tiles` view can give a tile only once (``hasUniqueIndex`` and
    /// ``hasUniqueImageIndex``): otherwise tiles are counted and read as distinct coordinates.
    package var tilesAreUnique: Bool { hasUniqueIndex && hasUniqueImageIndex }
    /// Whether the `metadata` table exists (with `name` and `value` columns).
    package var hasMetadataTable: Bool
    /// Whether the UTFGrid interaction tables of MBTiles 1.3 (`grids`, `grid_data`, ...) are present.
    package var hasUTFGrid: Bool
    /// Tables and views that are neither MBTiles nor UTFGrid nor SQLite's own nor the prefetch
    /// store's bookkeeping (sorted).
    package var extraTables: [String]
    /// The bookkeeping tables of tilepack's prefetch store (``prefetchBookkeepingTables``)
    /// that the file has (sorted): a store that `tilepack fetch` wrote, still plain MBTiles to readers.
    package var prefetchStoreTables: [String] = []
    /// `PRAGMA application_id` (0x4d504258 "MPBX" for files tilepack writes; 0 for most others).
    package var applicationID: Int32
    /// The SQLite page size in bytes.
    package var pageSize: Int
    /// The names of the file's triggers (sorted). A trigger can rewrite or drop rows as they are
    /// written, so tilepack never appends to a file that has one; `verify` warns about them.
    package var triggers: [String] = []

    /// The MBTiles application id, "MPBX".
    package static let mbtilesApplicationID: Int32 = 0x4d50_4258
    /// The tables TilepackPrefetch's store (`MBTilesTileStore`) adds to an MBTiles file (lower
    /// case, as SQLite compares names): readers tell them apart from foreign tables.
    /// (`tilepack_refresh` and `tilepack_refresh_tiles` exist only while a refresh is staged.)
    package static let prefetchBookkeepingTables: Set<String> = [
        "tilepack_regions", "tilepack_tile_state", "tilepack_refresh", "tilepack_refresh_tiles",
    ]

    /// Detects the schema on an open connection.
    package static func detect(_ connection: SQLiteConnection, path: String) throws(TileArchiveError) -> MBTilesSchema {
        // Reading sqlite_master is also the first read of the file: a damaged header or schema fails here.
        let objects = try SchemaObjects(connection)
        let (kind, coordinateTable) = try tilesKind(objects, connection: connection, path: path)
        // A unique index (or primary key) on exactly the three coordinate columns; and any index
        // whose columns are zoom_level, tile_column, tile_row in this order.
        var indexes = (unique: false, inCoordinateOrder: false)
        if kind != .otherView { indexes = try coordinateIndexes(connection, table: objects.name(coordinateTable)) }
        var hasUniqueImageIndex = true
        if kind == .normalized {
            hasUniqueImageIndex = try Self.hasUniqueKey(connection, table: objects.name("images"), column: "tile_id")
        }
        let others = otherTables(objects, kind: kind)
        var hasMetadata = false
        if objects.types["metadata"] != nil { hasMetadata = try columns("metadata", connection).isSuperset(of: ["name", "value"]) }
        let applicationID = Int32(truncatingIfNeeded: try connection.scalarInt("PRAGMA application_id") ?? 0)
        let pageSize = Int(try connection.scalarInt("PRAGMA page_size") ?? 0)
        return MBTilesSchema(
            kind: kind, coordinateTable: objects.name(coordinateTable), hasUniqueIndex: indexes.unique,
            hasIndexInCoordinateOrder: indexes.inCoordinateOrder, hasUniqueImageIndex: hasUniqueImageIndex,
            hasMetadataTable: hasMetadata, hasUTFGrid: others.hasUTFGrid, extraTables: others.extra,
            prefetchStoreTables: others.prefetchStore, applicationID: applicationID, pageSize: pageSize,
            triggers: objects.triggers.sorted())
    }

    /// The tables, views and triggers of a database, from `sqlite_master`.
    private struct SchemaObjects {
        /// Lower-cased name (SQLite compares names so) -> type (`table` or `view`).
        var types: [String: String] = [:]
        /// Lower-cased name -> the name as the file spells it.
        var originalNames: [String: String] = [:]
        var triggers: [String] = []

        init(_ connection: SQLiteConnection) throws(TileArchiveError) {
            let master = try connection.prepare("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view', 'trigger')")
            while try master.step() {
                guard let type = master.text(0), let name = master.text(1) else { continue }
                if type == "trigger" {
                    triggers.append(name)
                    continue
                }
                types[name.lowercased()] = type
                originalNames[name.lowercased()] = name
            }
        }

        /// The name of `lowercased` as the file spells it.
        func name(_ lowercased: String) -> String { originalNames[lowercased] ?? lowercased }
    }

    private static let tileColumns: Set<String> = ["zoom_level", "tile_column", "tile_row", "tile_data"]
    private static let coordinateColumns = ["zoom_level", "tile_column", "tile_row"]

    /// The columns of `table`, lower-cased.
    private static func columns(_ table: String, _ connection: SQLiteConnection) throws(TileArchiveError) -> Set<String> {
        let info = try connection.prepare("SELECT name FROM pragma_table_info(?1)")
        info.bind(1, text: table)
        var names: Set<String> = []
        while try info.step() { if let n = info.text(0) { names.insert(n.lowercased()) } }
        return names
    }

    /// The kind of schema behind `tiles` (which must exist, with the four columns) and the table
    /// that holds the coordinates (lower case).
    private static func tilesKind(
        _ objects: SchemaObjects, connection: SQLiteConnection, path: String
    ) throws(TileArchiveError) -> (MBTilesSchemaKind, String) {
        guard let tilesType = objects.types["tiles"] else {
            let found =
                objects.types.isEmpty ? "the database has no tables" : "tables: " + objects.types.keys.sorted().joined(separator: ", ")
            throw TileArchiveError(path: path, fault: .missingTable("'tiles' table or view: not an MBTiles file (\(found))"))
        }
        let missing = tileColumns.subtracting(try columns("tiles", connection))
        guard missing.isEmpty else {
            throw TileArchiveError(
                path: path,
                fault: .missingTable(
                    "column\(missing.count > 1 ? "s" : "") \(missing.sorted().joined(separator: ", ")) in 'tiles'"))
        }
        if tilesType == "table" { return (.flat, "tiles") }
        if objects.types["tiles_with_hash"] == "table",
            try columns("tiles_with_hash", connection).isSuperset(of: tileColumns.union(["tile_hash"]))
        {
            return (.flatWithHash, "tiles_with_hash")
        }
        if objects.types["map"] == "table", objects.types["images"] == "table",
            try columns("map", connection).isSuperset(of: coordinateColumns + ["tile_id"]),
            try columns("images", connection).isSuperset(of: ["tile_id", "tile_data"])
        {
            return (.normalized, "map")
        }
        return (.otherView, "tiles")
    }

    /// Whether `table` has a unique index (or primary key) on exactly the three coordinate
    /// columns, and whether it has an index whose columns are zoom_level, tile_column, tile_row
    /// in this order.
    private static func coordinateIndexes(
        _ connection: SQLiteConnection, table: String
    ) throws(TileArchiveError) -> (unique: Bool, inCoordinateOrder: Bool) {
        var result = (unique: false, inCoordinateOrder: false)
        let list = try connection.prepare("SELECT name, \"unique\" FROM pragma_index_list(?1)")
        list.bind(1, text: table)
        var indexes: [(name: String, unique: Bool)] = []
        while try list.step() {
            if let name = list.text(0) { indexes.append((name, list.int64(1) != 0)) }
        }
        for index in indexes {
            let info = try connection.prepare("SELECT name FROM pragma_index_info(?1) ORDER BY seqno")
            info.bind(1, text: index.name)
            var names: [String] = []
            while try info.step() { names.append(info.text(0)?.lowercased() ?? "") }
            if index.unique, Set(names) == Set(coordinateColumns), names.count == 3 { result.unique = true }
            if names.starts(with: coordinateColumns) { result.inCoordinateOrder = true }
        }
        return result
    }

    /// The tables beside the schema's own: UTFGrid's (whether any is there), the prefetch
    /// store's, and any other (as the file spells them); each list sorted.
    private static func otherTables(
        _ objects: SchemaObjects, kind: MBTilesSchemaKind
    ) -> (hasUTFGrid: Bool, extra: [String], prefetchStore: [String]) {
        var known: Set<String> = ["tiles", "metadata"]
        switch kind {
        case .flat, .otherView: break
        case .flatWithHash: known.insert("tiles_with_hash")
        case .normalized: known.formUnion(["map", "images"])
        }
        let utfGrid: Set<String> = ["grids", "grid_data", "grid_key", "grid_utfgrid", "keymap"]
        let hasUTFGrid = !utfGrid.isDisjoint(with: objects.types.keys)
        var extra: [String] = []
        var prefetchStore: [String] = []
        for name in objects.types.keys where !known.contains(name) && !utfGrid.contains(name) && !name.hasPrefix("sqlite_") {
            if Self.prefetchBookkeepingTables.contains(name) {
                prefetchStore.append(name)
            } else {
                extra.append(objects.name(name))
            }
        }
        return (hasUTFGrid, extra.sorted(), prefetchStore.sorted())
    }

    /// Whether a UNIQUE index, or the primary key, of `table` is `column` alone.
    private static func hasUniqueKey(_ connection: SQLiteConnection, table: String, column: String) throws(TileArchiveError) -> Bool {
        let keys = try connection.prepare("SELECT name, type, pk FROM pragma_table_info(?1) WHERE pk > 0")
        keys.bind(1, text: table)
        var primaryKey: [(name: String, type: String)] = []
        while try keys.step() { primaryKey.append((keys.text(0)?.lowercased() ?? "", keys.text(1)?.uppercased() ?? "")) }
        // INTEGER PRIMARY KEY is the rowid (no index is listed for it); other keys have an index below.
        if primaryKey.count == 1, primaryKey[0].name == column, primaryKey[0].type == "INTEGER" { return true }
        let list = try connection.prepare("SELECT name FROM pragma_index_list(?1) WHERE \"unique\" = 1")
        list.bind(1, text: table)
        var indexes: [String] = []
        while try list.step() { if let name = list.text(0) { indexes.append(name) } }
        for index in indexes {
            let info = try connection.prepare("SELECT name FROM pragma_index_info(?1)")
            info.bind(1, text: index)
            var names: [String] = []
            while try info.step() { names.append(info.text(0)?.lowercased() ?? "") }
            if names == [column] { return true }
        }
        return false
    }
}

extension SQLiteStatement {
    /// Binds `tile` as MBTiles keys it, (zoom_level, tile_column, tile_row) with TMS rows, at
    /// parameters 1-3.
    package func bindTile(_ tile: TileCoordinate) {
        bind(1, tile.zoom)
        bind(2, tile.x)
        bind(3, tile.row(in: .tms))
    }
}
