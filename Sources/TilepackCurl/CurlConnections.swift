#if canImport(CTilepackCurl)
internal import CTilepackCurl
import Foundation
@_spi(HTTP1) import TilepackHTTP

/// The guard against unsolicited responses (issue 47): the connections curl opened for one
/// ``CurlLoop``, as sockets, with what was asked on each, so that no answer is taken from bytes
/// no request asked for.
///
/// HTTP/1.1 has no way to tell an answer from a response a server sent unasked (an extra one
/// behind an answer, on a kept-alive connection): the next request written on that connection
/// takes the extra response for its answer, and every later one its predecessor's. libcurl
/// (7.88) sees the extra bytes only when they come in the read that ends an answer ("Excess
/// found", and it closes the connection); bytes behind them, or arriving later, stay in the
/// socket, and libcurl reuses a connection with bytes waiting (a readable socket is alive to
/// it). So the loop looks itself (`recv` with `MSG_PEEK`), on the loop's thread:
/// - before a request is written on a connection that has carried one
///   (`CURLOPT_PREREQFUNCTION`): bytes waiting there answer no request, so the transfer stops
///   before anything is written, curl closes the connection, and the request goes again on a
///   new one;
/// - when an answer completes: bytes waiting behind it, or a connection curl closed although
///   the answer let it stay open (curl's "Excess found"), mean the answer was followed by bytes
///   no request asked for. On a reused connection that answer may itself be an earlier extra
///   response, so it is dropped with all it carried and the request fetched again on a new
///   connection, even though it was written (an idempotent method; a POST ends as a lost
///   connection that says why, not sent again by the transport). The first answer on a new
///   connection is trusted: nothing was asked on it before, so nothing unasked can stand in
///   front of it.
///
/// A host caught once sending bytes no request asked for (on a connection it kept open) gets no
/// reused connection from the loop again: each of its requests goes on a connection of its own.
/// That bounds what no HTTP/1.1 client can catch: an extra response that reaches it only after
/// the next request was written, with the real answer arriving only after that exchange
/// completed (the bytes then surface at the next check, one answer late); it can fool the loop
/// only before the host is caught. HTTP/2 (https, where the server offers it) frames every
/// response with its stream and is not checked. Bytes followed by the end of the connection (a
/// TLS server's close_notify as it closes an idle connection) stop a request like any others,
/// but do not count against the host.
final class CurlConnections {
    /// What waits on a connection that should hold nothing.
    enum Unasked {
        /// Bytes no request asked for, on a connection its server keeps open.
        case bytes
        /// Bytes and then the end of the connection, or a broken socket: a dead connection, not
        /// held against its server.
        case closing
    }

    struct Connection {
        /// Tells this connection from a later one on the same descriptor number.
        let id: Int
        /// The local port and address, looked up once the socket is connected.
        var local: (port: Int, address: String)?
        /// Requests written on it.
        var requests = 0
        /// The handles of the transfers written on it whose end has not reached the loop: curl
        /// may write the next request on an HTTP/1.1 connection (a transfer waiting for it) in
        /// the same `curl_multi_perform` that completed the previous one, before the loop reads
        /// that completion.
        var inFlight: [UnsafeMutableRawPointer] = []
        /// Learnt from an answer's HTTP version (2 or later), or from a request written while
        /// another is still unanswered: an HTTP/2 connection frames every response with its
        /// stream, and its socket holds frames of other streams.
        var multiplexed = false
    }

    /// Where a transfer's request went: the connection's socket and id, and the request's
    /// number on it (1 for the first).
    struct Written {
        let socket: Int32
        let id: Int
        let sequence: Int
        let easy: UnsafeMutableRawPointer
    }

    private var sockets: [Int32: Connection] = [:]
    private var nextID = 0
    /// Connections curl closed while a transfer written on them had not reached the loop, by id:
    /// whether their peer had closed its side then (curl found the connection dead), rather than
    /// curl closing a connection that had sent more than the answer. Emptied as the transfers end.
    private var closedEarly: [Int: Bool] = [:]
    /// Whether libcurl calls ``requestWillBeWritten``: without `CURLOPT_PREREQFUNCTION` (libcurl
    /// before 7.80) the loop reuses no connection (`CURLOPT_FORBID_REUSE`), and nothing is checked.
    var guarded = true

    /// curl made a socket for a connection.
    func opened(_ socket: Int32) {
        sockets[socket] = Connection(id: nextID)
        nextID += 1
    }

    /// curl gives a socket up.
    func closing(_ socket: Int32) {
        if let connection = sockets.removeValue(forKey: socket), !connection.inFlight.isEmpty {
            let found = tilepack_socket_has_bytes(socket)
            closedEarly[connection.id] = found != 0 && found != 1
        }
    }

    /// Just before `transfer`'s request is written on the connection with this local address:
    /// `false` when bytes wait on a connection that carried a request before (nothing is
    /// written; ``CurlTransfer/refused`` says what was found).
    func requestWillBeWritten(_ transfer: CurlTransfer, localAddress: String, localPort: Int) -> Bool {
        guard let easy = transfer.easy, let socket = socket(localAddress: localAddress, localPort: localPort),
            var connection = sockets[socket]
        else { return true }
        if !connection.multiplexed && transfer.secure && connection.inFlight.contains(where: Self.mayMultiplex) {
            connection.multiplexed = true
        }
        if connection.requests > 0 && !connection.multiplexed, let found = Self.unasked(on: socket) {
            transfer.refused = found
            return false
        }
        connection.requests += 1
        connection.inFlight.append(easy)
        sockets[socket] = connection
        transfer.connection = Written(socket: socket, id: connection.id, sequence: connection.requests, easy: easy)
        return true
    }

    /// What waits on `socket`, looked at without reading it.
    private static func unasked(on socket: Int32) -> Unasked? {
        switch tilepack_socket_has_bytes(socket) {
        case 0, 3: nil
        case 1: .bytes
        default: .closing
        }
    }

    /// Whether the transfer on `easy`, written on a connection that now takes another request,
    /// shares it as a stream: it speaks HTTP/2, or has no answer yet (curl writes a second
    /// request on an HTTP/1.1 connection only once the first is answered). Asked of https
    /// connections only: http is HTTP/1.1 here (CURL_HTTP_VERSION_2TLS).
    private static func mayMultiplex(_ easy: UnsafeMutableRawPointer) -> Bool {
        var version = 0
        return tilepack_curl_http_version(easy, &version) != CURLE_OK || version == 0 || version >= Int(CURL_HTTP_VERSION_2_0)
    }

    /// The exchange of `transfer` ended (completed, failed or cancelled).
    func ended(_ transfer: CurlTransfer) {
        guard let written = transfer.connection else { return }
        transfer.connection = nil
        closedEarly[written.id] = nil
        if var connection = sockets[written.socket], connection.id == written.id {
            connection.inFlight.removeAll { $0 == written.easy }
            sockets[written.socket] = connection
        }
    }

    /// What followed the answer `transfer` just completed on its connection: bytes waiting
    /// behind it, or read and refused by curl, which then closed the connection. `drop`: the
    /// answer came on a connection that carried requests before, so it may be another request's.
    func afterAnswer(_ transfer: CurlTransfer, httpVersion: Int) -> (unasked: Unasked?, drop: Bool) {
        guard let written = transfer.connection else { return (nil, false) }
        let kept = sockets[written.socket].flatMap { $0.id == written.id ? $0 : nil }
        if httpVersion >= Int(CURL_HTTP_VERSION_2_0) {
            if kept != nil { sockets[written.socket]?.multiplexed = true }
            return (nil, false)
        }
        let reused = written.sequence > 1
        guard let kept else {
            if Self.closeExpected(transfer, httpVersion: httpVersion) { return (nil, false) }
            return (closedEarly[written.id] == true ? .closing : .bytes, reused)
        }
        // A request written after this one (see Connection.inFlight) was looked at before it
        // was written: the bytes now waiting are its answer.
        guard !kept.multiplexed, kept.requests == written.sequence, let found = Self.unasked(on: written.socket) else {
            return (nil, false)
        }
        return (found, reused)
    }

    /// Whether curl closes a connection after this answer whatever followed it: the answer said
    /// so (`Connection: close`, HTTP/1.0 without keep-alive), its body ran to the end of the
    /// connection (no length, not chunked), or the server answered before the whole request
    /// body was sent.
    static func closeExpected(_ transfer: CurlTransfer, httpVersion: Int) -> Bool {
        let fields = transfer.response.fields
        var options = (close: false, keepAlive: false)
        if var value = fields["connection"] {
            options = value.withUTF8 { HTTP1Syntax.connectionOptions(UnsafeRawBufferPointer($0), 0..<$0.count) }
        }
        let minor = httpVersion == Int(CURL_HTTP_VERSION_1_0) ? 0 : 1
        guard HTTP1Syntax.persists(minorVersion: minor, close: options.close, keepAlive: options.keepAlive) else { return true }
        let status = transfer.response.status ?? 0
        let bodyless = transfer.request.method == "HEAD" || status == 204 || status == 304 || status < 200
        let chunked = fields["transfer-encoding"]?.lowercased().contains("chunked") == true
        if !bodyless && !chunked && fields["content-length"] == nil { return true }
        if let body = transfer.request.body, transfer.bodyOffset < body.count { return true }
        return false
    }

    /// The socket of the connection with this local address; ports are looked up (getsockname)
    /// for sockets connected since the last look.
    private func socket(localAddress: String, localPort: Int) -> Int32? {
        var byPort: Int32?
        for (socket, connection) in sockets {
            var local = connection.local
            if local == nil {
                var text = [CChar](repeating: 0, count: 64)
                let port = tilepack_socket_local_port(socket, &text, text.count)
                guard port > 0 else { continue }
                local = (Int(port), String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
                sockets[socket]?.local = local
            }
            guard let local, local.port == localPort else { continue }
            if local.address == localAddress { return socket }
            byPort = socket
        }
        return byPort
    }
}

/// curl's `CURLOPT_SOCKOPTFUNCTION`: a socket for a connection, recorded.
let curlSocketOpened: tilepack_curl_sockopt_callback = { context, socket, purpose in
    if let context, purpose == CURLSOCKTYPE_IPCXN {
        Unmanaged<CurlConnections>.fromOpaque(context).takeUnretainedValue().opened(socket)
    }
    return CURL_SOCKOPT_OK
}

/// curl's `CURLOPT_CLOSESOCKETFUNCTION`: the socket forgotten, then closed.
let curlSocketClosing: tilepack_curl_closesocket_callback = { context, socket in
    if let context { Unmanaged<CurlConnections>.fromOpaque(context).takeUnretainedValue().closing(socket) }
    return tilepack_socket_close(socket)
}

/// curl's `CURLOPT_PREREQFUNCTION`: the request is about to be written on a connection.
let curlRequestWillBeWritten: tilepack_curl_prereq_callback = { context, _, localAddress, _, localPort in
    guard let context, let localAddress else { return CURL_PREREQFUNC_OK }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    guard let connections = transfer.connections else { return CURL_PREREQFUNC_OK }
    let go = connections.requestWillBeWritten(transfer, localAddress: String(cString: localAddress), localPort: Int(localPort))
    return go ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT
}
#endif
