internal import TilepackChecksum
import TilepackCore

/// What an archive holds, as three numbers that change when any tile or metadata value does
/// (Specs/updates.md §1): the tile count, the sum modulo 2^128 of every tile's 128-bit hash over
/// its coordinates and bytes, and a 128-bit hash of the metadata.
///
/// The sum does not depend on the order tiles are visited in, so an identity is brought up to date
/// from the changed tiles alone: subtract what a replaced or deleted tile contributed, add what a
/// new one does. Two archives of different formats holding the same tiles and metadata have the
/// same identity.
public struct ContentIdentity: Hashable, Sendable, CustomStringConvertible {
    /// The number of tiles.
    public var tileCount: UInt64
    /// The sum modulo 2^128 of ``tileHash(_:_:)`` over every tile.
    public var tiles: UInt128
    /// ``metadataHash(_:)`` of the metadata.
    public var metadata: UInt128

    public init(tileCount: UInt64 = 0, tiles: UInt128 = 0, metadata: UInt128 = 0) {
        self.tileCount = tileCount
        self.tiles = tiles
        self.metadata = metadata
    }

    /// The metadata key under which an MBTiles file patched in place keeps its identity, so that
    /// the next patch checks its base without reading every tile (`verify` checks it).
    public static let metadataKey = "tilepack_content_identity"

    /// Metadata keys that describe the tiles or the patch rather than the tileset, left out of
    /// ``metadataHash(_:)``: they are derived from the tiles, and a patch sets them.
    public static let derivedKeys: Set<String> = [
        TileMetadata.Key.aggregateTilesHash, TileMetadata.Key.hashAlgorithm, "agg_tiles_hash_before_apply", "agg_tiles_hash_after_apply",
        metadataKey, MBTilesIdentityStamp.key,
    ]

    /// `tpid1:<tile count>:<32 hex digits of tiles>:<32 hex digits of metadata>`.
    public var description: String { "tpid1:\(tileCount):\(Self.hex(tiles)):\(Self.hex(metadata))" }

    /// Parses ``description``; `nil` for anything else.
    public init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "tpid1", parts[2].count == 32, parts[3].count == 32,
            parts[1].allSatisfy(\.isASCII), let count = UInt64(parts[1]),
            let tiles = UInt128(parts[2], radix: 16), let metadata = UInt128(parts[3], radix: 16)
        else { return nil }
        self.init(tileCount: count, tiles: tiles, metadata: metadata)
    }

    /// The tiles' part alone (count and sum), for messages that name what differs.
    public var tilesDescription: String { "\(tileCount) tiles, \(Self.hex(tiles))" }

    /// Adds a tile's contribution.
    public mutating func add(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer) {
        add(tile, bytes, using: TileHasher())
    }

    /// Adds a tile's contribution, hashed by `hasher` (one per thread, reused: what a pass over
    /// every tile uses).
    package mutating func add(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer, using hasher: TileHasher) {
        tiles &+= hasher.hash(tile, bytes)
        tileCount &+= 1
    }

    /// Takes a tile's contribution away (a tile deleted, or the old bytes of a replaced one).
    public mutating func remove(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer) {
        remove(tile, bytes, using: TileHasher())
    }

    /// Takes a tile's contribution away, hashed by `hasher`.
    package mutating func remove(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer, using hasher: TileHasher) {
        tiles &-= hasher.hash(tile, bytes)
        tileCount &-= 1
    }

    /// SHA-256 over the zoom (1 byte), x and XYZ y (4 bytes each, little-endian) and the tile's
    /// bytes; its first 16 bytes read as a little-endian integer.
    public static func tileHash(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer) -> UInt128 {
        TileHasher().hash(tile, bytes)
    }

    /// ``tileHash(_:_:)`` for a pass over many tiles, through ``Digest/sha256(_:_:into:)``: a
    /// libcrypto EVP context per tile (allocated, SHA-256 looked up each time) cost more than
    /// hashing the bytes of a 1 KB tile. It keeps no state (one per thread, as before).
    package final class TileHasher {
        package init() {}

        package func hash(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer) -> UInt128 {
            var digest: (UInt128, UInt128) = (0, 0)
            withUnsafeMutableBytes(of: &digest) { fullHash(tile, bytes, into: $0.baseAddress!) }
            return UInt128(littleEndian: digest.0)
        }

        /// The whole SHA-256 whose first 16 bytes ``hash(_:_:)`` reads: the tile hash `T` a signed
        /// archive's leaf is made of (Specs/signing.md §3).
        package func fullHash(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer) -> [UInt8] {
            [UInt8](unsafeUninitializedCapacity: 32) { buffer, count in
                fullHash(tile, bytes, into: buffer.baseAddress!)
                count = 32
            }
        }

        /// ``fullHash(_:_:)`` into the 32 bytes at `out`: SHA-256's own calls, no context kept
        /// (libcrypto's EVP context per tile cost more than hashing a 1 KB tile's bytes).
        package func fullHash(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer) {
            // z (1 byte), x and y (4 bytes each, little-endian), on the stack.
            var prefix: (UInt64, UInt64) = (0, 0)
            withUnsafeMutableBytes(of: &prefix) { raw in
                raw[0] = UInt8(truncatingIfNeeded: tile.zoom)
                raw.storeBytes(of: UInt32(truncatingIfNeeded: tile.x).littleEndian, toByteOffset: 1, as: UInt32.self)
                raw.storeBytes(of: UInt32(truncatingIfNeeded: tile.y).littleEndian, toByteOffset: 5, as: UInt32.self)
                Digest.sha256(UnsafeRawBufferPointer(rebasing: raw[0..<9]), bytes, into: out)
            }
        }
    }

    /// SHA-256 over the metadata's entries but ``derivedKeys``, in ascending order of their keys'
    /// UTF-8 bytes, each as key length (4 bytes LE), key, value length (4 bytes LE), value; its
    /// first 16 bytes read as a little-endian integer.
    public static func metadataHash(_ metadata: TileMetadata) -> UInt128 {
        let entries = metadata.entries.filter { !derivedKeys.contains($0.key) }
            .map { (Array($0.key.utf8), Array($0.value.utf8)) }
            .sorted { $0.0.lexicographicallyPrecedes($1.0) }
        let digest = Digest(.sha256)
        for (key, value) in entries {
            digest.update(lengthBytes(key.count))
            digest.update(key)
            digest.update(lengthBytes(value.count))
            digest.update(value)
        }
        return littleEndian128(digest.finalize())
    }

    /// The identity of an archive: one pass over its tiles.
    public static func compute(_ archive: any TileArchive) throws -> ContentIdentity {
        var identity = ContentIdentity(metadata: metadataHash(try archive.metadata()))
        let hasher = TileHasher()
        try archive.forEachTile { tile, bytes in identity.add(tile, bytes, using: hasher) }
        return identity
    }

    private static func lengthBytes(_ count: Int) -> [UInt8] {
        let value = UInt32(truncatingIfNeeded: count)
        return (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    package static func littleEndian128(_ bytes: [UInt8]) -> UInt128 {
        var value: UInt128 = 0
        for i in (0..<16).reversed() { value = value << 8 | UInt128(bytes[i]) }
        return value
    }

    static func hex(_ value: UInt128) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 32 - digits.count) + digits
    }
}
