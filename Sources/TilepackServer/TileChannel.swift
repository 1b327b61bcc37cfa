import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// A connection of `tilepack serve`: HTTP/1.1 on Hummingbird's server (binding, the connection
/// limit, graceful shutdown, idle timeout), with every request answered on the event loop that
/// read it.
///
/// Answering a tile is synchronous work of a few microseconds (a `pread` or an SQLite lookup in
/// the page cache, then headers), so it runs where the request was decoded, as nginx's workers do.
/// Hummingbird's own responder would hand each request to a Swift task on the cooperative pool
/// and its response back to the event loop: two thread switches per request, most of the cost of
/// a tile (measured in `tools/bench-serve.sh`).
struct TileChannel: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let channel: any Channel
    }

    let service: TileService
    let idleTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            // NIO's HTTP/1 decoder and encoder only: pipelining order, keep-alive, idle timeout,
            // quiescing, parse errors and back-pressure are the request handler's, in one place.
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                withPipeliningAssistance: false, withServerUpgrade: nil, withErrorHandling: false, withOutboundHeaderValidation: false)
            try channel.pipeline.syncOperations.addHandler(TileRequestHandler(service: service, idleTimeout: idleTimeout))
            return Value(channel: channel)
        }
    }

    /// The connection lives in its handlers; this only waits for it to close (on graceful shutdown
    /// Hummingbird's server sends every connection `ChannelShouldQuiesceEvent`).
    func handle(value: Value, logger: Logger) async {
        try? await value.channel.closeFuture.get()
    }
}

/// Answers each request of one connection with ``TileService``, synchronously and so in order
/// (pipelined requests included): the head in, the response out, `HEAD` without its body (but with
/// its length), `Date` and `Server` added, metrics recorded. A request body is read and dropped (no
/// route takes one).
///
/// The connection rules (`Specs/serve.md`): keep-alive as HTTP/1.0 and 1.1 say; closed after
/// `idleTimeout` with nothing received (between requests or in the middle of one); a request that
/// does not parse gets 400 and the connection closes; on graceful shutdown an idle connection
/// closes at once and a busy one after its answer; a client that does not read its answers is not
/// read from either, so answers never pile up in memory.
final class TileRequestHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let service: TileService
    private let idleTimeout: TimeAmount
    private var head: HTTPRequestHead?
    private var quiescing = false
    private var closing = false
    private var readHeld = false
    private var lastRead = NIODeadline.now()
    private var idleCheck: Scheduled<Void>?
    private var date = HTTPDate()

    init(service: TileService, idleTimeout: TimeAmount) {
        self.service = service
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        lastRead = .now()
        scheduleIdleCheck(context: context, at: lastRead + idleTimeout)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleCheck?.cancel()
        idleCheck = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastRead = .now()
        guard !closing else { return }
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            head = requestHead
        case .body:
            break
        case .end:
            guard let requestHead = head else { return }
            head = nil
            respond(to: requestHead, context: context)
        }
    }

    private func respond(to requestHead: HTTPRequestHead, context: ChannelHandlerContext) {
        let start = DispatchTime.now().uptimeNanoseconds
        let answer = Self.serviceRequest(requestHead).map { service.respond(to: $0) } ?? ServerResponse(status: .badRequest)
        let keepAlive = requestHead.isKeepAlive && !quiescing
        var headers = HTTPHeaders(answer.headers)
        headers.add(name: "Date", value: date.now())
        headers.add(name: "Server", value: "tilepack")
        let length = answer.body?.readableBytes ?? 0
        // 204 and 304 have no body by definition, so no framing either; every other answer says
        // its length (for HEAD the length GET would send), so the encoder never chunks.
        if answer.status.code != 204, answer.status.code != 304 {
            headers.add(name: "Content-Length", value: String(length))
        }
        if !keepAlive, requestHead.version.minor >= 1 { headers.add(name: "Connection", value: "close") }
        if keepAlive, requestHead.version.minor == 0 { headers.add(name: "Connection", value: "keep-alive") }
        let status = HTTPResponseStatus(statusCode: answer.status.code, reasonPhrase: answer.status.reasonPhrase)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: requestHead.version, status: status, headers: headers))), promise: nil)
        if requestHead.method != .HEAD, let body = answer.body, length > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        if keepAlive {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            closeAfter(wrapOutboundOut(.end(nil)), context: context)
        }
        let elapsed = DispatchTime.now().uptimeNanoseconds &- start
        let bodyBytes = requestHead.method == .HEAD ? 0 : length
        service.metrics.record(status: answer.status.code, bodyBytes: bodyBytes, nanoseconds: Int64(elapsed))
    }

    /// The header fields ``TileService`` reads; a request's other fields (cookies, user agents and
    /// the like) are not copied for it.
    static let consultedFields: [HTTPField.Name] = [.acceptEncoding, .ifNoneMatch, .authorization, .origin, .accessControlRequestMethod]

    /// The request as ``TileService`` takes it: method, target, `Host` as the authority, and the
    /// consulted fields (each occurrence, in order); `nil` for a method that is not an HTTP token.
    static func serviceRequest(_ head: HTTPRequestHead) -> HTTPRequest? {
        guard let method = HTTPRequest.Method(head.method.rawValue) else { return nil }
        var fields = HTTPFields()
        var authority: String?
        for (name, value) in head.headers {
            if authority == nil, asciiCaseInsensitiveEqual(name, "host") {
                authority = value
            } else if let consulted = consultedFields.first(where: { asciiCaseInsensitiveEqual(name, $0.canonicalName) }) {
                fields.append(HTTPField(name: consulted, value: value))
            }
        }
        return HTTPRequest(method: method, scheme: nil, authority: authority, path: head.uri, headerFields: fields)
    }

    /// Writes the last part, then closes; nothing more is read or answered meanwhile.
    private func closeAfter(_ part: NIOAny, context: ChannelHandlerContext) {
        closing = true
        context.writeAndFlush(part).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !closing else { return }
        if error is HTTPParserError {
            // The decoder stops at the first malformed byte: answer 400 and close, as nginx does.
            var headers = HTTPHeaders()
            headers.add(name: "Connection", value: "close")
            headers.add(name: "Content-Length", value: "0")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .badRequest, headers: headers))), promise: nil)
            service.metrics.record(status: 400, bodyBytes: 0, nanoseconds: 0)
            closeAfter(wrapOutboundOut(.end(nil)), context: context)
        } else {
            closing = true
            context.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            quiescing = true
            // Between requests: close now. In the middle of one: its answer says close.
            if head == nil, !closing {
                closing = true
                context.close(promise: nil)
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Back-pressure: no reading while the socket does not take our answers.

    func read(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            context.read()
        } else {
            readHeld = true
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, readHeld {
            readHeld = false
            context.read()
        }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Idle timeout

    private func scheduleIdleCheck(context: ChannelHandlerContext, at deadline: NIODeadline) {
        idleCheck = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: deadline) { [self] in
            let due = lastRead + idleTimeout
            if due <= .now() {
                idleCheck = nil
                closing = true
                context.close(promise: nil)
            } else {
                scheduleIdleCheck(context: context, at: due)
            }
        }
    }
}

/// Whether two header names are equal ignoring ASCII case (`lowercase` is already lower case).
func asciiCaseInsensitiveEqual(_ name: String, _ lowercase: String) -> Bool {
    guard name.utf8.count == lowercase.utf8.count else { return false }
    return zip(name.utf8, lowercase.utf8).allSatisfy { byte, lower in (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) == lower }
}

/// The `Date` header (RFC 9110 IMF-fixdate), formatted once a second per connection.
struct HTTPDate {
    private var second = -1
    private var text = ""

    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    mutating func now() -> String {
        let seconds = time(nil)
        if seconds == second { return text }
        second = seconds
        text = Self.format(seconds)
        return text
    }

    static func format(_ seconds: Int) -> String {
        var clock = time_t(seconds)
        var parts = tm()
        gmtime_r(&clock, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
