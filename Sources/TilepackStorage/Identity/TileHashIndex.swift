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
    /// Whether the archive's stored bytes are what tilepack's writer makes of its tiles
    /// (Specs/updates.md §7.1: a bundle's every payload as the writer codes it, a PMTiles' equal
    /// contents stored once), so that a patch copies its unchanged payloads without checking
    /// them. A claim, not a proof: the identities still check every tile's content.
    public var canonical: Bool

    public init(archiveLength: UInt64, identity: ContentIdentity, hashes: [UInt64], canonical: Bool = false) {
        self.archiveLength = archiveLength
        self.identity = identity
        self.hashes = hashes
        self.canonical = canonical
    }

    /// The first eight bytes of the file tilepack writes (version 2, with its flags).
    public static let magic = Array("TPINDEX2".utf8)
    /// The first eight bytes of a version 1 index (no flags), which is still read.
    public static let firstVersionMagic = Array("TPINDEX1".utf8)
    /// The bytes before the hashes (version 2; version 1 has no flags: 56).
    public static let headerLength = 64
    /// Bit 0 of the flags: ``canonical``.
    static let canonicalFlag: UInt64 = 1
    /// The length of the index of `tiles` tiles tilepack writes (version 2), the longest a reader takes.
    public static func fileLength(tiles: Int) -> Int { headerLength + 8 * tiles + 4 }
    /// Whether `length` bytes is the length of an index of `tiles` tiles of either version.
    package static func isFileLength(_ length: Int, tiles: Int) -> Bool {
        length == fileLength(tiles: tiles) || length == fileLength(tiles: tiles) - 8
    }
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
    /// its tiles; `canonical` is what the caller knows of its bytes (``canonical``).
    public static func build(_ archive: any TileArchive, archiveLength: UInt64, canonical: Bool = false) throws -> TileHashIndex {
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
        return TileHashIndex(archiveLength: archiveLength, identity: identity, hashes: pairs.map(\.1), canonical: canonical)
    }

    /// The file's bytes (Specs/updates.md §7.1), version 2.
    public func encoded() -> [UInt8] {
        var out = Self.magic
        out.reserveCapacity(Self.headerLength + 8 * hashes.count + 4)
        func put64(_ value: UInt64) { for i in 0..<8 { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) } }
        func put128(_ value: UInt128) { for i in 0..<16 { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt128(i)))) } }
        put64(archiveLength)
        put64(identity.tileCount)
        put128(identity.tiles)
        put128(identity.metadata)
        put64(canonical ? Self.canonicalFlag : 0)
        #if _endian(little)
        hashes.withUnsafeBytes { out.append(contentsOf: $0) }  // already little-endian: one copy
        #else
        for h in hashes { withUnsafeBytes(of: h.littleEndian) { out.append(contentsOf: $0) } }
        #endif
        let crc = out.withUnsafeBytes { CRC32.checksum($0) }
        for i in 0..<4 { out.append(UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i)))) }
        return out
    }

    /// Whether `prefix` (at least eight bytes) starts an index file (of either version).
    public static func isIndex(_ prefix: some Collection<UInt8>) -> Bool {
        prefix.starts(with: magic) || prefix.starts(with: firstVersionMagic)
    }

    /// Reads an index file (version 2, or 1: then not ``canonical``), checking its magic, length
    /// and CRC-32 before anything else; `name` (its path or URL) names it in errors.
    public static func decode(_ bytes: [UInt8], name: String) throws(TileArchiveError) -> TileHashIndex {
        func fail(_ text: String) -> TileArchiveError { TileArchiveError(path: name, fault: .corrupt(text)) }
        guard bytes.count >= 8, isIndex(bytes.prefix(8)) else {
            let start = String(decoding: bytes.prefix(32), as: UTF8.self).replacingOccurrences(of: "\n", with: " ")
            throw TileArchiveError(
                path: name,
                fault: .notAnArchive(detected: "not a tilepack tile index (it starts with \"\(start)\", not TPINDEX2 or TPINDEX1)"))
        }
        let first = bytes.starts(with: firstVersionMagic)
        let headerLength = first ? Self.headerLength - 8 : Self.headerLength
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
        let hashes = bytes.withUnsafeBytes { raw in
            (0..<Int(count)).map { UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: headerLength + 8 * $0, as: UInt64.self)) }
        }
        // Version 2's flags: bits it does not know a reader ignores (Specs/updates.md §7.1).
        let flags = first ? 0 : get64(56)
        return TileHashIndex(
            archiveLength: get64(8), identity: ContentIdentity(tileCount: count, tiles: get128(24), metadata: get128(40)),
            hashes: hashes, canonical: flags & canonicalFlag != 0)
    }

    /// What a build does once its archive file is committed: writes the archive's index beside it
    /// (``sidecarName(of:)``, a new file renamed over an older one) when `writes`, else removes an
    /// index left beside it, which described the archive it replaced. `canonical`: the build's
    /// writer wrote every payload as it codes a tile (``canonical``).
    public static func updateSidecar(of archive: String, writes: Bool, canonical: Bool = false) throws {
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
        try build(opened, archiveLength: UInt64(size), canonical: canonical).write(to: sidecar, overwrite: true)
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

extension TileHashIndex {
    /// Whether `archive`'s stored bytes are what tilepack's writers make of its tiles (``canonical``),
    /// checked from its bytes: a bundle's every payload is what `BundleWriter.prepare` makes of
    /// its tile (one LZ4 compression a payload), a PMTiles holds no two equal contents. False for
    /// any other archive.
    package static func isCanonical(_ archive: any TileArchive) throws -> Bool {
        struct Differs: Error {}
        if let bundle = archive as? BundleArchive {
            let options = BundleWriter.Options()
            do {
                try bundle.forEachPayload(0..<bundle.payloadCount, scratch: BundleArchive.PayloadScratch()) { _, codec, stored, raw in
                    if BundleWriter.prepare(raw, unlessItMakes: stored, codec: codec, options: options) != nil { throw Differs() }
                }
            } catch is Differs {
                return false
            }
            return true
        }
        guard let pmtiles = archive as? PMTilesArchive else { return false }
        // Each content once (by its offset), then those of equal length and hash compared.
        var contents: [(offset: UInt64, length: Int, hash: Int)] = []
        try pmtiles.forEachRun { _, _, offset, length in contents.append((offset, length, 0)) }
        var distinct: [(offset: UInt64, length: Int, hash: Int)] = []
        distinct.reserveCapacity(contents.count)
        contents.sort { ($0.offset, $0.length) < ($1.offset, $1.length) }
        for content in contents where distinct.last.map({ ($0.offset, $0.length) != (content.offset, content.length) }) ?? true {
            distinct.append(content)
        }
        contents = []
        let base = Int(pmtiles.header.tileDataOffset)
        for i in distinct.indices {
            distinct[i].hash = try pmtiles.source.withBytes(offset: base + Int(distinct[i].offset), length: distinct[i].length) { bytes in
                var hasher = Hasher()
                hasher.combine(bytes: bytes)
                return hasher.finalize()
            }
        }
        distinct.sort { ($0.length, $0.hash, $0.offset) < ($1.length, $1.hash, $1.offset) }
        for (a, b) in zip(distinct, distinct.dropFirst()) where a.length == b.length && a.hash == b.hash {
            let first = try pmtiles.source.withBytes(offset: base + Int(a.offset), length: a.length) { Array($0) }
            let same = try pmtiles.source.withBytes(offset: base + Int(b.offset), length: b.length) { bytes in
                first.withUnsafeBytes { memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }
            }
            if same { return false }
        }
        return true
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
