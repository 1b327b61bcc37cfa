import TilepackCore
import TilepackStorage

extension MetadataMapping {
    /// `metadata` as an archive of `format` can hold it, and a note for every value changed or
    /// dropped: only MBTiles constrains values; a bundle and PMTiles hold any key and any text.
    package static func fitted(_ metadata: TileMetadata, for format: TileArchiveFormat) -> (metadata: TileMetadata, notes: [String]) {
        format == .mbtiles ? fittedToMBTiles(metadata) : (metadata, [])
    }
}
