import TilepackCore

/// The schema a new MBTiles file is written in.
public enum MBTilesWriteSchema: String, Hashable, Sendable, CaseIterable {
    /// One `tiles` table (the MBTiles spec's schema): fastest to write and read.
    case flat
    /// `map` + `images` behind a `tiles` view: identical tiles (ocean, empty land) stored once.
    case deduplicated
}

/// Whether the writer fills `format`, `bounds`, `center`, `minzoom`, `maxzoom` from the tiles.
public enum MetadataDerivation: String, Hashable, Sendable {
    /// Write the metadata as given.
    case none
    /// Fill the keys the caller did not set (the default).
    case fillMissing
    /// Recompute bounds, center, minzoom and maxzoom from the tiles even when set (format is
    /// still only filled when missing).
    case replace
    /// For tiles added to an archive: widen what is set so that it covers the tiles too (bounds
    /// the union of the old bounds and the tiles', minzoom and maxzoom the wider range, center the
    /// middle of the new bounds), fill what is missing.
    case extend
}

public struct MBTilesWriterOptions: Hashable, Sendable {
    /// The schema of a new file (an updated file keeps its own).
    public var schema: MBTilesWriteSchema
    /// Replace an existing destination (new files only).
    public var overwrite: Bool
    public var derivation: MetadataDerivation
    /// Rows per transaction while bulk loading a new file (an update is one transaction).
    public var tilesPerTransaction: Int
    /// The SQLite page size of a new file (default 8192: see Specs/mbtiles.md).
    public var pageSize: Int
    /// Whether `agg_tiles_hash` is computed and stored (Specs/mbtiles.md §5, §7). When off, a new
    /// file carries none (a value given in the metadata is dropped: it would describe other
    /// tiles), and an update recomputes the one the file already carries, if any. The MD5 is one
    /// serial pass over every tile byte: on 100 KB aerial tiles it costs more than reading them.
    public var aggregateTilesHash: Bool
    /// Whether a new file stores its content identity (`tilepack_content_identity`,
    /// Specs/updates.md §1.1), summed from the tiles as they are written, so that its first patch
    /// checks it without reading every tile. Not stored when a tile was written twice or removed
    /// (the sum would count what the file no longer holds). An update never computes one (a patch
    /// sets `MBTilesWriter.contentIdentity`; any other update drops a stored one). Off by
    /// default: a SHA-256 of every tile byte (the commands store it with `--index`).
    public var contentIdentity: Bool

    public init(
        schema: MBTilesWriteSchema = .flat, overwrite: Bool = false, derivation: MetadataDerivation = .fillMissing,
        tilesPerTransaction: Int = 10_000, pageSize: Int = 8192, aggregateTilesHash: Bool = true, contentIdentity: Bool = false
    ) {
        self.schema = schema
        self.overwrite = overwrite
        self.derivation = derivation
        self.tilesPerTransaction = max(1, tilesPerTransaction)
        self.pageSize = pageSize
        self.aggregateTilesHash = aggregateTilesHash
        self.contentIdentity = contentIdentity
    }
}
