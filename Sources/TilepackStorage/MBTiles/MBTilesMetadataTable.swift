import TilepackCore

extension SQLiteConnection {
    /// Replaces every row of `metadata` by `metadata`'s keys and values (inside the caller's transaction).
    package func replaceMetadata(_ metadata: TileMetadata) throws(TileArchiveError) {
        try execute("DELETE FROM metadata")
        let insert = try prepare("INSERT INTO metadata (name, value) VALUES (?1, ?2)")
        for key in metadata.keys {
            insert.bind(1, text: key)
            insert.bind(2, text: metadata[key] ?? "")
            _ = try insert.step()
            insert.reset()
        }
    }
}
