import Foundation
import TilepackCore
import TilepackHTTP
import TilepackStorage

/// Opens archives at `http://` and `https://` URLs, and `s3://BUCKET/KEY` objects (signed
/// requests, see ``S3Client``).
public enum RemoteArchive {
    /// Whether `location` is an http(s) or s3 URL rather than a path.
    public static func isRemote(_ location: String) -> Bool {
        let lower = location.lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://") || lower.hasPrefix("s3://")
    }

    /// Opens the archive at `url`, recognised by its first bytes: PMTiles (one request for the
    /// header and root directory) or a tilepack bundle (one request for the header, metadata
    /// and index of a small bundle, one more for a larger index). MBTiles needs the whole file
    /// (SQLite): it is named in the error.
    public static func open(url: URL, client: HTTPClient = .shared, options: HTTPByteSource.Options = .init())
        throws(TileArchiveError) -> any TileArchive
    {
        let source = try HTTPByteSource(url: url, client: client, options: options)
        return try openTileArchive(source: source)
    }

    /// Opens the archive at `location` in S3 (or an S3-compatible store) with `client`'s
    /// configuration and credentials, as ``open(url:client:options:)`` opens a URL.
    public static func open(s3 location: S3Location, client: S3Client = .environment, options: HTTPByteSource.Options = .init())
        throws(TileArchiveError) -> any TileArchive
    {
        let source = try HTTPByteSource(s3: location, client: client, options: options)
        return try openTileArchive(source: source)
    }

    /// Opens an `http(s)://` URL, or an `s3://` one with the environment's S3 configuration.
    public static func open(_ location: String) throws(TileArchiveError) -> any TileArchive {
        if S3Location.isS3(location) {
            guard let s3 = S3Location(location), !s3.key.isEmpty else {
                throw TileArchiveError(path: location, fault: .cannotOpen(errno: 0, reason: "not an s3://BUCKET/KEY URL"))
            }
            return try open(s3: s3)
        }
        guard let url = URL(string: location), isRemote(location) else {
            throw TileArchiveError(path: location, fault: .cannotOpen(errno: 0, reason: "not an http(s) URL"))
        }
        return try open(url: url)
    }
}
