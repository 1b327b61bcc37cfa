import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

@testable import TilepackServer

/// A raw HTTP/1.1 exchange over a loopback socket: the request target goes out byte for byte
/// (no client normalises `..` or `%2e`), the answer comes back unparsed by any library.
struct RawHTTP {
    struct Answer: Sendable {
        var status: Int
        /// Header names in lower case.
        var headers: [String: String]
        var body: [UInt8]

        func header(_ name: String) -> String? { headers[name.lowercased()] }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Sends one request on a new connection (`Connection: close`) and reads the whole answer;
    /// every socket operation times out after 10 s.
    static func send(port: Int, method: String = "GET", target: String, headers: [String: String] = [:]) throws -> Answer {
        let connection = try RawConnection(port: port, readTimeout: 10)
        var head = "\(method) \(target) HTTP/1.1\r\n"
        var fields = headers
        if fields.keys.first(where: { $0.lowercased() == "host" }) == nil { fields["Host"] = "127.0.0.1:\(port)" }
        fields["Connection"] = "close"
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        let bytes = Array(head.utf8)
        guard try connection.transmit(bytes, timeout: 10) == bytes.count else {
            throw Failure(description: "the server did not take the request within 10 s")
        }
        return try parse(connection.readUntilClosed(), method: method)
    }

    static func parse(_ received: [UInt8], method: String) throws -> Answer {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = (0..<max(0, received.count - 3)).first(where: { Array(received[$0..<($0 + 4)]) == separator }) else {
            throw Failure(description: "no end of head in \(received.count) bytes")
        }
        let lines = String(decoding: received[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw Failure(description: "bad status line \(lines[0])") }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { $0 + ", " + value } ?? value
        }
        var body = Array(received[(end + 4)...])
        if method == "HEAD" || status == 204 || status == 304 {
            guard body.isEmpty else { throw Failure(description: "\(status) answer to \(method) has \(body.count) body bytes") }
        } else if let length = headers["content-length"].flatMap(Int.init) {
            guard body.count == length else { throw Failure(description: "Content-Length \(length), body \(body.count) bytes") }
        } else if headers["transfer-encoding"]?.lowercased() == "chunked" {
            body = try dechunk(body)
        }
        return Answer(status: status, headers: headers, body: body)
    }

    static func dechunk(_ bytes: [UInt8]) throws -> [UInt8] {
        var result: [UInt8] = []
        var at = 0
        while at < bytes.count {
            guard let lineEnd = (at..<(bytes.count - 1)).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }),
                let size = Int(String(decoding: bytes[at..<lineEnd], as: UTF8.self).split(separator: ";")[0], radix: 16)
            else { throw Failure(description: "bad chunk") }
            if size == 0 { return result }
            result += bytes[(lineEnd + 2)..<(lineEnd + 2 + size)]
            at = lineEnd + 4 + size
        }
        return result
    }
}

/// One loopback TCP connection that sends whatever bytes a test gives it (several requests at
/// once, half a request, garbage) and reads what comes back. Every read gives up after
/// `readTimeout` seconds of silence.
final class RawConnection: Sendable {
    let fd: Int32

    init(port: Int, readTimeout: Int = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawHTTP.Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: readTimeout, tv_usec: 0)
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

    /// Closes the sending side (FIN): the server sees the end of what the client sends.
    func finishSending() { shutdown(fd, Int32(SHUT_WR)) }

    /// Reads until the server closes the connection; throws if it does not within the read
    /// timeout of silence, or when more than `limit` bytes come.
    func readUntilClosed(limit: Int = 256 << 20) throws -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n == 0 { return received }
            guard n > 0 else {
                throw RawHTTP.Failure(description: "the connection stayed open (errno \(errno)) after \(received.count) bytes")
            }
            received += buffer[0..<n]
            guard received.count <= limit else { throw RawHTTP.Failure(description: "answer over \(limit) bytes") }
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

/// A server running in this process on a free loopback port, stopped by `stop()`.
final class RunningServer: Sendable {
    let server: TileServer
    let port: Int
    let base: String
    private let task: Task<Void, any Error>

    private init(server: TileServer, port: Int, base: String, task: Task<Void, any Error>) {
        self.server = server
        self.port = port
        self.base = base
        self.task = task
    }

    static func start(
        _ options: TileServerOptions, store: RemoteStore = RemoteStore(), log: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws -> RunningServer {
        var options = options
        options.port = 0
        options.host = "127.0.0.1"
        let server = try TileServer(options: options, store: store, log: log)
        let (stream, continuation) = AsyncStream<String>.makeStream()
        let task = Task { try await server.run(handlingSignals: false) { continuation.yield($0) } }
        let deadline = Task {
            try await Task.sleep(for: .seconds(30))
            continuation.finish()
        }
        defer { deadline.cancel() }
        for await url in stream {
            guard let port = URL(string: url)?.port else { break }
            return RunningServer(server: server, port: port, base: url, task: task)
        }
        task.cancel()
        throw RawHTTP.Failure(description: "the server did not start within 30 s")
    }

    /// One request, its blocking socket I/O on a thread of its own (a test's task must not block
    /// a cooperative thread).
    func get(_ target: String, method: String = "GET", headers: [String: String] = [:]) async throws -> RawHTTP.Answer {
        let port = self.port
        return try await onThread { try RawHTTP.send(port: port, method: method, target: target, headers: headers) }
    }

    /// Shuts the server down gracefully and waits until it has.
    func stop() async {
        await server.shutdown()
        _ = try? await task.value
    }
}

enum ServerFixtures {
    static let sampleBundle = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
    static let sampleTiles = TestSupport.packageRoot.appendingPathComponent("samples/tiles").path

    /// The sample tree as an MBTiles file (TMS rows on disk) in `directory`.
    static func sampleMBTiles(in directory: TemporaryDirectory, name: String = "sample-mbtiles") throws -> String {
        let path = directory.file("\(name).mbtiles")
        let source = try BundleArchive(path: sampleBundle)
        let writer = try MBTilesWriter(creating: path, metadata: try source.metadata())
        try source.forEachTile { tile, bytes in try writer.write(bytes, at: tile) }
        _ = try writer.finish()
        return path
    }

    /// A bundle of `tiles` (each tile's bytes) with `metadata`, written atomically to `path`.
    static func writeBundle(
        _ path: String, content: TileContent, metadata: TileMetadata = TileMetadata(),
        overwrite: Bool = true, tiles: [(TileCoordinate, [UInt8])]
    ) throws {
        let writer = try BundleWriter(destination: path, content: content, metadata: metadata, overwrite: overwrite)
        for (tile, bytes) in tiles { try writer.addTile(at: tile, data: Data(bytes)) }
        _ = try writer.finish()
    }
}
