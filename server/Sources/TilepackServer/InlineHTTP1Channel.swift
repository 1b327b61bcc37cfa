import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import TilepackRequestHead

@_spi(HTTP1) import enum TilepackHTTP.HTTP1Syntax

/// A connection of `tilepack serve`: HTTP/1.1 on Hummingbird's server core (binding, the
/// connection limit, graceful shutdown), every request parsed (``RequestHead``) and answered
/// inline, on the event loop that read it (where Hummingbird's own `HTTP1Channel` hands it to a
/// task), its answer written as one buffer.
///
/// Answering a tile is synchronous work of a few microseconds (a `pread` or an SQLite lookup in
/// the page cache, then headers), so it runs where the request was read, as nginx's workers do.
/// Hummingbird's own responder would hand each request to a Swift task on the cooperative pool
/// and its response back to the event loop: two thread switches per request, most of the cost of
/// a tile (measured in `tools/bench-serve.sh`).
///
/// A tile of a remote archive whose bytes are not held (neither in its first request's bytes nor
/// in its cache) waits for the store, milliseconds to seconds: that answer is made on a thread of
/// `storeReads` instead, so the loop goes on answering the other connections meanwhile.
struct InlineHTTP1Channel: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let channel: any Channel
    }

    let service: TileService
    let idleTimeout: TimeAmount
    let headerTimeout: TimeAmount
    let connections: ConnectionRegistry
    /// Where answers that wait for a remote store are made; `nil` when no archive is remote.
    let storeReads: NIOThreadPool?

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            // One handler: bytes in, answers out. Parsing, pipelining order, keep-alive, idle
            // and header timeouts, quiescing, errors and back-pressure are its rules, in one place.
            try channel.pipeline.syncOperations.addHandler(
                TileRequestHandler(
                    service: service, idleTimeout: idleTimeout, headerTimeout: headerTimeout, connections: connections,
                    storeReads: storeReads))
            return Value(channel: channel)
        }
    }

    /// The connection lives in its handler; this only waits for it to close (on graceful shutdown
    /// Hummingbird's server sends every connection `ChannelShouldQuiesceEvent`).
    func handle(value: Value, logger: Logger) async {
        try? await value.channel.closeFuture.get()
    }
}

/// Answers each request of one connection with ``TileService``, synchronously and so in order
/// (pipelined requests included): the head in, the response out, `HEAD` without its body (but with
/// its length), `Date` and `Server` added, metrics recorded.
///
/// The connection rules (`Specs/serve.md`): keep-alive as HTTP/1.0 and 1.1 say; closed after
/// `idleTimeout` with nothing received (between requests or in the middle of one); a head not
/// whole `headerTimeout` after its first byte answered 408 and closed; a request that
/// does not parse gets 400 (431 when its head is too large, 505 for another HTTP version) and the
/// connection closes; a request with a body is answered and the connection closed, its body
/// unread (no resource takes one); on graceful shutdown an idle connection closes at once and a
/// busy one after its answer; a client that does not read its answers is not read from either,
/// so answers never pile up in memory.
///
/// A request whose answer waits for a remote store (``TileService/respondWithoutWaiting(to:)``
/// says so) is answered on a thread of `storeReads`; meanwhile this connection reads nothing more
/// and answers nothing else (its answers stay in order), and its idle timeout does not run. The
/// answer is written on the loop when it comes, then the requests that arrived meanwhile are answered.
final class TileRequestHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let service: TileService
    private let idleTimeout: TimeAmount
    private let headerTimeout: TimeAmount
    private let connections: ConnectionRegistry
    private let storeReads: NIOThreadPool?
    /// Whether an answer is being made on a thread of `storeReads`.
    private var waiting = false
    /// This connection in the registry: when it last completed a head.
    private var entry: ConnectionRegistry.Entry?
    /// When the first byte of the head being received came; `nil` between requests.
    private var headStarted: NIODeadline?
    /// When the scheduled timeout check runs.
    private var checkAt = NIODeadline.distantFuture
    /// Bytes of a request head not complete yet.
    private var received: ByteBuffer?
    private var quiescing = false
    private var closing = false
    private var lingering = false
    private var inputClosed = false
    private var lingered = 0
    private var readHeld = false
    private var unflushed = false
    private var lastRead = NIODeadline.now()
    private var idleCheck: Scheduled<Void>?
    private var date = HTTPDate()

    init(
        service: TileService, idleTimeout: TimeAmount, headerTimeout: TimeAmount, connections: ConnectionRegistry,
        storeReads: NIOThreadPool? = nil
    ) {
        self.service = service
        self.idleTimeout = idleTimeout
        self.headerTimeout = headerTimeout
        self.connections = connections
        self.storeReads = storeReads
    }

    func handlerAdded(context: ChannelHandlerContext) {
        lastRead = .now()
        let entry = ConnectionRegistry.Entry(channel: context.channel, now: lastRead.uptimeNanoseconds)
        connections.add(entry)
        self.entry = entry
        scheduleIdleCheck(context: context, at: lastRead + idleTimeout)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleCheck?.cancel()
        idleCheck = nil
        if let entry { connections.remove(entry) }
        entry = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastRead = .now()
        guard !closing else {
            if lingering {
                lingered += unwrapInboundIn(data).readableBytes
                if lingered > Self.lingerBytes { context.close(promise: nil) }
            }
            return
        }
        var bytes = unwrapInboundIn(data)
        var searched = 0
        if var earlier = received {
            searched = earlier.readableBytes
            earlier.writeBuffer(&bytes)
            bytes = earlier
            received = nil
        }
        // Kept, unparsed, until the answer the connection waits for is written.
        if waiting {
            received = bytes
            return
        }
        answerHeads(in: bytes, searched: searched, context: context)
    }

    /// Answers every complete head in `bytes`, in order, until one waits for the store; the
    /// answers go out together (one flush) when the read is done. Bytes kept from earlier reads
    /// (`searched` of them) are parsed again only once a head can have ended in the new ones (a
    /// fresh read is parsed at once: no rescan). What is left is kept in `received`.
    private func answerHeads(in bytes: ByteBuffer, searched: Int, context: ChannelHandlerContext) {
        var bytes = bytes
        var searched = searched
        while !closing, bytes.readableBytes > 0 {
            if waiting {
                received = bytes
                return
            }
            let ended = searched == 0 || bytes.withUnsafeReadableBytes { HTTP1Syntax.endOfHead($0, after: searched) != nil }
            let parse =
                ended || bytes.readableBytes >= RequestHead.maximumSize
                ? bytes.withUnsafeReadableBytes { RequestHead.parse($0) } : .incomplete
            searched = 0
            switch parse {
            case .incomplete:
                received = bytes
                if headStarted == nil {
                    // The header deadline runs from the head's first byte.
                    let deadline = lastRead + headerTimeout
                    headStarted = lastRead
                    if deadline < checkAt {
                        idleCheck?.cancel()
                        scheduleIdleCheck(context: context, at: deadline)
                    }
                }
                return
            case .invalid(let status, let reason):
                refuse(status: status, reason: reason, context: context)
                return
            case .complete(let head, let length):
                bytes.moveReaderIndex(forwardBy: length)
                headStarted = nil
                entry?.madeProgress(at: lastRead.uptimeNanoseconds)
                respond(to: head, context: context)
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if unflushed {
            unflushed = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    private func respond(to request: RequestHead, context: ChannelHandlerContext) {
        let start = DispatchTime.now().uptimeNanoseconds
        guard let storeReads else { return write(service.respond(to: request), for: request, start: start, context: context) }
        if let answer = service.respondWithoutWaiting(to: request) { return write(answer, for: request, start: start, context: context) }
        // The store is asked on a thread of the pool; the loop goes on with other connections.
        waiting = true
        let service = self.service
        storeReads.runIfActive(eventLoop: context.eventLoop) { service.respond(to: request) }.assumeIsolated().whenComplete {
            [self] result in
            waiting = false
            guard !closing else { return }
            // A pool that stopped (the server shuts down) made no answer.
            let answer =
                (try? result.get())
                ?? ServerResponse(status: .serviceUnavailable, body: context.channel.allocator.buffer(string: "shutting down\n"))
            lastRead = .now()
            write(answer, for: request, start: start, context: context)
            // What arrived meanwhile, then reading again.
            if let pending = received {
                received = nil
                answerHeads(in: pending, searched: 0, context: context)
            }
            if unflushed {
                unflushed = false
                context.flush()
            }
            guard !waiting, !closing else { return }
            if inputClosed {
                closeAfterInputClosed(context: context)
            } else if readHeld, context.channel.isWritable {
                readHeld = false
                context.read()
            }
        }
    }

    /// Writes `answer` (queued: the flush comes when the read is done, or at once when the
    /// connection closes after it) and records it.
    private func write(_ answer: ServerResponse, for request: RequestHead, start: UInt64, context: ChannelHandlerContext) {
        // A request with a body is the connection's last: its body is not read.
        let keepAlive = request.keepAlive && !request.hasBody && !quiescing
        let length = answer.body?.readableBytes ?? 0
        let sendsBody = request.method != .head && length > 0
        var buffer = context.channel.allocator.buffer(capacity: 320 + (sendsBody ? length : 0))
        Self.writeStatusLine(answer.status, minorVersion: request.minorVersion, into: &buffer)
        for field in answer.headers {
            Self.writeField(field.name.rawName, field.value, into: &buffer)
        }
        Self.writeField("Date", date.now(), into: &buffer)
        buffer.writeStaticString("Server: tilepack\r\n")
        // 204 and 304 have no body by definition, so no framing either; every other answer says
        // its length (for HEAD the length GET would send).
        if answer.status.code != 204, answer.status.code != 304 {
            buffer.writeStaticString("Content-Length: ")
            Self.writeDecimal(length, into: &buffer)
            buffer.writeStaticString("\r\n")
        }
        if !keepAlive, request.minorVersion >= 1 { buffer.writeStaticString("Connection: close\r\n") }
        if keepAlive, request.minorVersion == 0 { buffer.writeStaticString("Connection: keep-alive\r\n") }
        buffer.writeStaticString("\r\n")
        if sendsBody, let body = answer.body { buffer.writeImmutableBuffer(body) }
        if keepAlive {
            context.write(wrapOutboundOut(buffer), promise: nil)
            unflushed = true
        } else {
            closeAfter(buffer, context: context)
        }
        let elapsed = DispatchTime.now().uptimeNanoseconds &- start
        let bodyBytes = request.method == .head ? 0 : length
        service.metrics.record(status: answer.status.code, bodyBytes: bodyBytes, nanoseconds: Int64(elapsed))
    }

    /// A request that cannot be read: its status with the reason as text, then the connection
    /// closes (nginx does the same).
    private func refuse(status: Int, reason: String, context: ChannelHandlerContext) {
        let body = reason + "\n"
        var buffer = context.channel.allocator.buffer(capacity: 256 + body.utf8.count)
        Self.writeStatusLine(Self.refusal(status), minorVersion: 1, into: &buffer)
        Self.writeField("Date", date.now(), into: &buffer)
        buffer.writeStaticString("Server: tilepack\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ")
        Self.writeDecimal(body.utf8.count, into: &buffer)
        buffer.writeStaticString("\r\nConnection: close\r\n\r\n")
        buffer.writeString(body)
        service.metrics.record(status: status, bodyBytes: body.utf8.count, nanoseconds: 0)
        closeAfter(buffer, context: context)
    }

    /// The statuses ``RequestHead`` refuses a request with, with their reason phrases.
    static func refusal(_ code: Int) -> HTTPResponse.Status {
        switch code {
        case 408: .requestTimeout
        case 431: HTTPResponse.Status(code: 431, reasonPhrase: "Request Header Fields Too Large")
        case 505: HTTPResponse.Status(code: 505, reasonPhrase: "HTTP Version Not Supported")
        default: .badRequest
        }
    }

    /// `HTTP/1.x code reason`.
    private static func writeStatusLine(_ status: HTTPResponse.Status, minorVersion: Int, into buffer: inout ByteBuffer) {
        buffer.writeStaticString(minorVersion == 0 ? "HTTP/1.0 " : "HTTP/1.1 ")
        writeDecimal(status.code, into: &buffer)
        buffer.writeStaticString(" ")
        buffer.writeString(status.reasonPhrase)
        buffer.writeStaticString("\r\n")
    }

    /// One `name: value` header line. A control byte in a value (there should be none: the values
    /// are the server's own or checked request fields) goes out as a space, so no value can end
    /// the line early.
    private static func writeField(_ name: String, _ value: String, into buffer: inout ByteBuffer) {
        buffer.writeString(name)
        buffer.writeStaticString(": ")
        let clean =
            value.utf8.withContiguousStorageIfAvailable { bytes in
                bytes.allSatisfy { $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }
            } ?? value.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }
        if clean {
            buffer.writeString(value)
        } else {
            buffer.writeBytes(value.utf8.map { $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 ? $0 : 0x20 })
        }
        buffer.writeStaticString("\r\n")
    }

    /// A non-negative integer in decimal digits.
    private static func writeDecimal(_ value: Int, into buffer: inout ByteBuffer) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for any Int
        withUnsafeMutableBytes(of: &digits) { space in
            var index = space.count
            var rest = max(0, value)
            repeat {
                index -= 1
                space[index] = UInt8(0x30 + rest % 10)
                rest /= 10
            } while rest > 0
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: space[index...]))
        }
    }

    /// Writes the last answer, then closes; nothing more is answered meanwhile.
    ///
    /// The close lingers, as nginx's does: the answer is followed by a FIN, and whatever the
    /// client still sends (the body of its request, the rest of a head too large) is read and
    /// dropped until it closes too, for at most ``lingerTime`` and ``lingerBytes``. Closing with
    /// bytes unread would make the kernel send a reset, which can destroy the answer in the
    /// client's buffers before it reads it.
    private func closeAfter(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        closing = true
        received = nil
        unflushed = false
        let loop = context.eventLoop.assumeIsolatedUnsafeUnchecked()
        context.writeAndFlush(wrapOutboundOut(buffer)).assumeIsolated().whenComplete { [self] result in
            guard case .success = result, !inputClosed else { return context.close(promise: nil) }
            lingering = true
            let halfClosed = context.eventLoop.makePromise(of: Void.self)
            context.close(mode: .output, promise: halfClosed)
            halfClosed.futureResult.assumeIsolated().whenFailure { _ in context.close(promise: nil) }
            loop.scheduleTask(in: Self.lingerTime) { context.close(promise: nil) }
        }
    }

    /// How long, and for how many bytes, a closing connection still reads what the client sends.
    static let lingerTime = TimeAmount.seconds(2)
    static let lingerBytes = 1 << 20

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !closing else { return }
        closing = true
        context.close(promise: nil)
    }

    /// The client sends nothing more: the answers already written go out, then the connection closes.
    private func closeAfterInputClosed(context: ChannelHandlerContext) {
        closing = true
        unflushed = false
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(capacity: 0)))
            .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed? = event as? ChannelEvent {
            // The client sends nothing more (Hummingbird's server allows half-closed
            // connections): a head not complete yet never will be. The answers already written
            // go out, then the connection closes, rather than waiting for the idle timeout.
            inputClosed = true
            // Heads that arrived while an answer waited for the store are answered after it.
            if !waiting { received = nil }
            if lingering {
                context.close(promise: nil)
            } else if !closing, !waiting {
                closeAfterInputClosed(context: context)
            }
            return
        }
        if event is ChannelShouldQuiesceEvent {
            quiescing = true
            // Between requests: close now. In the middle of one: its answer says close.
            if received == nil, !closing, !waiting {
                closing = true
                if unflushed { context.flush() }
                context.close(promise: nil)
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Back-pressure: no reading while the socket does not take our answers.

    func read(context: ChannelHandlerContext) {
        if context.channel.isWritable, !waiting {
            context.read()
        } else {
            readHeld = true
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, readHeld, !waiting {
            readHeld = false
            context.read()
        }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Idle timeout

    private func scheduleIdleCheck(context: ChannelHandlerContext, at deadline: NIODeadline) {
        checkAt = deadline
        idleCheck = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: deadline) { [self] in
            let now = NIODeadline.now()
            // Waiting for the store is not idleness (the store's timeout bounds the wait).
            if waiting {
                scheduleIdleCheck(context: context, at: now + idleTimeout)
                return
            }
            if let headStarted, headStarted + headerTimeout <= now, !closing {
                // A head still arriving at its deadline (nginx's client_header_timeout): 408.
                idleCheck = nil
                checkAt = .distantFuture
                refuse(
                    status: 408,
                    reason: "the request head did not arrive within \(String(format: "%g", Double(headerTimeout.nanoseconds) / 1e9)) s",
                    context: context)
                return
            }
            let due = lastRead + idleTimeout
            if due <= now {
                idleCheck = nil
                checkAt = .distantFuture
                closing = true
                context.close(promise: nil)
            } else {
                scheduleIdleCheck(context: context, at: headStarted.map { min(due, $0 + headerTimeout) } ?? due)
            }
        }
    }
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
