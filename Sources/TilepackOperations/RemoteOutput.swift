import Foundation
import TilepackCore
import TilepackRemote
import TilepackStorage

/// An operation's output at an `s3://` URL: the archive is built in a temporary folder on this
/// machine and uploaded by multipart upload (``S3Client/upload(file:to:options:)``), so the object
/// appears whole or not at all; an output that is a path is written where it is.
package enum RemoteOutput {
    /// Runs `build` with the path to write: `destination` itself, or for `s3://BUCKET/KEY` a file
    /// of the same name in a new folder under `temporaryFolder` (else the system's), uploaded once
    /// `build` returns, the folder removed however it ends. An existing object is an error unless
    /// `overwrite`, checked before anything is built.
    ///
    /// The tile hash index `build` wrote beside the file (`--index`) goes up after the archive, as
    /// the object `KEY.tpindex` (the name `sync` reads), by multipart upload too; a build that
    /// wrote none and replaced an object (`overwrite`) deletes a `KEY.tpindex` left beside it,
    /// which described the object replaced, as a build into a file removes the file's.
    package static func write<R>(
        to destination: String, overwrite: Bool, temporaryFolder: String? = nil, client: S3Client? = nil,
        _ build: (String) throws -> R
    ) throws -> R {
        guard S3Location.isS3(destination) else { return try build(destination) }
        let (location, client) = try target(destination, overwrite: overwrite, client: client)
        let base = temporaryFolder ?? NSTemporaryDirectory()
        let folder = (base as NSString).appendingPathComponent("tilepack-upload-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw OperationError(path: folder, fault: .io("cannot make the temporary folder for the upload: \(error.localizedDescription)"))
        }
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let local = (folder as NSString).appendingPathComponent(location.fileName)
        let result = try build(local)
        let options = uploadOptions
        _ = try s3(destination) { () async throws(S3Error) in try await client.upload(file: local, to: location, options: options) }
        for suffix in [TileHashIndex.sidecarName(of: ""), SignatureSidecar.sidecarName(of: "")] {
            let index = local + suffix
            let indexLocation = S3Location(bucket: location.bucket, key: location.key + suffix)
            if FileSystem.stat(index) != nil {
                _ = try s3(indexLocation.description) { () async throws(S3Error) in
                    try await client.upload(file: index, to: indexLocation, options: options)
                }
            } else if overwrite {
                try s3(indexLocation.description) { () async throws(S3Error) in try await client.delete(indexLocation) }
            }
        }
        return result
    }

    /// Uploads the file at `path` as it is to `destination` (`s3://BUCKET/KEY`) by multipart
    /// upload (``S3Client/upload(file:to:options:)``): the object appears whole or not at all. An
    /// existing object is an error unless `overwrite`. Returns the object's ETag.
    @discardableResult
    package static func upload(file path: String, to destination: String, overwrite: Bool, client: S3Client? = nil) throws -> String? {
        let (location, client) = try target(destination, overwrite: overwrite, client: client)
        let options = uploadOptions
        return try s3(destination) { () async throws(S3Error) in try await client.upload(file: path, to: location, options: options) }
    }

    /// How the command uploads: part checksums unless `AWS_REQUEST_CHECKSUM_CALCULATION` is
    /// `when_required` (the AWS tools' setting, for stores that refuse them).
    static var uploadOptions: S3Client.UploadOptions {
        var options = S3Client.UploadOptions()
        options.partChecksums = ProcessInfo.processInfo.environment["AWS_REQUEST_CHECKSUM_CALCULATION"]?.lowercased() != "when_required"
        return options
    }

    /// The object `destination` names and the client to write it with, after checking that it
    /// names one object and, unless `overwrite`, that there is none.
    static func target(_ destination: String, overwrite: Bool, client: S3Client?) throws -> (S3Location, S3Client) {
        guard let location = S3Location(destination), !location.isPrefix, !location.isGlob else {
            throw OperationError(path: destination, fault: .badInput("an output in S3 is s3://BUCKET/KEY, a key naming one object"))
        }
        let client = client ?? S3Client.environment
        if !overwrite {
            let existing = try s3(destination) { () async throws(S3Error) in try await client.head(location) }
            if let existing {
                throw OperationError(
                    path: destination, fault: .badInput("the object exists (\(existing.size) bytes): use --force to replace it"))
            }
        }
        return (location, client)
    }

    /// Waits for an S3 exchange; its error as the operation's.
    static func s3<T: Sendable>(_ destination: String, _ body: @escaping @Sendable () async throws(S3Error) -> T) throws(OperationError)
        -> T
    {
        do {
            return try S3Client.wait(body)
        } catch {
            // The URL once: the error's own place when it is the destination.
            throw OperationError(path: destination, fault: .io(error.url == destination ? error.reason : error.description))
        }
    }
}

/// Inputs named by an S3 prefix (`s3://BUCKET/parts/`) or a glob in the key's last segment
/// (`s3://BUCKET/parts/part-*.tilepack`), listed with ListObjectsV2.
package enum RemoteInputs {
    /// `inputs` with each prefix or glob replaced by the archives it names (`.tilepack`,
    /// `.pmtiles`, `.mbtiles` keys, in key order); one that names none is an error.
    package static func expand(_ inputs: [String], client: S3Client? = nil) throws(OperationError) -> [String] {
        var expanded: [String] = []
        for input in inputs {
            guard let location = S3Location(input), location.isPrefix || location.isGlob else {
                expanded.append(input)
                continue
            }
            let client = client ?? S3Client.environment
            let slash = location.key.lastIndex(of: "/").map { location.key.index(after: $0) } ?? location.key.startIndex
            let folder = String(location.key[..<slash])
            let pattern = location.isGlob ? String(location.key[slash...]) : nil
            let listed = try RemoteOutput.s3(input) { () async throws(S3Error) in
                try await client.list(bucket: location.bucket, prefix: pattern == nil ? location.key : folder)
            }
            let archives = listed.map(\.key).filter { key in
                let name = String(key.dropFirst(folder.count))
                if let pattern {
                    return !name.contains("/") && fnmatch(pattern, name, 0) == 0
                }
                return TileArchiveFormat.named(by: key) != nil
            }
            guard !archives.isEmpty else {
                throw OperationError(
                    path: input,
                    fault: .badInput(
                        pattern == nil ? "no archive (.tilepack, .pmtiles, .mbtiles) under this prefix" : "no object matches this pattern"))
            }
            expanded += archives.map { "s3://\(location.bucket)/\($0)" }
        }
        return expanded
    }
}
