import Foundation

/// How `tilepack serve` serves its archives (see `Specs/serve.md`).
package struct TileServerOptions: Sendable, Hashable {
    /// The archive files and URLs (`http(s)://`, `s3://BUCKET/KEY`), each served under its file
    /// name (a URL's last path segment, a key's) without the extension.
    package var archivePaths: [String]
    /// The address to listen on: loopback unless said otherwise.
    package var host: String
    /// The port; 0 picks a free one.
    package var port: Int
    /// The base URL written into TileJSON and pages (`https://tiles.example.com/maps`); `nil` =
    /// `http://` and the request's Host.
    package var publicURL: String?
    /// `Cache-Control` of tiles; `nil` = the default, ``defaultCacheControl`` (``privateCacheControl``
    /// when a token is required).
    package var cacheControl: String?
    /// Origins allowed by CORS (`*` for any); empty = no CORS headers.
    package var corsOrigins: [String]
    /// When set, every request (but a CORS preflight) needs `Authorization: Bearer TOKEN` or `?token=TOKEN`.
    package var token: String?
    /// The folder of Debian's `libjs-leaflet` (`leaflet.js`, `leaflet.css`, `images/`).
    package var leafletPath: String
    /// How often each archive file is checked for replacement, in seconds (0 = every 50 ms).
    package var reloadInterval: Double
    /// Bytes of PNG tiles encoded from raw-bitmap bundles kept in memory.
    package var encodedTileCacheBytes: Int
    /// Open connections at most; more wait in the listen backlog.
    package var maximumConnections: Int
    /// Seconds a connection may go without traffic (between requests, or in the middle of one) before it is closed.
    package var idleTimeout: Double
    /// Seconds a request head may take to arrive, from its first byte (nginx's
    /// `client_header_timeout`): a client trickling a head is answered 408 and closed.
    package var headerTimeout: Double
    /// Event-loop threads reading requests and answering them; ``defaultEventLoops`` unless set.
    package var eventLoops: Int
    /// Bytes of each remote archive (`http(s)://`, `s3://`) kept in memory: its directories and
    /// tiles as fetched by range, the least recently used going first (go-pmtiles' 64 MB).
    package var remoteCacheBytes: Int
    /// Seconds between looks at each remote archive's version (its ETag): a republished object
    /// is served from the next look on (or as soon as a read finds it replaced).
    package var recheckInterval: Double
    /// Seconds one request to the store of a remote archive may take (tried twice); a store that
    /// does not answer in time gives 504.
    package var remoteTimeout: Double
    /// A publisher's public key file (`NAME.pub`, Specs/signing.md §1): every tile is checked
    /// against its archive's signed root (`ARCHIVE.tpsig` beside it, a file or read by range) on
    /// its first read, and a tile that is not the signed one is a 5xx, never served.
    package var keyPath: String?
    /// With ``keyPath``: the lowest signed release served (an older one is a replay).
    package var minimumRelease: UInt64 = 0

    /// `no-cache`: caches keep tiles but ask again each time, and the strong ETag turns the question
    /// into a 304 without a body. A replaced archive is seen on the next view. See `Specs/serve.md`.
    package static let defaultCacheControl = "public, no-cache"
    /// The default when a token is required: no shared cache may keep what needs a token.
    package static let privateCacheControl = "private, no-cache"
    package static let defaultLeafletPath = "/usr/share/javascript/leaflet"
    /// Twice the cores: a tile is read on the event loop that answers it (`pread`, SQLite), and a
    /// read the page cache cannot serve blocks that loop on the disk, so there are more loops
    /// than cores to keep the cores busy meanwhile. Measured on 2 cores under `wrk` (issue 16):
    /// 4 loops against 2 answered 15% (bundle) to 35% (MBTiles) more tiles per second, with half
    /// the p99 latency; 8 answered fewer.
    package static var defaultEventLoops: Int { 2 * max(1, ProcessInfo.processInfo.activeProcessorCount) }

    package init(
        archivePaths: [String], host: String = "127.0.0.1", port: Int = 8080, publicURL: String? = nil,
        cacheControl: String? = nil, corsOrigins: [String] = [], token: String? = nil,
        leafletPath: String = TileServerOptions.defaultLeafletPath, reloadInterval: Double = 0.25,
        encodedTileCacheBytes: Int = 64 << 20, maximumConnections: Int = 1024, idleTimeout: Double = 30,
        eventLoops: Int = TileServerOptions.defaultEventLoops, headerTimeout: Double = 60, remoteCacheBytes: Int = 64 << 20,
        recheckInterval: Double = 60, remoteTimeout: Double = 10
    ) {
        self.archivePaths = archivePaths
        self.host = host
        self.port = port
        self.publicURL = publicURL
        self.cacheControl = cacheControl
        self.corsOrigins = corsOrigins
        self.token = token
        self.leafletPath = leafletPath
        self.reloadInterval = reloadInterval
        self.encodedTileCacheBytes = encodedTileCacheBytes
        self.maximumConnections = maximumConnections
        self.idleTimeout = idleTimeout
        self.headerTimeout = headerTimeout
        self.eventLoops = eventLoops
        self.remoteCacheBytes = remoteCacheBytes
        self.recheckInterval = recheckInterval
        self.remoteTimeout = remoteTimeout
    }

    /// The `Cache-Control` value tiles go out with.
    package var effectiveCacheControl: String {
        cacheControl ?? (token == nil ? Self.defaultCacheControl : Self.privateCacheControl)
    }
}

/// Why the server cannot start or a request cannot be served, naming the file or value at fault.
package struct TileServerError: Error, Hashable, Sendable, CustomStringConvertible {
    package var message: String

    package init(_ message: String) { self.message = message }

    package var description: String { message }
}
