import Foundation
import Testing
import TilepackCore
import TilepackTestSupport
import TilepackURLSession

@testable import TilepackHTTP

/// Where clients made without a transport get theirs: the bootstrapped factory, else
/// URLSession found by name (this test process links TilepackURLSession, as an app does), else a
/// transport that says none was linked. The process-wide choice is left alone here (tests beside
/// these make default clients); the rule is checked with the choice passed in.
@Suite struct HTTPTransportSystemTests {
    @Test func anAppGetsURLSessionByName() {
        #expect(HTTPClient.shared.transport is URLSessionTransport)
        #expect(HTTPClient(maximumConnectionsPerHost: 2).transport is URLSessionTransport)
        let made = HTTPTransportSystem.makeTransport(
            maximumConnectionsPerHost: 3, chosen: nil,
            platformTransportName: HTTPTransportSystem.platformTransportName)
        #expect(made is URLSessionTransport)
    }

    @Test func aChosenFactoryIsUsedWithTheConnectionLimit() {
        let asked = Locked<[Int]>([])
        let made = HTTPTransportSystem.makeTransport(
            maximumConnectionsPerHost: 5,
            chosen: { connections in
                asked.withLock { $0.append(connections) }
                return TestTransport.curl.make(maximumConnectionsPerHost: connections)
            }, platformTransportName: HTTPTransportSystem.platformTransportName)
        #expect(asked.withLock { $0 } == [5])
        #expect(!(made is URLSessionTransport))
    }

    @Test func withNoTransportLinkedEveryExchangeSaysSo() async throws {
        let made = HTTPTransportSystem.makeTransport(
            maximumConnectionsPerHost: 1, chosen: nil,
            platformTransportName: "TilepackNoSuchModule.URLSessionTransport")
        let client = HTTPClient(transport: made)
        let url = URL(string: "http://127.0.0.1:9/tile.png")!
        let error = await #expect(throws: HTTPError.self) { try await client.send(HTTPRequest(url: url)) }
        #expect(error?.url == url.absoluteString)
        guard case .transport(let reason)? = error?.fault else {
            Issue.record("expected a transport fault, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("no HTTP transport") && reason.contains("TilepackURLSession") && reason.contains("bootstrap"))
    }
}

/// Header fields as every transport hands them over: any case, repeated names.
@Suite struct HTTPFieldsTests {
    @Test func namesAreCaseInsensitiveAndRepeatedFieldsJoin() throws {
        let request = HTTPRequest(url: try #require(URL(string: "http://127.0.0.1/a.png")), maximumBodyBytes: 10)
        var incoming = HTTPIncomingResponse(request: request)
        let headAccepted = incoming.receiveHead(
            status: 200,
            fields: [
                ("ETag", "\"a\""), ("Cache-Control", "no-cache"), ("content-length", "3"), ("cache-control", "max-age=5"),
            ])
        let bodyAccepted = incoming.receiveBody(Data("abc".utf8))
        #expect(headAccepted && bodyAccepted)
        incoming.end(nil)
        let response = try incoming.result().get()
        #expect(response.etag == "\"a\"" && response.header("ETAG") == "\"a\"")
        #expect(response.header("Cache-Control") == "no-cache, max-age=5")
        #expect(response.header("x-missing") == nil)
        #expect(response.headers == ["etag": "\"a\"", "cache-control": "no-cache, max-age=5", "content-length": "3"])
        #expect(response.fields.map(\.name) == ["etag", "cache-control", "content-length", "cache-control"])
        // A declared length over the limit is refused at the head, whatever the name's case.
        var large = HTTPIncomingResponse(request: request)
        let largeAccepted = large.receiveHead(status: 200, fields: [("Content-Length", " 11 ")])
        #expect(!largeAccepted)
        var built = HTTPResponse(url: request.url, status: 200, headers: ["Retry-After": "7"], body: Data())
        #expect(built.retryAfter() == .seconds(7))
        built.headers["X-Extra"] = "1"
        #expect(built.header("x-extra") == "1" && built.header("retry-after") == "7")
    }
}
