#if os(Linux)
import Foundation
import Testing
import TilepackCore
import TilepackHTTP
@testable import TilepackSockets
import TilepackTestSupport

/// tilepack's own HTTP/1.1 client: the response framing on its own (every byte boundary, every
/// framing, damaged heads), and what only this transport does (the fallback, resending on a
/// reused connection the server had closed, tasks on its loops). The rules it shares with the
/// other transports are HTTPClientTests' and the prefetch suites', which run over it too.
@Suite struct SocketTransportTests {

    /// Feeds `bytes` in pieces of `step` (0: all at once) and returns what came out.
    static func parse(_ bytes: [UInt8], step: Int = 0, isHead: Bool = false, close: Bool = false)
        -> (status: Int?, fields: [String: String], body: [UInt8], end: Bool?, malformed: String?, used: Int) {
        var parser = ResponseParser(isHead: isHead)
        var status: Int?
        var fields: [String: String] = [:]
        var body: [UInt8] = []
        var end: Bool?
        var malformed: String?
        var used = 0
        let pieces = step == 0 ? [bytes[...]] : stride(from: 0, to: bytes.count, by: step).map { bytes[$0..<min(bytes.count, $0 + step)] }
        for piece in pieces where !parser.isFinished {
            let array = Array(piece)
            used += array.withUnsafeBytes { buffer in
                parser.feed(buffer) { event in
                    switch event {
                    case .head(let code, let list):
                        status = code
                        for field in list { fields[field.name] = field.value }
                    case .body(let range): body += buffer[range]
                    case .end(let reusable): end = reusable
                    case .malformed(let reason): malformed = reason
                    }
                    return true
                }
            }
        }
        if close, !parser.isFinished {
            _ = parser.endOfInput { event in
                if case .end(let reusable) = event { end = reusable }
                return true
            }
        }
        return (status, fields, body, end, malformed, used)
    }

    @Test func framingByLengthChunksOrCloseSurvivesEveryReadBoundary() {
        let fixed = Array("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nETag: \"a1\"\r\nContent-Length: 11\r\n\r\nhello world".utf8)
        let chunked = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n".utf8)
        let untilClose = Array("HTTP/1.0 200 OK\r\nServer: old\r\n\r\nhello world".utf8)
        for step in [0, 1, 2, 3, 7] {
            let a = Self.parse(fixed, step: step)
            #expect(a.status == 200 && a.body == Array("hello world".utf8) && a.end == true && a.malformed == nil, "step \(step)")
            #expect(a.fields["etag"] == "\"a1\"" && a.fields["content-type"] == "image/png", "names lower-cased, values trimmed")
            let b = Self.parse(chunked, step: step)
            #expect(b.status == 200 && b.body == Array("hello world".utf8) && b.end == true && b.malformed == nil, "step \(step)")
            let c = Self.parse(untilClose, step: step, close: true)
            #expect(c.body == Array("hello world".utf8) && c.end == false, "step \(step): read until the close, never reused")
        }
        // Bytes after a complete response are not taken: the caller does not reuse the connection.
        let twice = Self.parse(fixed + Array("garbage".utf8))
        #expect(twice.end == true && twice.used == fixed.count)
    }

    @Test func bodilessResponsesInterimHeadsAndKeepAlive() {
        let head = Self.parse(Array("HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n".utf8), isHead: true)
        #expect(head.status == 200 && head.body.isEmpty && head.end == true)
        for status in [204, 304] {
            let result = Self.parse(Array("HTTP/1.1 \(status) X\r\nContent-Length: 9\r\n\r\n".utf8))
            #expect(result.status == status && result.body.isEmpty && result.end == true)
        }
        let interim = Self.parse(Array("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8), step: 5)
        #expect(interim.status == 200 && interim.body == Array("ok".utf8))
        #expect(Self.parse(Array("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n".utf8)).end == false)
        #expect(Self.parse(Array("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n".utf8)).end == false)
        #expect(Self.parse(Array("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n".utf8)).end == true)
        // Bare LFs end lines (RFC 9112 §2.2); repeated equal lengths are one length.
        let bare = Self.parse(Array("HTTP/1.1 200 OK\nContent-Length: 2, 2\n\nok".utf8))
        #expect(bare.body == Array("ok".utf8) && bare.end == true)
    }

    @Test func damagedFramingIsRefusedWithItsReason() {
        let cases: [(String, String)] = [
            ("HTTP/2 200 OK\r\n\r\n", "not an HTTP/1.x status line"),
            ("HTTP/1.1 2000 OK\r\n\r\n", "three digits"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "Content-Length"),
            ("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", "Content-Length"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "Transfer-Encoding"),
            ("HTTP/1.1 200 OK\r\n folded: x\r\n\r\n", "folding"),
            ("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", "token"),
            ("HTTP/1.1 200 OK\r\nX: a\u{1}b\r\n\r\n", "control byte"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "hexadecimal"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n", "hexadecimal"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", "longer than its size"),
            ("HTTP/1.1 101 Switching Protocols\r\n\r\n", "101"),
        ]
        for (text, reason) in cases {
            let result = Self.parse(Array(text.utf8))
            #expect(result.malformed?.contains(reason) == true, "\(text.debugDescription): \(result.malformed ?? "accepted")")
        }
        // Lengths are bounded: a head, a chunk-size line, trailers.
        let hugeHead = Array("HTTP/1.1 200 OK\r\nX: ".utf8) + Array(repeating: UInt8(ascii: "a"), count: 70_000)
        #expect(Self.parse(hugeHead, step: 4096).malformed?.contains("64 KiB") == true)
        let longLine = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1".utf8) + Array(repeating: UInt8(ascii: " "), count: 5000)
        #expect(Self.parse(longLine, step: 100).malformed?.contains("chunk-size line") == true)
        let trailers = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n".utf8)
            + Array(repeating: Array("X-T: 1234567890\r\n".utf8), count: 400).flatMap { $0 }
        #expect(Self.parse(trailers, step: 512).malformed?.contains("trailer") == true)
        // A body cut short is not complete at the close.
        #expect(Self.parse(Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".utf8), close: true).end == nil)
    }

    @Test func randomlyDamagedResponsesNeverTrapAndStayBounded() {
        let seeds = [
            "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 11\r\n\r\nhello world",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            "HTTP/1.0 404 Not Found\r\n\r\nnothing",
            "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
        ].map { Array($0.utf8) }
        var generator = SplitMix64(seed: 17)
        for round in 0..<20_000 {
            var bytes = seeds[round % seeds.count]
            TestSupport.damage(&bytes, random: &generator, times: 1 + Int(generator.next() % 4), cutting: true)
            let whole = Self.parse(bytes, close: true)
            let pieces = Self.parse(bytes, step: 1 + Int(generator.next() % 9), close: true)
            // However the bytes are cut, the outcome is the same; a body never exceeds the input.
            #expect(whole.status == pieces.status && whole.body == pieces.body && whole.end == pieces.end
                    && (whole.malformed == nil) == (pieces.malformed == nil), "\(bytes)")
            #expect(whole.body.count <= bytes.count)
        }
    }

    @Test func requestBytesComeFromTheURLsText() throws {
        func message(_ url: String, _ headers: [String: String] = [:]) throws -> RequestMessage? {
            try RequestMessage.make(HTTPRequest(url: URL(string: url)!, headers: headers))?.get()
        }
        let plain = try #require(try message("http://tiles.example:8080/3/4/5.png?key=a%20b#frag", ["If-None-Match": "\"e\""]))
        let text = String(decoding: plain.bytes, as: UTF8.self)
        #expect(text.hasPrefix("GET /3/4/5.png?key=a%20b HTTP/1.1\r\nHost: tiles.example:8080\r\nAccept: */*\r\n"))
        #expect(text.contains("If-None-Match: \"e\"\r\n") && text.hasSuffix("\r\n\r\n"))
        #expect(plain.authority == "tiles.example:8080")
        #expect(String(decoding: try #require(try message("HTTP://host?x=1")).bytes, as: UTF8.self).hasPrefix("GET /?x=1 HTTP/1.1\r\nHost: host\r\n"))
        #expect(RequestMessage.hostAndPort("[::1]:8080")! == ("::1", 8080))
        #expect(RequestMessage.hostAndPort("host")! == ("host", 80))
        #expect(RequestMessage.hostAndPort("host:99999") == nil && RequestMessage.hostAndPort(":80") == nil)
        // Not this transport's: https, credentials.
        #expect(try message("https://host/x") == nil)
        #expect(try message("http://user:pw@host/x") == nil)
        // A header value with a line break would split the request: refused.
        #expect(throws: SocketFault.self) { try message("http://host/x", ["X-Evil": "a\r\nHost: other"]) }
    }

    /// Records what is handed to it: a stand-in for libcurl as the fallback.
    final class RecordingTransport: HTTPTransport {
        let urls = Locked<[String]>([])
        nonisolated(nonsending) func exchange(_ request: HTTPRequest, _ response: HTTPIncomingResponse) async -> HTTPIncomingResponse {
            urls.withLock { $0.append(request.url.absoluteString) }
            var response = response
            response.receiveHead(status: 200, fields: [])
            response.end(nil)
            return response
        }
    }

    @Test func httpsAndProxiesGoToTheFallback() async throws {
        let fallback = RecordingTransport()
        let client = HTTPClient(transport: SocketTransport(fallback: fallback))
        #expect(try await client.send(HTTPRequest(url: URL(string: "https://tiles.invalid/1/2/3.png")!)).status == 200)
        #expect(fallback.urls.withLock { $0 } == ["https://tiles.invalid/1/2/3.png"])
        let server = try LoopbackHTTPServer { _ in .status(200, "direct") }
        defer { server.stop() }
        let proxied = HTTPClient(transport: SocketTransport(fallback: fallback, environment: ["http_proxy": "http://proxy.invalid:3128"]))
        _ = try await proxied.send(HTTPRequest(url: URL(string: server.baseURL + "/p")!))
        #expect(server.requestCount == 0 && fallback.urls.withLock { $0.count } == 2)
        let alone = HTTPClient(transport: SocketTransport())
        await #expect(throws: HTTPError(url: "https://tiles.invalid/x", fault: .unsupportedScheme("https"))) {
            _ = try await alone.send(HTTPRequest(url: URL(string: "https://tiles.invalid/x")!))
        }
    }

    @Test func aReusedConnectionClosedByTheServerIsResentOnceOnANewOne() async throws {
        // The second request reaches a kept-alive connection that the server then drops without
        // answering, as a server closing an idle connection does at that very moment.
        let dropped = Locked(false)
        let server = try LoopbackHTTPServer { request in
            let drop = request.path == "/dropped-once" && dropped.withLock { done in
                defer { done = true }
                return !done
            }
            return drop ? .close : .status(200, request.path)
        }
        defer { server.stop() }
        let client = HTTPClient(transport: SocketTransport())
        #expect(try await client.send(HTTPRequest(url: URL(string: server.baseURL + "/first")!)).body == Data("/first".utf8))
        #expect(try await client.send(HTTPRequest(url: URL(string: server.baseURL + "/dropped-once")!)).body == Data("/dropped-once".utf8))
        #expect(server.acceptedConnections == 2 && server.requestCount == 3)
        // A new connection that drops the request is an error, not resent: the server saw it once.
        let dropping = try LoopbackHTTPServer { _ in .close }
        defer { dropping.stop() }
        await #expect(throws: HTTPError.self) {
            _ = try await client.send(HTTPRequest(url: URL(string: dropping.baseURL + "/x")!))
        }
        #expect(dropping.requestCount == 1)
    }

    @Test func tasksOnTheLoopsUseTheirOwnLoopsConnections() async throws {
        let server = try LoopbackHTTPServer { request in .status(200, request.path) }
        defer { server.stop() }
        let transport = SocketTransport(maximumConnectionsPerHost: 4, loops: 2)
        #expect(transport.taskExecutors.count == 2)
        let client = HTTPClient(transport: transport)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                group.addTask(executorPreference: transport.taskExecutors[worker % 2]) {
                    for index in 0..<50 {
                        let path = "/w\(worker)/\(index)"
                        let body = try await client.send(HTTPRequest(url: URL(string: server.baseURL + path)!)).body
                        #expect(body == Data(path.utf8))
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(server.requestCount == 200)
        // Four connections shared out over two loops: two per loop at most.
        #expect(server.acceptedConnections <= 4, "\(server.acceptedConnections) connections")
    }

    /// Sends `count` GETs of `/<prefix><index>` at once; returns each one's body or error text.
    static func sendAll(_ client: HTTPClient, _ base: String, prefix: String, count: Int, timeout: Duration = .seconds(10)) async -> [Int: String] {
        await withTaskGroup(of: (Int, String).self) { group in
            for index in 0..<count {
                group.addTask {
                    do {
                        let response = try await client.send(HTTPRequest(url: URL(string: "\(base)/\(prefix)\(index)")!, timeout: timeout))
                        return (index, String(decoding: response.body, as: UTF8.self))
                    } catch {
                        return (index, "error: \(error)")
                    }
                }
            }
            var results: [Int: String] = [:]
            for await (index, text) in group { results[index] = text }
            return results
        }
    }

    @Test func requestsArePipelinedOnceAConnectionHasAnsweredAndAnswersKeepTheirOrder() async throws {
        let server = try LoopbackHTTPServer { request in .status(200, request.path) }
        defer { server.stop() }
        let transport = SocketTransport(maximumConnectionsPerHost: 2, requestsPerConnection: 4)
        #expect(transport.requestsPerConnection(to: URL(string: server.baseURL)!) == 4)
        #expect(transport.requestsPerConnection(to: URL(string: "https://example.com/")!) == 1)
        let client = HTTPClient(transport: transport)
        // A connection that has not answered yet carries one request: the first of each is alone.
        #expect(try await client.send(HTTPRequest(url: URL(string: server.baseURL + "/first")!)).body == Data("/first".utf8))
        #expect(server.pipelinedRequests == 0)
        let results = await Self.sendAll(client, server.baseURL, prefix: "p", count: 200)
        // Every answer went to its own request, though up to four waited on a connection at once.
        #expect((0..<200).allSatisfy { results[$0] == "/p\($0)" }, "\(results.filter { $0.value != "/p\($0.key)" }.prefix(3))")
        #expect(server.requestCount == 201)
        #expect(server.acceptedConnections <= 2)
        #expect(server.pipelinedRequests > 0)
        // An HTTP/1.0 server that keeps connections alive is asked one request at a time.
        let old = try LoopbackHTTPServer { request in
            .http10(status: 200, headers: ["Connection": "keep-alive"], body: Data(request.path.utf8))
        }
        defer { old.stop() }
        let pipelining = HTTPClient(transport: SocketTransport(maximumConnectionsPerHost: 2, requestsPerConnection: 4))
        let oldAnswers = await Self.sendAll(pipelining, old.baseURL, prefix: "o", count: 100)
        #expect((0..<100).allSatisfy { oldAnswers[$0] == "/o\($0)" })
        #expect(old.acceptedConnections <= 2 && old.pipelinedRequests == 0, "\(old.acceptedConnections) connections")
        // Without pipelining, no request is sent before the answer to the one ahead of it.
        let plain = try LoopbackHTTPServer { request in .status(200, request.path) }
        defer { plain.stop() }
        let serial = HTTPClient(transport: SocketTransport(maximumConnectionsPerHost: 2))
        let answers = await Self.sendAll(serial, plain.baseURL, prefix: "s", count: 100)
        #expect((0..<100).allSatisfy { answers[$0] == "/s\($0)" })
        #expect(plain.pipelinedRequests == 0)
    }

    @Test func aConnectionIdleForAMomentTakesItsNextRequestsTogetherOneIdleLongerTakesOne() async throws {
        // One connection; each answer waits 100 ms, so the requests sent meanwhile are seen
        // arriving before it (pipelined).
        let server = try LoopbackHTTPServer { request in .delayed(.milliseconds(100), .status(200, request.path)) }
        defer { server.stop() }
        func run(idleFor pause: Duration, window: Duration) async throws -> Int {
            let client = HTTPClient(transport: SocketTransport(maximumConnectionsPerHost: 1, requestsPerConnection: 4,
                                                               pipelinedAfterIdle: window))
            let before = server.pipelinedRequests
            // Proven: it answered, and stayed open.
            _ = try await client.send(HTTPRequest(url: URL(string: server.baseURL + "/first")!))
            try await Task.sleep(for: pause)
            let results = await Self.sendAll(client, server.baseURL, prefix: "b", count: 4)
            #expect((0..<4).allSatisfy { results[$0] == "/b\($0)" })
            return server.pipelinedRequests - before
        }
        // Idle within the window: all four go out behind one another at once.
        #expect(try await run(idleFor: .zero, window: .seconds(60)) == 3)
        // Idle past it: the first goes alone; the other three follow together once it answers.
        #expect(try await run(idleFor: .milliseconds(50), window: .milliseconds(1)) == 2)
        #expect(server.acceptedConnections == 2)
    }

    @Test func requestsLeftUnansweredWhenTheServerClosesAreSentAgain() async throws {
        // One connection at a time; every tenth answer says Connection: close and the server
        // hangs up after it (as nginx does every 1,000 requests): the requests pipelined behind
        // it were never answered.
        let served = Locked(0)
        let server = try LoopbackHTTPServer { request in
            let count = served.withLock { $0 += 1; return $0 }
            guard count % 10 == 0 else { return .status(200, request.path) }
            let body = Data(request.path.utf8)
            return .raw(Data("HTTP/1.1 200 OK\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n".utf8) + body)
        }
        defer { server.stop() }
        let client = HTTPClient(transport: SocketTransport(maximumConnectionsPerHost: 1, requestsPerConnection: 4))
        _ = try await client.send(HTTPRequest(url: URL(string: server.baseURL + "/first")!))
        let results = await Self.sendAll(client, server.baseURL, prefix: "c", count: 120)
        let wrong = results.filter { $0.value != "/c\($0.key)" }.sorted { $0.key < $1.key }
        #expect(wrong.isEmpty, "\(wrong.count) wrong: \(wrong.prefix(3))")
        // A new connection after each close (the server read, and logged, only the requests it
        // answered: those it left in its buffer were sent again), and pipelining went on. (A
        // close with requests unread can reach the client as a reset that loses the last answer:
        // that request is sent again too, so the server may log a few twice.)
        #expect(server.requestCount >= 121)
        #expect(server.acceptedConnections >= 12, "\(server.acceptedConnections) connections")
        #expect(server.pipelinedRequests > 0)
    }

    @Test func aHostThatDropsAPipelinedConnectionIsAskedOneRequestAtATimeFromThenOn() async throws {
        // The tenth request overall is dropped without an answer while others wait behind it.
        let served = Locked(0)
        let server = try LoopbackHTTPServer { request in
            let count = served.withLock { $0 += 1; return $0 }
            return count == 10 ? .close : .delayed(.milliseconds(2), .status(200, request.path))
        }
        defer { server.stop() }
        let client = HTTPClient(transport: SocketTransport(maximumConnectionsPerHost: 1, requestsPerConnection: 4))
        _ = try await client.send(HTTPRequest(url: URL(string: server.baseURL + "/first")!))
        let results = await Self.sendAll(client, server.baseURL, prefix: "d", count: 40)
        // The dropped request is sent again once (a reused connection closed before answering)
        // and those behind it are sent again: every request gets its own answer.
        #expect((0..<40).allSatisfy { results[$0] == "/d\($0)" }, "\(results.filter { $0.value != "/d\($0.key)" }.prefix(3))")
        #expect(server.pipelinedRequests > 0)
        let pipelined = server.pipelinedRequests
        let later = await Self.sendAll(client, server.baseURL, prefix: "l", count: 40)
        #expect((0..<40).allSatisfy { later[$0] == "/l\($0)" })
        #expect(server.pipelinedRequests == pipelined)
    }

    @Test func aPipelinedRequestCancelledOrPastItsDeadlineEndsAtOnceAndTheOthersKeepTheirAnswers() async throws {
        // One connection; "/slow" is answered after 3 s, "/warm" after 100 ms, the rest at once.
        let server = try LoopbackHTTPServer { request in
            switch request.path {
            case "/slow": .delayed(.seconds(3), .status(200, request.path))
            case "/warm": .delayed(.milliseconds(100), .status(200, request.path))
            default: .status(200, request.path)
            }
        }
        defer { server.stop() }
        let transport = SocketTransport(maximumConnectionsPerHost: 1, requestsPerConnection: 4)
        let client = HTTPClient(transport: transport)
        // Everything below runs on the loop's own thread (a task that prefers it, its child tasks
        // too), not on the test process's shared threads, which other tests may keep busy for
        // seconds: the order of the requests and the times measured are the transport's.
        let outcome = await Task(executorPreference: transport.taskExecutors[0]) { () -> [String] in
            func get(_ path: String, timeout: Duration = .seconds(30)) async -> (String, Duration) {
                let sent = ContinuousClock.now
                do {
                    let response = try await client.send(HTTPRequest(url: URL(string: server.baseURL + path)!, timeout: timeout))
                    return (String(decoding: response.body, as: UTF8.self), ContinuousClock.now - sent)
                } catch {
                    return (error.fault == .cancelled ? "cancelled" : error.reason, ContinuousClock.now - sent)
                }
            }
            // "/slow" waits for "/warm"'s answer, then goes out on a connection that has just
            // answered and stayed open: where requests are pipelined.
            async let warm = get("/warm")
            async let slow = get("/slow")
            var notes: [String] = []
            if await warm.0 != "/warm" { notes.append("warm: \(await warm.0)") }
            for _ in 0..<500 where server.requestCount < 2 { try? await Task.sleep(for: .milliseconds(2)) }
            // Now behind "/slow": one cancelled while it waits, one past its deadline.
            let cancelled = Task(executorPreference: transport.taskExecutors[0]) { await get("/cancelled") }
            let late = await get("/late", timeout: .milliseconds(300))
            if !late.0.contains("no complete answer within") { notes.append("late: \(late.0)") }
            // Ended at its deadline, not when its answer came (after "/slow"'s, 3 s after it was sent).
            if late.1 >= .milliseconds(1500) { notes.append("late ended after \(late.1)") }
            cancelled.cancel()
            let ended = await cancelled.value
            if ended.0 != "cancelled" { notes.append("cancelled: \(ended.0)") }
            if ended.1 >= .milliseconds(2500) { notes.append("cancelled ended after \(ended.1)") }
            if await slow.0 != "/slow" { notes.append("slow: \(await slow.0)") }
            return notes
        }.value
        #expect(outcome.isEmpty, "\(outcome)")
        // The answers to the two ended requests came and were dropped: later requests on the same
        // connection get their own.
        let after = await Self.sendAll(client, server.baseURL, prefix: "z", count: 8)
        #expect((0..<8).allSatisfy { after[$0] == "/z\($0)" }, "\(after)")
        // The two were pipelined behind "/slow" (the server, which reads what has arrived when
        // it has answered, finds at least the second already read); the connection carried on
        // (or, if the expired one's answer came apart from the rest, was replaced).
        #expect(server.pipelinedRequests >= 1)
        #expect(server.acceptedConnections <= 2)
    }
}
#endif
