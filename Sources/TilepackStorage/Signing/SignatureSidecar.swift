import Foundation
import TilepackCore

/// The `.tpsig` file beside a signed archive (Specs/signing.md §5): the signed root, then the
/// tree's locator (every leaf's tile id, and every 256th as fences) and every level of its tree.
package struct SignatureSidecar: Sendable {
    /// The signed note's bytes.
    package var note: [UInt8]
    /// The tile id of each leaf, in leaf order.
    package var tileIDs: [UInt64]
    /// Every level of the tree, the leaves first, the root last (32-byte hashes, flat).
    package var storedLevels: [[UInt8]]
    /// The fences as the file stores them (``encoded()`` writes every 256th tile id).
    package var storedFences: [UInt64] = []

    package init(note: [UInt8], tileIDs: [UInt64], storedLevels: [[UInt8]], storedFences: [UInt64]? = nil) {
        self.note = note
        self.tileIDs = tileIDs
        self.storedLevels = storedLevels
        self.storedFences = storedFences ?? stride(from: 0, to: tileIDs.count, by: Self.groupSize).map { tileIDs[$0] }
    }

    package static let magic = Array("TPSIG002".utf8)
    /// The first layout's magic (every 8th level stored), refused by name: re-signing writes this one.
    package static let firstLayoutMagic = Array("TPSIG001".utf8)
    package static let headerLength = 32
    /// Leaves per fence and per hash tile.
    package static let groupSize = 256
    /// The most leaves a tree may have.
    package static let maximumTreeSize = UInt64(UInt32.max)

    /// The name of the sidecar of `archive` (a path or URL).
    package static func sidecarName(of archive: String) -> String { archive + ".tpsig" }

    /// The length of the file of a note of `noteLength` bytes and a tree of `size` leaves.
    package static func fileLength(noteLength: Int, size: Int) -> Int {
        let padded = headerLength + (noteLength + 7) / 8 * 8
        var length = padded + 8 * ((size + groupSize - 1) / groupSize) + 8 * size
        for level in 0..<MerkleTree.levelCount(size: size) { length += 32 * MerkleTree.nodeCount(size: size, level: level) }
        return length
    }

    /// The file's bytes.
    package func encoded() -> [UInt8] {
        let size = tileIDs.count
        var out = Self.magic
        out.reserveCapacity(Self.fileLength(noteLength: note.count, size: size))
        func put32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) } }
        func put64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) } }
        put32(UInt32(note.count))
        put32(0)
        put64(UInt64(size))
        put64(0)
        out += note
        out += [UInt8](repeating: 0, count: (8 - note.count % 8) % 8)
        for fence in fences { put64(fence) }
        #if _endian(little)
        tileIDs.withUnsafeBytes { out.append(contentsOf: $0) }
        #else
        for id in tileIDs { put64(id) }
        #endif
        for level in storedLevels where !level.isEmpty { out += level }
        return out
    }

    /// Writes the sidecar of `note`, `tileIDs` and the tree over `leaves` (32 bytes each, in leaf
    /// order) into the file at `path` (staged, not yet in place), a part at a time: the tree's
    /// `levels` when they were built (`sign`), else each level computed from the one below as it is
    /// written and then let go (a sync holds its leaves and a level of half as many, not the tree).
    /// Returns the root written (the top level's node).
    package static func write(note: [UInt8], tileIDs: [UInt64], leaves: [UInt8], levels: [[UInt8]]? = nil, to path: String) throws
        -> [UInt8]
    {
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw TileArchiveError(
                path: path, fault: .io(errno: errno, reason: "cannot write the signature: \(String(cString: strerror(errno)))"))
        }
        defer { try? handle.close() }
        func put(_ bytes: [UInt8]) throws {
            do { try handle.write(contentsOf: bytes) } catch {
                throw TileArchiveError(
                    path: path, fault: .io(errno: 0, reason: "cannot write the signature: \(error.localizedDescription)"))
            }
        }
        let head = SignatureSidecar(note: note, tileIDs: [], storedLevels: [])
        var header = head.encoded()
        withUnsafeBytes(of: UInt64(tileIDs.count).littleEndian) { header.replaceSubrange(16..<24, with: $0) }
        try put(header)
        var locator: [UInt8] = []
        locator.reserveCapacity(8 * (tileIDs.count + tileIDs.count / groupSize + 1))
        for fence in stride(from: 0, to: tileIDs.count, by: groupSize) {
            withUnsafeBytes(of: tileIDs[fence].littleEndian) { locator += $0 }
        }
        for id in tileIDs { withUnsafeBytes(of: id.littleEndian) { locator += $0 } }
        try put(locator)
        locator = []
        try put(leaves)
        if leaves.isEmpty { return MerkleTree(leaves: []).root }
        if let levels {
            for level in levels.dropFirst() { try put(level) }
            return Array(levels[levels.count - 1].prefix(32))
        }
        guard leaves.count > 32 else { return leaves }
        var level = MerkleTree.parents(of: leaves)
        try put(level)
        while level.count > 32 {
            level = MerkleTree.parents(of: level)
            try put(level)
        }
        return level
    }

    /// Reads a sidecar file, checking its header and length before reading the rest; `path` names it in errors.
    package static func read(path: String) throws(SignatureError) -> SignatureSidecar {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            let reason = errno == ENOENT ? "missing: the archive is not signed (tilepack sign writes it)" : String(cString: strerror(errno))
            throw .sidecar(path: path, reason: reason)
        }
        defer { try? handle.close() }
        let header = [UInt8]((try? handle.read(upToCount: headerLength)) ?? Data())
        let (noteLength, size) = try parseHeader(header, path: path)
        let expected = fileLength(noteLength: noteLength, size: size)
        let actual = Int((try? handle.seekToEnd()) ?? 0)
        guard actual == expected else {
            let what = actual < expected ? "truncated" : "longer than its tree"
            throw .sidecar(path: path, reason: "\(what): \(actual) bytes, the signed root and tree of \(size) leaves need \(expected)")
        }
        try? handle.seek(toOffset: 0)
        let bytes = [UInt8]((try? handle.read(upToCount: expected)) ?? Data())
        guard bytes.count == expected else { throw .sidecar(path: path, reason: "cannot be read whole (it changed while read)") }
        guard bytes[(headerLength + noteLength)..<(headerLength + (noteLength + 7) / 8 * 8)].allSatisfy({ $0 == 0 }) else {
            throw .sidecar(path: path, reason: "the padding after its signed root is not zero bytes (a damaged sidecar)")
        }
        return decode(bytes, noteLength: noteLength, size: size)
    }

    /// Reads a sidecar from `source` (an `http(s)://` or `s3://` object read by range): its header,
    /// then, its length checked against it, the rest in one read.
    package static func read(source: any ByteSource) throws -> SignatureSidecar {
        let path = source.name
        let header = try SignedTreeReader.bytes(source, 0, min(headerLength, source.count))
        let (noteLength, size) = try parseHeader(header, path: path)
        let expected = fileLength(noteLength: noteLength, size: size)
        guard source.count == expected else {
            let what = source.count < expected ? "truncated" : "longer than its tree"
            throw SignatureError.sidecar(
                path: path, reason: "\(what): \(source.count) bytes, the signed root and tree of \(size) leaves need \(expected)")
        }
        let bytes = try SignedTreeReader.bytes(source, 0, expected)
        guard bytes[(headerLength + noteLength)..<(headerLength + (noteLength + 7) / 8 * 8)].allSatisfy({ $0 == 0 }) else {
            throw SignatureError.sidecar(path: path, reason: "the padding after its signed root is not zero bytes (a damaged sidecar)")
        }
        return decode(bytes, noteLength: noteLength, size: size)
    }

    /// The note length and tree size of a header, checked.
    package static func parseHeader(_ header: [UInt8], path: String) throws(SignatureError) -> (Int, Int) {
        guard header.count == headerLength else {
            throw .sidecar(path: path, reason: "truncated: \(header.count) bytes, shorter than the \(headerLength)-byte header")
        }
        if header.starts(with: firstLayoutMagic) {
            throw .sidecar(
                path: path,
                reason:
                    "a sidecar of the first layout (TPSIG001, every 8th level of the tree), which this tilepack no longer reads: re-sign the archive (tilepack sign ARCHIVE --private-key NAME.key --release N) to write the TPSIG002 layout"
            )
        }
        guard header.starts(with: magic) else { throw .sidecar(path: path, reason: "not a tilepack signature sidecar (no TPSIG002 magic)") }
        func u32(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(header[at + $1]) << (8 * UInt32($1)) } }
        func u64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(header[at + $1]) << (8 * UInt64($1)) } }
        let noteLength = Int(u32(8))
        guard (1...SignedRoot.maximumNoteLength).contains(noteLength) else {
            throw .sidecar(path: path, reason: "its signed root is \(noteLength) bytes, not 1 to \(SignedRoot.maximumNoteLength)")
        }
        guard u32(12) == 0, u64(24) == 0 else {
            throw .sidecar(path: path, reason: "flags or reserved bytes this version does not know are set")
        }
        let size = u64(16)
        guard size < maximumTreeSize else { throw .sidecar(path: path, reason: "its tree of \(size) leaves is over the 2^32 limit") }
        return (noteLength, Int(size))
    }

    /// The parts of a file whose length was checked.
    private static func decode(_ bytes: [UInt8], noteLength: Int, size: Int) -> SignatureSidecar {
        var at = headerLength
        let note = Array(bytes[at..<at + noteLength])
        at += (noteLength + 7) / 8 * 8
        func ids(_ count: Int) -> [UInt64] {
            defer { at += 8 * count }
            return bytes.withUnsafeBytes { raw in
                (0..<count).map { UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: at + 8 * $0, as: UInt64.self)) }
            }
        }
        let fences = ids((size + groupSize - 1) / groupSize)
        let tileIDs = ids(size)
        var levels: [[UInt8]] = []
        for level in 0..<MerkleTree.levelCount(size: size) {
            let count = 32 * MerkleTree.nodeCount(size: size, level: level)
            levels.append(Array(bytes[at..<at + count]))
            at += count
        }
        return SignatureSidecar(note: note, tileIDs: tileIDs, storedLevels: levels, storedFences: fences)
    }

    /// The fences the tile ids give (every 256th).
    package var fences: [UInt64] { stride(from: 0, to: tileIDs.count, by: Self.groupSize).map { tileIDs[$0] } }
}
