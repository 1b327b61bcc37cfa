import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

@testable import TilepackPrefetch

/// A loopback tile server whose tiles belong to a version: `/tiles.json` names it, tiles are at
/// `/{version}/{z}/{x}/{y}.png` and differ from one version to the next. The version can change
/// after a number of tile requests (a publisher releasing mid-refresh).
final class VersionedTileServer: Sendable {
    let server: LoopbackHTTPServer
    private let state: Locked<(version: Int, bumpAfter: Int?, tileRequests: Int)>
    /// The delay before each tile.
    let delay = Locked(Duration.milliseconds(2))

    init(version: Int = 1) throws {
        let state = Locked<(version: Int, bumpAfter: Int?, tileRequests: Int)>((version, nil, 0))
        self.state = state
        let delay = self.delay
        server = try LoopbackHTTPServer { request in
            if request.path == "/tiles.json" {
                let version = state.withLock { $0.version }
                return .respond(status: 200, headers: ["Content-Type": "application/json"], body: Data("{\"version\":\"\(version)\"}".utf8))
            }
            let parts = request.path.dropFirst().replacingOccurrences(of: ".png", with: "").split(separator: "/").compactMap { Int($0) }
            guard parts.count == 4, let tile = TileCoordinate(validatingZoom: parts[1], x: parts[2], y: parts[3]) else {
                return .status(404, "no such tile")
            }
            state.withLock { state in
                state.tileRequests += 1
                if let after = state.bumpAfter, state.tileRequests >= after {
                    state.version += 1
                    state.bumpAfter = nil
                }
            }
            // Old URLs keep working (as on a CDN), each with its own version's bytes.
            return .delayed(
                delay.withLock { $0 },
                .respond(status: 200, headers: ["Content-Type": "image/png"], body: Self.tile(tile, version: parts[0])))
        }
    }

    deinit { server.stop() }

    static func tile(_ tile: TileCoordinate, version: Int) -> Data { TestTiles.tiles256[(tile.zoom + tile.x + tile.y + version) % 8] }

    var source: PrefetchSource {
        var source = PrefetchSource(urlTemplate: server.baseURL + "/{version}/{z}/{x}/{y}.png")
        source.versionURL = server.baseURL + "/tiles.json"
        return source
    }

    var version: Int {
        get { state.withLock { $0.version } }
        set { state.withLock { $0.version = newValue } }
    }

    /// Releases the next version once `requests` more tiles have been asked for.
    func bump(afterTileRequests requests: Int) { state.withLock { $0.bumpAfter = $0.tileRequests + requests } }

    var tileRequests: Int { state.withLock { $0.tileRequests } }
}

@Suite("Prefetch: a refresh switches the store to one version in one transaction")
struct PrefetchRefreshTests {
    static let request = PrefetchRequest.boundingBox(berlin, zooms: 8...11)

    /// Every tile of `path`, read by a reader of its own (as the adapter or `tilepack serve` reads the store).
    static func versions(_ path: String, cover: PrefetchCover) throws -> Set<Int> {
        let archive = try MBTilesArchive(path: path, options: MBTilesOpenOptions(maximumIdleConnections: 1))
        var found: Set<Int> = []
        for tile in cover {
            let bytes = try #require(try archive.withTileBytes(at: tile) { Data($0) }, "tile \(tile) missing")
            let version = (1...9).first { VersionedTileServer.tile(tile, version: $0) == bytes }
            found.insert(version ?? -1)
        }
        return found
    }

    @Test("a reader during a refresh sees the old version whole, after it the new one; the store records the version")
    func readerSeesOneVersion() async throws {
        let server = try VersionedTileServer()
        let directory = try TemporaryDirectory()
        let path = directory.file("v.mbtiles")
        let prefetcher = try MapDataPrefetcher(
            storePath: path, source: server.source, configuration: testConfiguration { $0.connectionsPerHost = 1 },
            transport: TestTransport.curl.forPrefetch)
        let cover = try Self.request.cover()
        let first = try #require(await prefetcher.fetch(Self.request).1)
        #expect(first.status == .success && first.version == "1")
        #expect(try Self.versions(path, cover: cover) == [1])
        server.version = 2
        // A refresh longer than the store's batches (1 s): tiles written straight into `tiles`
        // would be committed in the middle of it.
        server.delay.withLock { $0 = .milliseconds(1500 / cover.count + 1) }
        // Readers poll the file while the refresh runs: each sees one version whole.
        let done = Locked(false)
        let seen = Locked<[Set<Int>]>([])
        let reader = Task.detached {
            while !done.withLock({ $0 }) {
                if let versions = try? Self.versions(path, cover: cover) { seen.withLock { $0.append(versions) } }
                try? await Task.sleep(for: .milliseconds(3))
            }
        }
        let second = try #require(await prefetcher.fetch(Self.request, options: PrefetchOptions(refresh: true)).1)
        done.withLock { $0 = true }
        await reader.value
        #expect(second.status == .success && second.version == "2" && second.restarts == 0)
        #expect(second.downloaded == cover.count)
        #expect(try Self.versions(path, cover: cover) == [2])
        let snapshots = seen.withLock { $0 }
        #expect(!snapshots.isEmpty)
        #expect(snapshots.allSatisfy { $0 == [1] || $0 == [2] }, "\(snapshots)")
        #expect(snapshots.contains([1]), "no reader ran during the refresh")
        // Nothing staged is left; the file is plain MBTiles that verifies.
        #expect(try prefetcher.store?.stagedRefresh() == nil)
        await prefetcher.close()
        #expect(ArchiveVerifier.run(path: path).errorCount == 0)
    }

    @Test("a refresh interrupted halfway leaves the old store whole; the next refresh asks only for the rest")
    func interruptedRefreshResumes() async throws {
        let server = try VersionedTileServer()
        let directory = try TemporaryDirectory()
        let path = directory.file("r.mbtiles")
        let cover = try Self.request.cover()
        let prefetcher = try MapDataPrefetcher(
            storePath: path, source: server.source, configuration: testConfiguration { $0.connectionsPerHost = 1 },
            transport: TestTransport.curl.forPrefetch)
        _ = try #require(await prefetcher.fetch(Self.request).1)
        server.version = 2
        // Slow enough that the cancel, sent from a progress event, lands before the last tile.
        server.delay.withLock { $0 = .milliseconds(25) }
        let half = cover.count / 2
        let cancel = CancelAfter(tiles: half)
        prefetcher.addListener(cancel)
        let before = server.tileRequests
        let interrupted = try #require(await prefetcher.fetch(Self.request, options: PrefetchOptions(refresh: true)).1)
        prefetcher.removeListener(cancel)
        #expect(interrupted.status == .cancelled)
        let asked = server.tileRequests - before
        #expect(asked >= half && asked < cover.count)
        // The old version whole, the new tiles staged out of sight.
        #expect(try Self.versions(path, cover: cover) == [1])
        #expect(try prefetcher.store?.stagedRefresh()?.version == "2")
        await prefetcher.close()

        // A new prefetcher (a new process after a kill) resumes: the staged tiles are not asked again.
        let again = try MapDataPrefetcher(
            storePath: path, source: server.source, configuration: testConfiguration(), transport: TestTransport.curl.forPrefetch)
        let start = server.tileRequests
        let resumed = try #require(await again.fetch(Self.request, options: PrefetchOptions(refresh: true)).1)
        #expect(resumed.status == .success && resumed.version == "2")
        let staged = cover.count - resumed.downloaded
        #expect(server.tileRequests - start == resumed.downloaded && staged >= half - 4, "\(staged) staged of \(cover.count)")
        #expect(try Self.versions(path, cover: cover) == [2])
        await again.close()
    }

    @Test("a version released during a refresh is detected: the refresh starts again and the store holds the newest version only")
    func versionChangeRestarts() async throws {
        let server = try VersionedTileServer()
        let directory = try TemporaryDirectory()
        let path = directory.file("c.mbtiles")
        let cover = try Self.request.cover()
        let prefetcher = try MapDataPrefetcher(
            storePath: path, source: server.source, configuration: testConfiguration(), transport: TestTransport.curl.forPrefetch)
        _ = try #require(await prefetcher.fetch(Self.request).1)
        server.version = 2
        server.bump(afterTileRequests: cover.count / 3)
        let recorder = EventRecorder()
        prefetcher.addListener(recorder)
        let report = try #require(await prefetcher.fetch(Self.request, options: PrefetchOptions(refresh: true)).1)
        await prefetcher.drainEvents()
        #expect(report.status == .success && report.restarts == 1 && report.version == "3", "\(report)")
        #expect(try Self.versions(path, cover: cover) == [3])
        let fractions = recorder.progress(report.requestId)
        #expect(fractions == fractions.sorted() && fractions.last == 1)
        await prefetcher.close()
    }

    @Test("without a version URL a refresh is still one transaction; {version} without one is refused")
    func noVersionIsOneTransaction() async throws {
        let server = try VersionedTileServer()
        let directory = try TemporaryDirectory()
        let path = directory.file("n.mbtiles")
        let cover = try Self.request.cover()
        // A template with the version written in: the server names none to the prefetcher.
        let source = PrefetchSource(urlTemplate: server.server.baseURL + "/1/{z}/{x}/{y}.png")
        let prefetcher = try MapDataPrefetcher(
            storePath: path, source: source, configuration: testConfiguration(), transport: TestTransport.curl.forPrefetch)
        _ = try #require(await prefetcher.fetch(Self.request).1)
        let changed = PrefetchSource(urlTemplate: server.server.baseURL + "/2/{z}/{x}/{y}.png")
        await prefetcher.close()
        let next = try MapDataPrefetcher(
            storePath: path, source: changed, configuration: testConfiguration { $0.connectionsPerHost = 1 },
            transport: TestTransport.curl.forPrefetch)
        server.delay.withLock { $0 = .milliseconds(25) }  // the cancel lands before the last tile
        let cancel = CancelAfter(tiles: cover.count / 2)
        next.addListener(cancel)
        let cut = try #require(await next.fetch(Self.request, options: PrefetchOptions(refresh: true)).1)
        #expect(cut.status == .cancelled && cut.version == nil)
        #expect(try Self.versions(path, cover: cover) == [1])
        next.removeListener(cancel)
        let whole = try #require(await next.fetch(Self.request, options: PrefetchOptions(refresh: true)).1)
        #expect(whole.status == .success)
        #expect(try Self.versions(path, cover: cover) == [2])
        await next.close()
        #expect(PrefetchSource(urlTemplate: "http://127.0.0.1:1/{version}/{z}/{x}/{y}.png").invalidReason?.contains("{version}") == true)
    }
}
