import Foundation
import TilepackCore
import TilepackHTTP
import TilepackStorage

/// A region recorded in the store: a request fetched (or being fetched) into it.
public struct PrefetchRegion: Hashable, Sendable {
    public var id: Int
    /// The request, or `nil` when the record cannot be read back (then it pins nothing).
    public var request: PrefetchRequest?
    /// Kept regions' tiles are never evicted or purged.
    public var kept: Bool
    /// The status of the last fetch of the region.
    public var status: String
}

/// Downloads the tiles of a box or a route corridor from a tile server into a persistent MBTiles
/// store for offline use: tilepack's `NMAMapDataPrefetcher` (HERE's NMAMapDataPrefetcher guide). See `Specs/prefetch.md`.
///
/// One prefetcher serves one store and one source. Operations are asynchronous: ``fetchMapData(for:options:)``
/// and ``estimateMapDataSize(for:)`` return a request id at once (negative, with an error, when
/// the request is refused) and report through listeners (``addListener(_:)``) and event streams
/// (``events()``): progress in [0, 1] that never decreases, the status `inProgress` and then exactly one
/// of `success`, `failure`, `cancelled` with a report, estimates, and purges.
public final class MapDataPrefetcher: Sendable {
    public let source: PrefetchSource
    public let configuration: PrefetchConfiguration
    /// The store, or `nil` when it did not exist and was not to be created (estimates only).
    package let store: MBTilesTileStore?

    /// HTTP clients, used in turn: one over the transport given to `init`, else one per
    /// URLSession. On Linux one URLSession moves every transfer through one serial queue
    /// (FoundationNetworking over libcurl), which caps one session near one core;
    /// ``PrefetchConfiguration/sessions`` sessions spread the work over the cores.
    let clients: [HTTPClient]
    let hub = EventHub()
    private let state = Locked(State())

    private struct State {
        var nextId = 1
        var running: [Int: Running] = [:]
        var reports: [Int: PrefetchReport] = [:]
        var estimates: [Int: PrefetchEstimate] = [:]
        /// Covers of kept regions, by region id: what eviction and purges leave.
        var keptCovers: [Int: PrefetchCover] = [:]
        var closed = false
    }

    private struct Running {
        var job: RequestJob
        var task: Task<Void, Never>?
    }

    /// Opens (or creates) the store at `storePath` for tiles of `source`.
    /// - Parameters:
    ///   - createStore: create the store when it does not exist; when false and it does not, only
    ///     estimates can run.
    ///   - readOnly: open the store read-only (an archive shipped in an app bundle): fetches are
    ///     refused with operation not allowed; estimates still run.
    ///   - transport: what moves the bytes; `nil` (the default): URLSessions
    ///     (``PrefetchConfiguration/sessions`` of them). A program may bring a bulk transport
    ///     (the command line uses `TilepackCurl`'s on Linux); every rule of the exchange stays in
    ///     TilepackHTTP's `HTTPClient` either way.
    /// - Throws: ``TileArchiveError`` when the store exists but cannot be opened as flat MBTiles.
    public init(
        storePath: String, source: PrefetchSource, configuration: PrefetchConfiguration = PrefetchConfiguration(),
        createStore: Bool = true, readOnly: Bool = false, transport: (any HTTPTransport)? = nil
    ) throws(TileArchiveError) {
        self.source = source
        self.configuration = configuration
        if (createStore && !readOnly) || FileManager.default.fileExists(atPath: storePath) {
            var metadata = TileMetadata()
            metadata[TileMetadata.Key.name] = source.hosts.first.map { "tiles from \($0)" } ?? "prefetched tiles"
            metadata[TileMetadata.Key.description] = "fetched by tilepack from \(source.urlTemplate)"
            if let format = source.format ?? source.formatFromExtension { metadata.setFormat(format) }
            store = try MBTilesTileStore(path: storePath, create: !readOnly, readOnly: readOnly, metadata: metadata)
        } else {
            store = nil
        }
        if let transport {
            clients = [HTTPClient(transport: transport, userAgent: configuration.userAgent)]
        } else {
            // The sessions share the connections per host exactly (8 over 3: 3, 3 and 2), so that
            // their sum is the configuration's bound, which nothing else counts.
            let connections = max(1, configuration.connectionsPerHost)
            let sessions = max(1, min(configuration.sessions, connections))
            clients = (0..<sessions).map { index in
                let share = connections / sessions + (index < connections % sessions ? 1 : 0)
                return HTTPClient(userAgent: configuration.userAgent, maximumConnectionsPerHost: share)
            }
        }
        if let store {
            let regions = try store.regions()
            state.withLock { state in
                for region in regions where region.kept {
                    if let request = PrefetchRequest(storedJSON: region.request), let cover = try? request.cover() {
                        state.keptCovers[region.id] = cover
                    }
                }
            }
        }
    }

    // MARK: Listeners and events

    /// Adds a listener (held strongly until removed). Events already delivered are not repeated.
    public func addListener(_ listener: any PrefetchListener) { hub.add(listener) }

    public func removeListener(_ listener: any PrefetchListener) { hub.remove(listener) }

    /// The same events as the listeners get, from now on, until the stream is dropped.
    public func events() -> AsyncStream<PrefetchEvent> { hub.stream() }

    // MARK: Requests

    /// Starts fetching the tiles of `request` that the store lacks (HERE's NMAMapDataPrefetcher's
    /// `fetchMapDataForBoundingBox:` / `fetchMapDataForRoute:radius:`). The same request on the
    /// same store resumes: tiles stored or recorded absent are not requested again.
    public func fetchMapData(for request: PrefetchRequest, options: PrefetchOptions = PrefetchOptions()) -> PrefetchSubmission {
        let cover: PrefetchCover
        switch check(request) {
        case .rejected(let rejection): return rejection
        case .accepted(let checked): cover = checked
        }
        if let budget = options.budget, budget <= 0 { return .rejected(.invalidParameters, "the budget must be above 0 bytes") }
        guard let store else { return .rejected(.operationNotAllowed, "there is no store to fetch into") }
        guard !store.isReadOnly else { return .rejected(.operationNotAllowed, "the store \(store.path) is read-only") }
        let region: TileRegionRecord
        do {
            // Committed with the first batch of tiles.
            region = try store.region(
                key: request.key(source: source), request: request.storedJSON, status: PrefetchStatus.inProgress.rawValue,
                commit: false)
        } catch {
            return .rejected(.unknown, "recording the region failed: \(error)")
        }
        let job = FetchJob(prefetcher: self, store: store, request: request, cover: cover, options: options, regionId: region.id)
        return submit(job) { state in state.keptCovers[region.id] = cover }
    }

    /// Fetches again only the tiles of `request` recorded as failed.
    public func retryFailedTiles(for request: PrefetchRequest) -> PrefetchSubmission {
        fetchMapData(for: request, options: PrefetchOptions(onlyFailed: true))
    }

    /// Starts estimating the size of `request` (HERE's NMAMapDataPrefetcher's `estimateMapDataSizeForBoundingBox:`):
    /// the exact tile count, the tiles missing from the store, and their bytes from the budget
    /// planner's stratified sample (``sampleSizes(for:seed:)``: 2% of the tiles, at least
    /// ``PrefetchConfiguration/samplesPerZoom`` a zoom; downloaded, not stored) with a 95% margin.
    public func estimateMapDataSize(for request: PrefetchRequest) -> PrefetchSubmission {
        let cover: PrefetchCover
        switch check(request) {
        case .rejected(let rejection): return rejection
        case .accepted(let checked): cover = checked
        }
        return submit(EstimateJob(prefetcher: self, store: store, request: request, cover: cover)) { _ in }
    }

    /// Estimates and waits for the result.
    public func estimate(_ request: PrefetchRequest) async -> PrefetchEstimate {
        let submission = estimateMapDataSize(for: request)
        guard submission.accepted else {
            return PrefetchEstimate(
                requestId: submission.requestId, tiles: 0, missing: 0, bytes: 0, margin: 0, kilobytes: 0,
                success: false, sampled: 0, sampledPresent: 0, error: submission.reason)
        }
        await wait(for: submission.requestId)
        return state.withLock { $0.estimates[submission.requestId] }
            ?? PrefetchEstimate(
                requestId: submission.requestId, tiles: 0, missing: 0, bytes: 0, margin: 0, kilobytes: 0,
                success: false, sampled: 0, sampledPresent: 0, error: "no result")
    }

    /// Fetches and waits for the report; `nil` when the request was refused (see the submission).
    public func fetch(_ request: PrefetchRequest, options: PrefetchOptions = PrefetchOptions()) async -> (
        PrefetchSubmission, PrefetchReport?
    ) {
        let submission = fetchMapData(for: request, options: options)
        guard submission.accepted else { return (submission, nil) }
        return (submission, await report(for: submission.requestId))
    }

    /// Waits until request `id` has ended (returns at once for an unknown or ended id).
    public func wait(for id: Int) async {
        let task = state.withLock { $0.running[id]?.task }
        await task?.value
    }

    /// The report of fetch `id`, waiting for it to end; `nil` for an unknown id or an estimate.
    public func report(for id: Int) async -> PrefetchReport? {
        await wait(for: id)
        return state.withLock { $0.reports[id] }
    }

    /// Cancels request `id`: it ends with the status `cancelled` (once), leaving what it stored.
    public func cancel(_ id: Int) {
        guard let running = state.withLock({ $0.running[id] }) else { return }
        running.job.cancel()
        running.task?.cancel()
    }

    public func cancelAll() {
        for id in runningRequests { cancel(id) }
    }

    /// Requests running now.
    public var runningRequests: [Int] { state.withLock { $0.running.keys.sorted() } }

    // MARK: The store

    /// Deletes every tile that belongs to no kept region (HERE's NMAMapDataPrefetcher's `clearCache`), and reports
    /// it to the listeners (`didPurgeCache`). `nil` when there is no writable store.
    @discardableResult
    public func clearCache() -> TileStorePurge? {
        guard let store, !store.isReadOnly else { return nil }
        let covers = state.withLock { Array($0.keptCovers.values) }
        do {
            let result = try store.purge { tile in covers.contains { $0.contains(tile) } }
            try store.refreshMetadata()
            hub.emit(.purged(result), from: self)
            return result
        } catch {
            return nil
        }
    }

    /// The regions recorded in the store.
    public func regions() throws(TileArchiveError) -> [PrefetchRegion] {
        guard let store else { return [] }
        return try store.regions().map {
            PrefetchRegion(id: $0.id, request: PrefetchRequest(storedJSON: $0.request), kept: $0.kept, status: $0.status)
        }
    }

    /// Stops keeping region `id`: its tiles become unused (evictable, purged by ``clearCache()``).
    @discardableResult
    public func releaseRegion(_ id: Int) throws(TileArchiveError) -> Bool {
        guard let store else { return false }
        let changed = try store.updateRegion(id: id, kept: false)
        state.withLock { _ = $0.keptCovers.removeValue(forKey: id) }
        return changed
    }

    /// Cancels every request, waits for them, delivers the last events, ends every event stream,
    /// and closes the store. Later requests are refused with operation not allowed.
    public func close() async {
        cancelAll()
        for id in runningRequests { await wait(for: id) }
        state.withLock { $0.closed = true }
        await hub.drain()
        hub.finishStreams()
        try? store?.close()
    }

    // MARK: Internals

    /// The checks every request goes through, in HERE's NMAMapDataPrefetcher's order of errors.
    private func check(_ request: PrefetchRequest) -> Checked {
        if state.withLock({ $0.closed }) { return .rejected(.rejected(.operationNotAllowed, "the prefetcher is closed")) }
        if let reason = configuration.invalidReason { return .rejected(.rejected(.invalidParameters, reason)) }
        if let reason = source.invalidReason { return .rejected(.rejected(.invalidParameters, reason)) }
        if let reason = request.invalidReason { return .rejected(.rejected(.invalidParameters, reason)) }
        // Before any request is made.
        if let reason = source.forbiddenReason { return .rejected(.rejected(.operationNotAllowed, reason)) }
        let cover: PrefetchCover
        do {
            cover = try request.cover()
        } catch {
            return .rejected(.rejected(.invalidParameters, "\(error)"))
        }
        guard cover.count <= configuration.maximumTiles else {
            return .rejected(
                .rejected(.routeAreaTooBig, "the area holds \(cover.count) tiles, over the limit of \(configuration.maximumTiles)"))
        }
        return .accepted(cover)
    }

    private enum Checked {
        case accepted(PrefetchCover)
        case rejected(PrefetchSubmission)
    }

    private func submit(_ job: RequestJob, whenAccepted: (inout State) -> Void) -> PrefetchSubmission {
        let id: Int? = state.withLock { state in
            guard !state.closed, state.running.count < configuration.maximumConcurrentRequests else { return nil }
            let id = state.nextId
            state.nextId += 1
            state.running[id] = Running(job: job, task: nil)
            whenAccepted(&state)
            return id
        }
        guard let id else {
            return .rejected(.busy, "\(configuration.maximumConcurrentRequests) requests are running, the most allowed")
        }
        job.start(id: id)
        let task = Task { [self] in
            await job.run()
            finish(id)
        }
        state.withLock { $0.running[id]?.task = task }
        return PrefetchSubmission(requestId: id, error: .none, reason: nil)
    }

    private func finish(_ id: Int) {
        state.withLock { state in
            guard let job = state.running.removeValue(forKey: id)?.job else { return }
            if let report = job.finalReport { state.reports[id] = report }
            if let estimate = job.finalEstimate { state.estimates[id] = estimate }
        }
    }

    /// Whether a kept region holds `tile`: such tiles are never evicted.
    func pinnedCovers() -> [PrefetchCover] {
        state.withLock { Array($0.keptCovers.values) }
    }
}

/// A running fetch or estimate.
protocol RequestJob: AnyObject, Sendable {
    func start(id: Int)
    func run() async
    func cancel()
    var finalReport: PrefetchReport? { get }
    var finalEstimate: PrefetchEstimate? { get }
}

/// Delivers events in order on one queue, to listeners and streams.
final class EventHub: Sendable {
    private let queue = DispatchQueue(label: "tilepack.prefetch.events")
    private let listeners = Locked<[ObjectIdentifier: any PrefetchListener]>([:])
    private let continuations = Locked<[UUID: AsyncStream<PrefetchEvent>.Continuation]>([:])

    func add(_ listener: any PrefetchListener) {
        listeners.withLock { $0[ObjectIdentifier(listener)] = listener }
    }

    func remove(_ listener: any PrefetchListener) {
        _ = listeners.withLock { $0.removeValue(forKey: ObjectIdentifier(listener)) }
    }

    func stream() -> AsyncStream<PrefetchEvent> {
        let (stream, continuation) = AsyncStream<PrefetchEvent>.makeStream(bufferingPolicy: .unbounded)
        let id = UUID()
        continuations.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    /// Queues `event`; events queued by one thread are delivered in that order, and callers that
    /// need an order across threads queue under their own lock.
    func emit(_ event: PrefetchEvent, from prefetcher: MapDataPrefetcher) {
        queue.async { [self] in
            for listener in listeners.withLock({ Array($0.values) }) {
                switch event {
                case .progress(let progress):
                    listener.prefetcher(prefetcher, didUpdateProgress: progress.fraction, forRequestId: progress.requestId)
                case .status(let id, let status, _):
                    listener.prefetcher(prefetcher, didUpdateStatus: status, forRequestId: id)
                case .estimate(let estimate):
                    listener.prefetcher(prefetcher, didEstimate: estimate)
                case .purged(let result):
                    listener.prefetcher(prefetcher, didPurgeCache: result)
                }
                listener.prefetcher(prefetcher, didReceive: event)
            }
            for continuation in continuations.withLock({ Array($0.values) }) { continuation.yield(event) }
        }
    }

    /// Ends every stream (after the events already queued).
    func finishStreams() {
        queue.async { [self] in
            for continuation in continuations.withLock({ Array($0.values) }) { continuation.finish() }
        }
    }

    /// Waits until every event queued so far is delivered.
    func drain() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { continuation.resume() }
        }
    }
}
