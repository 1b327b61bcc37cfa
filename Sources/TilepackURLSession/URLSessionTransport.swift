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

    /// - Parameter maximumConnectionsPerHost: `URLSession`'s limit on parallel connections to one host.
    public required init(maximumConnectionsPerHost: Int = 6) {
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

        let task = session.dataTask(with: urlRequest)
        let exchange = Exchange(response)
        let ended = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                exchange.start(continuation)
                delegate.register(exchange, for: task.taskIdentifier)
                if Task.isCancelled {
                    exchange.finish(.cancelled)
                    task.cancel()
                    return
                }
                task.resume()
                exchange.armDeadline { task.cancel() }
            }
        } onCancel: {
            exchange.finish(.cancelled)
            task.cancel()
        }
        delegate.unregister(task.taskIdentifier)
        return ended
    }
}

/// The state of one task: the response so far and the continuation to resume exactly once.
private final class Exchange: @unchecked Sendable {
    // Guarded by `lock` (a plain lock: the state holds a non-Sendable continuation and work item).
    private let lock = NSLock()
    private var response: HTTPIncomingResponse
    private var continuation: CheckedContinuation<HTTPIncomingResponse, Never>?
    private var deadline: DispatchWorkItem?
    private let timeout: Duration

    init(_ response: HTTPIncomingResponse) {
        self.response = response
        timeout = response.request.timeout
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

    /// Cancels the task when the whole exchange has taken longer than the timeout.
    func armDeadline(cancel: @escaping @Sendable () -> Void) {
        let item = DispatchWorkItem { [self] in
            if finish(.timedOut(timeout)) { cancel() }
        }
        let armed = withLock { () -> Bool in
            guard !response.isEnded else { return false }
            deadline = item
            return true
        }
        if armed { DispatchQueue.global().asyncAfter(deadline: .now() + HTTPClient.seconds(timeout), execute: item) }
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

    /// Redirects are not followed here: `HTTPClient` follows them, the same way for every transport.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping RedirectionHandler
    ) {
        completionHandler(nil)
    }
}
