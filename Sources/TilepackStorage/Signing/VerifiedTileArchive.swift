import Foundation
import TilepackCore

/// An archive whose every tile is checked against its publisher's signed root before it is
/// given out (Specs/signing.md): what an app opens a side-loaded pack with.
///
/// Opening checks the sidecar's signed root (the key's signature, the release, the tile count, the
/// metadata against the signed identity) and the stored hashes the root folds from; the rest of
/// the sidecar is read a group of 256 tiles at a time, each group checked against the root on its
/// first use. Each tile is then hashed on its first read and compared with its signed leaf, and
/// remembered as checked (a bit per tile), so a tile is hashed once however often it is read. A
/// tile whose bytes are not the signed ones, a tile the tree does not hold and a signed tile the
/// archive lacks are errors (`TileArchiveError`, `checksumMismatch` or `corrupt`, naming the
/// tile), never bytes.
public final class VerifiedTileArchive: TileArchive, @unchecked Sendable {
    /// The archive read.
    public let base: any TileArchive
    /// The signed root it was checked against.
    public let root: SignedRoot
    /// The key that signed it.
    public let key: VerifierKey
    private let minimumRelease: UInt64
    private let sidecarPath: String
    /// The sidecar, read by parts as tiles are read (a group of 256 tile ids and leaves at a time).
    private let sidecar: Locked<SignedTreeReader>
    private let size: Int
    /// One bit per leaf: checked.
    private let checked: Locked<[UInt64]>

    /// Checks `base`'s sidecar (`PATH.tpsig` beside it, or `sidecarPath`)
    /// with `key`; throws ``SignatureError`` naming the file or key, as `verify --key` does.
    public convenience init(base: any TileArchive, key: VerifierKey, minimumRelease: UInt64 = 0, sidecarPath: String? = nil) throws {
        let path = sidecarPath ?? SignatureSidecar.sidecarName(of: base.path)
        let source: FileByteSource
        do { source = try FileByteSource(path: path, coalescedReadLength: 1) } catch {
            let missing = FileSystem.stat(path) == nil
            throw SignatureError.sidecar(
                path: path, reason: missing ? "missing: the archive is not signed (tilepack sign writes it)" : "\(error.fault)")
        }
        try self.init(base: base, key: key, minimumRelease: minimumRelease, sidecar: source)
    }

    /// Checks `base` against the sidecar read from `sidecar` (a file, or the `.tpsig` of a remote
    /// archive read by range beside it: `tilepack serve --key` of an `http(s)://` or `s3://` archive).
    public init(base: any TileArchive, key: VerifierKey, minimumRelease: UInt64 = 0, sidecar source: any ByteSource) throws {
        let path = source.name
        let reader = try Self.openSidecar(source, key: key, minimumRelease: minimumRelease)
        let root = reader.root
        let count = try base.tileCount()
        guard UInt64(count) == root.treeSize else {
            throw SignatureError.tiles(archive: base.path, problems: [], count: abs(count - Int(root.treeSize)))
        }
        let metadata = ContentIdentity.metadataHash(try base.metadata())
        guard metadata == root.identity.metadata else {
            var actual = root.identity
            actual.metadata = metadata
            throw SignatureError.metadata(archive: base.path, signed: root.identity.description, actual: actual.description)
        }
        self.base = base
        self.root = root
        self.key = key
        self.minimumRelease = minimumRelease
        self.sidecarPath = path
        self.sidecar = Locked(reader)
        self.size = reader.size
        self.checked = Locked([UInt64](repeating: 0, count: (reader.size + 63) / 64))
    }

    /// The same archive, opened again at its path with the same key (a new version renamed over it).
    public func reopened() throws -> VerifiedTileArchive {
        try VerifiedTileArchive(
            base: try openTileArchive(path: base.path), key: key, minimumRelease: minimumRelease, sidecarPath: sidecarPath)
    }

    public var path: String { base.path }
    public var content: TileContent? { base.content }
    public func metadata() throws -> TileMetadata { try base.metadata() }
    public func zoomLevels() throws -> [ZoomLevelSummary] { try base.zoomLevels() }
    public func confirmUnchanged() throws { try base.confirmUnchanged() }

    /// The sidecar's header, signed root (the key's signature, the release) and fences, and the
    /// stored hashes the root is folded from (its top level and right edge), checked; the rest is
    /// read and checked a group at a time as tiles are read. A million tiles: about 40 KB read and
    /// a few hundred hashes at open, where the whole sidecar is 40 MB and its tree 2,000,000 hashes.
    private static func openSidecar(_ source: any ByteSource, key: VerifierKey, minimumRelease: UInt64) throws -> SignedTreeReader {
        let path = source.name
        let reader = try SignedTreeReader(source: source, key: key, minimumRelease: minimumRelease, origin: nil)
        guard try reader.storedRoot() == reader.root.rootHash else {
            throw SignatureError.sidecar(
                path: path, reason: "its stored hashes do not give its signed root (the sidecar was rewritten or damaged)")
        }
        return reader
    }

    /// Whether the signed tree holds the tile.
    public func containsTile(at tile: TileCoordinate) throws -> Bool { try index(of: tile) != nil }

    public func withTileBytes<R>(at tile: TileCoordinate, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        let index = try index(of: tile)
        let result = try base.withTileBytes(at: tile) { bytes in
            try check(tile, bytes, index: index)
            return try body(bytes)
        }
        if result == nil, index != nil { throw fault(tile, "a signed tile the archive lacks") }
        return result
    }

    public func readTile(at tile: TileCoordinate, into buffer: UnsafeMutableRawBufferPointer) throws -> Int? {
        // A checked tile takes the archive's own path (a raw bundle decompresses into the buffer).
        if let index = try index(of: tile), isChecked(index), let count = try base.readTile(at: tile, into: buffer) { return count }
        return try withTileBytes(at: tile) { bytes in
            guard bytes.count <= buffer.count else {
                throw TileArchiveError(path: path, fault: .bufferTooSmall(tile: tile, needed: bytes.count, available: buffer.count))
            }
            if let from = bytes.baseAddress, let to = buffer.baseAddress { to.copyMemory(from: from, byteCount: bytes.count) }
            return bytes.count
        }
    }

    public func forEachTile(_ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws {
        var seen = 0
        try base.forEachTile { tile, bytes in
            try check(tile, bytes, index: try index(of: tile))
            seen += 1
            try body(tile, bytes)
        }
        guard seen == size else { throw fault(nil, "\(size - seen) signed tiles the archive lacks") }
    }

    // MARK: - Checks

    private func index(of tile: TileCoordinate) throws -> Int? {
        let id = PMTilesFormat.tileID(of: tile)
        return try sidecar.withLock { reader throws in try reader.leafIndex(of: id) }
    }

    /// How many tiles were checked so far (each once).
    package var checkedCount: Int { checked.withLock { $0.reduce(0) { $0 + $1.nonzeroBitCount } } }

    private func isChecked(_ index: Int) -> Bool { checked.withLock { $0[index / 64] & (1 << UInt64(index % 64)) != 0 } }

    /// The tile's leaf against the signed one, unless it was checked before.
    private func check(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer, index: Int?) throws {
        guard let index else { throw fault(tile, "not in the signed tree") }
        if isChecked(index) { return }
        let leaf = TreeHasher().leaf(ContentIdentity.TileHasher().fullHash(tile, bytes))
        let signed = try sidecar.withLock { reader throws in try reader.checkedHash(level: 0, index: index) }
        guard let signed else {
            throw TileArchiveError(
                path: sidecarPath,
                fault: .corrupt(
                    "the stored hashes of tile \(tile.zoom)/\(tile.x)/\(tile.y)'s group do not give the signed root (the sidecar was rewritten or damaged)"
                ))
        }
        guard leaf == signed else {
            throw TileArchiveError(
                path: path,
                fault: .checksumMismatch(
                    region: "tile \(tile.zoom)/\(tile.x)/\(tile.y) against release \(root.release) signed by \(key)",
                    declared: SignedRoot.hex(signed), computed: SignedRoot.hex(leaf)))
        }
        checked.withLock { $0[index / 64] |= 1 << UInt64(index % 64) }
    }

    private func fault(_ tile: TileCoordinate?, _ reason: String) -> TileArchiveError {
        let what = tile.map { "tile \($0.zoom)/\($0.x)/\($0.y): " } ?? ""
        return TileArchiveError(path: path, fault: .corrupt("\(what)\(reason) (release \(root.release) signed by \(key))"))
    }
}

extension SignedRoot {
    /// Lower-case hexadecimal.
    static func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}
