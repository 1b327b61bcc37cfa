import Foundation
import TilepackCore
import TilepackImaging
import TilepackStorage

/// Options of ``TileExporter``.
package struct ExportOptions: Sendable {
    package var layout: TileTreeLayout = .zxy
    package var scheme: TileScheme = .xyz
    /// Write into a folder that already holds files (`--force`); without it such a folder is
    /// refused. Existing tiles are then replaced by renaming over them, never written through.
    package var overwrite = false
    /// The most tiles written (`--max-tiles`, default 500,000,000): a larger archive (a PMTiles run
    /// of billions of tiles) is refused before the folder is made.
    package var maximumTiles = TileCountLimit.defaultMaximum
    package init() {}
}

/// What an export did.
package struct ExportReport: Sendable, Codable {
    package var source: String
    package var destination: String
    package var exported = 0
    package var bytes = 0
    package var seconds = 0.0
}

/// Writes an archive's tiles back as a tree `dir/z/x/y.ext` (or `z/y/x.ext`), with a
/// `metadata.json` that `import` reads back, so that import -> export -> import is byte-exact.
///
/// Nothing is written outside `dir`: every path below it is made of numbers the exporter
/// formats itself, folders it meets must be real folders (not links), and each file is written to
/// a new temporary file (`O_CREAT | O_EXCL | O_NOFOLLOW`) renamed into place, so neither a
/// symbolic link nor a hard link planted in the tree is ever written through: a planted entry is
/// replaced, what it pointed to is untouched. A folder that already holds files is refused unless
/// ``ExportOptions/overwrite`` is set; then temporary files a killed export left in the folders it
/// writes are removed.
package enum TileExporter {
    package static func run(
        archive: any TileArchive, to directory: String, options: ExportOptions,
        progress: ProgressHandler? = nil
    ) throws(OperationError) -> ExportReport {
        let start = DispatchTime.now().uptimeNanoseconds
        try OutputIsInput.refuse(output: directory, inputs: [archive.path])
        var report = ExportReport(source: archive.path, destination: directory)
        let total = (try? archive.tileCount()) ?? nil
        let metadata: TileMetadata
        do {
            metadata = try archive.metadata()
        } catch {
            throw OperationError(path: archive.path, fault: .io("\(error)"))
        }
        if let total {
            try TileCountLimit.check(
                total, limit: options.maximumTiles, source: archive.path, writing: "export into the folder \(directory)")
        }
        try prepareFolder(directory, overwrite: options.overwrite)
        var created = Set<String>()
        var lastReport = start
        let raw: RawBitmapLayout? = if case .rawBitmap(let layout) = archive.content { layout } else { nil }
        let declared = try? metadata.format
        do {
            try archive.forEachTile { tile, bytes in
                let (folderNumber, fileNumber) =
                    options.layout == .zxy
                    ? (tile.x, tile.row(in: options.scheme)) : (tile.row(in: options.scheme), tile.x)
                let zoomFolder = directory + "/\(tile.zoom)"
                let folder = zoomFolder + "/\(folderNumber)"
                if !created.contains(folder) {
                    if !created.contains(zoomFolder) {
                        try SafeTree.makeFolder(zoomFolder, allowExisting: true)
                        created.insert(zoomFolder)
                    }
                    try SafeTree.makeFolder(folder, allowExisting: true)
                    if options.overwrite { SafeTree.removeStaleTemporaries(folder) }
                    created.insert(folder)
                }
                if let raw {
                    guard let bitmap = Bitmap(width: raw.width, height: raw.height, pixelFormat: raw.pixelFormat, pixels: Array(bytes))
                    else {
                        throw OperationError(
                            path: archive.path, fault: .badInput("tile \(tile): \(bytes.count) bytes do not make a \(raw) bitmap"))
                    }
                    let png = try PNGEncoder.encode(bitmap)
                    try png.withUnsafeBytes { try SafeTree.writeFile(folder + "/\(fileNumber).png", $0) }
                    report.bytes += png.count
                } else {
                    let format = TileFormat.sniff(bytes) ?? declared
                    try SafeTree.writeFile(folder + "/\(fileNumber).\(format?.fileExtension ?? "bin")", bytes)
                    report.bytes += bytes.count
                }
                report.exported += 1
                let now = DispatchTime.now().uptimeNanoseconds
                if let progress, now - lastReport > 200_000_000 {
                    lastReport = now
                    progress(
                        OperationProgress(done: report.exported, total: total, bytes: report.bytes, elapsed: Double(now - start) / 1e9))
                }
            }
        } catch let error as OperationError {
            throw error
        } catch {
            throw OperationError(path: archive.path, fault: .io("\(error)"))
        }
        try writeMetadata(metadata, to: directory, options: options, raw: raw != nil)
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    /// Makes the export's folder, refusing one that holds files unless `overwrite` is set.
    private static func prepareFolder(_ directory: String, overwrite: Bool) throws(OperationError) {
        try SafeTree.makeFolder(directory, allowExisting: true)
        if !overwrite, let names = SafeTree.entryNames(directory), let first = names.min() {
            let more = names.count > 1 ? " and \(names.count - 1) more \(names.count == 2 ? "entry" : "entries")" : ""
            throw OperationError(
                path: directory,
                fault: .badInput(
                    "the folder is not empty: it holds \"\(first)\"\(more); export into a new or empty folder, or use --force to write into it"
                ))
        }
    }

    /// Writes `metadata.json`, which import reads back: the archive's metadata with the tree's
    /// scheme and layout (and format `png` for a raw bundle's tiles, written as PNG).
    private static func writeMetadata(
        _ metadata: TileMetadata, to directory: String, options: ExportOptions, raw: Bool
    ) throws(OperationError) {
        var entries = metadata.entries
        entries["scheme"] = options.scheme.rawValue
        entries["layout"] = options.layout.rawValue
        if raw { entries["format"] = TileFormat.png.metadataValue }
        do {
            if options.overwrite { SafeTree.removeStaleTemporaries(directory) }
            let json = try JSONSerialization.data(withJSONObject: entries, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            try json.withUnsafeBytes { try SafeTree.writeFile(directory + "/metadata.json", $0) }
        } catch let error as OperationError {
            throw error
        } catch {
            throw OperationError(path: directory + "/metadata.json", fault: .io("\(error)"))
        }
    }
}

/// File-system writes that refuse to follow links.
enum SafeTree {
    static func makeFolder(_ path: String, allowExisting: Bool) throws(OperationError) {
        if FileSystem.mkdir(path, 0o755) == 0 { return }
        let code = errno
        if code == EEXIST, allowExisting, let info = FileSystem.lstat(path), (info.st_mode & S_IFMT) == S_IFDIR { return }
        if code == EEXIST {
            throw OperationError(
                path: path, fault: .badInput("exists and is not a real folder (a link or a file): refusing to write through it"))
        }
        throw OperationError(path: path, fault: .io("cannot create folder: \(String(cString: strerror(code)))"))
    }

    /// Writes `bytes` beside `path` and renames them over it (``FileSystem/replace(_:with:)``):
    /// whatever `path` was is replaced, never opened or truncated.
    static func writeFile(_ path: String, _ bytes: UnsafeRawBufferPointer) throws(OperationError) {
        do throws(FileSystem.ReplaceFailure) {
            try FileSystem.replace(path, with: bytes)
        } catch {
            let reason =
                switch error {
                case .create(let code): "cannot create a file here: \(AtomicFile.describe(errno: code))"
                case .write(let code): "write failed: \(AtomicFile.describe(errno: code))"
                case .rename(let code): "cannot put the file in place: \(AtomicFile.describe(errno: code))"
                }
            throw OperationError(path: path, fault: .io(reason))
        }
    }

    /// The names of the entries of `folder` (other than `.` and `..`), or `nil` when it cannot be listed.
    static func entryNames(_ folder: String) -> [String]? {
        FolderListing.entries(folder)?.map(\.name)
    }

    /// Removes the exporter's temporary files in `folder` (left by a killed export).
    static func removeStaleTemporaries(_ folder: String) {
        for (name, kind) in FolderListing.entries(folder) ?? []
        where kind == .regularFile && name.hasPrefix(".") && name.contains(FileSystem.temporaryMarker) {
            _ = FileSystem.unlink(folder + "/" + name)
        }
    }
}
