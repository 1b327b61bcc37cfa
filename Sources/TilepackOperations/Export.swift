import Foundation
import TilepackCore
import TilepackImaging

/// Options of ``TileExporter``.
public struct ExportOptions: Sendable {
    public var layout: TileTreeLayout = .zxy
    public var scheme: TileScheme = .xyz
    public init() {}
}

/// What an export did.
public struct ExportReport: Sendable, Codable {
    public var source: String
    public var destination: String
    public var exported = 0
    public var bytes = 0
    public var seconds = 0.0
}

/// Writes an archive's tiles back as a tree `dir/z/x/y.ext` (or `z/y/x.ext`), with a
/// `metadata.json` that `import` reads back, so that import -> export -> import is byte-exact.
///
/// Nothing is written outside `dir`: every path below it is made of numbers the exporter
/// formats itself, folders it meets must be real folders (not links), and files are opened with
/// `O_NOFOLLOW`, so a link planted in the tree cannot redirect a write.
public enum TileExporter {
    public static func run(archive: any TileArchive, to directory: String, options: ExportOptions,
                           progress: ProgressHandler? = nil) throws(OperationError) -> ExportReport {
        let start = DispatchTime.now().uptimeNanoseconds
        var report = ExportReport(source: archive.path, destination: directory)
        let total = (try? archive.tileCount()) ?? nil
        let metadata: TileMetadata
        do {
            metadata = try archive.metadata()
        } catch {
            throw OperationError(path: archive.path, fault: .io("\(error)"))
        }
        try SafeTree.makeFolder(directory, allowExisting: true)
        var created = Set<String>()
        var lastReport = start
        let raw: RawBitmapLayout? = if case .rawBitmap(let layout) = archive.content { layout } else { nil }
        let declared = try? metadata.format
        do {
            try archive.forEachTile { tile, bytes in
                let (folderNumber, fileNumber) = options.layout == .zxy
                    ? (tile.x, tile.row(in: options.scheme)) : (tile.row(in: options.scheme), tile.x)
                let zoomFolder = directory + "/\(tile.zoom)"
                let folder = zoomFolder + "/\(folderNumber)"
                if !created.contains(folder) {
                    if !created.contains(zoomFolder) {
                        try SafeTree.makeFolder(zoomFolder, allowExisting: true)
                        created.insert(zoomFolder)
                    }
                    try SafeTree.makeFolder(folder, allowExisting: true)
                    created.insert(folder)
                }
                if let raw {
                    guard let bitmap = Bitmap(width: raw.width, height: raw.height, pixelFormat: raw.pixelFormat, pixels: Array(bytes)) else {
                        throw OperationError(path: archive.path, fault: .badInput("tile \(tile): \(bytes.count) bytes do not make a \(raw) bitmap"))
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
                    progress(OperationProgress(done: report.exported, total: total, bytes: report.bytes, elapsed: Double(now - start) / 1e9))
                }
            }
        } catch let error as OperationError {
            throw error
        } catch {
            throw OperationError(path: archive.path, fault: .io("\(error)"))
        }
        var entries = metadata.entries
        entries["scheme"] = options.scheme.rawValue
        entries["layout"] = options.layout.rawValue
        if raw != nil { entries["format"] = TileFormat.png.metadataValue }
        do {
            let json = try JSONSerialization.data(withJSONObject: entries, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            try json.withUnsafeBytes { try SafeTree.writeFile(directory + "/metadata.json", $0) }
        } catch let error as OperationError {
            throw error
        } catch {
            throw OperationError(path: directory + "/metadata.json", fault: .io("\(error)"))
        }
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }
}

/// File-system writes that refuse to follow links.
enum SafeTree {
    static func makeFolder(_ path: String, allowExisting: Bool) throws(OperationError) {
        if mkdir(path, 0o755) == 0 { return }
        let code = errno
        var info = stat()
        if code == EEXIST, allowExisting, lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR { return }
        if code == EEXIST {
            throw OperationError(path: path, fault: .badInput("exists and is not a real folder (a link or a file): refusing to write through it"))
        }
        throw OperationError(path: path, fault: .io("cannot create folder: \(String(cString: strerror(code)))"))
    }

    static func writeFile(_ path: String, _ bytes: UnsafeRawBufferPointer) throws(OperationError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            let code = errno
            throw OperationError(path: path, fault: .io("cannot create: \(String(cString: strerror(code)))"))
        }
        defer { close(fd) }
        var done = 0
        while done < bytes.count {
            let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                let code = errno
                throw OperationError(path: path, fault: .io("write failed: \(String(cString: strerror(code)))"))
            }
            done += n
        }
    }
}
