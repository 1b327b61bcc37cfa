import TilepackCore

/// How much metadata tilepack reads and writes, in every format: readers stop with an error past
/// these limits (so a hostile file cannot make them allocate without bound) and writers refuse
/// to write what the readers would refuse.
package enum MetadataLimits {
    /// The most bytes, counted as the bundle's metadata block encodes them: 4, plus for each entry
    /// 8 and the UTF-8 bytes of its key and value. 16 MiB.
    package static let maximumBytes = 1 << 24
    /// The most entries (keys). MBTiles defines about twenty; 65,536 leaves room for any tool's own.
    package static let maximumEntries = 65_536

    /// The encoded size of one entry.
    static func entryBytes(keyCount: Int, valueCount: Int) -> Int { 8 + keyCount + valueCount }

    /// Why `metadata` is over the limits, or `nil` when it is within them.
    package static func violation(_ metadata: TileMetadata) -> String? {
        let entries = metadata.entries
        if entries.count > maximumEntries {
            return "\(entries.count) metadata entries, over the limit of \(maximumEntries)"
        }
        let bytes = entries.reduce(4) { $0 + entryBytes(keyCount: $1.key.utf8.count, valueCount: $1.value.utf8.count) }
        if bytes > maximumBytes {
            return "the metadata takes \(bytes) bytes, over the limit of \(maximumBytes) bytes (16 MiB)"
        }
        return nil
    }
}
