import ArgumentParser
import Foundation
import TilepackCore
import TilepackOperations
import TilepackRemote
import TilepackStorage

/// `tilepack upload`: a local archive into object storage as it is (go-pmtiles' `upload`).
struct UploadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upload",
        abstract: "Upload an archive to s3://BUCKET/KEY as it is, by multipart upload in parallel parts.",
        discussion: """
            The object appears whole or not at all: a failed upload is aborted, and the stale multipart uploads \
            of the same key (left by a killed process) are aborted first. The files tilepack keeps beside the \
            archive go up after it, as KEY.tpindex (its tile hash index, which sync reads) and KEY.tpsig (its \
            signature); an index that does not describe the archive refuses the upload before any byte is sent; \
            with --force, the object of a sidecar the archive lacks is deleted. A tile hash index alone goes up \
            to a key ending in .tpindex. The archive is not rebuilt (convert to \
            an s3:// output does that); its format is checked by its bytes, and a key ending in another \
            format's extension is refused. Credentials, region and endpoint as for every s3:// URL (README, \
            Object storage). Example:
              tilepack upload world.pmtiles s3://tiles/world.pmtiles
            """)

    @Argument(help: "The archive (\(TileArchiveFormat.extensions())), a local file.")
    var input: String

    @Argument(help: "Where to put it: s3://BUCKET/KEY.")
    var destination: String

    @Flag(help: "\(SharedHelp.force) (the object).")
    var force = false

    /// Accepted as on every command; an upload draws no progress bar and lists nothing per part,
    /// so its summary line prints either way.
    @Flag(name: .shortAndLong, help: ArgumentHelp(SharedHelp.quiet))
    var quiet = false

    func validate() throws {
        guard destination.lowercased().hasPrefix("s3://") else { throw ValidationError("the destination is an s3://BUCKET/KEY URL") }
    }

    func run() throws {
        if isTileHashIndex(input) {
            // An index alone (its archive uploaded before it), as `KEY.tpindex`.
            guard destination.hasSuffix(".tpindex") else {
                throw OperationError(
                    path: destination,
                    fault: .badInput("\(input) is a tile hash index: it goes up as the archive's key with .tpindex appended"))
            }
            try report(RemoteOutput.upload(file: input, to: destination, overwrite: force))
            return
        }
        let format = try TileArchiveFormat.detect(path: input)
        // Refusals are the operation's errors, as the existing object's is (RemoteOutput.target):
        // "Error: PLACE: fault", exit 1, no usage line (the arguments are well formed).
        if let named = TileArchiveFormat.named(by: destination), named != format {
            throw OperationError(
                path: destination, fault: .badInput("the key names a \(named) (\(named.fileExtension)), and \(input) is a \(format)"))
        }
        // An MBTiles file whose write-ahead log holds pages is not whole without it.
        if format == .mbtiles, let wal = FileSystem.stat(input + "-wal"), wal.st_size > 0 {
            throw OperationError(
                path: input,
                fault: .badInput(
                    "its write-ahead log (\(input)-wal, \(wal.st_size) bytes) holds changes the file has not: close the program writing it, or checkpoint it, first"
                ))
        }
        try checkIndex()
        try report(RemoteOutput.upload(file: input, to: destination, overwrite: force))
    }

    /// An index beside the archive that does not describe it refuses the upload before any byte
    /// is sent (a client would refuse it, and sync the archive whole).
    func checkIndex() throws {
        guard FileSystem.stat(TileHashIndex.sidecarName(of: input)) != nil else { return }
        do {
            _ = try TileHashIndex.beside(input, archive: try openTileArchive(path: input))
        } catch {
            throw OperationError(
                path: error.path, fault: .badInput("\(error.fault) (`tilepack index \(input)` writes its index): nothing was uploaded"))
        }
    }

    func isTileHashIndex(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        return TileHashIndex.isIndex(handle.readData(ofLength: 8))
    }

    func report(_ upload: @autoclosure () throws -> (etag: String?, sidecars: [S3Client.SidecarUpload])) throws {
        let size = FileSystem.stat(input).map { Int($0.st_size) } ?? 0
        let started = Date()
        let (etag, sidecars) = try upload()
        let seconds = Date().timeIntervalSince(started)
        print(
            "uploaded \(input) (\(size) bytes) to \(destination)\(etag.map { ", ETag \($0)" } ?? "") in \(String(format: "%.2f", seconds)) s"
        )
        for sidecar in sidecars {
            if let file = sidecar.file {
                print("  uploaded \(file) (\(sidecar.bytes) bytes) to \(sidecar.object)")
            } else {
                print("  deleted \(sidecar.object): \(input) has none beside it")
            }
        }
    }
}
