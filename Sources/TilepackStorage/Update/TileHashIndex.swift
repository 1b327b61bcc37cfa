import Foundation
internal import TilepackChecksum
import TilepackCore

/// A per-tile hash index (Specs/updates.md §7): for every tile of an archive, in (zoom, x, y)
/// order, a 64-bit hash of its bytes, and the archive's length and content identity it was made
/// from. `tilepack sync` reads it beside a remote archive (`ARCHIVE.tpindex`) to learn which
/// tiles differ from a local copy without downloading them.
public struct TileHashIndex: Sendable, Hashable {
    /// The length in bytes of the archive file the index was made from.
    public var archiveLength: UInt64
    /// The archive's content identity (Specs/updates.md §1).
    public var identity: ContentIdentity
    /// ``hash(_:)`` of each tile's bytes, in (zoom, x, y) order; as many as the identity's tiles.
    public var hashes: [UInt64]

    public init(archiveLength: UInt64, identity: ContentIdentity, hashes: [UInt64]) {
        self.archiveLength = archiveLength
        self.identity = identity
        self.hashes = hashes
    }

    /// The file's first eight bytes.
    public static let magic = Array("TPINDEX1".utf8)
    /// The bytes before the hashes.
    public static let headerLength = 56
    /// The most tiles an index is read for (a 2 GiB index).
    public static let maximumTiles = 1 << 28
    /// The name of the index published beside `archive` (a path or URL).
    public static func sidecarName(of archive: String) -> String { archive + ".tpindex" }

    /// The first 8 bytes of SHA-256 over the tile's bytes (as the archive's read API gives them),
    /// read as a little-endian integer. Coordinates are not hashed: equal bytes anywhere in the
    /// local copy serve a remote tile.
    public static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let digest = Digest.hash(.sha256, bytes)
        var value: UInt64 = 0
        for i in (0..<8).reversed() { value = value << 8 | UInt64(digest[i]) }
        return value
    }

    /// Builds the index of `archive` (whose file is `archiveLength` bytes long) in one pass over
    /// its tiles.
    public static func build(_ archive: any TileArchive, archiveLength: UInt64) throws -> TileHashIndex {
        var identity = ContentIdentity(metadata: ContentIdentity.metadataHash(try archive.metadata()))
        var previous: TileCoordinate?
        var sorted = true
        var pairs: [(TileCoordinate, UInt64)] = []
        try archive.forEachTile { tile, bytes in
            identity.add(tile, bytes)
            let h = hash(bytes)
            if let previous, !(previous < tile) { sorted = false }
            previous = tile
            pairs.append((tile, h))
        }
        if !sorted { pairs.sort { $0.0 < $1.0 } }
        return TileHashIndex(archiveLength: archiveLength, identity: identity, hashes: pairs.map(\.1))
    }

    /// The file's bytes (Specs/updates.md §7.1).
    public func encoded() -> [UInt8] {
        var out = Self.magic
        out.reserveCapacity(Self.headerLength + 8 * hashes.count + 4)
        func put64(_ value: UInt64) { for i in 0..<8 { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) } }
        func put128(_ value: UInt128) { for i in 0..<16 { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt128(i)))) } }
        put64(archiveLength)
        put64(identity.tileCount)
        put128(identity.tiles)
        put128(identity.metadata)
        for h in hashes { put64(h) }
        let crc = out.withUnsafeBytes { CRC32.checksum($0) }
        for i in 0..<4 { out.append(UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i)))) }
        return out
    }

    /// Whether `prefix` (at least eight bytes) starts an index file.
    public static func isIndex(_ prefix: some Collection<UInt8>) -> Bool { prefix.starts(with: magic) }

    /// Reads an index file, checking its magic, length and CRC-32 before anything else; `name`
    /// (its path or URL) names it in errors.
    public static func decode(_ bytes: [UInt8], name: String) throws(TileArchiveError) -> TileHashIndex {
        func fail(_ text: String) -> TileArchiveError { TileArchiveError(path: name, fault: .corrupt(text)) }
        guard bytes.count >= 8, isIndex(bytes.prefix(8)) else {
            let start = String(decoding: bytes.prefix(32), as: UTF8.self).replacingOccurrences(of: "\n", with: " ")
            throw TileArchiveError(
                path: name, fault: .notAnArchive(detected: "not a tilepack tile index (it starts with \"\(start)\", not TPINDEX1)"))
        }
        guard bytes.count >= headerLength + 4 else { throw TileArchiveError(path: name, fault: .truncated("the index ends in its header")) }
        func get64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) } }
        func get128(_ at: Int) -> UInt128 { (0..<16).reduce(0) { $0 | UInt128(bytes[at + $1]) << (8 * UInt128($1)) } }
        let count = get64(16)
        guard count <= UInt64(maximumTiles) else { throw fail("it declares \(count) tiles, over the \(maximumTiles) an index may have") }
        let expected = headerLength + 8 * Int(count) + 4
        guard bytes.count == expected else {
            if bytes.count < expected {
                throw TileArchiveError(
                    path: name, fault: .truncated("the index of \(count) tiles needs \(expected) bytes, it has \(bytes.count)"))
            }
            throw fail("\(bytes.count - expected) bytes follow the index of \(count) tiles")
        }
        let stored = (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[expected - 4 + $1]) << (8 * UInt32($1)) }
        let crc = bytes.withUnsafeBytes { CRC32.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<(expected - 4)])) }
        guard crc == stored else {
            throw fail("its CRC-32 is \(String(format: "%08x", crc)), the file says \(String(format: "%08x", stored)) (a damaged index)")
        }
        var hashes = [UInt64](repeating: 0, count: Int(count))
        for i in 0..<Int(count) { hashes[i] = get64(headerLength + 8 * i) }
        return TileHashIndex(
            archiveLength: get64(8), identity: ContentIdentity(tileCount: count, tiles: get128(24), metadata: get128(40)),
            hashes: hashes)
    }

    /// What a build does once its archive file is committed: writes the archive's index beside it
    /// (``sidecarName(of:)``, a new file renamed over an older one) when `writes`, else removes an
    /// index left beside it, which described the archive it replaced.
    public static func updateSidecar(of archive: String, writes: Bool) throws {
        let sidecar = sidecarName(of: archive)
        guard writes else {
            if FileSystem.stat(sidecar) != nil { _ = FileSystem.unlink(sidecar) }
            return
        }
        let opened = try openTileArchive(path: archive, bundleAccess: .positionalReads)
        let count = try opened.tileCount()
        guard count <= maximumTiles, let size = FileSystem.stat(archive)?.st_size else {
            throw TileArchiveError(
                path: archive,
                fault: .io(errno: EFBIG, reason: "\(count) tiles: an index holds at most \(maximumTiles) (such an archive is synced whole)")
            )
        }
        try build(opened, archiveLength: UInt64(size)).write(to: sidecar, overwrite: true)
    }

    /// Writes the index to `path`, beside it and renamed into place.
    public func write(to path: String, overwrite: Bool) throws(TileArchiveError) {
        let file = try AtomicFile(destination: path, overwrite: overwrite)
        do {
            try Data(encoded()).write(to: URL(fileURLWithPath: file.temporaryPath))
        } catch {
            throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "cannot write the index: \(error.localizedDescription)"))
        }
        try file.commit()
    }
}

/// Every tile's coordinates in (zoom, x, y) order, from the directories alone where the format
/// allows it (a bundle's index, PMTiles' directories), else from a pass over the tiles.
package func forEachTileCoordinate(of archive: any TileArchive, _ body: (TileCoordinate) throws -> Void) throws {
    if let bundle = archive as? BundleArchive {
        try bundle.forEachTileCoordinate(body)
    } else if let pmtiles = archive as? PMTilesArchive {
        try pmtiles.forEachTileCoordinate(body)
    } else {
        try archive.forEachTile { tile, _ in try body(tile) }
    }
}
