import Foundation
import TilepackCore

/// Checks a file's first bytes before SQLite sees it, so that the common wrong inputs get a
/// precise error: a missing file, an empty file, a PMTiles archive, some other file, an SQLite
/// file shorter than its header declares (truncated).
package enum MBTilesFileCheck {
    /// What the first 100 bytes and the size say.
    package struct Header {
        var fileSize: Int
        var pageSize: Int
        /// Bytes 18/19 = 2: the database is in WAL mode.
        var isWAL: Bool
    }

    /// Refuses a write to `path` (an append, a store resumed) while a `<file>-journal` that is not
    /// SQLite's lies beside it (see ``MBTilesRecovery/foreignJournal(path:)``): a read-write
    /// connection would take it for a live journal and roll the file back by it or delete it. The
    /// file and the journal are left as they are.
    package static func refuseForeignJournal(path: String) throws(TileArchiveError) {
        guard MBTilesRecovery.foreignJournal(path: path) != nil else { return }
        let journal = FileSystem.split(path + "-journal").name
        throw TileArchiveError(
            path: path,
            fault: .refusesWrites(
                "\(path)-journal is beside it but is not a SQLite rollback journal (it has no journal header), and a write would let SQLite take it for a live one "
                    + "(roll the file back by it, or delete it). Nothing was changed: move \(journal) away if it is not SQLite's (another program's file), then run again"
            ))
    }

    package static func check(path: String) throws(TileArchiveError) -> Header {
        let (fd, info) = try RegularFile.openForReading(path)
        defer { close(fd) }
        let fileSize = Int(info.st_size)
        var header = [UInt8](repeating: 0, count: 100)
        let count = header.withUnsafeMutableBytes { buffer in
            var filled = 0
            while filled < buffer.count {
                let n = read(fd, buffer.baseAddress! + filled, buffer.count - filled)
                if n < 0 {
                    if errno == EINTR { continue }
                    return -1
                }
                if n == 0 { break }
                filled += n
            }
            return filled
        }
        guard count >= 0 else {
            let code = errno
            throw TileArchiveError(path: path, fault: .io(errno: code, reason: "read: \(String(cString: strerror(code)))"))
        }
        let bytes = header.prefix(count)
        if count == 0 {
            throw TileArchiveError(path: path, fault: .notAnArchive(detected: "an empty file (0 bytes), not an MBTiles (SQLite) database"))
        }
        if bytes.starts(with: Array("PMTiles".utf8)) {
            let version = count > 7 ? header[7] : 0
            let shown = version == 0x33 ? "3 (written as ASCII '3')" : String(version)
            throw TileArchiveError(
                path: path,
                fault: .notAnArchive(
                    detected: "a PMTiles archive (spec version \(shown)), not MBTiles; tilepack reads MBTiles and .tilepack bundles"))
        }
        let magic = Array("SQLite format 3".utf8) + [0]
        if count < magic.count || !bytes.starts(with: magic) {
            if magic.starts(with: bytes) {
                throw TileArchiveError(
                    path: path, fault: .truncated("the file is \(fileSize) bytes, shorter than an SQLite header (100 bytes)"))
            }
            throw TileArchiveError(path: path, fault: .notAnArchive(detected: "not an SQLite database (\(describe(bytes)))"))
        }
        guard count == 100 else {
            throw TileArchiveError(
                path: path, fault: .truncated("the file is \(fileSize) bytes, shorter than an SQLite header (100 bytes)"))
        }
        func be16(_ i: Int) -> Int { Int(header[i]) << 8 | Int(header[i + 1]) }
        func be32(_ i: Int) -> Int { be16(i) << 16 | be16(i + 2) }
        let rawPageSize = be16(16)
        let pageSize = rawPageSize == 1 ? 65536 : rawPageSize
        guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else {
            throw TileArchiveError(
                path: path,
                fault: .corrupt("the SQLite header declares a page size of \(rawPageSize) bytes (must be a power of two from 512 to 65536)")
            )
        }
        // The in-header page count is valid only when "version-valid-for" equals the change counter.
        let pageCount = be32(28)
        if pageCount > 0, be32(24) == be32(92) {
            let declared = pageCount * pageSize
            if fileSize < declared {
                throw TileArchiveError(
                    path: path,
                    fault: .truncated(
                        "the SQLite header declares \(pageCount) pages of \(pageSize) bytes (\(declared) bytes) but the file has \(fileSize) bytes"
                    ))
            }
        }
        if fileSize % pageSize != 0 {
            throw TileArchiveError(
                path: path,
                fault: .truncated(
                    "the file is \(fileSize) bytes, not a whole number of \(pageSize)-byte SQLite pages"))
        }
        return Header(fileSize: fileSize, pageSize: pageSize, isWAL: header[18] == 2 || header[19] == 2)
    }

    /// A short description of bytes that are not a known archive.
    private static func describe(_ bytes: ArraySlice<UInt8>) -> String {
        let prefix = Array(bytes.prefix(16))
        if let text = String(validating: prefix, as: UTF8.self),
            text.unicodeScalars.allSatisfy({ $0.value >= 0x20 || $0 == "\n" || $0 == "\r" || $0 == "\t" })
        {
            let shown = text.replacingOccurrences(of: "\n", with: " ").trimmingCharacters(in: .whitespaces)
            return "starts with text \"\(shown)\""
        }
        return "starts with bytes " + prefix.prefix(8).map { String(format: "%02x", $0) }.joined(separator: " ")
    }

    /// A `file:` URI for `path` (percent-encoded) with query parameters, for `SQLITE_OPEN_URI`.
    static func uri(path: String, parameters: [String]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~/")
        var encoded = ""
        for byte in PathBytes.bytes(of: path) {
            let scalar = Unicode.Scalar(byte)
            if byte < 0x80, allowed.contains(scalar) {
                encoded.append(Character(scalar))
            } else {
                encoded += String(format: "%%%02X", byte)
            }
        }
        // An absolute path becomes file:///path; a relative one must not start with "//".
        let prefix = path.hasPrefix("/") ? "file://" : "file:"
        if !path.hasPrefix("/"), encoded.hasPrefix("/") { encoded = "./" + encoded }
        return prefix + encoded + (parameters.isEmpty ? "" : "?" + parameters.joined(separator: "&"))
    }
}
