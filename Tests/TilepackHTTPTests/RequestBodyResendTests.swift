import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackTestSupport

/// A request body the transport has to send twice arrives whole both times. libcurl sends a
/// request again by itself when a reused connection turns out dead: the server took the body,
/// then closed without an answer (an idle connection it had already given up on, a restart).
/// curl then rewinds the body (the transport's seek callback, `CURLOPT_SEEKFUNCTION`) and sends
/// it again on a new connection; without the rewind curl fails the exchange ("necessary data
/// rewind wasn't possible"), and a rewind to the wrong place sends other bytes. The part of a
/// multipart upload is such a body.
/// (libcurl's transport only: FoundationNetworking's URLSession, libcurl too, did not send the
/// body again and timed out.)
@Suite(.enabled(if: TestTransport.available.contains(.curl), "libcurl's transport (Linux)"))
struct RequestBodyResendTests {
    @Test func aBodySentAgainOnAFreshConnectionArrivesWhole() async throws {
        // 3 MiB, no two 4-byte words alike: a rewind to anywhere but the start shows.
        let body = Data((0..<(3 << 18)).flatMap { (word: UInt32) in withUnsafeBytes(of: word.bigEndian) { Array($0) } })
        let puts = Locked(0)
        let server = try LoopbackHTTPServer { request in
            guard request.method == "PUT" else { return .status(200, "warm") }
            let arrival = puts.withLock {
                $0 += 1
                return $0
            }
            // The first arrival: the whole body read, then the connection closed unanswered.
            return arrival == 1 ? .close : .status(200, "\(request.body.count)")
        }
        defer { server.stop() }
        let client = TestTransport.curl.client()
        try await onOwnThread {
            // A connection to reuse: curl retries only on one it has used before.
            let warm = try await client.send(HTTPRequest(url: URL(string: server.baseURL + "/warm")!))
            #expect(warm.status == 200)
            let put = HTTPRequest(
                url: URL(string: server.baseURL + "/part")!, method: "PUT", headers: ["Expect": ""], timeout: .seconds(60), body: body)
            let response = try await client.send(put)
            #expect(response.status == 200 && response.body == Data("\(body.count)".utf8))
        }
        let arrivals = server.requests.filter { $0.method == "PUT" }
        #expect(arrivals.count == 2)
        #expect(arrivals.allSatisfy { $0.body == body }, "\(arrivals.map(\.body.count))")
        // An empty `Expect` field sends none: no wait for a `100 Continue` the server never sends.
        #expect(arrivals.allSatisfy { $0.header("expect") == nil })
        #expect(server.acceptedConnections == 2)
    }
}
