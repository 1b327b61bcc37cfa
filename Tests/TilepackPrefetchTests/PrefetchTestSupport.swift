import Foundation
import TilepackCore
import TilepackHTTP
import TilepackImaging
import TilepackStorage
import TilepackTestSupport

@testable import TilepackPrefetch

/// PNG tiles of a given size, one colour per (z + x + y) % 8, encoded once.
enum TestTiles {
    static let colours: [RGBA8] = (0..<8).map { RGBA8(r: UInt8($0 * 30), g: UInt8(255 - $0 * 30), b: 90, a: 255) }
    static let tiles256: [Data] = colours.map { png(size: 256, colour: $0) }
    static let tile128 = png(size: 128, colour: RGBA8(r: 200, g: 0, b: 0, a: 255))

    static func png(size: Int, colour: RGBA8) -> Data {
        (try? PNGEncoder.encode(Bitmap(width: size, height: size, pixelFormat: .rgba8888, fill: colour))) ?? Data()
    }

    static func tile(_ tile: TileCoordinate) -> Data { tiles256[(tile.zoom + tile.x + tile.y) % 8] }
}

/// A loopback tile server at `/{z}/{x}/{y}.png` (XYZ), whose answers a test can override per tile.
final class TileServer: Sendable {
    let server: LoopbackHTTPServer
    /// Per path: replies to give, in order, before the normal tile (a fault injected `n` times).
    private let faults: Locked<[String: [LoopbackHTTPServer.Reply]]>
    /// Per path: a reply given every time instead of the tile.
    private let permanent: Locked<[String: LoopbackHTTPServer.Reply]>
    /// A delay before every normal tile.
    let delay: Locked<Duration?>
    /// Requests being answered now, and the most at once.
    private let concurrency: Locked<(now: Int, peak: Int)>
    /// ETag answers: 304 when If-None-Match matches.
    let etags: Bool

    /// The Last-Modified of every tile when the server sends one (then 304 for an equal If-Modified-Since).
    static let modified = "Wed, 21 Oct 2026 07:28:00 GMT"

    init(etags: Bool = false, lastModified: Bool = false) throws {
        self.etags = etags
        let faults = Locked<[String: [LoopbackHTTPServer.Reply]]>([:])
        let permanent = Locked<[String: LoopbackHTTPServer.Reply]>([:])
        let delay = Locked<Duration?>(nil)
        let concurrency = Locked<(now: Int, peak: Int)>((now: 0, peak: 0))
        self.server = try LoopbackHTTPServer { request in
            concurrency.withLock {
                $0.now += 1
                $0.peak = max($0.peak, $0.now)
            }
            defer { concurrency.withLock { $0.now -= 1 } }
            if let reply = permanent.withLock({ $0[request.path] }) { return reply }
            if let reply = faults.withLock({ list -> LoopbackHTTPServer.Reply? in
                guard var queue = list[request.path], !queue.isEmpty else { return nil }
                let first = queue.removeFirst()
                list[request.path] = queue
                return first
            }) {
                return reply
            }
            if let wait = delay.withLock({ $0 }) {
                Thread.sleep(forTimeInterval: Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18)
            }
            guard let tile = TileServer.tile(path: request.path) else { return .status(404, "no such tile") }
            let body = TestTiles.tile(tile)
            let tag = "\"t\(tile.zoom)-\(tile.x)-\(tile.y)\""
            if etags, request.header("if-none-match") == tag {
                return .respond(status: 304, headers: ["ETag": tag], body: Data())
            }
            if lastModified, request.header("if-modified-since") == TileServer.modified {
                return .respond(status: 304, headers: [:], body: Data())
            }
            var headers = ["Content-Type": "image/png"]
            if etags { headers["ETag"] = tag }
            if lastModified { headers["Last-Modified"] = TileServer.modified }
            return .respond(status: 200, headers: headers, body: body)
        }
        self.faults = faults
        self.permanent = permanent
        self.delay = delay
        self.concurrency = concurrency
    }

    deinit { server.stop() }

    var template: String { server.baseURL + "/{z}/{x}/{y}.png" }

    static func path(_ tile: TileCoordinate) -> String { "/\(tile.zoom)/\(tile.x)/\(tile.y).png" }

    static func tile(path: String) -> TileCoordinate? {
        // `/z/x/y.png`, or `/s/z/x/y.png` for a template with {s} in its path.
        let parts = path.dropFirst().replacingOccurrences(of: ".png", with: "").split(separator: "/").suffix(3).compactMap { Int($0) }
        guard parts.count == 3 else { return nil }
        return TileCoordinate(validatingZoom: parts[0], x: parts[1], y: parts[2])
    }

    func inject(_ tile: TileCoordinate, _ replies: LoopbackHTTPServer.Reply...) {
        faults.withLock { $0[Self.path(tile), default: []].append(contentsOf: replies) }
    }

    func always(_ tile: TileCoordinate, _ reply: LoopbackHTTPServer.Reply?) {
        permanent.withLock { $0[Self.path(tile)] = reply }
    }

    func requests(_ tile: TileCoordinate) -> Int { server.requests(to: Self.path(tile)) }

    var peakConcurrency: Int { concurrency.withLock { $0.peak } }

    /// Tiles requested (each path once), as tiles.
    var requestedTiles: [TileCoordinate] { server.requests.compactMap { Self.tile(path: $0.path) } }
}

/// Collects a prefetcher's events, as a listener.
/// Cancels every request of the prefetcher once one has settled `tiles` tiles.
final class CancelAfter: PrefetchListener, Sendable {
    let tiles: Int

    init(tiles: Int) {
        self.tiles = tiles
    }

    func prefetcher(_ prefetcher: MapDataPrefetcher, didReceive event: PrefetchEvent) {
        if case .progress(let progress) = event, progress.done >= tiles { prefetcher.cancelAll() }
    }
}

final class EventRecorder: PrefetchListener, @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [PrefetchEvent] = []
    private var fractions: [Int: [Double]] = [:]
    private var statuses: [Int: [PrefetchStatus]] = [:]
    private var purges: [TileStorePurge] = []

    func prefetcher(_ prefetcher: MapDataPrefetcher, didReceive event: PrefetchEvent) {
        lock.withLock { recorded.append(event) }
    }

    func prefetcher(_ prefetcher: MapDataPrefetcher, didUpdateProgress progress: Double, forRequestId requestId: Int) {
        lock.withLock { fractions[requestId, default: []].append(progress) }
    }

    func prefetcher(_ prefetcher: MapDataPrefetcher, didUpdateStatus status: PrefetchStatus, forRequestId requestId: Int) {
        lock.withLock { statuses[requestId, default: []].append(status) }
    }

    func prefetcher(_ prefetcher: MapDataPrefetcher, didPurgeCache result: TileStorePurge) {
        lock.withLock { purges.append(result) }
    }

    var events: [PrefetchEvent] { lock.withLock { recorded } }
    func progress(_ id: Int) -> [Double] { lock.withLock { fractions[id] ?? [] } }
    func statuses(_ id: Int) -> [PrefetchStatus] { lock.withLock { statuses[id] ?? [] } }
    var purged: [TileStorePurge] { lock.withLock { purges } }
}

/// A configuration that retries fast, for tests.
func testConfiguration(_ change: (inout PrefetchConfiguration) -> Void = { _ in }) -> PrefetchConfiguration {
    var configuration = PrefetchConfiguration()
    configuration.retry = RetryPolicy(
        maximumAttempts: 4, baseDelay: .milliseconds(5), maximumDelay: .milliseconds(50),
        maximumRetryAfter: .seconds(5))
    configuration.requestTimeout = 5
    configuration.connectionsPerHost = 4
    change(&configuration)
    return configuration
}

/// A box around Berlin's centre.
let berlin = GeoBoundingBox(west: 13.30, south: 52.45, east: 13.50, north: 52.56)

extension MapDataPrefetcher {
    /// Waits until the listeners have every event queued so far.
    func drainEvents() async { await hub.drain() }
}

extension TestTransport {
    /// What a prefetcher is given: `nil` for URLSession (the library's default path, its
    /// sessions), a new transport otherwise, with as many connections per host as
    /// ``testConfiguration(_:)`` allows.
    var forPrefetch: (any HTTPTransport)? { self == .urlSession ? nil : make(maximumConnectionsPerHost: 4) }
}
