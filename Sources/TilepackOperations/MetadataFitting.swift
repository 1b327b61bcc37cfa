import TilepackCore
import TilepackStorage

extension MetadataMapping {
    /// `metadata` as an archive of `kind` can hold it, and a note for every value changed or
    /// dropped: only MBTiles constrains values; a bundle and PMTiles hold any key and any text.
    package static func fitted(_ metadata: TileMetadata, for kind: ArchiveKind) -> (metadata: TileMetadata, notes: [String]) {
        kind == .mbtiles ? fittedToMBTiles(metadata) : (metadata, [])
    }
}
