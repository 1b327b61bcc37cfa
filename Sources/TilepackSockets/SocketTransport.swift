#if os(Linux)
internal import CTilepackSockets
import Foundation
import Glibc
import Synchronization
import TilepackCore
import TilepackHTTP

/// tilepack's own HTTP/1.1 client for cleartext `http://` URLs, for programs that move many small
/// bodies (`tilepack fetch` on Linux); everything else (`https://`, or any URL when the
/// environment names an HTTP proxy) goes to the `fallback` transport (libcurl in the command).
/// Not part of the `Tilepack` library an app links: the library's HTTP is URLSession.
///
/// Why its own: a tile is a few kilobytes, so per-request overhead is the whole cost. Through
/// libcurl a request cost 43 µs of CPU (URL parsing, header building, its state machine, a
/// transfer object per request), against 9 µs for `wrk`. Here one thread runs an `epoll` loop
/// over kept-alive connections: a request is written as one prepared buffer, a response read in
/// one `recv` and framed by ``ResponseParser``, the body handed to ``HTTPIncomingResponse``
/// (which bounds it as it arrives and checks its length), and the caller resumed.
///
/// Connections: at most `maximumConnectionsPerHost` to one host and port (more exchanges wait
/// their turn), idle ones kept for reuse (at most `maximumIdleConnections` in all) and closed when
/// the server closes them. A request that finds its reused connection closed by the server before
/// any byte of the answer is sent again once on a new connection, as browsers and curl do.
/// The whole exchange, waiting for a connection included, has the request's deadline.
///
/// Pipelining (RFC 9112 §9.3.2), when `requestsPerConnection` is above 1: once a connection has
/// answered a request in HTTP/1.1 and stayed open, up to that many
/// requests are sent on it before their answers, which come back in order. Requests written in
/// one turn of the loop go out in one `send`, and one `recv` reads several answers: the system
/// calls and wake-ups per request, most of a small tile's cost, fall with the depth. Requests
/// that a connection leaves unanswered (the server closed it after an answer, as nginx does
/// every 1,000 requests with `Connection: close`) are sent again on another connection, without
/// counting as an attempt; a host whose connection breaks or answers malformed bytes while
/// requests wait on it is sent one request at a time from then on. A pipelined request that is
/// cancelled or times out ends at once; its answer, when it comes, is read and dropped.
public final class SocketTransport: HTTPTransport {
    /// The event loops, each with its thread and connections.
    private let loops: [SocketLoop]
    private let fallback: (any HTTPTransport)?
    /// Whether the environment names an HTTP proxy: then every request goes to `fallback`,
    /// which honours it.
    private let proxied: Bool
    private let addresses = Locked<[String: ResolvedAddress]>([:])

    /// Requests sent ahead on one connection (1: no pipelining).
    private let depth: Int

    /// - Parameters:
    ///   - maximumConnectionsPerHost: parallel connections to one host and port, shared out over
    ///     the loops (each has at least one).
    ///   - requestsPerConnection: requests sent on one connection before their answers
    ///     (pipelining; 1, the default, sends one at a time). At most 32.
    ///   - maximumIdleConnections: idle connections kept open for reuse, over all hosts, per loop.
    ///   - pipelinedAfterIdle: how long a connection that was pipelining may have been idle and
    ///     still take several requests at once (as when every answer of its pipeline came in one
    ///     read and the next requests follow at once). Idle for longer, it carries one request
    ///     until it has answered again: the server may have closed it meanwhile.
    ///   - loops: event-loop threads. An exchange made from a task running on a loop (see
    ///     ``taskExecutors``) goes over that loop's connections; any other goes over the first loop's.
    ///   - fallback: the transport for what this one does not carry (`https`, proxies); without
    ///     one, such a request ends with ``HTTPError/Fault/unsupportedScheme(_:)``.
    ///   - environment: where `http_proxy` / `HTTP_PROXY` are looked up.
    public init(maximumConnectionsPerHost: Int = 8, requestsPerConnection: Int = 1, maximumIdleConnections: Int = 64,
                pipelinedAfterIdle: Duration = .milliseconds(50), loops: Int = 1,
                fallback: (any HTTPTransport)? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) {
        let count = max(1, loops)
        let connections = max(1, maximumConnectionsPerHost)
        depth = min(32, max(1, requestsPerConnection))
        self.loops = (0..<count).map { [depth] index in
            SocketLoop(maximumConnectionsPerHost: max(1, connections / count + (index < connections % count ? 1 : 0)),
                       requestsPerConnection: depth, maximumIdleConnections: max(0, maximumIdleConnections),
                       pipelinedAfterIdle: pipelinedAfterIdle)
        }
        self.fallback = fallback
        proxied = ["http_proxy", "HTTP_PROXY"].contains { !(environment[$0] ?? "").isEmpty }
    }

    public func requestsPerConnection(to url: URL) -> Int {
        guard !proxied, url.scheme?.lowercased() == "http", url.user == nil else { return fallback?.requestsPerConnection(to: url) ?? 1 }
        return depth
    }

    deinit {
        for loop in loops { loop.stop() }
    }

    /// The loops' threads, as executors: tasks that prefer one run between its network events, and
    /// an exchange they make is started and resumed there without waking another thread.
    public var taskExecutors: [any TaskExecutor] { loops }

    public nonisolated(nonsending) func exchange(_ request: HTTPRequest, _ response: HTTPIncomingResponse) async -> HTTPIncomingResponse {
        var response = response
        guard !proxied, let made = RequestMessage.make(request) else {
            if let fallback { return await fallback.exchange(request, response) }
            response.end(.unsupportedScheme(request.url.scheme ?? ""))
            return response
        }
        let message: RequestMessage
        switch made {
        case .success(let value): message = value
        case .failure(let refusal):
            response.end(refusal.fault)
            return response
        }
        let address: ResolvedAddress
        switch resolve(message.authority) {
        case .success(let resolved): address = resolved
        case .failure(let refusal):
            response.end(refusal.fault)
            return response
        }
        let exchange = SocketExchange(request: request, response: response, message: message, address: address)
        let loop = loops.first(where: \.isCurrentThread) ?? loops[0]
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                exchange.continuation = continuation
                loop.submit(exchange)
            }
        } onCancel: {
            loop.cancel(exchange)
        }
    }

    /// The host's address, looked up once per host and port (a name lookup blocks the calling
    /// thread, so it is not done on the loop's).
    private func resolve(_ authority: String) -> Result<ResolvedAddress, SocketFault> {
        if let known = addresses.withLock({ $0[authority] }) { return .success(known) }
        guard let (host, port) = RequestMessage.hostAndPort(authority) else {
            return .failure(SocketFault.transport("a URL authority that is not host[:port]: \(authority)"))
        }
        let key = authority
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            let reason = status == 0 ? "no address" : String(cString: gai_strerror(status))
            return .failure(SocketFault.cannotConnect("cannot resolve \(host): \(reason)"))
        }
        defer { freeaddrinfo(list) }
        // IPv4 first when the name has both: a tile server on "localhost" is most often there.
        var chosen = first
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if entry.pointee.ai_family == AF_INET { chosen = entry; break }
            cursor = entry.pointee.ai_next
        }
        guard let raw = chosen.pointee.ai_addr, chosen.pointee.ai_addrlen <= UInt32(MemoryLayout<sockaddr_storage>.size) else {
            return .failure(SocketFault.cannotConnect("cannot resolve \(host): no usable address"))
        }
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: raw, count: Int(chosen.pointee.ai_addrlen))) }
        let address = ResolvedAddress(storage: storage, length: chosen.pointee.ai_addrlen, family: chosen.pointee.ai_family, key: key)
        addresses.withLock { $0[key] = address }
        return .success(address)
    }
}

/// Why an exchange could not start.
struct SocketFault: Error {
    var fault: HTTPError.Fault

    static func cannotConnect(_ reason: String) -> SocketFault { SocketFault(fault: .cannotConnect(reason)) }
    static func transport(_ reason: String) -> SocketFault { SocketFault(fault: .transport(reason)) }
}

/// A socket address, looked up.
struct ResolvedAddress: @unchecked Sendable {
    var storage: sockaddr_storage
    var length: socklen_t
    var family: Int32
    /// "host:port": connections are pooled by it.
    var key: String
}

/// The bytes of one request, made on the caller's thread from the URL's text (no URL parsing
/// per request: this runs for every tile).
struct RequestMessage: Sendable {
    var bytes: [UInt8]
    /// The URL's authority ("host", "host:port", "[v6]:port"): the `Host` field, and the key
    /// connections are pooled and addresses looked up by.
    var authority: String
    var isHead: Bool

    /// The request's bytes, or `nil` when the URL is not one this transport carries (not
    /// `http://`, or with credentials in it): then the fallback carries it.
    static func make(_ request: HTTPRequest) -> Result<RequestMessage, SocketFault>? {
        var text = request.url.absoluteString
        return text.withUTF8 { url -> Result<RequestMessage, SocketFault>? in
            // "http://" in any case.
            let scheme: [UInt8] = [0x68, 0x74, 0x74, 0x70, 0x3A, 0x2F, 0x2F]
            guard url.count > 7, (0..<7).allSatisfy({ (url[$0] >= 0x41 && url[$0] <= 0x5A ? url[$0] | 0x20 : url[$0]) == scheme[$0] }) else {
                return nil
            }
            var end = 7
            while end < url.count, url[end] != 0x2F, url[end] != 0x3F, url[end] != 0x23 {
                if url[end] == 0x40 { return nil }  // user:password@: the fallback knows what to do with them
                end += 1
            }
            guard end > 7 else { return .failure(SocketFault.transport("no host in the URL")) }
            let authority = UnsafeBufferPointer(rebasing: url[7..<end])
            var targetEnd = end
            while targetEnd < url.count, url[targetEnd] != 0x23 { targetEnd += 1 }
            let target = UnsafeBufferPointer(rebasing: url[end..<targetEnd])
            guard target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                return .failure(SocketFault.transport("a request target with spaces or control bytes"))
            }
            let method = request.method
            guard !method.isEmpty, method.utf8.allSatisfy(ResponseParser.isTokenByte) else {
                return .failure(SocketFault.transport("a method that is not a token"))
            }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(96 + url.count)
            bytes.append(contentsOf: method.utf8)
            bytes.append(0x20)
            if target.first != 0x2F { bytes.append(0x2F) }  // "http://host" or "http://host?q": the path is "/"
            bytes.append(contentsOf: target)
            bytes.append(contentsOf: " HTTP/1.1\r\nHost: ".utf8)
            bytes.append(contentsOf: authority)
            bytes.append(contentsOf: "\r\n".utf8)
            if !request.headers.keys.contains(where: { ResponseParser.equalsLowercased($0.utf8, "accept") }) {
                bytes.append(contentsOf: "Accept: */*\r\n".utf8)
            }
            for (name, value) in request.headers {
                guard !name.isEmpty, name.utf8.allSatisfy(ResponseParser.isTokenByte) else {
                    return .failure(SocketFault.transport("a header name that is not a token: \(name)"))
                }
                guard !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                    return .failure(SocketFault.transport("a line break in the value of header \(name)"))
                }
                if ResponseParser.equalsLowercased(name.utf8, "host") { continue }  // the URL's
                bytes.append(contentsOf: name.utf8)
                bytes.append(contentsOf: ": ".utf8)
                bytes.append(contentsOf: value.utf8)
                bytes.append(contentsOf: "\r\n".utf8)
            }
            bytes.append(contentsOf: "\r\n".utf8)
            return .success(RequestMessage(bytes: bytes, authority: String(decoding: authority, as: UTF8.self), isHead: method == "HEAD"))
        }
    }

    /// The host and port of an authority ("host", "host:port", "[v6]", "[v6]:port").
    static func hostAndPort(_ authority: String) -> (host: String, port: Int)? {
        var host = Substring(authority)
        var portText: Substring?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let rest = host[host.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                portText = rest.dropFirst()
            }
            host = host[host.index(after: host.startIndex)..<close]
        } else if let colon = host.lastIndex(of: ":") {
            portText = host[host.index(after: colon)...]
            host = host[..<colon]
        }
        guard !host.isEmpty else { return nil }
        var port = 80
        if let portText, !portText.isEmpty {
            guard portText.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let number = Int(portText), (1...65535).contains(number) else {
                return nil
            }
            port = number
        }
        return (String(host), port)
    }
}

/// One exchange. The caller's thread fills it before ``SocketLoop/submit(_:)``; after that only
/// the loop's thread touches it, except `cancelled`.
final class SocketExchange: @unchecked Sendable {
    let request: HTTPRequest
    var response: HTTPIncomingResponse
    let message: RequestMessage
    let address: ResolvedAddress
    var continuation: CheckedContinuation<HTTPIncomingResponse, Never>?
    /// Monotonic nanoseconds by which the whole exchange must end.
    let deadline: UInt64
    /// The connection carrying it (loop thread).
    var connection: SocketConnection?
    /// Whether it was sent again after a reused connection turned out closed (loop thread).
    var resent = false
    /// Times it was sent again after a connection closed with it unanswered behind another
    /// request (pipelining; loop thread).
    var requeued = 0
    /// Whether it waits for a connection (loop thread).
    var isWaiting = false
    /// Whether the loop counts it among the exchanges under way (loop thread).
    var counted = false
    let cancelled = Atomic<Bool>(false)

    init(request: HTTPRequest, response: HTTPIncomingResponse, message: RequestMessage, address: ResolvedAddress) {
        self.request = request
        self.response = response
        self.message = message
        self.address = address
        let timeout = request.timeout.components
        let nanoseconds = max(0, timeout.seconds) * 1_000_000_000 + timeout.attoseconds / 1_000_000_000
        deadline = monotonicNanoseconds() &+ UInt64(clamping: nanoseconds)
    }
}

/// One TCP connection (loop thread only).
final class SocketConnection {
    let fd: Int32
    let key: String
    /// The exchanges whose requests went (or are going) out on it, in order: the first is the one
    /// being answered, the others were pipelined behind it.
    var queue: [SocketExchange] = []
    /// Frames the answer to the first of `queue`.
    var parser = ResponseParser(isHead: false)
    /// Request bytes not yet written from `written` on.
    var output: [UInt8] = []
    var written = 0
    var connecting: Bool
    /// Responses completed on it: a fault before the first byte of a later one may be the
    /// server's close of an idle connection.
    var served = 0
    var isIdle = false
    /// Whether it answered a request in HTTP/1.1 and stayed open since it was last idle for
    /// longer than the transport's `pipelinedAfterIdle`: only then are requests pipelined on it (an idle
    /// connection may have been closed by the server meanwhile; HTTP/1.0's keep-alive predates
    /// pipelining).
    var isProven = false
    /// When it last became idle (``monotonicNanoseconds()``).
    var idleSince: UInt64 = 0
    /// Whether it has request bytes to write at the end of the loop's turn.
    var isDirty = false

    init(fd: Int32, key: String, connecting: Bool) {
        self.fd = fd
        self.key = key
        self.connecting = connecting
    }
}

func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// The epoll loop, its thread, and every connection; it closes them all when it stops.
final class SocketLoop: TaskExecutor, @unchecked Sendable {
    private let maximumConnectionsPerHost: Int
    private let requestsPerConnection: Int
    private let maximumIdleConnections: Int
    private let epoll: Int32
    /// Wakes the loop when something is handed in while it sleeps.
    private let wakeup: Int32

    /// What other threads hand to the loop.
    private let inbox = Locked(Inbox())

    private struct Inbox {
        var jobs: [UnownedJob] = []
        var submitted: [SocketExchange] = []
        var cancelled: [SocketExchange] = []
        var stopping = false
        var closed = false
        var sleeping = false
        var woken = false

        var isEmpty: Bool { jobs.isEmpty && submitted.isEmpty && cancelled.isEmpty && !stopping }
    }

    // The loop thread's own state.
    private var connections: [Int32: SocketConnection] = [:]
    /// Open connections by host and port.
    private var pool: [String: [SocketConnection]] = [:]
    private var idle: [String: [SocketConnection]] = [:]
    private var idleCount = 0
    private var waiting: [String: [SocketExchange]] = [:]
    /// Hosts sent one request at a time after a connection failed with requests pipelined on it.
    private var serial: Set<String> = []
    /// Connections with request bytes to write at the end of this turn.
    private var dirty: [SocketConnection] = []
    private var active = 0
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
    /// How often deadlines are checked while exchanges are under way.
    private static let tick: UInt64 = 10_000_000
    /// Times one exchange is sent again after connections closed with it unanswered behind
    /// another request, before it fails.
    static let maximumRequeues = 4
    /// Nanoseconds a connection may have been idle and still take pipelined requests at once.
    private let freshIdle: UInt64

    init(maximumConnectionsPerHost: Int, requestsPerConnection: Int, maximumIdleConnections: Int, pipelinedAfterIdle: Duration) {
        let parts = pipelinedAfterIdle.components
        freshIdle = UInt64(clamping: max(0, parts.seconds) * 1_000_000_000 + max(0, parts.attoseconds) / 1_000_000_000)
        self.maximumConnectionsPerHost = maximumConnectionsPerHost
        self.requestsPerConnection = requestsPerConnection
        self.maximumIdleConnections = maximumIdleConnections
        epoll = tilepack_epoll_create()
        wakeup = tilepack_eventfd()
        if epoll >= 0, wakeup >= 0 {
            _ = tilepack_epoll_add(epoll, wakeup, tilepack_epoll_in)
        }
        let thread = Thread { [self] in run() }
        thread.name = "tilepack-sockets"
        thread.start()
    }

    func submit(_ exchange: SocketExchange) {
        if isCurrentThread {
            begin(exchange)
            return
        }
        let accepted = inbox.withLock { inbox -> Bool in
            guard !inbox.stopping, !inbox.closed else { return false }
            inbox.submitted.append(exchange)
            wake(&inbox)
            return true
        }
        if !accepted { end(exchange, .cancelled) }
    }

    /// A job of a task that prefers this executor: run by the loop's thread between its events.
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let queued = inbox.withLock { inbox -> Bool in
            guard !inbox.closed else { return false }
            inbox.jobs.append(job)
            wake(&inbox)
            return true
        }
        if !queued { globalConcurrentExecutor.enqueue(job) }
    }

    func cancel(_ exchange: SocketExchange) {
        exchange.cancelled.store(true, ordering: .relaxed)
        inbox.withLock { inbox in
            guard !inbox.closed else { return }
            inbox.cancelled.append(exchange)
            wake(&inbox)
        }
    }

    func stop() {
        inbox.withLock { inbox in
            guard !inbox.closed else { return }
            inbox.stopping = true
            wake(&inbox)
        }
    }

    /// A thread-specific slot where each loop's thread keeps its loop: asked once per exchange,
    /// so without a lock.
    private static let threadKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Whether the caller runs on the loop's thread (a task that prefers this executor).
    var isCurrentThread: Bool {
        let mine: UnsafeMutableRawPointer? = pthread_getspecific(Self.threadKey)
        return mine == Unmanaged.passUnretained(self).toOpaque()
    }

    /// Wakes the loop if it sleeps and no one has woken it yet (under the inbox lock).
    private func wake(_ inbox: inout Inbox) {
        guard inbox.sleeping, !inbox.woken else { return }
        inbox.woken = true
        var one: UInt64 = 1
        _ = Glibc.write(wakeup, &one, 8)
    }

    // MARK: The loop's thread

    private func run() {
        pthread_setspecific(Self.threadKey, Unmanaged.passUnretained(self).toOpaque())
        let capacity = 64
        let readyFDs = UnsafeMutablePointer<Int32>.allocate(capacity: capacity)
        let readyEvents = UnsafeMutablePointer<UInt32>.allocate(capacity: capacity)
        defer {
            readyFDs.deallocate()
            readyEvents.deallocate()
        }
        var lastCheck = monotonicNanoseconds()
        while true {
            let (jobs, submitted, cancelled, stopping) = inbox.withLock { inbox in
                defer {
                    inbox.jobs.removeAll(keepingCapacity: true)
                    inbox.submitted.removeAll(keepingCapacity: true)
                    inbox.cancelled.removeAll(keepingCapacity: true)
                }
                return (inbox.jobs, inbox.submitted, inbox.cancelled, inbox.stopping)
            }
            for exchange in submitted { begin(exchange) }
            for exchange in cancelled { cancelOnLoop(exchange) }
            let executor = asUnownedTaskExecutor()
            for job in jobs { job.runSynchronously(on: executor) }
            if stopping { break }
            // The requests of this turn, each connection's in one write.
            flushDirty()
            let now = monotonicNanoseconds()
            if active > 0, now &- lastCheck >= Self.tick {
                lastCheck = now
                expire(now)
                flushDirty()
            }
            let sleep = inbox.withLock { inbox -> Bool in
                guard inbox.isEmpty else { return false }
                inbox.sleeping = true
                inbox.woken = false
                return true
            }
            guard sleep else { continue }
            let timeout: Int32 = active > 0 ? Int32(Self.tick / 1_000_000) : -1
            let count = epoll < 0 ? -1 : tilepack_epoll_wait(epoll, readyFDs, readyEvents, Int32(capacity), timeout)
            inbox.withLock { $0.sleeping = false }
            if count < 0 {
                if errno == EINTR { continue }
                // No epoll (file descriptors exhausted at start): nothing can be carried.
                failEverything(.transport("epoll is not available: \(String(cString: strerror(errno)))"))
                usleep(10_000)
                continue
            }
            for index in 0..<Int(count) {
                let fd = readyFDs[index]
                if fd == wakeup {
                    var value: UInt64 = 0
                    _ = Glibc.read(wakeup, &value, 8)
                    continue
                }
                guard let connection = connections[fd] else { continue }
                handle(connection, readyEvents[index])
            }
        }
        // Stopping: every exchange still here ends cancelled, then everything is closed.
        let (left, jobs) = inbox.withLock { inbox -> ([SocketExchange], [UnownedJob]) in
            inbox.closed = true
            defer {
                inbox.submitted.removeAll()
                inbox.jobs.removeAll()
            }
            return (inbox.submitted, inbox.jobs)
        }
        for exchange in left { end(exchange, .cancelled) }
        // Tasks that still prefer this executor run on the global one from now on.
        for job in jobs { globalConcurrentExecutor.enqueue(job) }
        failEverything(.cancelled)
        for connection in Array(connections.values) { close(connection) }
        if epoll >= 0 { Glibc.close(epoll) }
        if wakeup >= 0 { Glibc.close(wakeup) }
        buffer.deallocate()
    }

    private func failEverything(_ fault: HTTPError.Fault) {
        for connection in Array(connections.values) {
            for exchange in closeTakingQueue(connection) { end(exchange, fault) }
        }
        let queues = waiting
        waiting = [:]
        for (_, queue) in queues {
            for exchange in queue { end(exchange, fault) }
        }
    }

    /// Puts an exchange on an idle connection, a new one, behind the requests of a busy one
    /// (pipelining), or in its host's queue.
    private func begin(_ exchange: SocketExchange, fresh: Bool = false) {
        if exchange.cancelled.load(ordering: .relaxed) {
            end(exchange, .cancelled)
            return
        }
        if !exchange.counted {
            exchange.counted = true
            active += 1
        }
        let key = exchange.address.key
        if !fresh, let connection = takeIdle(key) {
            send(exchange, on: connection)
            return
        }
        let open = pool[key]?.count ?? 0
        if fresh, open >= maximumConnectionsPerHost, let connection = takeIdle(key) {
            close(connection)  // a slot for the new connection: idle ones are likely stale too
        }
        if (pool[key]?.count ?? 0) < maximumConnectionsPerHost {
            switch connect(exchange.address) {
            case .failure(let refusal):
                end(exchange, refusal.fault)
            case .success(let connection):
                send(exchange, on: connection)
            }
            return
        }
        if let connection = pipelined(key) {
            send(exchange, on: connection)
            return
        }
        exchange.isWaiting = true
        waiting[key, default: []].append(exchange)
    }

    /// How many requests `connection` may carry at once: more than one only once it has answered
    /// one and stayed open, and only to a host that has not failed a pipeline.
    private func depth(of connection: SocketConnection) -> Int {
        requestsPerConnection > 1 && connection.isProven && !serial.contains(connection.key)
            ? requestsPerConnection : 1
    }

    /// The busy connection to `key` that can take another request: one whose requests of this
    /// turn are still to be written (they go out together, in one write and one segment), else
    /// the one with the fewest requests on it.
    private func pipelined(_ key: String) -> SocketConnection? {
        guard requestsPerConnection > 1, !serial.contains(key), let open = pool[key] else { return nil }
        var best: SocketConnection?
        for connection in open where !connection.queue.isEmpty && connection.queue.count < depth(of: connection) {
            if connection.isDirty { return connection }
            if best == nil || connection.queue.count < best!.queue.count { best = connection }
        }
        return best
    }

    private func takeIdle(_ key: String) -> SocketConnection? {
        guard let connection = idle[key]?.popLast() else { return nil }
        idleCount -= 1
        connection.isIdle = false
        // Idle for a moment only (its last answer came in this turn or the one before, as when
        // the answers to all its pipelined requests arrived in one read): still proven, so the
        // next requests go out together on it. Idle for longer: the server may have closed it.
        if connection.isProven, monotonicNanoseconds() &- connection.idleSince > freshIdle { connection.isProven = false }
        return connection
    }

    /// A new non-blocking connection, registered with epoll.
    private func connect(_ address: ResolvedAddress) -> Result<SocketConnection, SocketFault> {
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(SocketFault.cannotConnect("cannot open a socket: \(String(cString: strerror(errno)))")) }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var storage = address.storage
        let result = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, address.length) }
        }
        if result != 0, errno != EINPROGRESS {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            return .failure(SocketFault.cannotConnect("cannot connect to \(address.key): \(reason)"))
        }
        guard tilepack_epoll_add(epoll, fd, tilepack_epoll_in | tilepack_epoll_out | tilepack_epoll_rdhup | tilepack_epoll_et) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            return .failure(SocketFault.transport("epoll_ctl: \(reason)"))
        }
        let connection = SocketConnection(fd: fd, key: address.key, connecting: result != 0)
        connections[fd] = connection
        pool[address.key, default: []].append(connection)
        return .success(connection)
    }

    /// Queues the exchange's request on the connection; it is written at the end of the turn.
    private func send(_ exchange: SocketExchange, on connection: SocketConnection) {
        exchange.isWaiting = false
        exchange.connection = connection
        if connection.queue.isEmpty { connection.parser = ResponseParser(isHead: exchange.message.isHead) }
        connection.queue.append(exchange)
        if connection.written == connection.output.count {
            connection.output = exchange.message.bytes
            connection.written = 0
        } else {
            connection.output.append(contentsOf: exchange.message.bytes)
        }
        if !connection.connecting, !connection.isDirty {
            connection.isDirty = true
            dirty.append(connection)
        }
    }

    /// Writes the requests queued in this turn.
    private func flushDirty() {
        while !dirty.isEmpty {
            let connections = dirty
            dirty.removeAll(keepingCapacity: true)
            for connection in connections {
                connection.isDirty = false
                guard self.connections[connection.fd] === connection else { continue }
                flush(connection)
            }
        }
    }

    /// Writes what is left of the requests; the rest waits for EPOLLOUT.
    private func flush(_ connection: SocketConnection) {
        while connection.written < connection.output.count {
            let count = connection.output.withUnsafeBytes { bytes in
                Glibc.send(connection.fd, bytes.baseAddress! + connection.written, bytes.count - connection.written, Int32(MSG_NOSIGNAL))
            }
            if count > 0 {
                connection.written += count
                continue
            }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return }
            broken(connection, .connectionLost("sending the request failed: \(String(cString: strerror(errno)))"))
            return
        }
    }

    private func handle(_ connection: SocketConnection, _ events: UInt32) {
        let failed = events & (tilepack_epoll_err | tilepack_epoll_hup) != 0
        if connection.connecting {
            guard events & tilepack_epoll_out != 0 || failed else { return }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(connection.fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 || failed {
                let reason = error != 0 ? String(cString: strerror(error)) : "the connection failed"
                fail(connection, .cannotConnect("cannot connect to \(connection.key): \(reason)"))
                return
            }
            connection.connecting = false
            flush(connection)
            guard connections[connection.fd] === connection else { return }
        } else if events & tilepack_epoll_out != 0, !connection.queue.isEmpty, connection.written < connection.output.count {
            flush(connection)
            guard connections[connection.fd] === connection else { return }
        }
        if events & (tilepack_epoll_in | tilepack_epoll_rdhup) != 0 || failed {
            receive(connection, closing: events & (tilepack_epoll_rdhup | tilepack_epoll_hup | tilepack_epoll_err) != 0)
        }
    }

    /// Reads until the socket has nothing more, feeding the answers to the connection's
    /// exchanges in order. `closing`: the event said the peer has closed (or the connection
    /// broke), so reading goes on to the end even after a short read.
    private func receive(_ connection: SocketConnection, closing: Bool) {
        while true {
            let count = Glibc.recv(connection.fd, buffer.baseAddress, buffer.count, 0)
            if count > 0 {
                var offset = 0
                while offset < count {
                    guard let exchange = connection.queue.first else {
                        // Bytes nobody asked for: the connection cannot carry another request.
                        close(connection)
                        return
                    }
                    var stop = false
                    var finished: Bool?
                    var malformed: String?
                    let base = offset
                    // A pipelined exchange that ended early (cancelled, past its deadline): its
                    // answer is framed and dropped.
                    let dropped = exchange.continuation == nil
                    let used = connection.parser.feed(UnsafeRawBufferPointer(rebasing: buffer[base..<count])) { event in
                        switch event {
                        case .head(let status, let fields):
                            if !dropped, !exchange.response.receiveHead(status: status, fields: fields) { stop = true; return false }
                        case .body(let range):
                            guard !dropped else { return true }
                            let piece = UnsafeRawBufferPointer(rebasing: buffer[(base + range.lowerBound)..<(base + range.upperBound)])
                            if !exchange.response.receiveBody(piece) { stop = true; return false }
                        case .end(let reusable):
                            finished = reusable
                        case .malformed(let reason):
                            malformed = reason
                        }
                        return true
                    }
                    offset += used
                    if stop {
                        fail(connection, .transport("the transfer was stopped"))
                        return
                    }
                    if let malformed {
                        if connection.queue.count > 1 { serial.insert(connection.key) }
                        fail(connection, .connectionLost("the server's response is not HTTP/1.1: \(malformed)"))
                        return
                    }
                    guard let reusable = finished else { break }
                    guard complete(connection, reusable: reusable) else { return }
                }
                // A short read took all there was; more data, or the peer's close, comes with a new
                // event (edge-triggered: unless the close had come before this event was taken).
                if count < buffer.count, !closing { return }
                continue
            }
            if count == 0 {
                ended(connection, nil)
                return
            }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return }
            ended(connection, String(cString: strerror(errno)))
            return
        }
    }

    /// The peer closed the connection (or it broke with `error`).
    private func ended(_ connection: SocketConnection, _ error: String?) {
        guard !connection.queue.isEmpty else {
            close(connection)
            return
        }
        if error == nil, connection.parser.endOfInput({ _ in true }) {
            _ = complete(connection, reusable: false)
            return
        }
        broken(connection, .connectionLost(error.map { "the connection broke: \($0)" } ?? "the server closed the connection"))
    }

    /// A connection that failed under its exchanges. The one being answered is sent again once
    /// when it was a reused connection that the server had closed before answering, else it
    /// fails; those pipelined behind it were not answered and are sent again.
    private func broken(_ connection: SocketConnection, _ fault: HTTPError.Fault) {
        let resend = connection.served > 0 && !connection.parser.hasStarted && connection.queue.first?.resent == false
        let queue = closeTakingQueue(connection)
        guard let exchange = queue.first else { return }
        if queue.count > 1 { serial.insert(connection.key) }
        if resend {
            exchange.resent = true
            begin(exchange, fresh: true)
        } else {
            end(exchange, fault)
        }
        for other in queue.dropFirst() { requeue(other) }
    }

    /// Ends the connection's exchange with `fault` and closes the connection (it cannot carry
    /// another request after an exchange cut short); those pipelined behind it are sent again.
    private func fail(_ connection: SocketConnection, _ fault: HTTPError.Fault) {
        let queue = closeTakingQueue(connection)
        if let exchange = queue.first { end(exchange, fault) }
        for other in queue.dropFirst() { requeue(other) }
    }

    /// Closes a connection and hands back the exchanges it carried, in order, detached from it.
    private func closeTakingQueue(_ connection: SocketConnection) -> [SocketExchange] {
        let queue = connection.queue
        connection.queue = []
        close(connection)
        for exchange in queue { exchange.connection = nil }
        return queue
    }

    /// An exchange whose request went out behind another on a connection that closed before
    /// answering it: sent again, a bounded number of times.
    private func requeue(_ exchange: SocketExchange) {
        guard exchange.continuation != nil else { return }  // cancelled or timed out already
        exchange.requeued += 1
        guard exchange.requeued <= Self.maximumRequeues else {
            end(exchange, .connectionLost("\(Self.maximumRequeues + 1) connections closed before answering it"))
            return
        }
        begin(exchange)
    }

    /// The answer to the connection's first exchange is complete. Returns whether the
    /// connection stays open for the next.
    private func complete(_ connection: SocketConnection, reusable: Bool) -> Bool {
        guard !connection.queue.isEmpty else { return false }
        let exchange = connection.queue.removeFirst()
        exchange.connection = nil
        connection.served += 1
        if reusable {
            connection.isProven = connection.parser.isHTTP11
            if let next = connection.queue.first { connection.parser = ResponseParser(isHead: next.message.isHead) }
            release(connection)
            end(exchange, nil)
            return connections[connection.fd] === connection
        }
        let behind = closeTakingQueue(connection)
        end(exchange, nil)
        for other in behind { requeue(other) }
        return false
    }

    /// A connection with room for more: the first waiting exchanges of its host, as many as it
    /// may carry, or idle when it carries none.
    private func release(_ connection: SocketConnection) {
        while connection.queue.count < depth(of: connection), var queue = waiting[connection.key], !queue.isEmpty {
            let next = queue.removeFirst()
            waiting[connection.key] = queue.isEmpty ? nil : queue
            send(next, on: connection)
        }
        guard connection.queue.isEmpty else { return }
        guard idleCount < maximumIdleConnections else {
            close(connection)
            return
        }
        connection.isIdle = true
        connection.idleSince = monotonicNanoseconds()
        idle[connection.key, default: []].append(connection)
        idleCount += 1
    }

    /// Closes a connection; a waiting exchange of its host takes the freed slot.
    private func close(_ connection: SocketConnection) {
        guard connections[connection.fd] === connection else { return }
        connections[connection.fd] = nil
        Glibc.close(connection.fd)
        let key = connection.key
        if connection.isIdle, var list = idle[key], let index = list.firstIndex(where: { $0 === connection }) {
            list.remove(at: index)
            idle[key] = list.isEmpty ? nil : list
            idleCount -= 1
            connection.isIdle = false
        }
        if var list = pool[key], let index = list.firstIndex(where: { $0 === connection }) {
            list.remove(at: index)
            pool[key] = list.isEmpty ? nil : list
        }
        if var queue = waiting[key], !queue.isEmpty, (pool[key]?.count ?? 0) < maximumConnectionsPerHost {
            let next = queue.removeFirst()
            waiting[key] = queue.isEmpty ? nil : queue
            next.isWaiting = false
            begin(next)
        }
    }

    private func cancelOnLoop(_ exchange: SocketExchange) {
        if exchange.isWaiting {
            removeWaiting(exchange)
            end(exchange, .cancelled)
        } else if let connection = exchange.connection {
            if connection.queue.first === exchange {
                fail(connection, .cancelled)
            } else if connection.queue.contains(where: { $0 === exchange }) {
                // Pipelined behind another: its answer still comes, and is dropped.
                end(exchange, .cancelled)
            }
        }
    }

    private func removeWaiting(_ exchange: SocketExchange) {
        let key = exchange.address.key
        guard var queue = waiting[key], let index = queue.firstIndex(where: { $0 === exchange }) else { return }
        queue.remove(at: index)
        waiting[key] = queue.isEmpty ? nil : queue
        exchange.isWaiting = false
    }

    /// Ends every exchange past its deadline. One being answered closes its connection; one
    /// pipelined behind it ends at once and its answer is dropped when it comes.
    private func expire(_ now: UInt64) {
        for connection in Array(connections.values) {
            guard let first = connection.queue.first else { continue }
            if first.deadline <= now {
                fail(connection, .timedOut(first.request.timeout))
                continue
            }
            for exchange in connection.queue.dropFirst() where exchange.deadline <= now {
                end(exchange, .timedOut(exchange.request.timeout))
            }
        }
        for (_, queue) in waiting {
            for exchange in queue where exchange.deadline <= now {
                removeWaiting(exchange)
                end(exchange, .timedOut(exchange.request.timeout))
            }
        }
    }

    /// Ends an exchange and resumes its caller (once).
    private func end(_ exchange: SocketExchange, _ fault: HTTPError.Fault?) {
        guard let continuation = exchange.continuation else { return }
        exchange.continuation = nil
        if exchange.counted {
            exchange.counted = false
            active -= 1
        }
        exchange.isWaiting = false
        exchange.response.end(fault)
        continuation.resume(returning: exchange.response)
    }
}
#endif
