import Foundation
import TilepackCore

/// tilepack's HTTP(S) client: the rules of an exchange, over a transport that moves the bytes
/// (URLSession by default, module TilepackURLSession, so an app gets the platform's proxy
/// settings, TLS and ATS and links no second network stack; a program may bring a bulk
/// transport, see ``HTTPTransport`` and ``HTTPTransportSystem``).
///
/// What it adds to the transport, the same for every transport: a deadline for the whole
/// exchange (a server that trickles bytes forever times out), bodies bounded as they arrive (a
/// lying or huge body never fills memory), a `Content-Length` check (a body cut short is an
/// error, not a tile), typed errors that name the URL, a `User-Agent` naming tilepack, redirects
/// followed to http(s) only, and retries with back-off (``send(_:retry:onRetry:)``).
///
/// One client holds one transport and its connections; share it. Responses of every status are
/// returned; the caller decides what a 404 or a 304 means.
public final class HTTPClient: Sendable {
    /// The `User-Agent` sent unless a request sets its own: `tilepack/<version>`.
    public static let defaultUserAgent = "tilepack/\(TilepackVersion.current)"

    /// Redirects followed for one request; one more is an error.
    public static let maximumRedirects = 10

    /// A client for the whole process, over ``HTTPTransportSystem``'s transport (URLSession in
    /// an app), made at its first use.
    public static let shared = HTTPClient()

    public let userAgent: String
    public let transport: any HTTPTransport

    /// A client over a transport of its own from ``HTTPTransportSystem`` (its own URLSession in
    /// an app).
    /// - Parameters:
    ///   - userAgent: sent with every request that sets none.
    ///   - maximumConnectionsPerHost: the transport's limit on parallel connections to one host.
    public convenience init(userAgent: String = HTTPClient.defaultUserAgent, maximumConnectionsPerHost: Int = 6) {
        self.init(transport: HTTPTransportSystem.makeTransport(maximumConnectionsPerHost: maximumConnectionsPerHost), userAgent: userAgent)
    }

    /// A client over `transport`.
    public init(transport: any HTTPTransport, userAgent: String = HTTPClient.defaultUserAgent) {
        self.transport = transport
        self.userAgent = userAgent
    }

    /// One exchange, no retry; redirects (301, 302, 303, 307, 308 to an http(s) `Location`) are
    /// followed up to ``maximumRedirects``; one to another scheme is returned as it is.
    /// - Throws: ``HTTPError`` naming the URL: transport faults, time-out, a body that is cut
    ///   short or too large, cancellation of the calling task.
    public nonisolated(nonsending) func send(_ request: HTTPRequest) async throws(HTTPError) -> HTTPResponse {
        var current = request
        if !current.headers.keys.contains(where: { $0.utf8.count == 10 && $0.lowercased() == "user-agent" }) {
            current.headers["User-Agent"] = userAgent
        }
        var redirects = 0
        while true {
            guard Self.isHTTP(current.url) else {
                throw HTTPError(url: current.url.absoluteString, fault: .unsupportedScheme(current.url.scheme ?? ""))
            }
            if Task.isCancelled { throw HTTPError(url: current.url.absoluteString, fault: .cancelled) }
            let response = try await transport.exchange(current, HTTPIncomingResponse(request: current)).result().get()
            guard Self.redirectStatuses.contains(response.status), let location = response.header("location"),
                let next = URL(string: location.trimmingCharacters(in: .whitespaces), relativeTo: current.url)?.absoluteURL,
                Self.isHTTP(next)
            else { return response }
            redirects += 1
            guard redirects <= Self.maximumRedirects else {
                throw HTTPError(url: request.url.absoluteString, fault: .transport("more than \(Self.maximumRedirects) redirects"))
            }
            current.url = next
        }
    }

    static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]

    static func isHTTP(_ url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased() else { return false }
        return scheme == "http" || scheme == "https"
    }

    /// An exchange tried again after transient faults (see ``HTTPError/isTransient``) and
    /// retryable statuses (``RetryPolicy/retryableStatuses``), waiting as `retry` says. When the
    /// tries run out on a retryable status, that response is returned; on a fault, it is thrown.
    /// - Parameter onRetry: told of each retry before its wait (for logs and counters).
    public func send(
        _ request: HTTPRequest, retry: RetryPolicy,
        onRetry: @Sendable (_ attempt: Int, _ reason: String, _ delay: Duration) -> Void = { _, _, _ in }
    ) async throws(HTTPError) -> HTTPResponse {
        var generator = RetryPolicy.Jitter()
        var attempt = 1
        while true {
            let outcome: Result<HTTPResponse, HTTPError>
            do { outcome = .success(try await send(request)) } catch { outcome = .failure(error) }
            var retryAfter: Duration?
            let reason: String
            switch outcome {
            case .success(let response):
                guard RetryPolicy.retryableStatuses.contains(response.status), attempt < retry.maximumAttempts else { return response }
                retryAfter = response.retryAfter()
                if let wait = retryAfter, wait > retry.maximumRetryAfter { return response }
                reason = "HTTP status \(response.status)"
            case .failure(let error):
                guard error.isTransient, attempt < retry.maximumAttempts else { throw error }
                reason = error.description
            }
            let delay = retry.delay(afterAttempt: attempt, retryAfter: retryAfter, using: &generator)
            onRetry(attempt, reason, delay)
            do { try await Task.sleep(for: delay) } catch { throw HTTPError(url: request.url.absoluteString, fault: .cancelled) }
            attempt += 1
        }
    }

    /// A duration in seconds.
    public static func seconds(_ duration: Duration) -> TimeInterval {
        let parts = duration.components
        return TimeInterval(parts.seconds) + TimeInterval(parts.attoseconds) / 1e18
    }
}
