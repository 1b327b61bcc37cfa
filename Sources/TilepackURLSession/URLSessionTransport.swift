import Foundation
import TilepackCore
import TilepackHTTP

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The library's transport: one `URLSession` (FoundationNetworking on Linux), so an app gets the
/// platform's proxy settings, TLS and ATS and links no second network stack. Redirects are not
/// followed here but by `HTTPClient` (the same rule for every transport); the whole-exchange
/// deadline is a timer per exchange (URLSession's own timeout is an idle timeout).
///
/// `HTTPClient.shared` and clients made without a transport use it when this module is linked
/// (the `Tilepack` and `TilepackRemote` products link it): `HTTPTransportSystem` finds it by
/// name, so that TilepackHTTP itself does not link FoundationNetworking.
public final class URLSessionTransport: PlatformHTTPTransport {
    private let session: URLSession
    private let delegate: SessionDelegate
    /// Exchanges beyond a host's connections wait here, not in URLSession, where their deadline
    /// would run while they wait (``HostLine``).
    private let line: Locked<HostLine<Exchange>>
    /// The serial queue the session's callbacks and the exchanges' deadlines run on. A queue of
    /// the transport's own rather than Dispatch's global queue, which an `OperationQueue` uses
    /// by default: the global queue runs as many threads as the machine has cores and adds one a
    /// second when they block, so an app (or a test) whose work blocks those threads (a pipe
    /// read, a semaphore) would hold every answer and every deadline with them. Measured on
    /// 2 cores with 8 global threads blocked: a loopback answer took 6 s through the global
    /// queue, 0.2 s through this one. It is owned here: `OperationQueue.underlyingQueue` does
    /// not keep it alive.
    private let callbacks = DispatchQueue(label: "tilepack-http.callbacks")

    /// - Parameter maximumConnectionsPerHost: `URLSession`'s limit on parallel connections to one
    ///   host. More exchanges wait their turn in the transport, first come first served, and an
    ///   exchange's deadline starts at its turn.
    public required init(maximumConnectionsPerHost: Int = 6) {
        line = Locked(HostLine(connections: maximumConnectionsPerHost))
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = maximumConnectionsPerHost
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        delegate = SessionDelegate()
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = "tilepack-http"
        queue.underlyingQueue = callbacks
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: queue)
        // A host that answers over HTTP/2 or 3 takes many exchanges per connection (where the
        // platform reports the protocol in its metrics: Apple's does, FoundationNetworking's not).
        delegate.onMultiplexing = { [weak self] host in
            guard let self else { return }
            for waiting in line.withLock({ $0.multiplexes(host: host) }) { begin(waiting) }
        }
    }

    deinit { session.invalidateAndCancel() }

    public nonisolated(nonsending) func exchange(_ request: HTTPRequest, _ response: HTTPIncomingResponse) async -> HTTPIncomingResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        // URLSession's own timeout is only a backstop behind the exchange's deadline (the timer
        // below), so it is the deadline rounded up to whole seconds: FoundationNetworking on Linux
        // arms its timer with `Int(timeoutInterval) * 1000` milliseconds, which makes 0.5 s a
        // time-out of 0 ms, at once (swift-corelibs-foundation, HTTPURLProtocol.configureEasyHandle).
        urlRequest.timeoutInterval = max(1, HTTPClient.seconds(request.timeout).rounded(.up))
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        urlRequest.httpBody = request.body

        let exchange = Exchange(response, urlRequest: urlRequest, host: HostLine<Exchange>.host(of: request.url))
        let ended = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                exchange.start(continuation)
                if Task.isCancelled {
                    exchange.finish(.cancelled)
                    return
                }
                if line.withLock({ $0.admit(exchange, host: exchange.host) }) { begin(exchange) }
            }
        } onCancel: {
            exchange.finish(.cancelled)
            exchange.cancelTask()
            _ = line.withLock { $0.remove(exchange, host: exchange.host) }
        }
        if let task = exchange.taskIdentifier { delegate.unregister(task) }
        release(exchange)
        return ended
    }

    /// Starts an exchange whose turn came: its task, then its deadline.
    private func begin(_ exchange: Exchange) {
        let task = session.dataTask(with: exchange.urlRequest)
        delegate.register(exchange, for: task.taskIdentifier)
        guard exchange.attach(task) else {
            // Ended (cancelled) while it waited: its place goes on at once.
            delegate.unregister(task.taskIdentifier)
            release(exchange)
            return
        }
        task.resume()
        exchange.armDeadline(on: callbacks) { task.cancel() }
    }

    /// Gives an ended exchange's place, if it had one, to the next in line (``HostLine`` gives
    /// it back once, whoever calls first).
    private func release(_ exchange: Exchange) {
        for waiting in line.withLock({ $0.finished(exchange, host: exchange.host) }) { begin(waiting) }
    }
}

/// The state of one task: the response so far and the continuation to resume exactly once.
private final class Exchange: @unchecked Sendable {
    // Guarded by `lock` (a plain lock: the state holds a non-Sendable continuation and work item).
    private let lock = NSLock()
    private var response: HTTPIncomingResponse
    private var continuation: CheckedContinuation<HTTPIncomingResponse, Never>?
    private var deadline: DispatchWorkItem?
    private var task: URLSessionDataTask?
    private let timeout: Duration
    let urlRequest: URLRequest
    /// Its line in the transport (``HostLine/host(of:)``).
    let host: String

    init(_ response: HTTPIncomingResponse, urlRequest: URLRequest, host: String) {
        self.response = response
        self.urlRequest = urlRequest
        self.host = host
        timeout = response.request.timeout
    }

    /// The task's identifier in the session's delegate, once it has one.
    var taskIdentifier: Int? { withLock { task?.taskIdentifier } }

    /// Gives the exchange its task; `false` when it has already ended (the task is not to run).
    func attach(_ task: URLSessionDataTask) -> Bool {
        withLock {
            guard !response.isEnded else { return false }
            self.task = task
            return true
        }
    }

    /// Cancels its task, if it has one.
    func cancelTask() {
        withLock { task }?.cancel()
    }

    private func withLock<R>(_ body: () -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    func start(_ continuation: CheckedContinuation<HTTPIncomingResponse, Never>) {
        let early = withLock { () -> HTTPIncomingResponse? in
            if response.isEnded { return response }
            self.continuation = continuation
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    /// Cancels the task when the whole exchange has taken longer than the timeout; the timer
    /// runs on `queue` (the transport's own, not the global queue: see `callbacks`).
    func armDeadline(on queue: DispatchQueue, cancel: @escaping @Sendable () -> Void) {
        let item = DispatchWorkItem { [self] in
            if finish(.timedOut(timeout)) { cancel() }
        }
        let armed = withLock { () -> Bool in
            guard !response.isEnded else { return false }
            deadline = item
            return true
        }
        if armed { queue.asyncAfter(deadline: .now() + HTTPClient.seconds(timeout), execute: item) }
    }

    /// Ends the exchange with `fault` (`nil`: completed) and resumes the waiting task, once;
    /// returns whether this call ended it.
    @discardableResult
    func finish(_ fault: HTTPError.Fault?) -> Bool {
        let ended = withLock { () -> (CheckedContinuation<HTTPIncomingResponse, Never>?, DispatchWorkItem?, HTTPIncomingResponse)? in
            guard !response.isEnded else { return nil }
            response.end(fault)
            let pending = continuation
            continuation = nil
            return (pending, deadline, response)
        }
        guard let (continuation, deadline, response) = ended else { return false }
        deadline?.cancel()
        continuation?.resume(returning: response)
        return true
    }

    /// The response head; `false` refuses it (declared length over the limit).
    func receive(_ head: URLResponse) -> Bool {
        guard let http = head as? HTTPURLResponse else {
            finish(.transport("not an HTTP response"))
            return false
        }
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let key = key as? String, let value = value as? String { headers[key] = value }
        }
        let accepted = withLock { response.receiveHead(status: http.statusCode, headers: headers) }
        if !accepted { finish(nil) }
        return accepted
    }

    /// A piece of the body; `false` refuses it (past the limit).
    func receive(_ data: Data) -> Bool {
        let accepted = withLock { response.receiveBody(data) }
        if !accepted { finish(nil) }
        return accepted
    }

    func complete(error: (any Error)?) {
        finish(error.map { Self.fault($0, timeout: timeout) })
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

#if canImport(FoundationNetworking)
// swift-corelibs-foundation's delegate protocols take plain completion handlers.
private typealias DispositionHandler = (URLSession.ResponseDisposition) -> Void
private typealias RedirectionHandler = (URLRequest?) -> Void
#else
// Apple's SDK declares them @Sendable: a method without it would not be the delegate's (the
// optional Objective-C requirement is matched by its exact type), and would never be called.
private typealias DispositionHandler = @Sendable (URLSession.ResponseDisposition) -> Void
private typealias RedirectionHandler = @Sendable (URLRequest?) -> Void
#endif

/// Routes the session's callbacks to their exchanges.
private final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let exchanges = Locked<[Int: Exchange]>([:])
    /// Told the host of an exchange that went over HTTP/2 or 3 (set once, before any task).
    var onMultiplexing: (@Sendable (String) -> Void)?

    func register(_ exchange: Exchange, for task: Int) { exchanges.withLock { $0[task] = exchange } }
    func unregister(_ task: Int) { _ = exchanges.withLock { $0.removeValue(forKey: task) } }
    private func exchange(_ task: URLSessionTask) -> Exchange? { exchanges.withLock { $0[task.taskIdentifier] } }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping DispositionHandler
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

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        guard let name = metrics.transactionMetrics.last?.networkProtocolName, name == "h2" || name == "h3",
            let exchange = exchange(task)
        else { return }
        onMultiplexing?(exchange.host)
    }

    /// Redirects are not followed here: `HTTPClient` follows them, the same way for every transport.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping RedirectionHandler
    ) {
        completionHandler(nil)
    }
}
