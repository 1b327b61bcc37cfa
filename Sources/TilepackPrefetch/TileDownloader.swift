import Foundation
import Synchronization
import TilepackCore
import TilepackHTTP

/// What one tile's download came to, after its retries.
enum TileDownload: Sendable {
    /// A sound tile.
    case tile(Data, format: TileFormat, etag: String?, lastModified: String?)
    /// The stored tile is still current (304 to a conditional request).
    case notModified
    /// No tile there (404 or 204).
    case absent(status: Int)
    /// Every attempt failed.
    case failed(TileFault)
    /// The request was cancelled.
    case cancelled
}

/// Downloads tiles of one source: a request rate, retries with back-off and `Retry-After` (which
/// pauses the whole host), and the body checks of ``TileBodyCheck``. The transport bounds the
/// connections to each host.
final class TileDownloader: Sendable {
    let clients: [HTTPClient]
    private let turn = Locked(0)
    let configuration: PrefetchConfiguration
    let pauses = HostPauses()
    let limiter: RateLimiter?
    /// The format all tiles must share: the source's, or the first stored tile's.
    let format: Locked<TileFormat?>
    let tileSize: Int
    /// The header fields of every request: the clients' `User-Agent`, set here once so that no
    /// request needs a dictionary of its own (the client would otherwise add it to each).
    private let baseHeaders: [String: String]
    /// Connections refused (or unresolvable hosts) in a row, over every host, with no answer of
    /// any kind between them; past ``maximumRefusals`` the source is unreachable.
    private let refusals = Atomic<Int>(0)
    /// Refused connections in a row after which a fetch stops: the server is not there (a wrong
    /// port, a server that is down). Every tile would otherwise spend its retries and back-off
    /// (about 4 s each) on it. Several workers' worth of tiles, each tried `maximumAttempts` times.
    static let maximumRefusals = 40

    /// Why the source is unreachable, once ``maximumRefusals`` connections in a row were refused.
    var unreachable: String? {
        guard refusals.load(ordering: .relaxed) >= Self.maximumRefusals else { return nil }
        return
            "the tile server refused \(Self.maximumRefusals) connections in a row, with no answer between them; is it running, and are the URL's host and port right?"
    }

    init(clients: [HTTPClient], source: PrefetchSource, configuration: PrefetchConfiguration, storedFormat: TileFormat?) {
        self.clients = clients
        self.configuration = configuration
        limiter = RateLimiter(requestsPerSecond: configuration.requestsPerSecond)
        format = Locked(source.format ?? source.formatFromExtension ?? storedFormat)
        tileSize = source.expectedTileSize
        baseHeaders = clients.first.map { ["User-Agent": $0.userAgent] } ?? [:]
    }

    /// Downloads `url`; `validators` make the request conditional (refresh). `attempts` counts
    /// the requests made.
    nonisolated(nonsending) func download(
        _ url: URL, validators: (etag: String?, lastModified: String?)? = nil,
        maximumAttempts: Int? = nil, attempts: inout Int
    ) async -> TileDownload {
        let host = url.connectionHost
        var headers = baseHeaders
        if let etag = validators?.etag { headers["If-None-Match"] = etag }
        if let lastModified = validators?.lastModified { headers["If-Modified-Since"] = lastModified }
        let request = HTTPRequest(
            url: url, headers: headers, timeout: .milliseconds(Int64(configuration.requestTimeout * 1000)),
            maximumBodyBytes: configuration.maximumTileBytes)
        let retry = configuration.retry
        let tries = min(maximumAttempts ?? retry.maximumAttempts, retry.maximumAttempts)
        var generator = RetryPolicy.Jitter()
        var attempt = 0
        while true {
            if Task.isCancelled { return .cancelled }
            if let unreachable { return .failed(.transport(unreachable)) }
            attempt += 1
            await pauses.wait(host)
            if let limiter { await limiter.wait() }
            if Task.isCancelled { return .cancelled }
            attempts += 1
            let fault: TileFault
            var retryAfter: Duration?
            do {
                let client =
                    clients.count == 1
                    ? clients[0]
                    : clients[
                        turn.withLock {
                            $0 = ($0 + 1) % clients.count
                            return $0
                        }]
                let response = try await client.send(request)
                if refusals.load(ordering: .relaxed) != 0 { refusals.store(0, ordering: .relaxed) }
                switch response.status {
                case 200:
                    let expected = format.withLock { $0 }
                    switch TileBodyCheck.check(response.body, expectedFormat: expected, tileSize: tileSize) {
                    case .success(let sniffed):
                        if expected == nil { format.withLock { if $0 == nil { $0 = sniffed } } }
                        return .tile(response.body, format: sniffed, etag: response.etag, lastModified: response.lastModified)
                    case .failure(let invalid):
                        guard invalid.retryable else { return .failed(invalid) }
                        fault = invalid
                    }
                case 204, 404:
                    return .absent(status: response.status)
                case 304 where validators != nil:
                    return .notModified
                default:
                    retryAfter = response.retryAfter()
                    fault = .status(response.status, retryAfter: retryAfter.map(HTTPClient.seconds))
                }
            } catch {
                if case .cancelled = error.fault { return .cancelled }
                if case .cannotConnect = error.fault { refusals.wrappingAdd(1, ordering: .relaxed) }
                fault = error.isTransient ? .transport(error.reason) : .invalidBody(error.reason)
            }
            guard fault.retryable, attempt < tries else { return .failed(fault) }
            if let retryAfter {
                guard retryAfter <= retry.maximumRetryAfter else {
                    return .failed(.status(fault.httpStatus, retryAfter: HTTPClient.seconds(retryAfter)))
                }
                // The server asked the whole host to wait, not only this request.
                pauses.pause(host, for: retryAfter)
            }
            let delay = retry.delay(afterAttempt: attempt, retryAfter: retryAfter, using: &generator)
            do { try await Task.sleep(for: delay) } catch { return .cancelled }
        }
    }
}
