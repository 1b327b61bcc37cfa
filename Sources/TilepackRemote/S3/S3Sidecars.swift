import Foundation
import TilepackCore
import TilepackStorage

/// The files tilepack keeps beside an archive (``ArchiveSidecars``: its tile hash index, its
/// signature) carried beside the object it was uploaded as (Specs/updates.md §7.4).
extension S3Client {
    /// What happened to one sidecar object.
    package struct SidecarUpload: Sendable {
        /// The object, `s3://BUCKET/KEY.EXT`.
        package var object: String
        /// The local file uploaded as it, or `nil` when the object was deleted (the archive has none).
        package var file: String?
        package var bytes: Int
    }

    /// Uploads each sidecar that lies beside `archive` as the object named the same way beside
    /// `location` (`KEY.tpindex`, `KEY.tpsig`), in ``ArchiveSidecars/names(of:)``'s order, each by
    /// multipart upload (whole or not at all). Call it once the archive's object is in place: a
    /// client that finds a sidecar finds its archive. With `replacing` (the archive's object was
    /// replaced), the object of each sidecar the archive lacks is deleted: it described the
    /// archive replaced.
    package func uploadSidecars(of archive: String, beside location: S3Location, replacing: Bool, options: UploadOptions)
        async throws(S3Error) -> [SidecarUpload]
    {
        var done: [SidecarUpload] = []
        for (file, key) in zip(ArchiveSidecars.names(of: archive), ArchiveSidecars.names(of: location.key)) {
            let object = S3Location(bucket: location.bucket, key: key)
            if let info = FileSystem.stat(file) {
                try await upload(file: file, to: object, options: options)
                done.append(SidecarUpload(object: object.description, file: file, bytes: Int(info.st_size)))
            } else if replacing {
                try await delete(object)
                done.append(SidecarUpload(object: object.description, file: nil, bytes: 0))
            }
        }
        return done
    }
}
