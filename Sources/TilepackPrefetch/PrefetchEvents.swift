import Foundation
import TilepackCore
import TilepackStorage

/// Why a request was not started (HERE's NMAMapDataPrefetcher's `NMAPrefetchRequestError`).
public enum PrefetchRequestError: String, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The request was started.
    case none
    /// Something unforeseen failed while submitting (e.g. the store cannot be read).
    case unknown
    /// As many requests as ``PrefetchConfiguration/maximumConcurrentRequests`` are running.
    case busy
    /// A zoom outside 0-30, an invalid box or route, a radius below 500 m, a template without
    /// `{x}` `{y}` `{z}` or not http(s), a scale other than 1-3.
    case invalidParameters = "invalid-parameters"
    /// The store is read-only, or the source's usage policy forbids bulk downloads.
    case operationNotAllowed = "operation-not-allowed"
    /// The request covers more than ``PrefetchConfiguration/maximumTiles`` tiles.
    case routeAreaTooBig = "route-area-too-big"

    public var description: String { rawValue }
}

/// What ``MapDataPrefetcher/fetchMapData(for:options:)`` and
/// ``MapDataPrefetcher/estimateMapDataSize(for:)`` return: a request id (negative when rejected)
/// and the error (``PrefetchRequestError/none`` when accepted), with a sentence saying why.
public struct PrefetchSubmission: Hashable, Sendable {
    public var requestId: Int
    public var error: PrefetchRequestError
    public var reason: String?

    public var accepted: Bool { error == .none && requestId >= 0 }

    static func rejected(_ error: PrefetchRequestError, _ reason: String) -> PrefetchSubmission {
        PrefetchSubmission(requestId: -1, error: error, reason: reason)
    }
}

/// The status of a fetch (HERE's NMAMapDataPrefetcher's `NMAPrefetchStatus`): `inProgress` first, then exactly one
/// of the others.
public enum PrefetchStatus: String, Hashable, Sendable, Codable, CustomStringConvertible {
    case inProgress = "in-progress"
    /// Every tile of the area is stored or absent at the source.
    case success
    /// Some tiles failed after their retries (listed in the report), or the store failed.
    case failure
    case cancelled

    public var isFinal: Bool { self != .inProgress }
    public var description: String { rawValue }
}

/// How far a fetch has come. `fraction` is in [0, 1] and never decreases.
public struct PrefetchProgress: Hashable, Sendable, Codable {
    public var requestId: Int
    public var fraction: Double
    /// Tiles in the area, and tiles settled (stored, present, absent or failed).
    public var tiles: Int
    public var done: Int
    public var downloaded: Int
    public var alreadyPresent: Int
    public var absent: Int
    public var failed: Int
    /// Bytes of tiles downloaded and stored.
    public var bytes: Int
    public var elapsed: Double
}

/// One tile that failed after its retries.
public struct PrefetchFailure: Hashable, Sendable, Codable, CustomStringConvertible {
    /// `z/x/y` (XYZ).
    public var tile: String
    public var url: String
    /// The last HTTP status (0 for a connection fault).
    public var status: Int
    public var attempts: Int
    public var reason: String

    public var description: String { "\(tile) \(url): \(reason) (\(attempts) attempts)" }
}

/// The result of a fetch.
public struct PrefetchReport: Hashable, Sendable, Codable {
    public var requestId: Int
    /// The region recorded in the store (the same request resumes it).
    public var regionId: Int
    public var status: PrefetchStatus
    /// Tiles in the area.
    public var tiles: Int
    /// Downloaded and stored by this run.
    public var downloaded: Int
    /// Already in the store (not requested, or revalidated unchanged with a 304).
    public var alreadyPresent: Int
    /// Revalidated unchanged (304) by a refresh (counted in ``alreadyPresent`` too).
    public var notModified: Int
    /// Absent at the source (404 or 204), recorded.
    public var absent: Int
    /// Failed after their retries.
    public var failed: Int
    /// Bytes downloaded and stored.
    public var bytes: Int
    /// HTTP requests made (retries included).
    public var requests: Int
    public var seconds: Double
    /// The failed tiles (at most ``PrefetchReport/maximumListedFailures``).
    public var failures: [PrefetchFailure]
    /// Tiles evicted to keep the store under its capacity while fetching.
    public var evicted: Int
    /// Why the fetch failed as a whole (a store fault), when it did.
    public var error: String?
    /// The source's version the store now holds (`PrefetchSource.versionURL`), when it names one.
    public var version: String? = nil
    /// How often a refresh started again because the source's version changed under it.
    public var restarts: Int? = nil
    /// With a budget (``PrefetchOptions/budget``): the plan carried out and where it stopped.
    public var budget: PrefetchBudgetReport? = nil

    public static let maximumListedFailures = 1000
}

/// A size estimate (HERE's NMAMapDataPrefetcher's estimate callback, in KB with a success flag).
public struct PrefetchEstimate: Hashable, Sendable, Codable {
    public var requestId: Int
    /// The exact number of tiles in the area.
    public var tiles: Int
    /// Of them, not yet in the store: what a fetch would download.
    public var missing: Int
    /// The estimated bytes of the missing tiles, and the half-width of its 95% interval.
    public var bytes: Int
    public var margin: Int
    /// `bytes` in KB (1024 bytes, rounded up), 0 on failure: HERE's NMAMapDataPrefetcher's figure.
    public var kilobytes: Int
    /// False when no sample tile could be fetched (then bytes and kilobytes are 0).
    public var success: Bool
    /// Tiles sampled (requested, or already stored) and how many of them exist at the source.
    public var sampled: Int
    public var sampledPresent: Int
    /// Why the estimate failed, when it did.
    public var error: String?
}

/// What the prefetcher reports to its listeners and event streams.
public enum PrefetchEvent: Hashable, Sendable {
    case progress(PrefetchProgress)
    /// `report` is set with every final status.
    case status(requestId: Int, PrefetchStatus, report: PrefetchReport?)
    case estimate(PrefetchEstimate)
    /// Unused tiles were purged (``MapDataPrefetcher/clearCache()``), HERE's NMAMapDataPrefetcher's `didPurgeCache`.
    case purged(TileStorePurge)
}

/// Receives a prefetcher's events (HERE's NMAMapDataPrefetcher's `NMAMapDataPrefetcherListener`), one at a time, in
/// order, on the prefetcher's delivery queue. Every method has an empty default.
public protocol PrefetchListener: AnyObject, Sendable {
    /// `progress` in [0, 1], never decreasing for a request.
    func prefetcher(_ prefetcher: MapDataPrefetcher, didUpdateProgress progress: Double, forRequestId requestId: Int)
    func prefetcher(_ prefetcher: MapDataPrefetcher, didUpdateStatus status: PrefetchStatus, forRequestId requestId: Int)
    func prefetcher(_ prefetcher: MapDataPrefetcher, didEstimate estimate: PrefetchEstimate)
    func prefetcher(_ prefetcher: MapDataPrefetcher, didPurgeCache result: TileStorePurge)
    /// Every event, including the detailed progress and the final report.
    func prefetcher(_ prefetcher: MapDataPrefetcher, didReceive event: PrefetchEvent)
}

extension PrefetchListener {
    public func prefetcher(_ prefetcher: MapDataPrefetcher, didUpdateProgress progress: Double, forRequestId requestId: Int) {}
    public func prefetcher(_ prefetcher: MapDataPrefetcher, didUpdateStatus status: PrefetchStatus, forRequestId requestId: Int) {}
    public func prefetcher(_ prefetcher: MapDataPrefetcher, didEstimate estimate: PrefetchEstimate) {}
    public func prefetcher(_ prefetcher: MapDataPrefetcher, didPurgeCache result: TileStorePurge) {}
    public func prefetcher(_ prefetcher: MapDataPrefetcher, didReceive event: PrefetchEvent) {}
}
