import Foundation
import TilepackCore
@_spi(HTTP1) import TilepackHTTP

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A small HTTP/1.1 server on 127.0.0.1 (a free port) for tests, on plain POSIX sockets: one
/// thread accepts, one thread serves each connection (keep-alive). A handler decides every
/// answer, including faults a real server or network shows: delays, any status, a connection
/// dropped before or during the body, a body shorter than its `Content-Length`, raw bytes.
/// Every request is logged. ``stop()`` closes the listener and every open connection.
public final class LoopbackHTTPServer: @unchecked Sendable {
    /// A request as the server read it.
    public struct Request: Sendable, Hashable {
        public var method: String
        /// The request target as sent (path and query).
        public var target: String
        /// The target's path, percent-decoding left to the handler.
        public var path: String { String(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "") }
        /// The target's query, without `?`.
        public var query: String? {
            let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            return parts.count > 1 ? String(parts[1]) : nil
        }
        /// Header fields by lower-cased name.
        public var headers: [String: String]
        /// Whether the client lets the connection stay open after the answer (its version and `Connection`).
        public var keepAlive = true
        /// The body (a `Content-Length` one), as it arrived.
        public var body = Data()

        public func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    /// What the server does with a request.
    public indirect enum Reply: Sendable {
        /// A complete response; `Content-Length` is added unless `headers` has one.
        case respond(status: Int, headers: [String: String], body: Data)
        /// Declares `body.count` bytes, sends only the first `sent`, then closes the connection.
        case truncated(status: Int, headers: [String: String], body: Data, sent: Int)
        /// Sends the bytes as they are, then closes the connection.
        case raw(Data)
        /// Closes the connection without answering.
        case close
        /// Waits, then replies.
        case delayed(Duration, Reply)
        /// An HTTP/1.0 answer; the connection stays open when `headers` ask for keep-alive.
        case http10(status: Int, headers: [String: String], body: Data)
        /// Sends the head and then the body one byte at a time, `interval` apart (a slow server).
        case trickle(status: Int, headers: [String: String], body: Data, interval: Duration)
        /// A complete response with `extra` right behind it in the same write (bytes no request
        /// asked for, such as a second response); the connection stays open.
        case unsolicited(status: Int, headers: [String: String], body: Data, extra: Data)
        /// A complete response, then `extra` in a write of its own once `gate` returned (at once,
        /// or a test's event: the client's exchange completed), then `sent` is called once the
        /// client's TCP has taken the extra bytes (on Linux; the test learns they wait in the
        /// client's socket); the connection stays open.
        case unsolicitedAfter(
            status: Int, headers: [String: String], body: Data, extra: Data, gate: @Sendable () -> Void = {},
            sent: @Sendable () -> Void = {})
        /// `extra` and then a complete response, in one write: bytes no request asked for that
        /// reach the client after it wrote this request, ahead of the answer.
        case unsolicitedBefore(extra: Data, status: Int, headers: [String: String], body: Data)

        public static func status(_ code: Int, _ body: String = "") -> Reply {
            .respond(status: code, headers: ["Content-Type": "text/plain"], body: Data(body.utf8))
        }
    }

    public typealias Handler = @Sendable (Request) -> Reply

    public let port: Int
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    private let listener: Int32
    private let handler: Handler
    private let state = Locked(State())

    private struct State {
        var requests: [Request] = []
        var connections: Set<Int32> = []
        var accepted = 0
        var pipelined = 0
        var stopped = false
        var abandonedTrickles: [Duration] = []
    }

    /// Starts a server whose answers come from `handler`.
    public init(handler: @escaping Handler) throws {
        (listener, port) = try Self.boundSocket(listening: true)
        self.handler = handler
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "loopback-accept"
        thread.start()
    }

    /// A server of the files under `root` (GET and HEAD, single byte ranges, 404 otherwise).
    public convenience init(files root: URL) throws {
        try self.init(handler: Self.fileHandler(root: root))
    }

    deinit { stop() }

    /// Every request so far, in arrival order.
    public var requests: [Request] { state.withLock { $0.requests } }
    public var requestCount: Int { state.withLock { $0.requests.count } }
    public func requests(to path: String) -> Int { state.withLock { $0.requests.filter { $0.path == path }.count } }
    /// Connections accepted so far (a client that reuses its connections opens few).
    public var acceptedConnections: Int { state.withLock { $0.accepted } }
    /// Requests read together with the one ahead of them, or during the wait of its `.delayed`
    /// answer: before that answer was sent (HTTP/1.1 pipelining: a client that waits for each
    /// answer never causes one). A lower bound: of requests that arrive together after an
    /// answer, the first is not counted.
    public var pipelinedRequests: Int { state.withLock { $0.pipelined } }
    /// For each `.trickle` reply the client stopped reading (it closed the connection), how long
    /// after the reply's head: the client's own deadline as this server saw it, whatever the test
    /// process's scheduling.
    public var abandonedTrickles: [Duration] { state.withLock { $0.abandonedTrickles } }

    /// Closes the listener and every connection; idempotent.
    public func stop() {
        // Under the lock: a connection's thread removes and closes its descriptor under it too,
        // so a number shut down here is still this server's (not one the system has since given
        // to another server's, or a client's, socket).
        let stopping = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.stopped = true
            for fd in state.connections { shutdown(fd, Int32(SHUT_RDWR)) }
            return true
        }
        guard stopping else { return }
        // Shut down, not closed: the accept thread closes it as it leaves. Closed here, its number
        // could go to another server's new listener while the accept thread is between two calls,
        // and that thread would then accept (and drop) the other server's connections.
        shutdown(listener, Int32(SHUT_RDWR))
    }

    /// A TCP socket bound to a free port of 127.0.0.1, listening or not, and the port.
    static func boundSocket(listening: Bool) throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var yes: Int32 = 1
        if listening { setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size)) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, !listening || listen(fd, 128) == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(.init(rawValue: code) ?? .EIO)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    // MARK: - Serving

    private func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                close(listener)
                return
            }
            let accepted = state.withLock { state -> Bool in
                guard !state.stopped else { return false }
                state.connections.insert(fd)
                state.accepted += 1
                return true
            }
            guard accepted else {
                close(fd)
                close(listener)
                return
            }
            var yes: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            let thread = Thread { [self] in serve(fd) }
            thread.name = "loopback-connection"
            thread.start()
        }
    }

    private func serve(_ fd: Int32) {
        defer {
            state.withLock { state in
                state.connections.remove(fd)
                close(fd)
            }
        }
        var buffer = [UInt8]()
        while let request = readRequest(fd, &buffer) {
            state.withLock { $0.requests.append(request) }
            let keepOpen = send(handler(request), for: request, on: fd, pending: &buffer)
            if !keepOpen || !request.keepAlive { return }
        }
    }

    /// Reads one request head and its `Content-Length` body, with HTTP/1 syntax as the server
    /// reads it (`HTTP1Syntax`); a head it cannot read ends the connection.
    private func readRequest(_ fd: Int32, _ buffer: inout [UInt8]) -> Request? {
        var chunk = [UInt8](repeating: 0, count: 16_384)
        // Whether this request's bytes came with an earlier read (before the last answer went out).
        var early = !buffer.isEmpty
        var searched = 0
        while true {
            if let end = buffer.withUnsafeBytes({ HTTP1Syntax.endOfHead($0, after: searched) }) {
                if early { state.withLock { $0.pipelined += 1 } }
                guard let parsed = buffer.withUnsafeBytes({ Self.parseHead(UnsafeRawBufferPointer(rebasing: $0[..<end])) }) else {
                    return nil
                }
                var request = parsed.0
                let length = parsed.bodyLength
                buffer.removeSubrange(..<end)
                if length > 0 {
                    while buffer.count < length {
                        let n = Self.read(fd, &chunk)
                        if n <= 0 { return nil }
                        buffer.append(contentsOf: chunk[..<n])
                    }
                    request.body = Data(buffer[..<length])
                    buffer.removeSubrange(..<length)
                }
                return request
            }
            if buffer.count > 65_536 { return nil }
            searched = buffer.count
            let n = Self.read(fd, &chunk)
            if n <= 0 { return nil }
            early = false
            buffer.append(contentsOf: chunk[..<n])
        }
    }

    /// The request and its body's length, from a head that ends in `head`; `nil` when it is not one.
    static func parseHead(_ head: UnsafeRawBufferPointer) -> (Request, bodyLength: Int)? {
        var position = 0
        var lines: [Range<Int>] = []
        while true {
            guard let found = try? HTTP1Syntax.line(head, from: position) else { return nil }
            position = found.next
            if !found.line.isEmpty { lines.append(found.line) } else if !lines.isEmpty { break }
        }
        guard let requestLine = lines.first else { return nil }
        let parts = String(decoding: UnsafeRawBufferPointer(rebasing: head[requestLine]), as: UTF8.self).split(separator: " ")
        guard parts.count == 3, HTTP1Syntax.isToken(head, requestLine.lowerBound..<(requestLine.lowerBound + parts[0].utf8.count)) else {
            return nil
        }
        let minorVersion = parts[2] == "HTTP/1.0" ? 0 : 1
        var request = Request(method: String(parts[0]), target: String(parts[1]), headers: [:])
        var close = false, keepAlive = false, bodyLength = 0
        for line in lines.dropFirst() {
            guard let colon = line.first(where: { head[$0] == 0x3A }), HTTP1Syntax.isToken(head, line.lowerBound..<colon) else {
                return nil
            }
            let name = String(decoding: UnsafeRawBufferPointer(rebasing: head[line.lowerBound..<colon]), as: UTF8.self).lowercased()
            let value = HTTP1Syntax.trimmed(head, (colon + 1)..<line.upperBound)
            request.headers[name] = String(decoding: UnsafeRawBufferPointer(rebasing: head[value]), as: UTF8.self)
            if HTTP1Syntax.equalsIgnoringCase(head, line.lowerBound..<colon, "content-length") {
                guard let length = HTTP1Syntax.decimal(head, value) else { return nil }
                bodyLength = length
            }
            if HTTP1Syntax.equalsIgnoringCase(head, line.lowerBound..<colon, "connection") {
                let options = HTTP1Syntax.connectionOptions(head, value)
                close = close || options.close
                keepAlive = keepAlive || options.keepAlive
            }
        }
        request.keepAlive = HTTP1Syntax.persists(minorVersion: minorVersion, close: close, keepAlive: keepAlive)
        return (request, bodyLength)
    }

    /// Sends a reply; returns whether the connection stays open.
    /// - Parameter pending: bytes read after this request: what a `.delayed` answer finds sent
    ///   during its wait goes there (requests pipelined behind this one).
    private func send(_ reply: Reply, for request: Request, on fd: Int32, pending: inout [UInt8]) -> Bool {
        switch reply {
        case .respond(let status, let headers, let body):
            let head = Self.head(status: status, headers: headers, length: body.count)
            return write(fd, head) && (request.method == "HEAD" || write(fd, body))
        case .http10(let status, let headers, let body):
            guard write(fd, Self.head(status: status, headers: headers, length: body.count, version: "1.0")), write(fd, body) else {
                return false
            }
            return headers.contains { $0.key.lowercased() == "connection" && $0.value.lowercased() == "keep-alive" }
        case .truncated(let status, let headers, let body, let sent):
            _ = write(fd, Self.head(status: status, headers: headers, length: body.count))
            _ = write(fd, body.prefix(max(0, min(sent, body.count))))
            return false
        case .raw(let bytes):
            _ = write(fd, bytes)
            return false
        case .close:
            return false
        case .delayed(let wait, let next):
            Thread.sleep(forTimeInterval: Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18)
            var chunk = [UInt8](repeating: 0, count: 16_384)
            while true {
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                guard count > 0 else { break }
                pending += chunk[..<count]
            }
            return send(next, for: request, on: fd, pending: &pending)
        case .trickle(let status, let headers, let body, let interval):
            guard write(fd, Self.head(status: status, headers: headers, length: body.count)) else { return false }
            let started = ContinuousClock.now
            for byte in body {
                if state.withLock({ $0.stopped }) { return false }
                Thread.sleep(forTimeInterval: Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18)
                guard write(fd, Data([byte])) else {
                    state.withLock { $0.abandonedTrickles.append(ContinuousClock.now - started) }
                    return false
                }
            }
            return true
        case .unsolicited(let status, let headers, let body, let extra):
            return write(fd, Self.head(status: status, headers: headers, length: body.count) + body + extra)
        case .unsolicitedAfter(let status, let headers, let body, let extra, let gate, let sent):
            guard write(fd, Self.head(status: status, headers: headers, length: body.count) + body) else { return false }
            gate()
            let written = write(fd, extra) && delivered(fd)
            sent()
            return written
        case .unsolicitedBefore(let extra, let status, let headers, let body):
            return write(fd, extra + Self.head(status: status, headers: headers, length: body.count) + body)
        }
    }

    private static func head(status: Int, headers: [String: String], length: Int, version: String = "1.1") -> Data {
        var text = "HTTP/\(version) \(status) \(reasonPhrase(status))\r\n"
        var hasLength = false
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            if name.lowercased() == "content-length" { hasLength = true }
            text += "\(name): \(value)\r\n"
        }
        if !hasLength && status != 304 && status != 204 { text += "Content-Length: \(length)\r\n" }
        text += "\r\n"
        return Data(text.utf8)
    }

    private static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 204: "No Content"
        case 206: "Partial Content"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }

    /// One read, tried again when a signal interrupts it (a test process gets many: its
    /// subprocesses end), so a kept-alive connection is not closed under a client by accident.
    private static func read(_ fd: Int32, _ chunk: inout [UInt8]) -> Int {
        while true {
            let n = chunk.withUnsafeMutableBytes { buffer in
                #if canImport(Glibc)
                Glibc.read(fd, buffer.baseAddress, buffer.count)
                #else
                Darwin.read(fd, buffer.baseAddress, buffer.count)
                #endif
            }
            if n < 0 && errno == EINTR { continue }
            return n
        }
    }

    /// Waits until the peer's TCP has taken every byte written on `fd` (Linux: `SIOCOUTQ`, the
    /// bytes not yet acknowledged, is 0), so they are in its socket: on loopback a write can
    /// return before they reach it. The kernel tells no event for it, so it is looked at every
    /// 0.2 ms, for at most 10 s; `false` if they never were taken.
    private func delivered(_ fd: Int32) -> Bool {
        #if os(Linux)
        for _ in 0..<50_000 {
            var unacknowledged: CInt = 0
            guard ioctl(fd, UInt(0x5411), &unacknowledged) == 0 else { return false }  // SIOCOUTQ
            if unacknowledged == 0 { return true }
            usleep(200)
        }
        return false
        #else
        return true
        #endif
    }

    private func write(_ fd: Int32, _ data: Data) -> Bool {
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                #if canImport(Glibc)
                let n = Glibc.send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                #else
                let n = Darwin.send(fd, bytes.baseAddress! + offset, bytes.count - offset, 0)
                #endif
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return false }
                offset += n
            }
            return true
        }
    }

    // MARK: - Files

    /// Serves `root/<path>`: 200 with the bytes, 206 for a single `Range: bytes=a-b`, 416 for a
    /// range past the end, 404 for anything missing, 403 for paths with `..`.
    public static func fileHandler(root: URL) -> Handler {
        { request in
            let path = request.path.removingPercentEncoding ?? request.path
            guard !path.contains("..") else { return .status(403, "forbidden") }
            guard let data = FileManager.default.contents(atPath: root.path + path) else { return .status(404, "not found") }
            guard let range = request.header("range"), let slice = byteRange(range, size: data.count) else {
                return .respond(status: 200, headers: ["Accept-Ranges": "bytes"], body: data)
            }
            guard let slice else {
                return .respond(status: 416, headers: ["Content-Range": "bytes */\(data.count)"], body: Data())
            }
            return .respond(
                status: 206, headers: ["Content-Range": "bytes \(slice.lowerBound)-\(slice.upperBound - 1)/\(data.count)"],
                body: data.subdata(in: slice))
        }
    }

    /// A single `bytes=a-b`, `bytes=a-` or `bytes=-n` range: `nil` when the field is not one,
    /// `.some(nil)` when it lies past the end.
    static func byteRange(_ field: String, size: Int) -> Range<Int>?? {
        guard field.hasPrefix("bytes="), !field.contains(",") else { return nil }
        let spec = field.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard spec.count == 2 else { return nil }
        if spec[0].isEmpty {
            guard let suffix = Int(spec[1]), suffix > 0 else { return nil }
            return .some(max(0, size - suffix)..<size)
        }
        guard let first = Int(spec[0]) else { return nil }
        guard first < size else { return .some(nil) }
        let last = spec[1].isEmpty ? size - 1 : min(Int(spec[1]) ?? -1, size - 1)
        guard last >= first else { return nil }
        return .some(first..<(last + 1))
    }
}

/// A port on 127.0.0.1 where nothing listens, for as long as this value lives: a socket bound to
/// it and never listening holds it, so connections are refused and no other server (of a test
/// running beside) can take it. (A server's port, once the server stops, may go to the next one.)
public final class RefusingPort: @unchecked Sendable {
    public let port: Int
    private let fd: Int32

    public init() throws {
        (fd, port) = try LoopbackHTTPServer.boundSocket(listening: false)
    }

    deinit { close(fd) }
}
