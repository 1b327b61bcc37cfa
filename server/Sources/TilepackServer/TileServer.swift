import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import TilepackCore
import TilepackStorage
import UnixSignals

/// `tilepack serve`: archives over HTTP on Hummingbird 2's server core (see `Specs/serve.md`;
/// connections in ``InlineHTTP1Channel``).
///
/// ```swift
/// let server = try TileServer(options: TileServerOptions(archivePaths: ["world.mbtiles"], port: 0))
/// try await server.run { url in print("serving \(url)") }
/// ```
package final class TileServer: Sendable {
    package let options: TileServerOptions
    let service: TileService
    private let log: @Sendable (String) -> Void
    private let group = Locked<ServiceGroup?>(nil)

    /// Opens every archive (each must open, and names must be distinct) and reads Leaflet.
    /// - Parameter log: where problems go (a tile that cannot be read, a replaced file that does not open).
    /// - Parameter store: where remote archives are read from (the environment's by default).
    package init(
        options: TileServerOptions, store: RemoteStore = RemoteStore(),
        log: @escaping @Sendable (String) -> Void = TileServer.standardError
    ) throws(TileServerError) {
        guard (0...65535).contains(options.port) else { throw TileServerError("--port must be 0-65535, not \(options.port)") }
        if let publicURL = options.publicURL, !(publicURL.hasPrefix("http://") || publicURL.hasPrefix("https://")) {
            throw TileServerError("--public-url must start with http:// or https://, not '\(publicURL)'")
        }
        if let token = options.token, token.isEmpty || token.contains(where: { $0.isWhitespace }) {
            throw TileServerError("--token must be a non-empty word without spaces")
        }
        self.options = options
        self.log = log
        guard options.remoteCacheBytes >= 0, options.recheckInterval > 0 else {
            throw TileServerError("--cache-size must not be negative and --recheck must be positive")
        }
        self.service = try TileService(options: options, store: store, log: log)
    }

    /// Writes one line to standard error.
    package static let standardError: @Sendable (String) -> Void = { line in
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// The names archives are served under, in the order given.
    package var archiveNames: [String] { service.catalog.slots.map(\.name) }

    /// Listens and serves until the task is cancelled or, with `handlingSignals`, until SIGINT or
    /// SIGTERM (then requests in flight are finished first). `onListening` gets the base URL
    /// (`http://127.0.0.1:PORT/`) once the socket listens.
    package func run(handlingSignals: Bool = true, onListening: @escaping @Sendable (String) -> Void) async throws {
        let service = self.service
        let options = self.options
        var logger = Logger(label: "tilepack-serve")
        logger.logLevel = .error
        let loops = Self.eventLoopGroup(threads: max(1, options.eventLoops))
        let connections = ConnectionRegistry()
        // Answers that wait for a remote archive's store are made here, off the event loops.
        let storeReads =
            service.catalog.slots.contains { $0.remote != nil } ? NIOThreadPool(numberOfThreads: Self.storeReadThreads) : nil
        storeReads?.start()
        defer { storeReads?.shutdownGracefully { _ in } }
        let channel = InlineHTTP1Channel(
            service: service, idleTimeout: .nanoseconds(Int64(max(options.idleTimeout, 0.1) * 1e9)),
            headerTimeout: .nanoseconds(Int64(max(options.headerTimeout, 0.1) * 1e9)), connections: connections,
            storeReads: storeReads)
        let server = channel.server(
            configuration: ServerConfiguration(
                address: .hostname(options.host, port: options.port), serverName: "tilepack",
                availableConnectionsDelegate: SheddingConnections(maximum: max(1, options.maximumConnections), registry: connections)),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? options.port
                let host = options.host.contains(":") ? "[\(options.host)]" : options.host
                let base = "http://\(host):\(port)"
                service.listeningBase.withLock { $0 = base }
                onListening(base + "/")
            },
            eventLoopGroup: loops,
            logger: logger
        )
        let watcher = ArchiveWatcher(service: service, interval: options.reloadInterval, log: log)
        watcher.start()
        defer { watcher.stop() }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [server], gracefulShutdownSignals: handlingSignals ? [.sigterm, .sigint] : [], logger: logger))
        self.group.withLock { $0 = group }
        do {
            try await group.run()
        } catch {
            // Before listening, the fault is the address: say which, and what to do.
            guard service.listeningBase.withLock({ $0 }) == nil else { throw error }
            throw Self.listenError(error, host: options.host, port: options.port)
        }
    }

    /// Threads that wait for remote stores: as many answers wait at once (each connection has at
    /// most one in flight); more wait in the pool's queue. A read from a store takes milliseconds
    /// and a thread that waits uses no CPU.
    static let storeReadThreads = 16

    /// Why the server cannot listen on `host:port`, naming both and what to change.
    static func listenError(_ error: any Error, host: String, port: Int) -> TileServerError {
        let address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        switch (error as? IOError)?.errnoCode {
        case EADDRINUSE?:
            return TileServerError(
                "cannot listen on \(address): the port is in use (another server?); choose another with --port (--port 0 picks a free one)")
        case EACCES?:
            return TileServerError(
                "cannot listen on \(address): permission denied (ports below 1024 need privileges); choose another with --port")
        case EADDRNOTAVAIL?:
            return TileServerError("cannot listen on \(address): the address is not one of this machine's; check --host")
        default:
            return TileServerError("cannot listen on \(address): \(error)")
        }
    }

    /// Event-loop groups by size, made once and kept for the life of the process, as SwiftNIO's
    /// own singleton group is: servers started and stopped in one process (the tests) share them,
    /// and no group is shut down while a connection of a stopped server still finishes on it.
    private static let eventLoopGroups = Locked<[Int: MultiThreadedEventLoopGroup]>([:])

    static func eventLoopGroup(threads: Int) -> MultiThreadedEventLoopGroup {
        eventLoopGroups.withLock { groups in
            if let group = groups[threads] { return group }
            let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
            groups[threads] = group
            return group
        }
    }

    /// Stops listening, lets requests in flight finish, and makes ``run(handlingSignals:onListening:)`` return.
    package func shutdown() async {
        await group.withLock { $0 }?.triggerGracefulShutdown()
    }
}

/// Looks at every archive file at a fixed interval on its own thread (opening a replaced archive
/// can take a while and must not hold up requests), and swaps in what changed.
final class ArchiveWatcher: Sendable {
    private let service: TileService
    private let interval: Double
    private let log: @Sendable (String) -> Void
    private let stopped = Locked(false)

    init(service: TileService, interval: Double, log: @escaping @Sendable (String) -> Void) {
        self.service = service
        self.interval = max(interval, 0.05)
        self.log = log
    }

    func start() {
        service.lastReloadCheck.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
        let thread = Thread { [self] in
            while !stopped.withLock({ $0 }) {
                Thread.sleep(forTimeInterval: interval)
                checkOnce()
            }
        }
        thread.name = "tilepack-serve archive watcher"
        thread.start()
    }

    func stop() { stopped.withLock { $0 = true } }

    func checkOnce() {
        defer { service.lastReloadCheck.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed) }
        for slot in service.catalog.slots {
            // An MBTiles file's connections keep their read transactions until now: a writer
            // patching it in place gets its lock, and reads see the change from here on.
            (slot.current.archive as? MBTilesArchive)?.endReadTransactions()
            switch slot.check() {
            case .unchanged: break
            case .reloaded:
                service.metrics.recordReload(archive: slot.name, failed: false)
                log("reloaded '\(slot.name)' from \(slot.path)")
            case .failed(let problem):
                service.metrics.recordReload(archive: slot.name, failed: true)
                log(problem)
            }
        }
    }
}
