import Foundation
import TilepackCore
import TilepackStorage

/// `import --report FILE`: what the import skipped, as JSON lines, written whatever happens.
///
/// The file is prepared (a temporary file beside it is created) before the import starts, so an
/// unwritable report path stops the import before anything is written; it is then written when
/// the import ends, also when the import fails. Each line is one JSON object:
/// `{"path": ..., "reason": ...}` per skipped file (a name with newlines cannot forge a line: JSON
/// escapes them; a path that is not UTF-8 also carries its exact bytes as `"path_base64"`), and a
/// last line `{"summary": {"imported": N, "skipped": N, "filtered": N, "destination": ...,
/// "error": ... or null}}`.
package final class ImportReportFile {
    package let path: String
    private let file: AtomicFile

    /// Checks that the report can be written at `path` (creating its temporary file).
    /// - Throws: ``OperationError`` naming the report path and why it cannot be written.
    package init(path: String) throws(OperationError) {
        self.path = path
        if let info = FileSystem.stat(path), (info.st_mode & S_IFMT) != S_IFREG {
            throw OperationError(
                path: path, fault: .badInput("the report cannot be written here: it is \(RegularFile.describe(mode: info.st_mode))"))
        }
        do {
            file = try AtomicFile(destination: path, overwrite: true)
        } catch {
            throw OperationError(path: path, fault: .io("the report cannot be written here (\(error.fault)); nothing was imported"))
        }
    }

    /// The report's lines.
    static func lines(_ report: ImportReport, error: OperationError?) -> Data {
        var out = Data()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        struct Line: Encodable {
            var path: String
            var path_base64: String?
            var reason: String
        }
        struct Summary: Encodable {
            var imported: Int
            var skipped: Int
            var filtered: Int
            var destination: String
            var error: String?

            func encode(to encoder: Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(imported, forKey: .imported)
                try container.encode(skipped, forKey: .skipped)
                try container.encode(filtered, forKey: .filtered)
                try container.encode(destination, forKey: .destination)
                try container.encode(error, forKey: .error)  // null when the import succeeded
            }
            enum CodingKeys: String, CodingKey { case imported, skipped, filtered, destination, error }
        }
        for skipped in report.skipped {
            let escaped = PathBytes.hasEscapes(skipped.path)
            let line = Line(
                path: escaped ? String(decoding: PathBytes.bytes(of: skipped.path), as: UTF8.self) : skipped.path,
                path_base64: escaped ? Data(PathBytes.bytes(of: skipped.path)).base64EncodedString() : nil,
                reason: skipped.reason)
            if let data = try? encoder.encode(line) {
                out.append(data)
                out.append(0x0A)
            }
        }
        let summary = [
            "summary": Summary(
                imported: report.imported, skipped: report.skipped.count, filtered: report.filtered,
                destination: report.destination, error: error?.description)
        ]
        if let data = try? encoder.encode(summary) {
            out.append(data)
            out.append(0x0A)
        }
        return out
    }

    /// Writes the report and puts it in place.
    package func write(_ report: ImportReport, error: OperationError?) throws(OperationError) {
        let data = Self.lines(report, error: error)
        do {
            if let code = FileSystem.createFile(file.temporaryPath, contents: data) {
                throw TileArchiveError(path: path, fault: .io(errno: code, reason: AtomicFile.describe(errno: code)))
            }
            try file.commit()
        } catch {
            file.discard()
            throw OperationError(path: path, fault: .io("the report could not be written: \(error)"))
        }
    }
}
