import Foundation
internal import TilepackChecksum
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage
@_spi(TilepackInternal) internal import TilepackCompression

/// The difference between two versions of a tileset (Specs/updates.md §2): the added and changed
/// tiles whole, the deleted tiles, the metadata changes, and what identifies the version it applies
/// to and the version it makes.
///
/// Held in memory: a patch is as large as the change, not as the archive.
public struct TilePatch: Sendable {
    /// Where a patch comes from, by what it carries.
    public enum Origin: String, Sendable, Codable {
        /// tilepack's own patch file, or an MBTiles patch written by `tilepack diff`.
        case tilepack
        /// An MBTiles patch written by martin's `mbtiles diff`: no content identities.
        case martin
    }

    /// A tile the patch adds or replaces.
    public struct Tile: Sendable {
        public var coordinate: TileCoordinate
        public var bytes: [UInt8]
        public init(_ coordinate: TileCoordinate, bytes: [UInt8]) {
            self.coordinate = coordinate
            self.bytes = bytes
        }
    }

    public var origin: Origin = .tilepack
    /// The identity of the archive the patch applies to (`nil`: martin's patches).
    public var before: ContentIdentity?
    /// The identity of the archive it makes.
    public var after: ContentIdentity?
    /// martin's `agg_tiles_hash_before_apply` and `agg_tiles_hash_after_apply`.
    public var aggregateHashBefore: String?
    public var aggregateHashAfter: String?
    /// The `agg_tiles_hash` the new version carries in its metadata (`nil`: none), which a
    /// rewritten result carries exactly, whichever layout the patch came in (Specs/updates.md §2.2,
    /// §3): a tilepack patch file's `aggAfter`; an MBTiles patch's `tilepack_patch` row
    /// `agg_tiles_hash`, or for martin's own patches `agg_tiles_hash_after_apply`, as martin's
    /// apply sets it.
    public var newAggregateHash: String?
    /// What the tiles are (``TileContent``'s description: `png`, `pbf`, `raw rgba8 256x256`);
    /// `nil` when the patch does not say.
    public var content: String?
    /// Metadata keys set (a value) or deleted (`nil`), in ascending key order.
    public var metadataChanges: [(key: String, value: String?)] = []
    /// Tiles deleted, ascending.
    public var deletions: [TileCoordinate] = []
    /// Tiles added or changed, ascending.
    public var tiles: [Tile] = []

    public init() {}

    /// The bytes of the added and changed tiles.
    public var tileBytes: Int { tiles.reduce(0) { $0 + $1.bytes.count } }

    /// Applies the metadata changes to `metadata` (``ContentIdentity/derivedKeys`` are never set
    /// from a patch).
    public func apply(to metadata: inout TileMetadata) {
        for (key, value) in metadataChanges where !ContentIdentity.derivedKeys.contains(key) { metadata[key] = value }
    }

    /// What it takes from `old` to `new` (both metadata as read).
    public static func metadataChanges(from old: TileMetadata, to new: TileMetadata) -> [(key: String, value: String?)] {
        let keys = Set(old.entries.keys).union(new.entries.keys).subtracting(ContentIdentity.derivedKeys).sorted()
        return keys.compactMap { key in old[key] == new[key] ? nil : (key, new[key]) }
    }
}

/// A patch file that cannot be used, naming the file and the fault.
public struct TilePatchError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var fault: Fault

    public init(path: String, fault: Fault) {
        self.path = path
        self.fault = fault
    }

    public enum Fault: Sendable, CustomStringConvertible {
        /// Not a patch tilepack reads (what it looks like).
        case notAPatch(String)
        /// The file ends before what its header declares.
        case truncated(String)
        /// A checksum, length or record that cannot be right.
        case corrupt(String)
        /// martin's binary-diff patch (its `bsdiffraw*` table): tiles as bsdiff deltas of the
        /// base's tiles, which tilepack does not apply.
        case binaryDiff(table: String)
        /// The base is not the version the patch was made from.
        case wrongBase(expected: String, found: String)
        /// The archive is the version the patch makes: the patch was applied already (nothing to do).
        case alreadyApplied(version: String)
        /// The archive's tiles are the patch's `base` or `target` version's, its metadata is not
        /// (`keys`: those known to differ, Specs/updates.md §4 item 2).
        case onlyMetadataDiffers(version: String, keys: [String])
        /// The patch carries tiles of another type than the base's.
        case wrongTileType(patch: String, base: String)
        /// The patched archive is not the version the patch makes: nothing was replaced.
        case resultMismatch(expected: String, found: String)
        /// The archive could not be read or written.
        case archive(TileArchiveError)

        public var description: String {
            switch self {
            case .notAPatch(let what): "not a tile patch: \(what)"
            case .truncated(let what): "truncated patch: \(what)"
            case .corrupt(let what): "corrupt patch: \(what)"
            case .binaryDiff(let table):
                "a martin binary-diff patch (table '\(table)'): its tiles are bsdiff deltas, which tilepack does not apply (make a whole-tile patch with `mbtiles diff` without --patch-type, or with `tilepack diff`)"
            case .wrongBase(let expected, let found):
                "made for another base: it applies to \(expected), this archive is \(found)"
            case .alreadyApplied(let version): "already at the version this patch makes (\(version)): nothing to do"
            case .onlyMetadataDiffers(let version, let keys):
                "the tiles match (the patch's \(version) version's); only the metadata differs (\(keys.isEmpty ? "keys the patch does not change: compare `tilepack meta` of both versions" : "keys " + keys.joined(separator: ", "))): nothing was changed"
            case .wrongTileType(let patch, let base): "its tiles are \(patch), the base's are \(base)"
            case .resultMismatch(let expected, let found):
                "the patched archive would be \(found), not \(expected) as the patch says: nothing was changed"
            case .archive(let error): error.description
            }
        }
    }

    public var description: String { "\(path): \(fault)" }
}

// MARK: - tilepack's patch file

extension TilePatch {
    /// The first eight bytes of a tilepack patch file.
    public static let magic: [UInt8] = Array("TPPATCH1".utf8)
    /// Header lengths past this are refused.
    static let maximumHeaderLength = 1 << 20
    /// Uncompressed bodies past this are refused (4 GiB).
    static let maximumBodyLength: UInt64 = 1 << 32

    struct Header: Codable {
        var before: String
        var after: String
        var aggBefore: String?
        var aggAfter: String?
        var content: String?
        var metadataChanges: Int
        var deletions: Int
        var tiles: Int
        var bodyLength: UInt64
    }

    /// The patch file's bytes (Specs/updates.md §2.2). Needs both identities.
    public func encoded() -> [UInt8] {
        var body: [UInt8] = []
        body.reserveCapacity(tileBytes + tiles.count * 13 + deletions.count * 9 + 4096)
        for (key, value) in metadataChanges {
            Self.put32(&body, key.utf8.count)
            body += key.utf8
            if let value {
                body.append(1)
                Self.put32(&body, value.utf8.count)
                body += value.utf8
            } else {
                body.append(0)
            }
        }
        for tile in deletions { Self.putTile(&body, tile) }
        for tile in tiles {
            Self.putTile(&body, tile.coordinate)
            Self.put32(&body, tile.bytes.count)
            body += tile.bytes
        }
        let header = Header(
            before: before?.description ?? "", after: after?.description ?? "", aggBefore: aggregateHashBefore,
            aggAfter: aggregateHashAfter, content: content, metadataChanges: metadataChanges.count, deletions: deletions.count,
            tiles: tiles.count, bodyLength: UInt64(body.count))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let headerBytes = Array((try? encoder.encode(header)) ?? Data())
        let compressed = Gzip.compress(body, level: 9)
        let stored = compressed.count < body.count ? compressed : body
        var file = Self.magic
        Self.put32(&file, headerBytes.count)
        file += headerBytes
        file.append(stored.count < body.count ? 1 : 0)
        Self.put64(&file, UInt64(stored.count))
        file += stored
        let crc = file.withUnsafeBytes { CRC32.checksum($0) }
        Self.put32(&file, Int(crc))
        return file
    }

    /// Whether `bytes` begin as a tilepack patch file.
    public static func isPatchFile(_ prefix: some Collection<UInt8>) -> Bool { prefix.starts(with: magic) }

    /// Parses a patch file's bytes, checking every length and the CRC-32 before reading a record.
    public static func decode(_ file: [UInt8], path: String) throws(TilePatchError) -> TilePatch {
        func fail(_ fault: TilePatchError.Fault) -> TilePatchError { TilePatchError(path: path, fault: fault) }
        guard file.starts(with: magic) else {
            throw fail(.notAPatch("it does not begin with \"TPPATCH1\""))
        }
        guard file.count >= 12 else { throw fail(.truncated("\(file.count) bytes, shorter than the fixed header")) }
        let headerLength = Int(get32(file, 8))
        guard headerLength <= maximumHeaderLength else {
            throw fail(.corrupt("a header of \(headerLength) bytes, over the limit of \(maximumHeaderLength)"))
        }
        let fixedEnd = 12 + headerLength + 1 + 8
        guard file.count >= fixedEnd + 4 else { throw fail(.truncated("\(file.count) bytes, the header declares more")) }
        let storedLength = get64(file, 12 + headerLength + 1)
        guard storedLength <= UInt64(file.count - fixedEnd - 4) else {
            throw fail(.truncated("the body is declared as \(storedLength) bytes, the file holds \(file.count - fixedEnd - 4)"))
        }
        guard storedLength == UInt64(file.count - fixedEnd - 4) else {
            throw fail(.corrupt("\(file.count - fixedEnd - 4 - Int(storedLength)) bytes after the body"))
        }
        let declaredCRC = get32(file, file.count - 4)
        let computedCRC = file.withUnsafeBytes { CRC32.checksum(UnsafeRawBufferPointer(rebasing: $0[..<(file.count - 4)])) }
        guard declaredCRC == computedCRC else {
            throw fail(.corrupt("CRC-32 \(hex32(declaredCRC)) declared, \(hex32(computedCRC)) computed: the file was damaged"))
        }
        guard let header = try? JSONDecoder().decode(Header.self, from: Data(file[12..<(12 + headerLength)])) else {
            throw fail(.corrupt("its header is not the JSON object Specs/updates.md describes"))
        }
        guard let before = ContentIdentity(header.before), let after = ContentIdentity(header.after) else {
            throw fail(.corrupt("its header's identities are not tpid1 identities"))
        }
        guard header.metadataChanges >= 0, header.deletions >= 0, header.tiles >= 0, header.bodyLength <= maximumBodyLength else {
            throw fail(.corrupt("negative counts or a body over 4 GiB in its header"))
        }
        let codec = file[12 + headerLength]
        let stored = file[fixedEnd..<(file.count - 4)]
        var body: [UInt8]
        switch codec {
        case 0:
            body = Array(stored)
        case 1:
            // Deflate expands at most 1032:1: a declared length past that is a lie, refused before allocating.
            guard header.bodyLength <= UInt64(stored.count) * 1032 + 64 else {
                throw fail(.corrupt("a body of \(header.bodyLength) bytes cannot come from \(stored.count) compressed bytes"))
            }
            switch stored.withUnsafeBytes({ Gzip.decompress($0, limit: Int(header.bodyLength)) }) {
            case .success(let bytes): body = bytes
            case .failure(let failure): throw fail(.corrupt("its body does not decompress: \(failure)"))
            }
        default:
            throw fail(.corrupt("unknown body codec \(codec)"))
        }
        guard UInt64(body.count) == header.bodyLength else {
            throw fail(.corrupt("the body is \(body.count) bytes, the header says \(header.bodyLength)"))
        }
        var patch = TilePatch()
        patch.before = before
        patch.after = after
        patch.aggregateHashBefore = header.aggBefore
        patch.aggregateHashAfter = header.aggAfter
        patch.newAggregateHash = header.aggAfter
        patch.content = header.content
        var reader = BodyReader(bytes: body, path: path)
        for _ in 0..<header.metadataChanges {
            let key = try reader.text()
            let op = try reader.byte()
            switch op {
            case 0: patch.metadataChanges.append((key, nil))
            case 1: patch.metadataChanges.append((key, try reader.text()))
            default: throw fail(.corrupt("metadata record '\(key)' has operation \(op)"))
            }
        }
        for _ in 0..<header.deletions { patch.deletions.append(try reader.tile()) }
        for _ in 0..<header.tiles {
            let tile = try reader.tile()
            let length = try reader.length()
            patch.tiles.append(Tile(tile, bytes: try reader.take(length)))
        }
        guard reader.offset == body.count else { throw fail(.corrupt("\(body.count - reader.offset) bytes after the last record")) }
        return patch
    }

    /// Writes the patch file to `path` (beside, then renamed).
    public func write(to path: String, overwrite: Bool) throws(TileArchiveError) {
        let file = try AtomicFile(destination: path, overwrite: overwrite)
        let bytes = encoded()
        do {
            try Data(bytes).write(to: URL(fileURLWithPath: file.temporaryPath))
        } catch {
            throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "cannot write the patch: \(error.localizedDescription)"))
        }
        try file.commit()
    }

    private struct BodyReader {
        let bytes: [UInt8]
        let path: String
        var offset = 0

        mutating func take(_ count: Int) throws(TilePatchError) -> [UInt8] {
            guard count <= bytes.count - offset else {
                throw TilePatchError(path: path, fault: .corrupt("a record at body offset \(offset) runs past the body's end"))
            }
            defer { offset += count }
            return Array(bytes[offset..<(offset + count)])
        }
        /// The offset of the next `count` bytes, which are skipped (read in place: no array made).
        private mutating func skip(_ count: Int) throws(TilePatchError) -> Int {
            guard count <= bytes.count - offset else {
                throw TilePatchError(path: path, fault: .corrupt("a record at body offset \(offset) runs past the body's end"))
            }
            defer { offset += count }
            return offset
        }
        mutating func byte() throws(TilePatchError) -> UInt8 { bytes[try skip(1)] }
        mutating func length() throws(TilePatchError) -> Int { Int(TilePatch.get32(bytes, try skip(4))) }
        mutating func text() throws(TilePatchError) -> String {
            let at = offset
            guard let text = String(validating: try take(try length()), as: UTF8.self) else {
                throw TilePatchError(path: path, fault: .corrupt("the text at body offset \(at) is not UTF-8"))
            }
            return text
        }
        mutating func tile() throws(TilePatchError) -> TileCoordinate {
            let at = try skip(9)
            guard
                let tile = TileCoordinate(
                    validatingZoom: Int(bytes[at]), x: Int(TilePatch.get32(bytes, at + 1)), y: Int(TilePatch.get32(bytes, at + 5)))
            else {
                throw TilePatchError(path: path, fault: .corrupt("the tile at body offset \(at) is out of range"))
            }
            return tile
        }
    }

    static func put32(_ out: inout [UInt8], _ value: Int) {
        let v = UInt32(truncatingIfNeeded: value)
        for i in 0..<4 { out.append(UInt8(truncatingIfNeeded: v >> (8 * i))) }
    }
    static func put64(_ out: inout [UInt8], _ value: UInt64) {
        for i in 0..<8 { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }
    static func putTile(_ out: inout [UInt8], _ tile: TileCoordinate) {
        out.append(UInt8(tile.zoom))
        put32(&out, tile.x)
        put32(&out, tile.y)
    }
    static func get32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[at + $1]) << (8 * UInt32($1)) }
    }
    static func get64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
    }
    static func hex32(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }
}
