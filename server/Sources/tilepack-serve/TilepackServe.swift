import ArgumentParser
import Foundation
import TilepackHTTP
import TilepackServer

#if os(Linux)
import TilepackCurl
#endif

/// `tilepack-serve` (also run as `tilepack serve`): archives over HTTP. A program of its own so
/// that `tilepack` builds without the server's dependencies (Hummingbird, SwiftNIO).
@main
struct TilepackServe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tilepack-serve",
        abstract:
            "Serve MBTiles, PMTiles and .tilepack archives, local or at http(s):// and s3:// URLs, over HTTP: tiles, TileJSON, a preview map, health and metrics.",
        discussion: """
            Each archive is served under its file name without the extension: /NAME/{z}/{x}/{y}.EXT, \
            /NAME.json (TileJSON 3.0.0), /NAME/ (a preview map). The first line on standard output is \
            the base URL ("serving http://127.0.0.1:PORT/"). An archive replaced by rename is picked up \
            without a restart; a remote one (http(s)://, s3://BUCKET/KEY, named after the URL's or key's \
            file name) is read by range requests, and its ETag looked at every --recheck seconds: a \
            republished object is served without a restart. See Specs/serve.md for the whole HTTP contract.
            """
    )

    @Argument(help: "The archives to serve (.mbtiles, .pmtiles, .tilepack; recognised by their bytes): files, http(s):// or s3:// URLs.")
    var archives: [String] = []

    @Option(help: "The address to listen on (loopback by default; 0.0.0.0 for every interface).")
    var host = "127.0.0.1"

    @Option(help: "The port (0 picks a free one).")
    var port = 8080

    @Option(
        name: .customLong("public-url"), help: "The base URL written into TileJSON and pages (default: http:// and the request's Host).")
    var publicURL: String?

    @Option(
        name: .customLong("cache-control"),
        help:
            "Cache-Control of tiles (default: \"\(TileServerOptions.defaultCacheControl)\"; \"\(TileServerOptions.privateCacheControl)\" with --token)."
    )
    var cacheControl: String?

    @Option(name: .customLong("cors"), help: "An origin allowed to fetch tiles from scripts; repeat for several; * for any.")
    var corsOrigins: [String] = []

    @Option(help: "Require this token on every request: Authorization: Bearer TOKEN, or ?token=TOKEN.")
    var token: String?

    @Option(name: .customLong("leaflet-path"), help: "The folder of Leaflet (Debian's libjs-leaflet).")
    var leafletPath = TileServerOptions.defaultLeafletPath

    @Option(name: .customLong("reload-interval"), help: "Seconds between checks of the archive files for replacement.")
    var reloadInterval = 0.25

    @Option(
        name: .customLong("idle-timeout"), help: "Seconds a connection with no traffic is kept (also one that stops sending mid-request).")
    var idleTimeout = 30.0

    @Option(
        name: .customLong("header-timeout"),
        help: "Seconds a request head may take to arrive, from its first byte (a client trickling it gets 408).")
    var headerTimeout = 60.0

    @Option(
        name: .customLong("max-connections"),
        help: "Open connections at most (at the limit, the connection longest without a request is closed to take a new one).")
    var maxConnections = 1024

    @Option(
        help:
            "Event-loop threads answering requests (default: twice the cores, \(TileServerOptions.defaultEventLoops) here: a tile read that misses the page cache blocks its loop)."
    )
    var threads = TileServerOptions.defaultEventLoops

    @Option(name: .customLong("png-cache-mb"), help: "MiB of PNG tiles encoded from raw-bitmap bundles kept in memory.")
    var pngCacheMB = 64

    @Option(
        name: .customLong("cache-size"),
        help: "MiB of each remote archive kept in memory (its directories and tiles as fetched, least recently used first out).")
    var cacheSizeMB = 64

    @Option(
        help: "How often each remote archive's version (its ETag) is looked at: seconds, or a number with s or m (60s, 5m).",
        transform: TilepackServe.seconds)
    var recheck = 60.0

    @Option(
        name: .customLong("store-timeout"),
        help: "Seconds a request to a remote archive's store may take (tried twice; then 504).")
    var storeTimeout = 10.0

    @Option(
        help: ArgumentHelp(
            "Serve only the publisher's tiles: each archive checked against its signed root (ARCHIVE.tpsig beside it, a file or read by range) with this public key file (NAME.pub), each tile on its first read; a tile that is not the signed one is a 5xx with a log line naming it, never served.",
            valueName: "public-key-file"))
    var key: String?

    @Option(name: .customLong("min-release"), help: "With --key: the lowest signed release served (an older one is a replay).")
    var minRelease: UInt64?

    /// `60`, `60s`, `1.5m` in seconds.
    static func seconds(_ text: String) throws -> Double {
        let (number, scale): (Substring, Double) =
            text.hasSuffix("m") ? (text.dropLast(), 60) : text.hasSuffix("s") ? (text.dropLast(), 1) : (Substring(text), 1)
        guard let value = Double(number), value > 0, value.isFinite else {
            throw ValidationError("--recheck takes a positive number of seconds (60, 60s, 5m), not '\(text)'")
        }
        return value * scale
    }

    func validate() throws {
        guard !archives.isEmpty else { throw ValidationError("give one or more archives to serve") }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0-65535, not \(port)") }
        guard reloadInterval > 0, idleTimeout > 0, headerTimeout > 0, storeTimeout > 0 else {
            throw ValidationError("--reload-interval, --idle-timeout, --header-timeout and --store-timeout must be positive")
        }
        guard maxConnections > 0 else { throw ValidationError("--max-connections must be positive") }
        guard (1...1024).contains(threads) else { throw ValidationError("--threads must be 1-1024, not \(threads)") }
        guard (0...65536).contains(pngCacheMB) else { throw ValidationError("--png-cache-mb must be 0-65536") }
        guard (0...65536).contains(cacheSizeMB) else { throw ValidationError("--cache-size must be 0-65536 (MiB)") }
        guard minRelease == nil || key != nil else { throw ValidationError("--min-release goes with --key") }
    }

    func run() async throws {
        var options = TileServerOptions(
            archivePaths: archives, host: host, port: port, publicURL: publicURL, cacheControl: cacheControl,
            corsOrigins: corsOrigins, token: token, leafletPath: leafletPath, reloadInterval: reloadInterval,
            encodedTileCacheBytes: pngCacheMB << 20, maximumConnections: maxConnections, idleTimeout: idleTimeout,
            eventLoops: threads, headerTimeout: headerTimeout, remoteCacheBytes: cacheSizeMB << 20, recheckInterval: recheck,
            remoteTimeout: storeTimeout)
        options.keyPath = key
        options.minimumRelease = minRelease ?? 0
        #if os(Linux)
        // Remote archives' range requests through libcurl (kept-alive connections, HTTP/2 on
        // https), not FoundationNetworking's URLSession.
        HTTPTransportSystem.bootstrap { connections in CurlTransport(maximumConnectionsPerHost: connections) }
        #endif
        let server = try TileServer(options: options)
        try await server.run { url in
            FileHandle.standardOutput.write(Data("serving \(url)\n".utf8))
        }
    }
}
