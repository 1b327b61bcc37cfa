import Foundation
import TilepackCore
import TilepackHTTP
import TilepackStorage

/// Opens archives at `http://` and `https://` URLs.
public enum RemoteArchive {
    /// Whether `location` is an http(s) URL rather than a path.
    public static func isRemote(_ location: String) -> Bool {
        let lower = location.lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://")
    }

    /// Opens the archive at `url`: PMTiles, recognised by its first bytes (one request for the
    /// header and root directory). MBTiles needs the whole file (SQLite) and a bundle is read
    /// from a local file: both are named in the error.
    public static func open(url: URL, client: HTTPClient = .shared, options: HTTPByteSource.Options = .init())
        throws(TileArchiveError) -> any TileArchive
    {
        let source = try HTTPByteSource(url: url, client: client, options: options)
        return try openTileArchive(source: source)
    }

    public static func open(_ location: String) throws(TileArchiveError) -> any TileArchive {
        guard let url = URL(string: location), isRemote(location) else {
            throw TileArchiveError(path: location, fault: .cannotOpen(errno: 0, reason: "not an http(s) URL"))
        }
        return try open(url: url)
    }
}
