import Foundation
import TilepackCore
@_spi(TilepackInternal) internal import TilepackCompression

/// How `tilepack meta set` and `meta delete` changed a file.
public enum MetadataEditMethod: String, Sendable, Codable {
    /// MBTiles: one SQLite transaction on the `metadata` table.
    case transaction
    /// PMTiles: the new metadata fitted the room the file has; it was written there through a copy
    /// past the end of the file, so that a crash at any point leaves a whole file.
    case inPlace
    /// Bundle, PMTiles: the file written again beside itself with the new metadata, the
    /// directories or index and the tile data copied byte for byte, and renamed over the old one.
    case rewrite
}

/// Changes the metadata of an archive file in place (`tilepack meta set`, `meta delete`): the
/// keys in `set` take their values, the keys in `delete` go; nothing else in the file changes, so
/// tile bytes, `agg_tiles_hash`, the index and its CRC stay what they were (an MBTiles file's
/// stored content identity gets the new metadata's hash). Values are not checked
/// here (the caller validates them); the limits every reader holds to are.
package enum ArchiveMetadataEditor {
    package static func edit(path: String, set: [String: String], delete: [String]) throws(TileArchiveError) -> MetadataEditMethod {
        let archive = try openTileArchive(path: path, bundleAccess: .positionalReads)
        switch archive {
        case is MBTilesArchive:
            try editMBTiles(path: path, set: set, delete: delete)
            return .transaction
        case let bundle as BundleArchive:
            var metadata = (try? bundle.metadata()) ?? TileMetadata()
            apply(&metadata, set: set, delete: delete)
            try checkLimits(metadata, path: path)
            return try rewriteBundle(path: path, metadata: BundleMetadataCoding.encode(metadata))
        case let pmtiles as PMTilesArchive:
            return try editPMTiles(pmtiles, set: set, delete: delete)
        default:
            throw TileArchiveError(path: path, fault: .notAnArchive(detected: "not a local MBTiles, bundle or PMTiles file"))
        }
    }

    private static func apply(_ metadata: inout TileMetadata, set: [String: String], delete: [String]) {
        for key in delete { metadata[key] = nil }
        for (key, value) in set { metadata[key] = value }
    }

    private static func checkLimits(_ metadata: TileMetadata, path: String) throws(TileArchiveError) {
        if let violation = MetadataLimits.violation(metadata) { throw TileArchiveError(path: path, fault: .invalidMetadata(violation)) }
    }

    // MARK: MBTiles

    private static func editMBTiles(path: String, set: [String: String], delete: [String]) throws(TileArchiveError) {
        try MBTilesFileCheck.refuseForeignJournal(path: path)
        let connection = try SQLiteConnection(filename: path, archivePath: path, readOnly: false, uri: false, create: false)
        try connection.execute("PRAGMA busy_timeout = 5000")
        try connection.inTransaction(.immediate) { () throws(TileArchiveError) in
            let counter = connection.fileChangeCounter()
            var metadata = TileMetadata(try MBTilesArchive.readMetadataRows(connection, path: path, strict: false))
            apply(&metadata, set: set, delete: delete)
            var set = set
            var delete = delete
            // A stored identity's tiles part still holds (no tile changes); its metadata part is
            // taken again, or one that does not parse is dropped.
            if let stored = metadata[ContentIdentity.metadataKey] {
                if var identity = ContentIdentity(stored) {
                    identity.metadata = ContentIdentity.metadataHash(metadata)
                    set[ContentIdentity.metadataKey] = identity.description
                    set[MBTilesIdentityStamp.key] = MBTilesIdentityStamp.stamp(counterAtBegin: counter)
                } else {
                    delete.append(ContentIdentity.metadataKey)
                }
                if set[MBTilesIdentityStamp.key] == nil { delete.append(MBTilesIdentityStamp.key) }
            }
            try checkLimits(metadata, path: path)
            let remove = try connection.prepare("DELETE FROM metadata WHERE name = ?1")
            for key in Set(delete).union(set.keys) {
                remove.bind(1, text: key)
                _ = try remove.step()
                remove.reset()
            }
            try connection.insertNameValues(into: "metadata", set.sorted(by: { $0.key < $1.key }).map { (name: $0.key, value: $0.value as String?) })
        }
    }

    // MARK: Bundle

    /// Always written again beside the file and renamed over it (see below): the metadata lies
    /// between the header and the index, whatever its length.
    private static func rewriteBundle(path: String, metadata block: [UInt8]) throws(TileArchiveError) -> MetadataEditMethod {
        let file = try ReadWriteFile(path: path, writable: true)
        let header = BundleHeader(decoding: try file.read(offset: 0, length: BundleFormat.headerLength).withUnsafeBytes { $0 })
        let newIndexOffset = UInt64(BundleFormat.aligned(BundleFormat.headerLength + block.count))
        let metadataCRC = block.withUnsafeBytes { BundleFormat.crc32($0) }
        // Always written again beside the file and renamed: the metadata sits between the header
        // and the index, so a write over it could not be made whole by one write of the header
        // (a crash between the two would leave a block that fails its CRC).
        let shift = Int64(newIndexOffset) - Int64(header.indexOffset)
        var moved = header
        moved.metadataLength = UInt64(block.count)
        moved.metadataCRC = metadataCRC
        moved.indexOffset = newIndexOffset
        moved.dataOffset = UInt64(Int64(header.dataOffset) + shift)
        moved.fileLength = UInt64(Int64(header.fileLength) + shift)
        try rewrite(path: path, from: file) { out throws(TileArchiveError) in
            try out.write(moved.encoded())
            try out.write(block)
            try out.write([UInt8](repeating: 0, count: Int(newIndexOffset) - BundleFormat.headerLength - block.count))
            // Index, its padding and the data, byte for byte (data offsets are from dataOffset).
            try file.copy(offset: Int(header.indexOffset), length: Int(header.fileLength - header.indexOffset), to: out)
        }
        return .rewrite
    }

    // MARK: PMTiles

    private static func editPMTiles(_ archive: PMTilesArchive, set: [String: String], delete: [String]) throws(TileArchiveError)
        -> MetadataEditMethod
    {
        let path = archive.path
        let header = archive.header
        let compression = header.internalCompression
        guard compression == .gzip || compression == .none else {
            throw TileArchiveError(path: path, fault: .unsupportedVersion("metadata compressed with \(compression)"))
        }
        let file = try ReadWriteFile(path: path, writable: true)
        // The JSON as stored (not completed from the header, as reading does), edited as it is.
        let json = try storedPMTilesMetadata(file, header: header)
        var metadata: TileMetadata
        switch PMTilesMetadata.decode(json) {
        case .success(let value): metadata = value
        case .failure(let fault): throw TileArchiveError(path: path, fault: .corrupt("metadata: \(fault.reason)"))
        }
        apply(&metadata, set: set, delete: delete)
        try checkLimits(metadata, path: path)
        let encoded = editedPMTilesJSON(json, metadata: metadata, set: set, delete: delete)
        let block = compression == .gzip ? Gzip.compress(encoded) : encoded
        guard block.count <= PMTilesFormat.maximumMetadataLength else {
            throw TileArchiveError(
                path: path, fault: .invalidMetadata("the metadata is over the limit of \(PMTilesFormat.maximumMetadataLength) bytes"))
        }
        if UInt64(block.count) <= header.metadataLength {
            try writePMTilesMetadataInPlace(block, header: header, file: file)
            return .inPlace
        }
        try rewritePMTiles(file, header: header, metadata: block)
        return .rewrite
    }

    /// The metadata JSON as the file stores it, decompressed (`{}` when there is none).
    private static func storedPMTilesMetadata(_ file: ReadWriteFile, header: PMTilesHeader) throws(TileArchiveError) -> [UInt8] {
        guard header.metadataLength > 0 else { return Array("{}".utf8) }
        let raw = try file.read(offset: Int(header.metadataOffset), length: Int(header.metadataLength))
        return try raw.withUnsafeBytes { bytes in
            Result { () throws(TileArchiveError) in
                try PMTilesArchive.decompress(
                    bytes, compression: header.internalCompression, limit: PMTilesFormat.maximumMetadataLength, what: "metadata",
                    name: file.path)
            }
        }.get()
    }

    /// The edited metadata's JSON: `json` with the members set or deleted, so that members of
    /// other types (numbers, arrays) that were not edited keep their JSON type; encoded from
    /// `metadata` when a structural key is edited or `json` is not an object.
    private static func editedPMTilesJSON(
        _ json: [UInt8], metadata: TileMetadata, set: [String: String], delete: [String]
    ) -> [UInt8] {
        var encoded = PMTilesMetadata.encode(metadata)
        let structural = [TileMetadata.Key.json] + PMTilesMetadata.liftedKeys
        if var object = (try? JSONSerialization.jsonObject(with: Data(json))) as? [String: Any],
            !set.keys.contains(where: structural.contains), !delete.contains(where: structural.contains)
        {
            for key in delete { object[key] = nil }
            for (key, value) in set { object[key] = value }
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) {
                encoded = Array(data)
            }
        }
        return encoded
    }

    /// Writes `block` into the room the old metadata had, so that a crash at any point leaves a
    /// whole file (the header, 127 bytes at offset 0, is the one place that commits): the new
    /// block first goes past the end of the file and the header points at it; then it is written
    /// into the old room, the header points there, and the copy is cut off. Every step is synced
    /// before the next; the result is what one write into the room gives.
    private static func writePMTilesMetadataInPlace(_ block: [UInt8], header: PMTilesHeader, file: ReadWriteFile) throws(TileArchiveError) {
        let end = try file.length()
        try file.write(block, offset: end)
        try file.sync()
        var staged = header
        staged.metadataOffset = UInt64(end)
        staged.metadataLength = UInt64(block.count)
        try file.write(staged.encoded(), offset: 0)
        try file.sync()
        try file.write(block, offset: Int(header.metadataOffset))
        try file.sync()
        var written = header
        written.metadataLength = UInt64(block.count)
        try file.write(written.encoded(), offset: 0)
        try file.sync()
        try file.truncate(to: end)
        try file.sync()
    }

    /// Writes the file again: the header, then every section in the order the file has them, the
    /// metadata replaced by `block`; directories and tile data copied byte for byte (their entries
    /// are offsets within their own sections).
    private static func rewritePMTiles(_ file: ReadWriteFile, header: PMTilesHeader, metadata block: [UInt8]) throws(TileArchiveError) {
        var sections: [(offset: UInt64, length: UInt64, kind: Int)] = [
            (header.rootOffset, header.rootLength, 0), (header.metadataOffset, header.metadataLength, 1),
            (header.leafOffset, header.leafLength, 2), (header.tileDataOffset, header.tileDataLength, 3),
        ]
        sections.sort { $0.offset < $1.offset }
        var moved = header
        var position = UInt64(PMTilesFormat.headerLength)
        for section in sections {
            let length = section.kind == 1 ? UInt64(block.count) : section.length
            switch section.kind {
            case 0: moved.rootOffset = position
            case 1:
                moved.metadataOffset = position
                moved.metadataLength = length
            case 2: moved.leafOffset = position
            default: moved.tileDataOffset = position
            }
            position += length
        }
        try rewrite(path: file.path, from: file) { out throws(TileArchiveError) in
            try out.write(moved.encoded())
            for section in sections {
                if section.kind == 1 {
                    try out.write(block)
                } else {
                    try file.copy(offset: Int(section.offset), length: Int(section.length), to: out)
                }
            }
        }
    }

    // MARK: Writing again

    /// Writes the new file beside `path` with `body`, and renames it over `path`.
    private static func rewrite(path: String, from source: ReadWriteFile, _ body: (BufferedOutput) throws(TileArchiveError) -> Void)
        throws(TileArchiveError)
    {
        let file = try AtomicFile(destination: path, overwrite: true)
        do throws(TileArchiveError) {
            let fd = FileSystem.open(file.temporaryPath, O_WRONLY | O_TRUNC | O_CLOEXEC)
            guard fd >= 0 else {
                let code = errno
                throw TileArchiveError(
                    path: path, fault: .io(errno: code, reason: "open \(file.temporaryPath): \(String(cString: strerror(code)))"))
            }
            defer { close(fd) }
            let out = BufferedOutput(fd: fd, path: path)
            try body(out)
            try out.flush()
            try file.commit()
        } catch {
            file.discard()
            throw error
        }
    }
}

/// A file opened for positional reads and writes, closed with the value.
final class ReadWriteFile {
    let path: String
    private let fd: Int32

    init(path: String, writable: Bool) throws(TileArchiveError) {
        self.path = path
        fd = FileSystem.open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC)
        guard fd >= 0 else { throw Self.error(path, "open") }
    }

    deinit { close(fd) }

    private static func error(_ path: String, _ what: String) -> TileArchiveError {
        let code = errno
        return TileArchiveError(path: path, fault: .io(errno: code, reason: "\(what): \(String(cString: strerror(code)))"))
    }

    func read(offset: Int, length: Int) throws(TileArchiveError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: length)
        var done = 0
        while done < length {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, length - done, off_t(offset + done)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                if n == 0 {
                    throw TileArchiveError(path: path, fault: .corrupt("the file ends at \(offset + done), before \(offset + length)"))
                }
                throw Self.error(path, "read")
            }
            done += n
        }
        return bytes
    }

    func write(_ bytes: [UInt8], offset: Int) throws(TileArchiveError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, bytes.count - done, off_t(offset + done)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw Self.error(path, "write") }
            done += n
        }
    }

    func sync() throws(TileArchiveError) {
        guard fsync(fd) == 0 else { throw Self.error(path, "fsync") }
    }

    /// The file's length now.
    func length() throws(TileArchiveError) -> Int {
        let end = lseek(fd, 0, SEEK_END)
        guard end >= 0 else { throw Self.error(path, "seek") }
        return Int(end)
    }

    /// Cuts the file to `length` bytes.
    func truncate(to length: Int) throws(TileArchiveError) {
        guard ftruncate(fd, off_t(length)) == 0 else { throw Self.error(path, "truncate") }
    }

    /// Copies `length` bytes from `offset` into `out`, a megabyte at a time.
    func copy(offset: Int, length: Int, to out: BufferedOutput) throws(TileArchiveError) {
        var done = 0
        while done < length {
            let chunk = try read(offset: offset + done, length: min(1 << 20, length - done))
            try out.write(chunk)
            done += chunk.count
        }
    }
}
