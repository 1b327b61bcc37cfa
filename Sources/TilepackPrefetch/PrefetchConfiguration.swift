import Foundation
import TilepackCore
import TilepackHTTP
import TilepackPlan

/// How a ``MapDataPrefetcher`` downloads and keeps tiles.
public struct PrefetchConfiguration: Hashable, Sendable {
    /// The store's capacity in bytes of tile data: 256 MB by default, as HERE's NMAMapDataPrefetcher's cache. Past
    /// it, tiles that belong to no kept region are evicted, least recently used first; tiles of
    /// kept regions are never evicted (a region larger than the capacity is still fetched whole).
    public var capacity: Int = 256 * 1024 * 1024
    /// Requests (fetches and estimates) running at once; one more is refused as busy.
    public var maximumConcurrentRequests: Int = 4
    /// HTTP connections to one host (a template with `{s}` spreads over several hosts): the
    /// requests in flight to it. The prefetcher's own sessions share them; a prefetcher given a
    /// transport runs this many requests per host and the transport's own connection limit bounds
    /// them (give it the same number, as `tilepack fetch` does).
    public var connectionsPerHost: Int = 8
    /// URLSessions the requests are spread over (each with its share of the connections): one
    /// per core by default, at most 8. Unused when the prefetcher is given a transport.
    public var sessions: Int = min(8, max(1, ProcessInfo.processInfo.activeProcessorCount))
    /// At most this many HTTP requests per second over all hosts; `nil` for no limit.
    public var requestsPerSecond: Double?
    /// The User-Agent header: names tilepack and its version.
    public var userAgent: String = PrefetchConfiguration.defaultUserAgent
    /// Requests whose area holds more tiles are refused (route area too big): one million tiles,
    /// about 15-25 GB of raster tiles, beyond what an offline region should be.
    public var maximumTiles: Int = 1_000_000
    /// Retries of one tile on timeouts, dropped connections, truncated bodies, 408, 429 and the
    /// transient 5xx: exponential back-off with full jitter, `Retry-After` honoured (up to its
    /// `maximumRetryAfter`; a longer wait fails the tile). 404 and 204 are never retried.
    public var retry = RetryPolicy(
        maximumAttempts: 5, baseDelay: .milliseconds(250), maximumDelay: .seconds(30),
        maximumRetryAfter: .seconds(120))
    /// Seconds one HTTP request may take.
    public var requestTimeout: Double = 30
    /// The largest tile body accepted.
    public var maximumTileBytes: Int = 16 << 20
    /// The least tiles sampled per zoom for a byte estimate (or all of a zoom with fewer): the
    /// sample is 2% of the area's tiles, stratified by zoom and area, and at least this many a
    /// zoom (`Specs/plan.md` §4).
    public var samplesPerZoom: Int = 8
    /// The seed of the estimate's draw; `nil`: one from the request (the same request, the same
    /// sample tiles, the same estimate).
    public var sampleSeed: UInt64?

    public init() {}

    /// `tilepack/<version> (offline prefetch)`.
    public static let defaultUserAgent = "tilepack/\(TilepackVersion.current) (offline prefetch)"

    /// Why the configuration is unusable, or `nil`.
    var invalidReason: String? {
        if capacity < 0 { return "the capacity is negative" }
        if !(1...1024).contains(maximumConcurrentRequests) { return "maximumConcurrentRequests must be 1-1024" }
        if !(1...256).contains(connectionsPerHost) { return "connectionsPerHost must be 1-256" }
        if !(1...64).contains(sessions) { return "sessions must be 1-64" }
        if let rate = requestsPerSecond, !(rate.isFinite && rate > 0) { return "requestsPerSecond must be above 0" }
        if retry.maximumAttempts > 100 { return "retry.maximumAttempts must be 1-100" }
        if maximumTiles < 1 { return "maximumTiles must be at least 1" }
        if !(requestTimeout > 0 && requestTimeout.isFinite) { return "the request timeout must be positive" }
        if maximumTileBytes < 1 { return "maximumTileBytes must be positive" }
        if !(0...1000).contains(samplesPerZoom) { return "samplesPerZoom must be 0-1000" }
        if userAgent.isEmpty || userAgent.contains(where: { $0 == "\r" || $0 == "\n" }) {
            return "the User-Agent must be one non-empty line"
        }
        return nil
    }
}

/// Options of one fetch.
public struct PrefetchOptions: Hashable, Sendable {
    /// Revalidate tiles already stored (`If-None-Match` / `If-Modified-Since`; a 304 rewrites
    /// nothing) and ask again for tiles recorded absent.
    public var refresh = false
    /// Request only the area's tiles recorded as failed.
    public var onlyFailed = false
    /// The most bytes of tiles the fetch may leave in the store for the area: the budget
    /// planner's plan of a sample (``MapDataPrefetcher/plan(_:budget:format:focus:seed:)``) is
    /// fetched, shallowest zoom first, and the fetch stops taking tiles before the area's stored
    /// bytes would pass it. `nil`: the whole area. The store's ``PrefetchConfiguration/capacity``
    /// evicts only tiles of no kept region, so for this fetch the budget is what limits it.
    public var budget: Int?
    /// With a budget: prefer detail near these points (`Specs/plan.md` §2).
    public var focus: PlanFocus?

    public init(refresh: Bool = false, onlyFailed: Bool = false, budget: Int? = nil, focus: PlanFocus? = nil) {
        self.refresh = refresh
        self.onlyFailed = onlyFailed
        self.budget = budget
        self.focus = focus
    }
}
