#if canImport(Glibc)
import Foundation
import Glibc
import TilepackCore
import TilepackHTTP

/// A deliberately wrong HTTP/1.1 transport, for checking the checks: one connection to a loopback
/// server, requests one at a time, each answer read off the connection in order (`Content-Length`
/// framing), and bytes found beyond an answer kept as the start of the next one. An unsolicited
/// response from the server thus answers the next request, and every later answer on the
/// connection is one request late: the fault of issue 29's item 18. Tests that must catch such a
/// transport run over this one and expect to fail.
public final class ResponseShiftingTransport: HTTPTransport {
    private let connection = Locked(Connection())

    public init() {}

    deinit { connection.withLock { _ = $0.drop() } }

    public nonisolated(nonsending) func exchange(_ request: HTTPRequest, _ response: HTTPIncomingResponse) async -> HTTPIncomingResponse {
        var response = response
        let answer = connection.withLock { $0.send(request) }
        if let answer {
            response.receiveHead(status: answer.status, headers: ["content-length": String(answer.body.count)])
            answer.body.withUnsafeBytes { _ = response.receiveBody($0) }
            response.end(nil)
        } else {
            response.end(.connectionLost("the shifting transport lost its connection"))
        }
        return response
    }
}

/// The connection and the bytes read off it but not yet taken as an answer.
private struct Connection {
    var fd: Int32 = -1
    var buffer: [UInt8] = []

    /// Under the lock: sends the request and reads the next answer off the connection.
    mutating func send(_ request: HTTPRequest) -> (status: Int, body: [UInt8])? {
        guard let port = request.url.port, connect(port: port) else { return nil }
        let target = request.url.path.isEmpty ? "/" : request.url.path
        let head = Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8)
        guard head.withUnsafeBytes({ Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == head.count else { return drop() }
        let terminator: [UInt8] = [13, 10, 13, 10]
        while buffer.firstRange(of: terminator) == nil { guard fill() else { return drop() } }
        let end = buffer.firstRange(of: terminator)!
        let lines = String(decoding: buffer[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        buffer.removeSubrange(..<end.upperBound)
        let status = lines.first.flatMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } } ?? 0
        let length =
            lines.dropFirst().compactMap { line -> Int? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                return Int(parts[1].trimmingCharacters(in: .whitespaces))
            }.first ?? 0
        while buffer.count < length { guard fill() else { return drop() } }
        let body = Array(buffer[..<length])
        buffer.removeSubrange(..<length)
        return (status, body)
    }

    private mutating func connect(port: Int) -> Bool {
        if fd >= 0 { return true }
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if connected != 0 { _ = drop() }
        return fd >= 0
    }

    /// One read onto the buffer; `false` at the end of the stream, an error or the 5 s deadline.
    private mutating func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16_384)
        let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return false }
        buffer += chunk[..<count]
        return true
    }

    mutating func drop() -> (status: Int, body: [UInt8])? {
        if fd >= 0 { close(fd) }
        fd = -1
        buffer.removeAll()
        return nil
    }
}
#endif
