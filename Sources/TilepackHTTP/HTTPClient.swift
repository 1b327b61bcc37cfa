import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TilepackCore

/// tilepack's HTTP(S) client: `URLSession` (FoundationNetworking on Linux), so an app gets the
/// platform's proxy settings, TLS and ATS and links no second network stack.
///
/// What it adds to `URLSession`: a deadline for the whole exchange (a server that trickles bytes
/// forever times out), bodies bounded as they arrive (a lying or huge body never fills memory),
/// a `Content-Length` check (a body cut short is an error, not a tile), typed errors that name
/// the URL, a `User-Agent` naming tilepack, and retries with back-off (``send(_:retry:)``).
///
/// One client holds one session and its connections; share it. Responses of every status are
/// returned; the caller decides what a 404 or a 304 means.
public final class HTTPClient: Sendable {
    /// The `User-Agent` sent unless a request sets its own: `tilepack/<version>`.
    public static let defaultUserAgent = "tilepack/\(TilepackVersion.current)"

    /// A client for the whole process.
    public static let shared = HTTPClient()

    public let userAgent: String
    private let session: URLSession
    private let delegate: SessionDelegate

    /// - Parameters:
    ///   - userAgent: sent with every request that sets none.
    ///   - maximumConnectionsPerHost: `URLSession`'s limit on parallel connections to one host.
    public init(userAgent: String = HTTPClient.defaultUserAgent, maximumConnectionsPerHost: Int = 6) {
        self.userAgent = userAgent
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = maximumConnectionsPerHost
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        delegate = SessionDelegate()
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = "tilepack-http"
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: queue)
    }

    deinit { session.invalidateAndCancel() }

    /// One exchange, no retry.
    /// - Throws: ``HTTPError`` naming the URL: transport faults, time-out, a body that is cut
    ///   short or too large, cancellation of the calling task.
    public func send(_ request: HTTPRequest) async throws(HTTPError) -> HTTPResponse {
        let text = request.url.absoluteString
        guard let scheme = request.url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw HTTPError(url: text, fault: .unsupportedScheme(request.url.scheme ?? ""))
        }
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        urlRequest.timeoutInterval = Self.seconds(request.timeout)
        urlRequest.setValue(userAgent, forHTTPHeaderField: "User-Agent")
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }

        let task = session.dataTask(with: urlRequest)
        let exchange = Exchange(url: request.url, limit: request.maximumBodyBytes, timeout: request.timeout)
        let result: Result<HTTPResponse, HTTPError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                exchange.start(continuation)
                delegate.register(exchange, for: task.taskIdentifier)
                if Task.isCancelled {
                    exchange.finish(.failure(HTTPError(url: text, fault: .cancelled)))
                    task.cancel()
                    return
                }
                task.resume()
                exchange.armDeadline { task.cancel() }
            }
        } onCancel: {
            exchange.finish(.failure(HTTPError(url: text, fault: .cancelled)))
            task.cancel()
        }
        delegate.unregister(task.taskIdentifier)
        return try result.get()
    }

    /// An exchange tried again after transient faults (see ``HTTPError/isTransient``) and
    /// retryable statuses (``RetryPolicy/retryableStatuses``), waiting as `retry` says. When the
    /// tries run out on a retryable status, that response is returned; on a fault, it is thrown.
    /// - Parameter onRetry: told of each retry before its wait (for logs and counters).
    public func send(
        _ request: HTTPRequest, retry: RetryPolicy,
        onRetry: @Sendable (_ attempt: Int, _ reason: String, _ delay: Duration) -> Void = { _, _, _ in }
    ) async throws(HTTPError) -> HTTPResponse {
        var generator = SystemRandomNumberGenerator()
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

    static func seconds(_ duration: Duration) -> TimeInterval {
        let parts = duration.components
        return TimeInterval(parts.seconds) + TimeInterval(parts.attoseconds) / 1e18
    }
}

/// The state of one task: its body so far and the continuation to resume exactly once.
private final class Exchange: @unchecked Sendable {
    let requestURL: URL
    let url: String
    let limit: Int
    let timeout: Duration
    // Guarded by `lock` (a plain lock: the state holds non-Sendable continuation and work item).
    private let lock = NSLock()
    private var current = State()

    private func withState<R>(_ body: (inout State) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&current)
    }

    private struct State {
        var continuation: CheckedContinuation<Result<HTTPResponse, HTTPError>, Never>?
        var finished: Result<HTTPResponse, HTTPError>?
        var response: HTTPURLResponse?
        var body = Data()
        var timedOut = false
        var deadline: DispatchWorkItem?
    }

    init(url: URL, limit: Int, timeout: Duration) {
        requestURL = url
        self.url = url.absoluteString
        self.limit = limit
        self.timeout = timeout
    }

    func start(_ continuation: CheckedContinuation<Result<HTTPResponse, HTTPError>, Never>) {
        let early = withState { state -> Result<HTTPResponse, HTTPError>? in
            if let finished = state.finished { return finished }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    /// Cancels the task when the whole exchange has taken longer than the timeout.
    func armDeadline(cancel: @escaping @Sendable () -> Void) {
        let item = DispatchWorkItem { [self] in
            let fire = withState { state -> Bool in
                guard state.finished == nil else { return false }
                state.timedOut = true
                return true
            }
            if fire {
                finish(.failure(HTTPError(url: url, fault: .timedOut(timeout))))
                cancel()
            }
        }
        let armed = withState { state -> Bool in
            guard state.finished == nil else { return false }
            state.deadline = item
            return true
        }
        if armed { DispatchQueue.global().asyncAfter(deadline: .now() + HTTPClient.seconds(timeout), execute: item) }
    }

    /// Resumes the waiting task with `result`, once; later calls do nothing.
    func finish(_ result: Result<HTTPResponse, HTTPError>) {
        let (continuation, deadline) = withState { state -> (CheckedContinuation<Result<HTTPResponse, HTTPError>, Never>?, DispatchWorkItem?) in
            guard state.finished == nil else { return (nil, nil) }
            state.finished = result
            let pending = state.continuation
            state.continuation = nil
            state.body = Data()
            return (pending, state.deadline)
        }
        deadline?.cancel()
        continuation?.resume(returning: result)
    }

    /// The response head: refuses a declared length over the limit at once.
    func receive(_ response: URLResponse) -> Bool {
        guard let http = response as? HTTPURLResponse else {
            finish(.failure(HTTPError(url: url, fault: .transport("not an HTTP response"))))
            return false
        }
        if http.expectedContentLength > Int64(limit) {
            finish(.failure(HTTPError(url: url, fault: .tooLarge(limit: limit))))
            return false
        }
        withState { $0.response = http }
        return true
    }

    /// A piece of the body: refuses it when the body grows past the limit.
    func receive(_ data: Data) -> Bool {
        let overflow = withState { state -> Bool in
            guard state.finished == nil else { return false }
            if state.body.count + data.count > limit { return true }
            state.body.append(data)
            return false
        }
        if overflow { finish(.failure(HTTPError(url: url, fault: .tooLarge(limit: limit)))) }
        return !overflow
    }

    func complete(error: (any Error)?) {
        let (response, body, timedOut) = withState { ($0.response, $0.body, $0.timedOut) }
        if timedOut { return }  // already finished with .timedOut
        if let error {
            // A transfer that broke after a head declaring its length is a body cut short,
            // whatever words the transport uses for it.
            if let response, (response.allHeaderFields["Content-Length"] as? String).flatMap(Int.init) ?? -1 > body.count,
               ![NSURLErrorCancelled, NSURLErrorTimedOut].contains((error as NSError).code) {
                let declared = (response.allHeaderFields["Content-Length"] as? String).flatMap(Int.init) ?? 0
                finish(.failure(HTTPError(url: url, fault: .truncated(expected: declared, received: body.count))))
                return
            }
            finish(.failure(HTTPError(url: url, fault: Self.fault(error, timeout: timeout))))
            return
        }
        guard let response else {
            finish(.failure(HTTPError(url: url, fault: .transport("no response"))))
            return
        }
        var headers: [String: String] = [:]
        for (key, value) in response.allHeaderFields {
            if let key = key as? String, let value = value as? String { headers[key.lowercased()] = value }
        }
        // A body shorter than declared is cut short. The length is only comparable when the
        // transport did not decode a content encoding (it then counts encoded bytes).
        let encoding = headers["content-encoding"]?.lowercased() ?? "identity"
        if encoding == "identity", let declared = headers["content-length"].flatMap(Int.init), declared != body.count,
           response.statusCode != 304, response.statusCode != 204 {
            finish(.failure(HTTPError(url: url, fault: .truncated(expected: declared, received: body.count))))
            return
        }
        finish(.success(HTTPResponse(url: response.url ?? requestURL, status: response.statusCode, headers: headers, body: body)))
    }

    static func fault(_ error: any Error, timeout: Duration) -> HTTPError.Fault {
        let error = error as NSError
        guard error.domain == NSURLErrorDomain else { return .transport(error.localizedDescription) }
        let reason = error.localizedDescription
        switch error.code {
        case NSURLErrorTimedOut: return .timedOut(timeout)
        case NSURLErrorCancelled: return .cancelled
        case NSURLErrorCannotConnectToHost, NSURLErrorCannotFindHost, NSURLErrorDNSLookupFailed,
             NSURLErrorNotConnectedToInternet, NSURLErrorSecureConnectionFailed, NSURLErrorServerCertificateUntrusted,
             NSURLErrorServerCertificateHasBadDate, NSURLErrorServerCertificateNotYetValid, NSURLErrorServerCertificateHasUnknownRoot:
            return .cannotConnect(reason)
        case NSURLErrorNetworkConnectionLost, NSURLErrorBadServerResponse, NSURLErrorZeroByteResource,
             NSURLErrorCannotParseResponse, NSURLErrorCannotDecodeRawData, NSURLErrorCannotDecodeContentData:
            return .connectionLost(reason)
        default: return .transport(reason)
        }
    }
}

/// Routes the session's callbacks to their exchanges.
private final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let exchanges = Locked<[Int: Exchange]>([:])

    func register(_ exchange: Exchange, for task: Int) { exchanges.withLock { $0[task] = exchange } }
    func unregister(_ task: Int) { _ = exchanges.withLock { $0.removeValue(forKey: task) } }
    private func exchange(_ task: URLSessionTask) -> Exchange? { exchanges.withLock { $0[task.taskIdentifier] } }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        guard let exchange = exchange(dataTask), exchange.receive(response) else {
            completionHandler(.cancel)
            return
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let exchange = exchange(dataTask) else { return }
        if !exchange.receive(data) { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        exchange(task)?.complete(error: error)
    }

    /// Redirects are followed (at most URLSession's own limit) only to http(s).
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        let scheme = request.url?.scheme?.lowercased()
        completionHandler(scheme == "http" || scheme == "https" ? request : nil)
    }
}
