import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport
@testable import TilepackServer

/// One loopback TCP connection that sends whatever bytes a test gives it (several requests at
/// once, half a request, garbage) and reads what comes back. Every read gives up after 5 s.
final class RawConnection: Sendable {
    let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawHTTP.Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw RawHTTP.Failure(description: "connect to port \(port): errno \(errno)")
        }
    }

    deinit { close(fd) }

    /// Sends all of `bytes`, or as much as the socket takes within `timeout` seconds; returns how
    /// many bytes went out.
    @discardableResult
    func transmit(_ bytes: [UInt8], timeout: Int = 5) throws -> Int {
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0, errno == EAGAIN || errno == EWOULDBLOCK { return sent }
            guard n > 0 else { throw RawHTTP.Failure(description: "send: errno \(errno)") }
            sent += n
        }
        return sent
    }

    func transmit(_ text: String) throws { try transmit(Array(text.utf8)) }

    /// Reads until the server closes the connection; throws if it does not within 5 s of silence.
    func readUntilClosed() throws -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n == 0 { return received }
            guard n > 0 else {
                throw RawHTTP.Failure(description: "the connection stayed open (errno \(errno)) after \(received.count) bytes")
            }
            received += buffer[0..<n]
        }
    }

    /// Splits a stream of answers, each framed by its `Content-Length` (none for 204 and 304).
    static func answers(in stream: [UInt8]) throws -> [RawHTTP.Answer] {
        var answers: [RawHTTP.Answer] = []
        var rest = stream[...]
        let separator: [UInt8] = [13, 10, 13, 10]
        while !rest.isEmpty {
            guard let end = rest.indices.dropLast(3).first(where: { Array(rest[$0..<($0 + 4)]) == separator }) else {
                throw RawHTTP.Failure(description: "no end of head in the last \(rest.count) bytes")
            }
            let head = try RawHTTP.parse(Array(rest[rest.startIndex..<(end + 4)]), method: "HEAD")
            let length = head.status == 204 || head.status == 304 ? 0 : Int(head.header("content-length") ?? "") ?? -1
            guard length >= 0, end + 4 + length <= rest.endIndex else {
                throw RawHTTP.Failure(description: "answer \(answers.count + 1) is not framed by its Content-Length")
            }
            answers.append(RawHTTP.Answer(status: head.status, headers: head.headers, body: Array(rest[(end + 4)..<(end + 4 + length)])))
            rest = rest[(end + 4 + length)...]
        }
        return answers
    }
}

/// The connection rules of `Specs/serve.md` ("Connections"), on the real server.
@Suite struct ConnectionTests {
    static func sampleTile(_ path: String) throws -> [UInt8] {
        let parts = path.split(separator: "/").compactMap { Int($0.split(separator: ".")[0]) }
        let tile = try TileCoordinate(zoom: parts[0], x: parts[1], y: parts[2])
        return try #require(try BundleArchive(path: ServerFixtures.sampleBundle).withTileBytes(at: tile) { Array($0) })
    }

    @Test func pipelinedRequestsAreAnsweredInOrderOnOneConnection() async throws {
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [ServerFixtures.sampleBundle]))
        let port = server.port
        let tiles = ["1/0/1.png", "2/3/1.png", "0/0/0.png"]
        let stream = try await onThread {
            let connection = try RawConnection(port: port)
            var requests = ""
            for (index, tile) in tiles.enumerated() {
                requests += "GET /sample/\(tile) HTTP/1.1\r\nHost: x\r\n\(index == tiles.count - 1 ? "Connection: close\r\n" : "")\r\n"
            }
            try connection.transmit(requests)
            return try connection.readUntilClosed()
        }
        await server.stop()
        let answers = try RawConnection.answers(in: stream)
        #expect(answers.map(\.status) == [200, 200, 200])
        for (answer, tile) in zip(answers, tiles) {
            #expect(answer.body == (try Self.sampleTile(tile)), "answer for \(tile)")
            #expect(answer.header("server") == "tilepack")
            let date = try #require(answer.header("date"))
            #expect(date.hasSuffix(" GMT") && date.count == 29, "IMF-fixdate: \(date)")
        }
        #expect(answers.last?.header("connection") == "close")
        #expect(answers.first?.header("connection") == nil)
    }

    @Test func http10ClosesUnlessAskedToKeepAlive() async throws {
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [ServerFixtures.sampleBundle]))
        let port = server.port
        let plain = try await onThread {
            let connection = try RawConnection(port: port)
            try connection.transmit("GET /sample/0/0/0.png HTTP/1.0\r\n\r\n")
            return try connection.readUntilClosed()
        }
        // Two requests with keep-alive: both answered on one connection, the second closing it.
        let kept = try await onThread {
            let connection = try RawConnection(port: port)
            try connection.transmit("GET /sample/0/0/0.png HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /sample/1/0/0.png HTTP/1.0\r\n\r\n")
            return try connection.readUntilClosed()
        }
        await server.stop()
        let first = try RawConnection.answers(in: plain)
        #expect(first.map(\.status) == [200])
        #expect(String(decoding: plain.prefix(8), as: UTF8.self) == "HTTP/1.0")
        let both = try RawConnection.answers(in: kept)
        #expect(both.map(\.status) == [200, 200])
        #expect(both[0].header("connection")?.lowercased() == "keep-alive")
        #expect(both[1].body == (try Self.sampleTile("1/0/0.png")))
    }

    @Test func aRequestThatDoesNotParseGets400AndTheConnectionCloses() async throws {
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [ServerFixtures.sampleBundle]))
        let port = server.port
        let stream = try await onThread {
            let connection = try RawConnection(port: port)
            try connection.transmit("GET /sample/0/0/0.png HTTP/1.1\r\nHost: x\r\n\r\nNOT AN HTTP REQUEST\u{1}\r\n\r\n")
            return try connection.readUntilClosed()
        }
        let metrics = try await server.get("/_/metrics")
        await server.stop()
        let answers = try RawConnection.answers(in: stream)
        #expect(answers.map(\.status) == [200, 400])
        #expect(answers.last?.header("connection") == "close")
        #expect(metrics.text.contains("tilepack_http_requests_total{status=\"400\"} 1"))
    }

    @Test func idleConnectionsAndHalfSentRequestsAreClosed() async throws {
        var options = TileServerOptions(archivePaths: [ServerFixtures.sampleBundle])
        options.idleTimeout = 0.4
        let server = try await RunningServer.start(options)
        let port = server.port
        let (afterAnswer, halfRequest) = try await onThread {
            let started = Date()
            let idle = try RawConnection(port: port)
            try idle.transmit("GET /sample/0/0/0.png HTTP/1.1\r\nHost: x\r\n\r\n")
            let answered = try idle.readUntilClosed()
            let half = try RawConnection(port: port)
            try half.transmit("GET /sample/0/0/0.png HTTP/1.1\r\nHo")
            let nothing = try half.readUntilClosed()
            return ((answered, Date().timeIntervalSince(started)), nothing)
        }
        await server.stop()
        #expect(try RawConnection.answers(in: afterAnswer.0).map(\.status) == [200])
        #expect(afterAnswer.1 >= 0.35, "closed after \(afterAnswer.1) s, before the idle timeout")
        #expect(halfRequest.isEmpty)
    }

    /// How many 200 answers the server has counted.
    static func answeredOK(_ server: RunningServer) async throws -> Int {
        let metrics = try await server.get("/_/metrics").text
        let line = metrics.split(separator: "\n").first { $0.hasPrefix("tilepack_http_requests_total{status=\"200\"}") }
        return line.flatMap { $0.split(separator: " ").last }.flatMap { Int($0) } ?? 0
    }

    @Test func aClientThatDoesNotReadIsNotReadFrom() async throws {
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [ServerFixtures.sampleBundle]))
        let port = server.port
        // Up to 32 MiB of pipelined requests (about 600,000) for tiles of about 1 KiB, and no answer
        // read: once the socket's buffers hold all the answers they can, the server must stop
        // reading requests (else it would hold hundreds of MiB of answers).
        let request = Array("GET /sample/2/1/1.png HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        let (connection, stalled) = try await onThread {
            let connection = try RawConnection(port: port)
            var batch: [UInt8] = []
            for _ in 0..<(1 << 16) { batch += request }
            for _ in 0..<16 where try connection.transmit(batch, timeout: 1) < batch.count {
                return (connection, true)
            }
            return (connection, false)
        }
        #expect(stalled, "the server took 32 MiB of requests without its answers being read")
        let before = try await Self.answeredOK(server)
        try await Task.sleep(for: .milliseconds(800))
        let after = try await Self.answeredOK(server)
        // `after` counts the first metrics request: nothing else may have been answered meanwhile.
        #expect(after - before <= 1, "the server went on answering (\(before) then \(after)) a client that reads nothing")
        #expect(before > 0)
        withExtendedLifetime(connection) {}
        await server.stop()
    }
}
