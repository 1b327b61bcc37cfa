#if canImport(CTilepackCurl)
internal import CTilepackCurl
import Foundation
import TilepackCore
import TilepackHTTP

/// A bulk HTTP transport on libcurl's multi interface, for programs that move many small
/// bodies (`tilepack fetch` on Linux). Not part of the `Tilepack` library an app links: the
/// library's HTTP is URLSession (`URLSessionTransport`, module TilepackURLSession).
///
/// Why: on Linux, URLSession is FoundationNetworking over this same libcurl, with every transfer
/// going through one serial queue and some forty thread switches per request. Here one thread
/// runs `curl_multi_poll` for every transfer: requests reach it through a locked queue and
/// `curl_multi_wakeup`, connections are kept alive and reused (curl's connection cache, at most
/// `maximumConnectionsPerHost` per host), https speaks HTTP/2 where the server offers it (ALPN)
/// with every transfer to a host multiplexed as a stream of one connection (a transfer waits for
/// that connection rather than opening another, `CURLOPT_PIPEWAIT`), the whole-exchange deadline is curl's own
/// `CURLOPT_TIMEOUT_MS` (no timer per request), bodies go straight from curl's buffer into
/// ``HTTPIncomingResponse`` (which bounds them as they arrive), and a finished transfer resumes
/// its caller. Every rule above the bytes (User-Agent, redirects, length checks, typed errors,
/// retries) stays in ``HTTPClient``.
///
/// libcurl is loaded (`libcurl.so.4`) when the first transport is made, not when the program
/// starts; where it cannot be, every exchange fails with a ``HTTPError/Fault/transport(_:)``
/// that says why.
public final class CurlTransport: HTTPTransport {
    private let loop: CurlLoop?

    /// - Parameters:
    ///   - maximumConnectionsPerHost: parallel connections to one host (http/1.1: one transfer
    ///     each). More transfers wait their turn in the transport, first come first served, and
    ///     a transfer's deadline starts at its turn (``HostLine``). On HTTP/2 the transfers share
    ///     one connection, up to ``HostLine/streamsPerConnection`` on each.
    ///   - maximumCachedConnections: idle connections kept open for reuse, over all hosts.
    public init(maximumConnectionsPerHost: Int = 8, maximumCachedConnections: Int = 64) {
        loop =
            CurlLibrary.failure == nil
            ? CurlLoop(maximumConnectionsPerHost: maximumConnectionsPerHost, maximumCachedConnections: maximumCachedConnections)
            : nil
    }

    deinit { loop?.stop() }

    public nonisolated(nonsending) func exchange(_ request: HTTPRequest, _ response: HTTPIncomingResponse) async -> HTTPIncomingResponse {
        guard let loop else {
            var response = response
            response.end(.transport(CurlLibrary.failure ?? "libcurl is not loaded"))
            return response
        }
        let transfer = CurlTransfer(request: request, response: response)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                loop.submit(transfer, continuation)
            }
        } onCancel: {
            loop.cancel(transfer)
        }
    }
}

/// libcurl, loaded once per process by the first transport made.
enum CurlLibrary {
    /// `nil` once libcurl is loaded and initialised; otherwise why it could not be.
    static let failure: String? = {
        var reason = [CChar](repeating: 0, count: 256)
        guard tilepack_curl_load(&reason, reason.count) != 0 else { return nil }
        return String(decoding: reason.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }()
}

/// One exchange. After ``CurlLoop/submit(_:_:)`` only the loop's thread touches it, except
/// `cancelled`.
final class CurlTransfer: @unchecked Sendable {
    let request: HTTPRequest
    @exclusivity(unchecked) var response: HTTPIncomingResponse
    var continuation: CheckedContinuation<HTTPIncomingResponse, Never>?
    /// The header fields of the response being received (reset at each status line), names
    /// lower-cased byte by byte as they arrive.
    @exclusivity(unchecked) var fields = HTTPFields()
    var headDelivered = false
    /// How much of the request's body curl has read (``curlRead``).
    var bodyOffset = 0
    var easy: UnsafeMutableRawPointer?
    /// Where it goes (``HostLine/host(of:)``): the line it waits in for a connection.
    let host: String
    /// The request's own header list, when it is not the loop's shared one (freed with the transfer).
    var headerList: UnsafeMutablePointer<curl_slist>?
    /// Set by a cancel from any thread; the loop ends the transfer when it sees it.
    let cancelled = Locked(false)

    // The guard against unsolicited responses (``CurlConnections``).
    /// The response as it was handed in: what a transfer sent again starts from.
    let initialResponse: HTTPIncomingResponse
    /// The loop's connections, for curl's `CURLOPT_PREREQFUNCTION`.
    var connections: CurlConnections?
    /// The connection the request was written on, until the exchange ends.
    var connection: CurlConnections.Written?
    /// An https request, whose connection may be HTTP/2's (http is HTTP/1.1 here).
    let secure: Bool
    /// Set when the request was not written because bytes no request asked for waited on the
    /// connection curl chose: what was found.
    var refused: CurlConnections.Unasked?
    /// How many times the request was started.
    var attempts = 0
    /// Whether this start of the request goes on a new connection (a request sent again, or one
    /// to a host caught sending bytes no request asked for); its handle is reset after.
    var ownConnection = false

    init(request: HTTPRequest, response: HTTPIncomingResponse) {
        self.request = request
        self.response = response
        initialResponse = response
        host = HostLine<CurlTransfer>.host(of: request.url)
        secure = request.url.scheme?.lowercased() == "https"
    }

    /// Drops all the transfer received, to start it again.
    func rewind() {
        response = initialResponse
        fields = HTTPFields()
        headDelivered = false
        bodyOffset = 0
        refused = nil
    }

    /// Hands the head to the response once, before the first body byte or at the end.
    func deliverHead() -> Bool {
        guard !headDelivered else { return true }
        headDelivered = true
        var code = 0
        guard let easy, tilepack_curl_response_code(easy, &code) == CURLE_OK, code > 0 else { return true }
        return response.receiveHead(status: code, fields: fields)
    }
}

/// The multi handle, its thread and its easy handles; it frees them all when its thread ends.
final class CurlLoop: @unchecked Sendable {
    /// Touched by the loop's thread only (and by `init` before the thread starts).
    private let multi: UnsafeMutableRawPointer
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    /// Transfers beyond a host's connections wait here, not in curl, whose timeout would run
    /// while they wait (``HostLine``).
    private var line: HostLine<CurlTransfer>
    /// Transfers whose turn came, about to start (``handOn(_:)``).
    private var turns: [CurlTransfer] = []
    private var handingOn = false
    /// Handles ready for a transfer: every option that is the same for all transfers is set
    /// (``configure(_:)``), so a transfer sets only its own (``start(_:)``).
    private var idleHandles: [UnsafeMutableRawPointer] = []
    /// The header list of the first request: a fetch sends the same fields (its `User-Agent`)
    /// with every tile, so the list is made once and shared, not built and freed per transfer. The user agent goes as `CURLOPT_USERAGENT`, outside the list:
    /// curl looks for a dozen names in the list for every request it writes.
    private var sharedHeaders: (fields: [String: String], list: UnsafeMutablePointer<curl_slist>?, userAgent: String?)?

    /// What other threads hand to the loop. `curl_multi_wakeup` is called under this lock so
    /// that it never runs after the loop has freed the multi handle (`closed`), and only when
    /// the loop sleeps in `curl_multi_poll` (`polling`) and no one has woken it yet: a request
    /// submitted while the loop works is picked up before it sleeps again.
    private let inbox = Locked(Inbox())
    /// The connections curl opened, for the guard against unsolicited responses; it outlives
    /// the multi handle (curl's close callback reaches it when the handle is cleaned up).
    private let connections = CurlConnections()
    /// Hosts caught sending bytes no request asked for: their requests reuse no connection.
    private var unaskedHosts: Set<String> = []

    private struct Inbox {
        var submitted: [CurlTransfer] = []
        var cancelled: [CurlTransfer] = []
        var stopping = false
        var closed = false
        var polling = false
        var woken = false

        var isEmpty: Bool { submitted.isEmpty && cancelled.isEmpty && !stopping }

        /// Wakes the loop if it sleeps and no one has woken it yet.
        mutating func wake(_ multi: UnsafeMutableRawPointer) {
            guard polling, !woken else { return }
            woken = true
            tilepack_curl_multi_wakeup(multi)
        }
    }

    /// Made only once libcurl is loaded (``CurlLibrary/failure`` is `nil`).
    init(maximumConnectionsPerHost: Int, maximumCachedConnections: Int) {
        // curl_multi_init fails only when memory runs out.
        guard let multi = tilepack_curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        self.multi = multi
        line = HostLine(connections: maximumConnectionsPerHost)
        _ = tilepack_curl_multi_set_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(1, maximumConnectionsPerHost))
        _ = tilepack_curl_multi_set_long(multi, CURLMOPT_MAXCONNECTS, max(1, maximumCachedConnections))
        // HTTP/2 streams share a connection (libcurl's default since 7.62, said here); HTTP/1.1
        // pipelining is never asked for (libcurl removed it in 7.65).
        _ = tilepack_curl_multi_set_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        let thread = Thread { [self] in run() }
        thread.name = "tilepack-curl"
        thread.start()
    }

    func submit(_ transfer: CurlTransfer, _ continuation: CheckedContinuation<HTTPIncomingResponse, Never>) {
        transfer.continuation = continuation
        let accepted = inbox.withLock { inbox -> Bool in
            guard !inbox.stopping else { return false }
            inbox.submitted.append(transfer)
            inbox.wake(multi)
            return true
        }
        if !accepted {
            transfer.response.end(.cancelled)
            transfer.continuation = nil
            continuation.resume(returning: transfer.response)
        }
    }

    func cancel(_ transfer: CurlTransfer) {
        transfer.cancelled.withLock { $0 = true }
        inbox.withLock { inbox in
            guard !inbox.closed else { return }
            inbox.cancelled.append(transfer)
            inbox.wake(multi)
        }
    }

    func stop() {
        inbox.withLock { inbox in
            guard !inbox.closed else { return }
            inbox.stopping = true
            inbox.wake(multi)
        }
    }

    // MARK: The loop's thread

    private func run() {
        var running: Int32 = 0
        while true {
            let (submitted, cancelled, stopping) = inbox.withLock { inbox in
                defer {
                    inbox.submitted.removeAll(keepingCapacity: true)
                    inbox.cancelled.removeAll(keepingCapacity: true)
                }
                return (inbox.submitted, inbox.cancelled, inbox.stopping)
            }
            for transfer in submitted { admit(transfer) }
            for transfer in cancelled {
                if transfer.easy != nil {
                    finish(transfer, .cancelled)
                } else if line.remove(transfer, host: transfer.host) {
                    end(transfer, .cancelled)
                }
            }
            if stopping { break }
            tilepack_curl_multi_perform(multi, &running)
            var left: Int32 = 0
            while let message = tilepack_curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
                    let transfer = active[easy]
                else { continue }
                completed(transfer, easy, tilepack_curl_message_result(message))
            }
            // Sleeps only with nothing handed in since the inbox was emptied.
            let sleep = inbox.withLock { inbox -> Bool in
                guard inbox.isEmpty else { return false }
                inbox.polling = true
                inbox.woken = false
                return true
            }
            if sleep {
                tilepack_curl_multi_poll(multi, 1000)
                inbox.withLock { $0.polling = false }
            }
        }
        // Stopping: every transfer still here ends cancelled, then everything is freed.
        let left = inbox.withLock { inbox -> [CurlTransfer] in
            inbox.closed = true
            defer { inbox.submitted.removeAll() }
            return inbox.submitted
        }
        for transfer in left + line.drain() { end(transfer, .cancelled) }
        for transfer in Array(active.values) { finish(transfer, .cancelled) }
        for easy in idleHandles { tilepack_curl_easy_cleanup(easy) }
        idleHandles.removeAll()
        tilepack_curl_slist_free_all(sharedHeaders?.list)
        sharedHeaders = nil
        tilepack_curl_multi_cleanup(multi)
    }

    /// Ends a transfer curl has finished with `code`, or sends its request again on a new
    /// connection when its answer cannot be trusted (``CurlConnections``).
    private func completed(_ transfer: CurlTransfer, _ easy: UnsafeMutableRawPointer, _ code: CURLcode) {
        var version = 0
        if tilepack_curl_http_version(easy, &version) == CURLE_OK, version >= Int(CURL_HTTP_VERSION_2_0) {
            handOn(line.multiplexes(host: transfer.host))
        }
        let unasked = "bytes no request asked for (an unsolicited response)"
        if let found = transfer.refused, code == CURLE_ABORTED_BY_CALLBACK {
            // Nothing was written: the request goes again, whatever its method.
            if found == .bytes { unaskedHosts.insert(transfer.host) }
            guard transfer.attempts < 3 else { return refuse(transfer, "\(unasked) waited on every connection") }
            return sendAgain(transfer)
        }
        if code == CURLE_OK {
            let (found, drop) = connections.afterAnswer(transfer, httpVersion: version)
            if found == .bytes { unaskedHosts.insert(transfer.host) }
            if drop {
                guard Self.idempotent.contains(transfer.request.method), transfer.attempts < 3 else {
                    return refuse(
                        transfer,
                        "the answer was followed by \(unasked) on a reused connection, so it may be another request's; "
                            + "the transport does not send a \(transfer.request.method) again")
                }
                return sendAgain(transfer)
            }
        }
        // A head that arrived before a fault lets the response tell a cut body.
        _ = transfer.deliverHead()
        finish(transfer, code == CURLE_OK ? nil : Self.fault(code, timeout: transfer.request.timeout))
    }

    /// Ends `transfer` with nothing of what it received: a connection lost, for `reason`.
    private func refuse(_ transfer: CurlTransfer, _ reason: String) {
        transfer.rewind()
        finish(transfer, .connectionLost(reason))
    }

    /// The methods sent again after an answer that cannot be trusted (RFC 9110 §9.2.2).
    private static let idempotent: Set<String> = ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"]

    /// Drops what `transfer` received and starts it again on a new connection; it keeps its
    /// place in its host's line.
    private func sendAgain(_ transfer: CurlTransfer) {
        guard let easy = transfer.easy, active.removeValue(forKey: easy) != nil else { return }
        tilepack_curl_multi_remove_handle(multi, easy)
        connections.ended(transfer)
        release(transfer, reset: true)
        transfer.rewind()
        start(transfer)
    }

    /// Starts `transfer` if its host has a connection free; else it waits its turn in ``line``.
    private func admit(_ transfer: CurlTransfer) {
        if transfer.cancelled.withLock({ $0 }) {
            end(transfer, .cancelled)
        } else if line.admit(transfer, host: transfer.host) {
            handOn([transfer])
        }
    }

    /// Sets up a handle for `transfer` and adds it to the multi handle.
    private func start(_ transfer: CurlTransfer) {
        if transfer.cancelled.withLock({ $0 }) {
            end(transfer, .cancelled)
            return
        }
        guard let easy = idleHandles.popLast() ?? newHandle() else {
            end(transfer, .transport("curl_easy_init failed"))
            return
        }
        transfer.easy = easy
        transfer.attempts += 1
        transfer.connections = connections
        let caught = unaskedHosts.contains(transfer.host)
        transfer.ownConnection = transfer.attempts > 1 || caught
        let request = transfer.request
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        let (list, userAgent) = headerList(for: transfer)
        let milliseconds = max(1, Int(HTTPClient.seconds(request.timeout) * 1000))
        var ok =
            request.url.absoluteString.withCString { tilepack_curl_set_pointer(easy, CURLOPT_URL, $0) } == CURLE_OK
            && tilepack_curl_set_long(easy, CURLOPT_NOBODY, request.method == "HEAD" ? 1 : 0) == CURLE_OK
            // A range asks for the stored bytes (Accept-Encoding: identity): an answer encoded all
            // the same is handed over as it came, for its reader to refuse by name
            // (HTTPResponse.encodedRangeFault), not decoded (or failed as a bad encoding) here.
            && tilepack_curl_set_long(easy, CURLOPT_HTTP_CONTENT_DECODING, request.acceptsIdentityOnly ? 0 : 1) == CURLE_OK
        if request.method != "GET" && request.method != "HEAD" {
            ok = ok && request.method.withCString { tilepack_curl_set_pointer(easy, CURLOPT_CUSTOMREQUEST, $0) } == CURLE_OK
        } else {
            ok = ok && tilepack_curl_set_pointer(easy, CURLOPT_CUSTOMREQUEST, nil) == CURLE_OK
        }
        if let body = request.body {
            // curl reads the body from the request's own bytes as it sends them (a read callback,
            // rewound by a seek callback when curl sends it again), not from a copy made first:
            // the part of a multipart upload is megabytes. The handle is reset when the transfer
            // ends, so the next request is no upload.
            transfer.bodyOffset = 0
            ok =
                ok && tilepack_curl_set_long(easy, CURLOPT_POST, 1) == CURLE_OK
                && tilepack_curl_set_long(easy, CURLOPT_POSTFIELDSIZE, body.count) == CURLE_OK
                && tilepack_curl_set_callback(easy, CURLOPT_READFUNCTION, curlRead) == CURLE_OK
                && tilepack_curl_set_pointer(easy, CURLOPT_READDATA, context) == CURLE_OK
                && tilepack_curl_set_seek_callback(easy, curlSeek) == CURLE_OK
                && tilepack_curl_set_pointer(easy, CURLOPT_SEEKDATA, context) == CURLE_OK
            // Large bodies go out in larger writes (curl's default buffer is 64 KiB).
            if body.count > 1 << 20 { ok = ok && tilepack_curl_set_long(easy, CURLOPT_UPLOAD_BUFFERSIZE, 1 << 20) == CURLE_OK }
        }
        if let userAgent {
            ok = ok && userAgent.withCString { tilepack_curl_set_pointer(easy, CURLOPT_USERAGENT, $0) } == CURLE_OK
        } else {
            ok = ok && tilepack_curl_set_pointer(easy, CURLOPT_USERAGENT, nil) == CURLE_OK
        }
        ok =
            ok
            && tilepack_curl_set_pointer(easy, CURLOPT_HTTPHEADER, list) == CURLE_OK
            && tilepack_curl_set_long(easy, CURLOPT_TIMEOUT_MS, milliseconds) == CURLE_OK
            && tilepack_curl_set_pointer(easy, CURLOPT_WRITEDATA, context) == CURLE_OK
            && tilepack_curl_set_pointer(easy, CURLOPT_HEADERDATA, context) == CURLE_OK
            && (!connections.guarded || tilepack_curl_set_prereq_callback(easy, curlRequestWillBeWritten, context) == CURLE_OK)
            // A request sent again goes on a new connection; one to a host caught sending bytes
            // no request asked for goes on a connection no other request will use.
            && (!transfer.ownConnection || tilepack_curl_set_long(easy, CURLOPT_FRESH_CONNECT, 1) == CURLE_OK)
            && (!caught || tilepack_curl_set_long(easy, CURLOPT_FORBID_REUSE, 1) == CURLE_OK)
        guard ok, tilepack_curl_multi_add_handle(multi, easy) == CURLM_OK else {
            release(transfer, reset: true)
            end(transfer, .transport("libcurl refused the request"))
            return
        }
        active[easy] = transfer
    }

    /// A new handle with the options every transfer shares; `nil` when curl has no memory.
    private func newHandle() -> UnsafeMutableRawPointer? {
        guard let easy = tilepack_curl_easy_init() else { return nil }
        guard configure(easy) else {
            tilepack_curl_easy_cleanup(easy)
            return nil
        }
        return easy
    }

    /// The options every transfer shares, set once per handle (and again after a reset).
    private func configure(_ easy: UnsafeMutableRawPointer) -> Bool {
        let sockets = Unmanaged.passUnretained(connections).toOpaque()
        if connections.guarded && tilepack_curl_set_prereq_callback(easy, curlRequestWillBeWritten, nil) == CURLE_UNKNOWN_OPTION {
            // libcurl before 7.80 cannot say when a request is about to be written on a connection:
            // then no connection carries two requests (CurlConnections).
            connections.guarded = false
        }
        return tilepack_curl_set_long(easy, CURLOPT_NOSIGNAL, 1) == CURLE_OK
            && tilepack_curl_set_socket_callbacks(easy, curlSocketOpened, curlSocketClosing, sockets) == CURLE_OK
            && (connections.guarded || tilepack_curl_set_long(easy, CURLOPT_FORBID_REUSE, 1) == CURLE_OK)
            && tilepack_curl_set_long(easy, CURLOPT_FOLLOWLOCATION, 0) == CURLE_OK
            // HTTP/2 over TLS when the server offers it, HTTP/1.1 on cleartext http; a transfer
            // waits for a connection that may multiplex rather than opening one more.
            && tilepack_curl_set_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)) == CURLE_OK
            && tilepack_curl_set_long(easy, CURLOPT_PIPEWAIT, 1) == CURLE_OK
            // The encodings curl can decode, as URLSession on Linux asks for.
            && tilepack_curl_set_pointer(easy, CURLOPT_ACCEPT_ENCODING, "") == CURLE_OK
            && tilepack_curl_set_callback(easy, CURLOPT_WRITEFUNCTION, curlWrite) == CURLE_OK
            && tilepack_curl_set_callback(easy, CURLOPT_HEADERFUNCTION, curlHeader) == CURLE_OK
            // No proxy in the environment: said once here, or curl looks for one (five getenv)
            // for every transfer. With one, curl reads it as always.
            && (Self.environmentNamesProxy
                || tilepack_curl_set_pointer(easy, CURLOPT_PROXY, "") == CURLE_OK
                    && tilepack_curl_set_pointer(easy, CURLOPT_NOPROXY, "") == CURLE_OK)
    }

    /// Whether any variable curl takes a proxy from is set (read once per process).
    private static let environmentNamesProxy =
        (["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] as [String])
        .contains { ProcessInfo.processInfo.environment[$0] != nil }

    /// The header list for `transfer`'s request and the user agent to send outside it. The first
    /// set of fields the loop sees is shared for its life; a request with other fields (a
    /// conditional refresh, a range) gets a list of its own, freed with the transfer.
    private func headerList(for transfer: CurlTransfer) -> (UnsafeMutablePointer<curl_slist>?, String?) {
        let fields = transfer.request.headers
        if let shared = sharedHeaders, shared.fields == fields { return (shared.list, shared.userAgent) }
        var list: UnsafeMutablePointer<curl_slist>?
        var userAgent: String?
        for (name, value) in fields {
            guard !name.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 58 }),
                !value.utf8.contains(where: { $0 == 13 || $0 == 10 })
            else { continue }
            if name.utf8.count == 10 && name.lowercased() == "user-agent" {
                userAgent = value
            } else if value.isEmpty {
                // "Name:" with nothing after it stops curl sending a field of its own (`Expect:`).
                list = tilepack_curl_slist_append(list, "\(name):")
            } else {
                list = tilepack_curl_slist_append(list, "\(name): \(value)")
            }
        }
        if sharedHeaders == nil {
            sharedHeaders = (fields, list, userAgent)
        } else {
            transfer.headerList = list
        }
        return (list, userAgent)
    }

    /// Takes the transfer's handle out of the multi handle and ends it.
    private func finish(_ transfer: CurlTransfer, _ fault: HTTPError.Fault?) {
        guard let easy = transfer.easy, active.removeValue(forKey: easy) != nil else { return }
        tilepack_curl_multi_remove_handle(multi, easy)
        connections.ended(transfer)
        // A handle that ended a transfer cleanly keeps its options for the next one; after a
        // fault, a body or a connection of its own it starts afresh.
        release(transfer, reset: fault != nil || transfer.request.body != nil || transfer.ownConnection)
        end(transfer, fault)
    }

    /// Returns the transfer's handle to the pool with no callback context left; with `reset`,
    /// every option goes back to curl's default and the shared ones are set again.
    private func release(_ transfer: CurlTransfer, reset: Bool) {
        if let easy = transfer.easy {
            var reusable = idleHandles.count < 256
            if reusable && reset {
                tilepack_curl_easy_reset(easy)
                reusable = configure(easy)
            } else if reusable {
                reusable =
                    tilepack_curl_set_pointer(easy, CURLOPT_WRITEDATA, nil) == CURLE_OK
                    && tilepack_curl_set_pointer(easy, CURLOPT_HEADERDATA, nil) == CURLE_OK
                    && (!connections.guarded || tilepack_curl_set_prereq_callback(easy, curlRequestWillBeWritten, nil) == CURLE_OK)
            }
            if reusable { idleHandles.append(easy) } else { tilepack_curl_easy_cleanup(easy) }
        }
        transfer.easy = nil
        tilepack_curl_slist_free_all(transfer.headerList)
        transfer.headerList = nil
    }

    private func end(_ transfer: CurlTransfer, _ fault: HTTPError.Fault?) {
        transfer.response.end(fault)
        let continuation = transfer.continuation
        transfer.continuation = nil
        continuation?.resume(returning: transfer.response)
        // Its place, if it had one, goes to the next in line.
        handOn(line.finished(transfer, host: transfer.host))
    }

    /// Runs transfers whose turn came, in order, one after another: a start that fails ends its
    /// transfer, which hands its place on again, in this loop rather than one call deeper.
    private func handOn(_ transfers: [CurlTransfer]) {
        turns.append(contentsOf: transfers)
        guard !handingOn else { return }
        handingOn = true
        while !turns.isEmpty { start(turns.removeFirst()) }
        handingOn = false
    }

    static func fault(_ code: CURLcode, timeout: Duration) -> HTTPError.Fault {
        let reason = String(cString: tilepack_curl_easy_strerror(code))
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return .timedOut(timeout)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT, CURLE_SSL_CONNECT_ERROR,
            CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE:
            return .cannotConnect(reason)
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM,
            CURLE_WEIRD_SERVER_REPLY, CURLE_BAD_CONTENT_ENCODING, CURLE_HTTP3:
            return .connectionLost(reason)
        case CURLE_UNSUPPORTED_PROTOCOL:
            return .unsupportedScheme(reason)
        default:
            return .transport(reason)
        }
    }
}

#endif
