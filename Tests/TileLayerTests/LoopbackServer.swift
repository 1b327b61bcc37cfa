import Foundation
import TilepackCore
import NIOCore
import NIOHTTP1
import NIOPosix

/// A tiny HTTP/1.1 file server on 127.0.0.1 (a random port) for the http(s) tile tests, built on
/// the swift-nio that AsyncHTTPClient already depends on. Serves `root/<path>`; logs every path.
final class LoopbackTileServer: Sendable {
    let port: Int
    let log: RequestLog
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    final class RequestLog: Sendable {
        private let paths = Locked<[String]>([])
        func append(_ path: String) { paths.withLock { $0.append(path) } }
        var all: [String] { paths.withLock { $0 } }
    }

    static func start(root: URL) async throws -> LoopbackTileServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let log = RequestLog()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 64)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMapThrowing {
                    try channel.pipeline.syncOperations.addHandler(FileHandler(root: root, log: log))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return LoopbackTileServer(port: channel.localAddress?.port ?? 0, log: log, group: group, channel: channel)
    }

    private init(port: Int, log: RequestLog, group: MultiThreadedEventLoopGroup, channel: any Channel) {
        self.port = port
        self.log = log
        self.group = group
        self.channel = channel
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    func stop() async throws {
        try await channel.close().get()
        try await group.shutdownGracefully()
    }

    private final class FileHandler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let root: URL
        let log: RequestLog
        var head: HTTPRequestHead?

        init(root: URL, log: RequestLog) {
            self.root = root
            self.log = log
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): self.head = head
            case .body: break
            case .end:
                guard let head else { return }
                let path = String(head.uri.split(separator: "?").first ?? "")
                log.append(path)
                var status = HTTPResponseStatus.ok
                var body = Data()
                if path.contains("..") {
                    status = .forbidden
                } else if let data = FileManager.default.contents(atPath: root.path + path) {
                    body = data
                } else {
                    status = .notFound
                }
                var headers = HTTPHeaders()
                headers.add(name: "content-length", value: String(body.count))
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
                var buffer = context.channel.allocator.buffer(capacity: body.count)
                buffer.writeBytes(body)
                context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                self.head = nil
            }
        }
    }
}
