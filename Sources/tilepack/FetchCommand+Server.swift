import ArgumentParser
import Foundation
import TilepackCore
import TilepackPrefetch

/// How a tile server is asked: what `fetch` and `plan TEMPLATE` share (the template's
/// placeholders, the request rate, connections, the User-Agent).
struct TileServerOptions: ParsableArguments {
    @Option(help: "Requests in flight per host: over as many connections on http/1.1, multiplexed on one HTTP/2 connection on https.")
    var concurrency: Int = 8

    /// Removed with tilepack's own sockets client (HTTP/1.1 pipelining): given, it is an error
    /// that says so.
    @Option(help: .hidden)
    var pipeline: String?

    #if os(Linux)
    @Option(help: "What moves the bytes: curl (libcurl's multi interface; HTTP/2 multiplexing on https).", transform: FetchTransport.parse)
    var transport: FetchTransport = .platformDefault
    #else
    @Option(help: "What moves the bytes: urlsession (the library's transport).", transform: FetchTransport.parse)
    var transport: FetchTransport = .platformDefault

    @Option(help: "URLSessions to spread the requests over (default: one per core).")
    var sessions: Int?
    #endif

    @Option(help: "At most N requests per second.")
    var rate: Double?

    @Option(name: .customLong("user-agent"), help: "The User-Agent header (default: tilepack/<version>).")
    var userAgent: String?

    @Option(help: "How the server numbers rows: xyz (north = 0) or tms.")
    var scheme: TileScheme = .xyz

    @Option(help: "The screen scale put into {scale}: 1, 2 or 3; tiles are then 256 x scale pixels.")
    var scale: Int = 1

    @Option(name: .customLong("tile-size"), help: "The size every raster tile must have (default 256 x scale).")
    var tileSize: Int?

    @Option(help: "What {s} stands for, comma-separated.")
    var subdomains: String = "a,b,c"

    func validate() throws {
        if !(1...256).contains(concurrency) { throw ValidationError("--concurrency must be 1-256") }
        if pipeline != nil {
            throw ValidationError(
                "--pipeline was removed with tilepack's own sockets transport (HTTP/1.1 pipelining); \(FetchTransport.removal)")
        }
        #if !os(Linux)
        if let sessions, !(1...64).contains(sessions) { throw ValidationError("--sessions must be 1-64") }
        #endif
        if let rate, !(rate > 0 && rate.isFinite) { throw ValidationError("--rate must be above 0") }
    }

    /// The prefetcher's configuration with these options (and its defaults for the rest).
    func configuration() -> PrefetchConfiguration {
        var configuration = PrefetchConfiguration()
        configuration.connectionsPerHost = concurrency
        configuration.requestsPerSecond = rate
        #if !os(Linux)
        if let sessions { configuration.sessions = sessions }
        #endif
        if let userAgent { configuration.userAgent = userAgent }
        return configuration
    }

    /// The source of `template` with these options.
    func source(template: String) -> PrefetchSource {
        PrefetchSource(
            urlTemplate: template, scheme: scheme, scale: scale, subdomains: subdomains.split(separator: ",").map { String($0) },
            tileSize: tileSize)
    }
}
