import TilepackCore

extension SQLiteConnection {
    /// Replaces every row of `metadata` by `metadata`'s keys and values (inside the caller's transaction).
    package func replaceMetadata(_ metadata: TileMetadata) throws(TileArchiveError) {
        try execute("DELETE FROM metadata")
        try insertNameValues(into: "metadata", metadata.keys.map { ($0, metadata[$0] ?? "") })
    }
}
