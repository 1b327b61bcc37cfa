import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackTestSupport

/// Issue 47, item 1: an unsolicited response must never answer a request, whenever it comes. The
/// server sends one extra response on a kept-alive connection, at one of four moments; the
/// client asks for /0, /1, /2, /3 one after another over one connection at a time, and every
/// answer must be its own request's.
///
/// Answers are 24,000 bytes, more than libcurl reads with a response head (16 KiB): libcurl
/// then reads the body by its length and leaves whatever follows it in the socket (a small
/// answer and the extra bytes behind it come in one read, which libcurl sees and closes).
@Suite struct UnsolicitedResponseTimingTests {
    enum Timing: String, CaseIterable, CustomStringConvertible, Sendable {
        /// In the write of /1's answer, right behind it.
        case sameWrite
        /// In a write of its own right after /1's answer; the client asks for /2 once it is in its
        /// socket (the server says so).
        case separateWrite
        /// Once the client's exchange of /1 completed and the connection went back to the pool;
        /// the client asks for /2 once it is in its socket.
        case delayed
        /// Once /2 arrived, ahead of its answer in the same write: the client had written /2.
        case beforeNextAnswer

        var description: String { rawValue }
    }

    static func body(_ path: String) -> Data { Data("answer to \(path) ".utf8) + Data(repeating: 0x2E, count: 24_000) }
    /// The extra response: a whole 200 of an answer's size, for a path nobody asked for.
    static let extra = Data("HTTP/1.1 200 OK\r\nContent-Length: \(body("/x").count)\r\n\r\n".utf8) + body("/x")

    /// The server and the client's events the server waits for or signals.
    final class Scenario: Sendable {
        let server: LoopbackHTTPServer
        /// Signalled by the client when its exchange of /1 completed.
        let completed = DispatchSemaphore(value: 0)
        /// Signalled by the server once the extra response is in the client's socket.
        let sent = DispatchSemaphore(value: 0)
        let timing: Timing

        init(_ timing: Timing) throws {
            self.timing = timing
            let injected = Locked(false)
            let (completed, sent) = (completed, sent)
            server = try LoopbackHTTPServer { request in
                let body = UnsolicitedResponseTimingTests.body(request.path)
                let extra = UnsolicitedResponseTimingTests.extra
                let path = timing == .beforeNextAnswer ? "/2" : "/1"
                // One extra response, behind (or ahead of) the first answer to `path`.
                guard request.path == path, !injected.withLock({ $0 }) else { return .respond(status: 200, headers: [:], body: body) }
                injected.withLock { $0 = true }
                switch timing {
                case .sameWrite: return .unsolicited(status: 200, headers: [:], body: body, extra: extra)
                case .separateWrite:
                    return .unsolicitedAfter(status: 200, headers: [:], body: body, extra: extra, sent: { sent.signal() })
                case .delayed:
                    return .unsolicitedAfter(
                        status: 200, headers: [:], body: body, extra: extra, gate: { _ = completed.wait(timeout: .now() + 120) },
                        sent: { sent.signal() })
                case .beforeNextAnswer: return .unsolicitedBefore(extra: extra, status: 200, headers: [:], body: body)
                }
            }
        }

        /// Asks for /0 to /3 in turn over one connection at a time of `transport`, ordering /2
        /// after the extra response as the timing says, and returns the requests answered with
        /// another's body, as "path: what came". On a thread of its own: a connection idle past
        /// libcurl's 118 s limit (a starved test task in a full run) would be another connection.
        func misanswered(over transport: TestTransport) async throws -> [String] {
            let client = HTTPClient(transport: transport.make(maximumConnectionsPerHost: 1))
            return try await onOwnThread { try await self.misanswered(client) }
        }

        private func misanswered(_ client: HTTPClient) async throws -> [String] {
            var wrong: [String] = []
            for index in 0..<4 {
                let path = "/\(index)"
                if index == 2 && (timing == .separateWrite || timing == .delayed) {
                    try await onThread { [sent] in _ = sent.wait(timeout: .now() + 120) }
                }
                let got: Data
                do {
                    got = try await client.send(HTTPRequest(url: URL(string: server.baseURL + path)!)).body
                } catch {
                    got = Data("\(error)".utf8)
                }
                if got != UnsolicitedResponseTimingTests.body(path) { wrong.append("\(path): \(String(decoding: got.prefix(40), as: UTF8.self))") }
                if index == 1 { completed.signal() }
            }
            return wrong
        }
    }

    /// URLSession's connections are Foundation's: on Linux (FoundationNetworking over libcurl
    /// 7.88, which reuses a connection with bytes waiting) the extra response answers /2 and /2's
    /// answer /3, in all four timings, every run: this test documents it (README's module table).
    /// Apple's URLSession has not been seen here.
    @Test(arguments: Timing.allCases)
    func urlSessionTakesTheExtraResponseForTheNextAnswer(_ timing: Timing) async throws {
        let scenario = try Scenario(timing)
        defer { scenario.server.stop() }
        let wrong = try await scenario.misanswered(over: .urlSession)
        let shifted = ["/2: answer to /x " + String(repeating: ".", count: 27), "/3: answer to /2 " + String(repeating: ".", count: 27)]
        #if os(Linux)
        withKnownIssue("FoundationNetworking takes an unsolicited response for the next request's answer") {
            #expect(wrong.isEmpty, "\(wrong)")
        }
        #expect(wrong == shifted, "what FoundationNetworking did: \(wrong)")
        #expect(scenario.server.acceptedConnections == 1 && scenario.server.requestCount == 4)
        #else
        withKnownIssue("not seen on Apple platforms", isIntermittent: true) { #expect(wrong.isEmpty, "\(wrong)") }
        #endif
    }

    #if os(Linux)
    @Test(arguments: Timing.allCases)
    func libcurlAnswersEveryRequestWithItsOwnAnswer(_ timing: Timing) async throws {
        let scenario = try Scenario(timing)
        defer { scenario.server.stop() }
        let wrong = try await scenario.misanswered(over: .curl)
        #expect(wrong.isEmpty, "\(wrong)")
        // The connection that carried the extra response was given up, and the server, caught,
        // gets a new connection for each request after (none is reused: "connections").
        let (connections, requests) = (scenario.server.acceptedConnections, scenario.server.requestCount)
        switch timing {
        case .sameWrite:
            // /1's answer came on a reused connection with bytes behind it: dropped, and asked
            // again on a new connection; /2 and /3 on one each.
            #expect(scenario.server.requests(to: "/1") == 2 && requests == 5 && connections == 4, "\(connections) connections")
        case .delayed:
            // /2 was never written on the connection holding the extra bytes.
            #expect(scenario.server.requests(to: "/2") == 1 && requests == 4 && connections == 3, "\(connections) connections")
        case .beforeNextAnswer:
            // /2 was written and its "answer" (the extra) had its real answer behind it: asked again.
            #expect(scenario.server.requests(to: "/2") == 2 && requests == 5 && connections == 3, "\(connections) connections")
        case .separateWrite:
            // Whether /1's exchange ended before the extra bytes arrived is the machine's to
            // decide: /1 asked again (as in the same write), or /2 not written (as delayed).
            #expect(requests == 5 ? connections == 4 : requests == 4 && connections == 3, "\(requests) requests, \(connections) connections")
        }
    }
    #endif
}
