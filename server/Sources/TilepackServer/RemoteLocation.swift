import Foundation
import TilepackCore
import TilepackHTTP
import TilepackRemote

/// Where remote archives are read from: the HTTP client of `http(s)://` URLs and the S3 client
/// (configuration and credentials) of `s3://` ones. The program's is its environment's
/// (`AWS_*`, `~/.aws`, libcurl on Linux); tests bring their own.
package struct RemoteStore: Sendable {
    package var http: HTTPClient
    package var s3: S3Client

    package init(http: HTTPClient = .shared, s3: S3Client = .environment) {
        self.http = http
        self.s3 = s3
    }
}

/// A served archive that is not a file: an `http(s)://` URL (a presigned one is sent as it is)
/// or an `s3://BUCKET/KEY` object.
struct RemoteLocation: Sendable {
    enum Kind: Sendable {
        case http(URL)
        case s3(S3Location)
    }

    let kind: Kind
    /// As given on the command line (what errors, logs and pages show).
    let text: String

    /// `nil` when `text` is not a URL of a remote archive (a file path).
    init?(_ text: String) throws(TileServerError) {
        guard RemoteArchive.isRemote(text) else { return nil }
        self.text = text
        if S3Location.isS3(text) {
            guard let location = S3Location(text), !location.key.isEmpty, !location.isPrefix, !location.isGlob else {
                throw TileServerError("\(text): not an s3://BUCKET/KEY URL of one object")
            }
            kind = .s3(location)
        } else {
            guard let url = URL(string: text), url.host != nil else { throw TileServerError("\(text): not an http(s) URL") }
            kind = .http(url)
        }
    }

    /// The file name the archive is served under (before its extension is dropped): the key's
    /// last segment, or the URL path's (a presigned URL's query is not part of it).
    var fileName: String {
        switch kind {
        case .s3(let location): return location.fileName
        case .http(let url): return url.lastPathComponent
        }
    }

    /// The object opened now: its first bytes fetched, pinned by their version; each request to
    /// the store bounded by the settings' timeout and tried twice (a tile waits for the store, so
    /// not for long).
    func open(_ settings: RemoteSettings) throws(TileArchiveError) -> HTTPByteSource {
        let options = Self.options(settings)
        switch kind {
        case .http(let url): return try HTTPByteSource(url: url, client: settings.store.http, options: options)
        case .s3(let location): return try HTTPByteSource(s3: location, client: settings.store.s3, options: options)
        }
    }

    /// The archive's signature sidecar beside it (`URL.tpsig`, `s3://BUCKET/KEY.tpsig`), opened now
    /// and read by range as tiles are checked (Specs/signing.md §5), pinned by its own version.
    func openSidecar(_ settings: RemoteSettings) throws(TileArchiveError) -> HTTPByteSource {
        let options = Self.options(settings)
        switch kind {
        case .http(let url):
            var parts = URLComponents(url: url, resolvingAgainstBaseURL: false)
            parts?.path += ".tpsig"
            guard let sidecar = parts?.url else { throw TileArchiveError(path: text + ".tpsig", fault: .corrupt("not a URL")) }
            return try HTTPByteSource(url: sidecar, client: settings.store.http, options: options)
        case .s3(let location):
            guard let sidecar = S3Location(location.description + ".tpsig") else {
                throw TileArchiveError(path: text + ".tpsig", fault: .corrupt("not an s3:// URL"))
            }
            return try HTTPByteSource(s3: sidecar, client: settings.store.s3, options: options)
        }
    }

    /// The object's version now (a `HEAD`; one byte by range for a presigned URL).
    func currentVersion(_ settings: RemoteSettings) throws(TileArchiveError) -> RemoteObjectVersion {
        switch kind {
        case .http(let url):
            return try HTTPByteSource.currentVersion(url: url, client: settings.store.http, options: Self.options(settings))
        case .s3(let location):
            return try HTTPByteSource.currentVersion(s3: location, client: settings.store.s3)
        }
    }

    static func options(_ settings: RemoteSettings) -> HTTPByteSource.Options {
        var options = HTTPByteSource.Options()
        options.cacheBytes = settings.cacheBytes
        options.timeout = settings.timeout
        options.retry = RetryPolicy(maximumAttempts: 2, baseDelay: .milliseconds(100), maximumRetryAfter: .seconds(2))
        return options
    }
}
