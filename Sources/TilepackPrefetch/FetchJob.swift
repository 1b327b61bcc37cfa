import Foundation
import Synchronization
import TilepackCore
import TilepackHTTP
import TilepackPlan
import TilepackStorage

/// One fetch: workers take the area's tiles in order, skip what the store has, download the
/// rest and record every outcome; progress is reported as tiles settle.
final class FetchJob: RequestJob, @unchecked Sendable {
    unowned let prefetcher: MapDataPrefetcher
    let store: MBTilesTileStore
    let request: PrefetchRequest
    let cover: PrefetchCover
    let options: PrefetchOptions
    let regionId: Int
    let source: PrefetchSource
    /// The URLs of the version being fetched (`{version}` replaced).
    private let template: Locked<TemplateURLs>

    let state = Locked(Counters())
    let feed: Locked<Feed>
    private let cancelled = Atomic<Bool>(false)
    private let result = Locked<PrefetchReport?>(nil)
    /// Stored tiles since the capacity was last checked (the writer's queue only).
    private let sinceEviction = Locked(0)

    /// Stored tiles between two checks of the capacity.
    static let evictionInterval = 256
    /// Seconds between two progress events (the last one is always sent).
    static let progressInterval = 0.1

    struct Counters {
        var id = -1
        var total = 0
        var done = 0
        var downloaded = 0
        var alreadyPresent = 0
        var notModified = 0
        var absent = 0
        var failed = 0
        var bytes = 0
        var requests = 0
        var evicted = 0
        var failures: [PrefetchFailure] = []
        var lastFraction = 0.0
        var lastEmit = 0.0
        var started = Date().timeIntervalSince1970
        var storeError: String?
        /// The source's version (``PrefetchSource/versionURL``), and how often a refresh
        /// started again because it changed.
        var version: String?
        var restarts = 0
        /// With a budget: the plan and where the fetch stops (FetchJob+Budget.swift).
        var budget: BudgetState?
    }

    /// How often a refresh starts again after the source's version changed before it ends as a failure.
    static let maximumRestarts = 3

    /// The tiles still to take.
    enum Feed {
        case cover(TileCover.Iterator)
        case list([TileCoordinate], Int)

        mutating func next() -> TileCoordinate? {
            switch self {
            case .cover(var iterator):
                let tile = iterator.next()
                self = .cover(iterator)
                return tile
            case .list(let tiles, let index):
                guard index < tiles.count else { return nil }
                self = .list(tiles, index + 1)
                return tiles[index]
            }
        }
    }

    init(
        prefetcher: MapDataPrefetcher, store: MBTilesTileStore, request: PrefetchRequest, cover: PrefetchCover,
        options: PrefetchOptions, regionId: Int
    ) {
        self.prefetcher = prefetcher
        self.store = store
        self.request = request
        self.cover = cover
        self.options = options
        self.regionId = regionId
        source = prefetcher.source
        template = Locked(TemplateURLs(source: prefetcher.source))
        feed = Locked(.cover(cover.makeIterator()))
    }

    var finalReport: PrefetchReport? { result.withLock { $0 } }
    var finalEstimate: PrefetchEstimate? { nil }

    func start(id: Int) {
        state.withLock { counters in
            counters.id = id
            counters.total = cover.count
            prefetcher.hub.emit(.status(requestId: id, .inProgress, report: nil), from: prefetcher)
        }
    }

    func cancel() {
        cancelled.store(true, ordering: .relaxed)
    }

    private var isCancelled: Bool { cancelled.load(ordering: .relaxed) || Task.isCancelled }

    func run() async {
        repeat { await fetchOnce() } while await !switchInRefresh()
        finish()
    }

    /// The source's version now: its TileJSON's `version`, else the document's ETag; `nil` when
    /// the source names no version URL. Throws a message when it cannot be read.
    private func readVersion() async throws(VersionFault) -> String? {
        guard let text = source.versionURL else { return nil }
        guard let url = URL(string: text), let client = prefetcher.clients.first else { throw VersionFault("not a URL: \(text)") }
        let request = HTTPRequest(
            url: url, headers: ["User-Agent": client.userAgent],
            timeout: .milliseconds(Int64(prefetcher.configuration.requestTimeout * 1000)),
            maximumBodyBytes: 1 << 20)
        let response: HTTPResponse
        do { response = try await client.send(request) } catch {
            throw VersionFault("reading the source's version at \(text) failed: \(error)")
        }
        guard response.status == 200 else { throw VersionFault("reading the source's version at \(text) failed: HTTP \(response.status)") }
        if let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any] {
            if let version = object["version"] as? String, !version.isEmpty { return version }
            if let version = object["version"] as? NSNumber { return version.stringValue }
        }
        if let etag = response.etag, !etag.isEmpty { return "etag " + etag }
        throw VersionFault("the source's version document \(text) has no `version` and no ETag")
    }

    struct VersionFault: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// After a refresh's tiles are in: when the source's version is what it was when the
    /// refresh began, the staged tiles are switched in (one transaction with the metadata and
    /// the region's status, committed by ``finish()``) and this returns true; when it changed,
    /// the staged tiles are dropped and this returns false (the refresh starts again), unless
    /// it did so ``maximumRestarts`` times. A fetch that is not a complete refresh changes nothing here.
    private func switchInRefresh() async -> Bool {
        guard options.refresh else { return true }
        let (complete, version) = state.withLock { counters in
            (counters.storeError == nil && counters.failed == 0 && counters.done >= counters.total, counters.version)
        }
        guard complete, !isCancelled else { return true }
        if source.versionURL != nil {
            let now: String?
            do { now = try await readVersion() } catch {
                fail(with: error.description)
                return true
            }
            if now != version {
                do { try store.discardRefresh() } catch {
                    fail(with: "dropping the staged refresh failed: \(error)")
                    return true
                }
                let again = state.withLock { counters -> Bool in
                    guard counters.restarts < Self.maximumRestarts else { return false }
                    counters.restarts += 1
                    counters.total += cover.count
                    return true
                }
                guard again else {
                    fail(
                        with:
                            "the source's version changed during each of \(Self.maximumRestarts + 1) refreshes (last \(version ?? "none") to \(now ?? "none"))"
                    )
                    return true
                }
                return false
            }
        }
        do { try store.publishRefresh() } catch { fail(with: "switching in the refreshed tiles failed: \(error)") }
        return true
    }

    /// One pass over the area (a refresh that starts again makes another).
    private func fetchOnce() async {
        feed.withLock { $0 = .cover(cover.makeIterator()) }
        if source.versionURL != nil {
            do {
                let version = try await readVersion()
                state.withLock { $0.version = version }
                template.withLock { $0 = TemplateURLs(source: source, version: version) }
            } catch {
                fail(with: error.description)
                return
            }
        }
        if options.refresh {
            do { try store.beginRefresh(key: "region \(regionId)", version: state.withLock { $0.version }) } catch {
                fail(with: "staging the refresh failed: \(error)")
                return
            }
        }
        if options.onlyFailed {
            let failed = (try? store.records(withOutcome: .failed)) ?? []
            let tiles = failed.map(\.tile).filter { cover.contains($0) }
            feed.withLock { $0 = .list(tiles, 0) }
            state.withLock { $0.total = tiles.count }
        } else if let budget = options.budget {
            guard await planBudget(budget) else { return }
        }
        // Zooms where the store held nothing when the fetch began: their tiles are not looked up
        // one by one (this fetch asks for each tile once). A fetch running beside another on the
        // same store may then download a tile the other has just stored; it is stored again, whole.
        let emptyZooms = Set(cover.zooms.filter { (try? store.isEmpty(atZoom: $0)) == true })
        let storedFormat = try? store.metadata().format
        let downloader = TileDownloader(
            clients: prefetcher.clients, source: source, configuration: prefetcher.configuration,
            storedFormat: storedFormat ?? nil)
        // Outcomes go into the store on the writer's queue; the capacity is checked there too.
        let writer = StoreWriter(
            store: store, onError: { [weak self] message in self?.fail(with: message) },
            afterBatch: { [weak self] stored in
                guard let self else { return }
                let due = sinceEviction.withLock { count -> Bool in
                    count += stored
                    guard count >= Self.evictionInterval else { return false }
                    count = 0
                    return true
                }
                if due { evictIfNeeded() }
            })
        // Enough workers to keep every connection of every host busy; the transport's connections
        // per host are the one bound on what each host sees.
        let workers = max(1, min(1024, prefetcher.configuration.connectionsPerHost * max(1, source.hosts.count)))
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<workers {
                group.addTask { [self] in
                    while !isCancelled, withinBudget, let tile = feed.withLock({ $0.next() }) {
                        await process(tile, downloader: downloader, writer: writer, emptyZooms: emptyZooms)
                        // A server that refuses every connection ends the fetch, not tile by tile.
                        if let unreachable = downloader.unreachable { fail(with: unreachable) }
                    }
                }
            }
        }
        await writer.flush()
    }

    private nonisolated(nonsending) func process(
        _ tile: TileCoordinate, downloader: TileDownloader, writer: StoreWriter, emptyZooms: Set<Int>
    ) async {
        let record: TileStateRecord?
        let storedSize: Int?
        do {
            if emptyZooms.contains(tile.zoom) {
                record = nil
                storedSize = nil
            } else {
                record = try store.record(of: tile)
                storedSize = try store.storedSize(of: tile)
            }
        } catch {
            fail(with: "reading the store failed: \(error)")
            return
        }
        if options.refresh {
            // A refresh resumed: what it staged before is not asked again.
            do {
                if try store.isStaged(tile) {
                    settle { $0.alreadyPresent += 1 }
                    return
                }
            } catch {
                fail(with: "reading the store failed: \(error)")
                return
            }
        }
        var validators: (etag: String?, lastModified: String?)?
        if let storedSize {
            guard options.refresh else {
                settle { $0.alreadyPresent += 1 }
                return
            }
            if record?.etag != nil || record?.lastModified != nil {
                validators = (record?.etag, record?.lastModified)
            }
            _ = storedSize
        } else if record?.outcome == .absent, !options.refresh {
            settle { $0.absent += 1 }
            return
        }
        guard let url = template.withLock({ $0 }).url(for: tile) else {
            settle { $0.failed += 1 }
            return
        }
        var attempts = 0
        let outcome = await downloader.download(url, validators: validators, attempts: &attempts)
        let now = Date().timeIntervalSince1970
        switch outcome {
        case .cancelled:
            state.withLock { $0.requests += attempts }
            return
        case .tile(let data, _, let etag, let lastModified):
            let record = TileStateRecord(
                tile: tile, outcome: .stored, httpStatus: 200, attempts: attempts, bytes: data.count,
                etag: etag, lastModified: lastModified, fetchedAt: now)
            // A refresh stages what it downloads: the store switches to it in one transaction at the end.
            await writer.submit(options.refresh ? .stage(record, data) : .record(record, data))
            settle(attempts: attempts, at: now) { counters in
                counters.downloaded += 1
                counters.bytes += data.count
            }
        case .notModified:
            await writer.submit(
                .touch(
                    tile, attempts: attempts, at: now,
                    otherwise: TileStateRecord(
                        tile: tile, outcome: .stored, httpStatus: 304, attempts: attempts, bytes: storedSize ?? 0, fetchedAt: now)))
            settle(attempts: attempts) { counters in
                counters.alreadyPresent += 1
                counters.notModified += 1
            }
        case .absent(let status):
            let record = TileStateRecord(tile: tile, outcome: .absent, httpStatus: status, attempts: attempts, fetchedAt: now)
            await writer.submit(options.refresh ? .stage(record, nil) : .record(record, nil))
            settle(attempts: attempts) { $0.absent += 1 }
        case .failed(let fault):
            // A stored tile whose refresh failed stays as it was.
            if storedSize == nil {
                await writer.submit(
                    .record(
                        TileStateRecord(
                            tile: tile, outcome: .failed, httpStatus: fault.httpStatus, attempts: attempts,
                            message: fault.description, fetchedAt: now), nil))
            }
            let failure = PrefetchFailure(
                tile: "\(tile.zoom)/\(tile.x)/\(tile.y)", url: url.absoluteString, status: fault.httpStatus,
                attempts: attempts, reason: fault.description)
            settle(attempts: attempts) { counters in
                counters.failed += 1
                if counters.failures.count < PrefetchReport.maximumListedFailures { counters.failures.append(failure) }
            }
        }
    }

    /// Counts a settled tile and sends progress when due.
    /// - Parameter now: the time, when the caller has it (seconds since 1970).
    private func settle(attempts: Int = 0, at time: Double? = nil, _ update: (inout Counters) -> Void) {
        let now = time ?? Date().timeIntervalSince1970
        state.withLock { counters in
            update(&counters)
            counters.requests += attempts
            counters.done += 1
            let fraction = counters.total > 0 ? min(1, Double(counters.done) / Double(counters.total)) : 1
            if fraction > counters.lastFraction && (now - counters.lastEmit >= Self.progressInterval || counters.done == counters.total) {
                counters.lastFraction = fraction
                counters.lastEmit = now
                prefetcher.hub.emit(.progress(progress(counters, fraction: fraction, now: now)), from: prefetcher)
            }
        }
    }

    private func progress(_ counters: Counters, fraction: Double, now: Double) -> PrefetchProgress {
        PrefetchProgress(
            requestId: counters.id, fraction: fraction, tiles: counters.total, done: counters.done, downloaded: counters.downloaded,
            alreadyPresent: counters.alreadyPresent, absent: counters.absent, failed: counters.failed, bytes: counters.bytes,
            elapsed: now - counters.started)
    }

    private func evictIfNeeded() {
        let capacity = prefetcher.configuration.capacity
        guard store.totalBytes > capacity else { return }
        let covers = prefetcher.pinnedCovers()
        if let purge = try? store.evict(toCapacity: capacity, isPinned: { tile in covers.contains { $0.contains(tile) } }) {
            state.withLock { $0.evicted += purge.tiles }
        }
    }

    /// A store fault ends the fetch as a failure.
    func fail(with message: String) {
        state.withLock { if $0.storeError == nil { $0.storeError = message } }
        cancelled.store(true, ordering: .relaxed)
    }

    /// Ends the fetch with one commit: the last tiles, the refreshed metadata and the region's
    /// status go into the file together (each commit costs about four syncs).
    private func finish() {
        evictIfNeeded()
        try? store.refreshMetadata(commit: false)
        func report(storeError: String?) -> PrefetchReport {
            state.withLock { counters -> PrefetchReport in
                if let storeError, counters.storeError == nil { counters.storeError = storeError }
                // A cancel that came after the last tile settled changes nothing.
                let wasCancelled = cancelled.load(ordering: .relaxed) && counters.done < counters.total && counters.storeError == nil
                let status: PrefetchStatus =
                    counters.storeError != nil
                    ? .failure
                    : wasCancelled
                        ? .cancelled
                        : counters.failed > 0 ? .failure : .success
                return PrefetchReport(
                    requestId: counters.id, regionId: regionId, status: status, tiles: counters.total, downloaded: counters.downloaded,
                    alreadyPresent: counters.alreadyPresent, notModified: counters.notModified, absent: counters.absent,
                    failed: counters.failed, bytes: counters.bytes, requests: counters.requests,
                    seconds: Date().timeIntervalSince1970 - counters.started, failures: counters.failures, evicted: counters.evicted,
                    error: counters.storeError, version: counters.version, restarts: counters.restarts,
                    budget: counters.budget?.report(settled: counters.done))
            }
        }
        let expected = report(storeError: nil).status
        _ = try? store.updateRegion(id: regionId, status: expected.rawValue, commit: false)
        var storeError: String?
        do {
            try store.commit()
        } catch {
            storeError = "committing the store failed: \(error)"
        }
        let report = report(storeError: storeError)
        if report.status != expected { _ = try? store.updateRegion(id: regionId, status: report.status.rawValue) }
        result.withLock { $0 = report }
        prefetcher.hub.emit(.status(requestId: report.requestId, report.status, report: report), from: prefetcher)
    }
}
