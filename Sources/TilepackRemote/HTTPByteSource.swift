import Foundation
import TilepackCore
import TilepackHTTP
import TilepackStorage

/// An archive on an HTTP(S) server or object store (S3, a CDN), read by range requests through
/// ``TilepackHTTP``'s `URLSession` client, behind Storage's ``ByteSource``.
///
/// - The first request asks for the first ``Options/initialLength`` bytes (a PMTiles header and
///   root directory); its `Content-Range` gives the object's size and its `ETag` pins the object:
///   every later request sends `If-Match` and checks the answer's `ETag` and size, so an object
///   replaced underneath is an error (``TileArchiveError/Fault/corrupt(_:)`` saying so), never
///   a mix of two versions. A server that sends no `ETag` pins the object by its `Last-Modified`
///   and size instead (`If-Unmodified-Since`, and each answer's `Last-Modified` checked), and by its
///   size alone when it sends neither; ``pin`` says which, and ``notes`` is told (once an object)
///   when it is not an ETag. An object nothing pins (``isUnpinned``) has its first request's bytes
///   (a PMTiles header and root directory, a bundle's header) read again by
///   ``confirmUnchanged()``, which a whole-archive read calls before committing its output.
/// - A server that ignores `Range` (status 200 with more than was asked) is an error that says
///   so; statuses other than 206 are errors naming the URL and the status.
/// - Fetched ranges are kept in a bounded cache. ``willRead(_:)`` takes the ranges about to be
///   read: neighbours less than ``Options/coalescingGap`` apart are fetched together, up to
///   ``Options/maximumRequestBytes`` a request.
/// - Transient faults and 408/429/5xx are retried with back-off (``Options/retry``, honouring
///   `Retry-After`); each request has a deadline (``Options/timeout``).
///
/// The methods block the calling thread until the bytes are there; the HTTP exchanges run on a
/// task executor of their own, so a caller on Swift's cooperative pool cannot starve them.
public final class HTTPByteSource: ByteSource, @unchecked Sendable {
    public struct Options: Sendable {
        /// The bytes of the first request.
        public var initialLength = 16384
        /// Ranges closer than this are fetched in one request.
        public var coalescingGap = 64 << 10
        /// The largest request.
        public var maximumRequestBytes = 8 << 20
        /// The bytes the cache keeps (the first request's bytes are always kept).
        public var cacheBytes = 64 << 20
        public var timeout: Duration = .seconds(30)
        public var retry = RetryPolicy()
        public init() {}
    }

    public let url: URL
    /// The URL, or `s3://BUCKET/KEY` for an object in S3.
    public let name: String
    public let count: Int
    /// The `ETag` the object was pinned by (`nil` when the server sends none).
    public let etag: String?
    /// The `Last-Modified` the object was pinned by when the server sends no `ETag`.
    public let lastModified: String?

    /// What tells this object from a replacement, in words.
    public var pin: String {
        if let etag { return "its ETag \(etag)" }
        if let lastModified { return "its Last-Modified (\(lastModified)) and size (\(count) bytes), as the server sends no ETag" }
        return
            "its size (\(count) bytes) alone, as the server sends no ETag or Last-Modified: a replacement of the same size is not detected"
    }

    /// Told (a command sets it, to print) when an object is pinned by less than an ETag: once an
    /// object (its name), however often it is opened.
    public static let notes = Locked<(@Sendable (String) -> Void)?>(nil)
    /// The objects ``notes`` was told of.
    private static let noted = Locked<Set<String>>([])

    /// Whether nothing the server sends tells this object from a replacement of the same size (no
    /// `ETag`, no `Last-Modified`) while reads go past the first request's bytes.
    public var isUnpinned: Bool { etag == nil && lastModified == nil && count > head.count }
    public let options: Options

    let client: HTTPClient
    let authority: (any RangeRequestAuthority)?
    /// The first request's bytes.
    let head: Data
    struct State {
        /// Cached chunks by their first byte, with a use stamp for eviction.
        var chunks: [Int: (data: Data, used: UInt64)] = [:]
        var cachedBytes = 0
        var clock: UInt64 = 0
        /// Coalesced ranges announced by `willRead`, ascending and disjoint.
        var planned: [Range<Int>] = []
        var requests = 0
        /// Fetches of a planned range wider than their read: while there were any, a read that
        /// finds no chunk starting where it does looks for one that spans it.
        var widerChunks = 0
        /// Body bytes received by every request but the first.
        var receivedBytes = 0
        /// Whether the server answers several ranges in one request (`nil`: not asked yet).
        var multipleRanges: Bool?
    }
    let state = Locked(State())

    /// The requests made so far (the first included).
    public var requestCount: Int { state.withLock { $0.requests } }

    /// Opens `url`: one request, for the first ``Options/initialLength`` bytes.
    public convenience init(url: URL, client: HTTPClient = .shared, options: Options = Options()) throws(TileArchiveError) {
        try self.init(url: url, client: client, options: options, authority: nil)
    }

    /// Opens the object at `location` in S3 (or an S3-compatible store): every request signed
    /// by `client`'s credentials, every error answer named with S3's code.
    public convenience init(s3 location: S3Location, client: S3Client = .environment, options: Options = Options()) throws(TileArchiveError)
    {
        try self.init(
            url: client.configuration.url(for: location), client: client.http, options: options,
            authority: S3RangeAuthority(client: client, location: location))
    }

    init(url: URL, client: HTTPClient, options: Options, authority: (any RangeRequestAuthority)?) throws(TileArchiveError) {
        self.url = url
        self.name = authority?.name ?? url.absoluteString
        self.client = client
        self.options = options
        self.authority = authority
        let first = try Self.fetch(
            url: url, range: 0..<options.initialLength, etag: nil, client: client, options: options, expectedSize: nil,
            authority: authority)
        state.withLock {
            $0.requests += first.attempts
            $0.receivedBytes += first.body.count
        }
        count = first.size
        etag = first.etag
        lastModified = first.etag == nil ? first.lastModified : nil
        head = first.body
        if etag == nil, count > head.count, let note = Self.notes.withLock({ $0 }),
            Self.noted.withLock({ $0.insert(name).inserted })
        {
            if isUnpinned {
                note(
                    "\(name): cannot detect a replacement during the read: the server sends no ETag or Last-Modified (its header and root directory are read again at the end, and the read fails if they differ)"
                )
            } else {
                note("\(name) is pinned by \(pin)")
            }
        }
    }

    /// For an object nothing pins (``isUnpinned``): reads the first request's bytes again (a
    /// PMTiles header and root directory, a bundle's header, metadata and small index) and throws
    /// `corrupt` naming the URL when they, or the size, differ from the first read. A replacement
    /// that keeps them (other tile bytes under the same directory) is left to the tiles' own
    /// checks. Nothing for an object pinned by its ETag or Last-Modified, whose every request is
    /// checked already.
    public func confirmUnchanged() throws(TileArchiveError) {
        guard isUnpinned else { return }
        let again = try Self.fetch(
            url: url, range: 0..<head.count, etag: nil, client: client, options: options, expectedSize: count, authority: authority)
        state.withLock {
            $0.requests += again.attempts
            $0.receivedBytes += again.body.count
        }
        guard again.body != head else { return }
        throw TileArchiveError(
            path: name,
            fault: .corrupt(
                "the object changed during the read: its header and root directory (its first \(head.count) bytes) differ from the first read, and the server sends no ETag or Last-Modified to tell the versions apart"
            ))
    }

    // MARK: ByteSource

    public func withBytes<R>(offset: Int, length: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try checkRange(offset: offset, length: length)
        if length == 0 { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        if offset + length <= head.count {
            return try head.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + length)])) }
        }
        if let hit = cached(offset: offset, length: length) {
            return try hit.data.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[hit.start..<(hit.start + length)])) }
        }
        if Self.waitingForbidden {
            throw TileArchiveError(
                path: name,
                fault: .io(
                    errno: EWOULDBLOCK, reason: "bytes \(offset)-\(offset + length - 1) are not held, and this caller may not wait for them"
                ))
        }
        // A planned range that holds this one is fetched whole; otherwise just these bytes.
        let range =
            state.withLock { state in state.planned.first { $0.contains(offset) && $0.upperBound >= offset + length } }
            ?? offset..<(offset + length)
        let data = try fetch(range, wider: range != offset..<(offset + length))
        let start = offset - range.lowerBound
        return try data.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[start..<(start + length)])) }
    }

    public func willRead(_ ranges: [Range<Int>]) throws {
        let sorted = ranges.filter { !$0.isEmpty && $0.upperBound > head.count }.sorted { $0.lowerBound < $1.lowerBound }
        var merged: [Range<Int>] = []
        for range in sorted {
            if let last = merged.last, range.lowerBound <= last.upperBound + options.coalescingGap,
                max(last.upperBound, range.upperBound) - last.lowerBound <= options.maximumRequestBytes
            {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
        state.withLock { $0.planned = merged }
    }

    // MARK: Callers that may not wait

    /// Whether reads in this task (or on this thread, outside a task) may use only the bytes
    /// held: set by ``withoutWaiting(_:)``.
    @TaskLocal public static var waitingForbidden = false

    /// Runs `body` with every read of an `HTTPByteSource` answered only from the bytes it holds
    /// (its first request's bytes, its cache): a read that needs the store throws a
    /// ``TileArchiveError`` with `io(EWOULDBLOCK)` (``wouldWait(_:)``) instead of waiting. For a
    /// caller that must not block (a server's event loop), which then asks again where it may wait.
    public static func withoutWaiting<R>(_ body: () throws -> R) rethrows -> R {
        try $waitingForbidden.withValue(true, operation: body)
    }

    /// Whether `error` is a read that ``withoutWaiting(_:)`` refused.
    public static func wouldWait(_ error: any Error) -> Bool {
        guard case .io(let code, _)? = (error as? TileArchiveError)?.fault else { return false }
        return code == EWOULDBLOCK
    }

    // MARK: Fetching and caching

    /// A cached chunk that holds the bytes: first the one that starts at `offset` (a tile read
    /// again: one lookup, whatever the cache holds), then, when some chunk was fetched for a wider
    /// planned range, any that spans them.
    private func cached(offset: Int, length: Int) -> (data: Data, start: Int)? {
        state.withLock { state in
            state.clock += 1
            if let chunk = state.chunks[offset], length <= chunk.data.count {
                state.chunks[offset]?.used = state.clock
                return (chunk.data, 0)
            }
            guard state.widerChunks > 0 else { return nil }
            for (start, chunk) in state.chunks where start <= offset && offset + length <= start + chunk.data.count {
                state.chunks[start]?.used = state.clock
                return (chunk.data, offset - start)
            }
            return nil
        }
    }

    /// Fetches `range` and keeps it; `wider` when it spans more than the read that asked for it.
    /// Past the budget, the least recently used chunks go, a tenth of the budget at a time (one
    /// sort per batch, not a scan of the whole cache per fetch).
    private func fetch(_ range: Range<Int>, wider: Bool) throws(TileArchiveError) -> Data {
        let result = try Self.fetch(
            url: url, range: range, etag: etag, client: client, options: options, expectedSize: count,
            lastModified: lastModified, authority: authority)
        state.withLock { state in
            state.requests += result.attempts
            state.receivedBytes += result.body.count
            state.clock += 1
            if let replaced = state.chunks.updateValue((result.body, state.clock), forKey: range.lowerBound) {
                state.cachedBytes -= replaced.data.count
            }
            state.cachedBytes += result.body.count
            if wider { state.widerChunks += 1 }
            guard state.cachedBytes > options.cacheBytes, state.chunks.count > 1 else { return }
            let target = options.cacheBytes - options.cacheBytes / 10
            for (start, chunk) in state.chunks.sorted(by: { $0.value.used < $1.value.used }) {
                guard state.cachedBytes > target, state.chunks.count > 1 else { break }
                state.chunks[start] = nil
                state.cachedBytes -= chunk.data.count
            }
        }
        return result.body
    }

    /// Pins `request` to one version of the object: If-Match on a strong ETag (the server answers
    /// 412 when it changed), else If-Unmodified-Since on its Last-Modified.
    static func pin(_ request: inout HTTPRequest, etag: String?, lastModified: String?) {
        if let etag, !etag.hasPrefix("W/") { request.headers["If-Match"] = etag }
        if etag == nil, let lastModified { request.headers["If-Unmodified-Since"] = lastModified }
    }

    /// Why `response` is not of the version `etag` (else `lastModified`) names, or nil.
    static func versionChange(_ response: HTTPResponse, etag: String?, lastModified: String?) -> String? {
        if let etag, let now = response.etag, now != etag {
            return "the object changed while it was read (ETag \(etag), now \(now)); open it again"
        }
        if etag == nil, let lastModified, response.header("last-modified") != lastModified {
            return
                "the object changed while it was read (Last-Modified \(lastModified), now \(response.header("last-modified") ?? "none")); open it again"
        }
        return nil
    }

    /// Sends `request`, signed by `authority`, with `retry`, for a blocking caller; counts the attempts.
    static func send(
        _ request: HTTPRequest, client: HTTPClient, retry: RetryPolicy, authority: (any RangeRequestAuthority)?, attempts: Locked<Int>
    ) -> Result<HTTPResponse, RangeRequestFailure> {
        RemoteExecutor.shared.run { () async throws(RangeRequestFailure) -> HTTPResponse in
            var signed = request
            if let authority { signed = try await authority.prepare(request) }
            do throws(HTTPError) {
                return try await client.send(signed, retry: retry) { _, _, _ in attempts.withLock { $0 += 1 } }
            } catch { throw .http(error) }
        }
    }

    struct Fetched {
        var body: Data
        var size: Int
        var etag: String?
        var lastModified: String?
        var attempts: Int
    }

    /// One range request, retried as the options say, with every answer checked.
    static func fetch(
        url: URL, range: Range<Int>, etag: String?, client: HTTPClient, options: Options, expectedSize: Int?,
        lastModified: String? = nil, authority: (any RangeRequestAuthority)? = nil, observer: HTTPBodyObserver? = nil
    ) throws(TileArchiveError) -> Fetched {
        let name = authority?.name ?? url.absoluteString
        func fail(_ fault: TileArchiveError.Fault) -> TileArchiveError { TileArchiveError(path: name, fault: fault) }
        var request = HTTPRequest(url: url, timeout: options.timeout, maximumBodyBytes: max(range.count, 1) + 1024)
        request.setRange(UInt64(range.lowerBound)..<UInt64(range.upperBound))
        request.bodyObserver = observer
        pin(&request, etag: etag, lastModified: lastModified)
        let attempts = Locked(1)
        let outcome = send(request, client: client, retry: options.retry, authority: authority, attempts: attempts)
        let response: HTTPResponse
        switch outcome {
        case .success(let value): response = value
        case .failure(.refused(let reason)): throw fail(.cannotOpen(errno: 0, reason: reason))
        case .failure(.http(let error)):
            if case .tooLarge = error.fault {
                throw fail(
                    .io(
                        errno: 0,
                        reason:
                            "the server ignored the Range header (it sent more than the \(range.count) bytes asked for): remote archives need a server that answers range requests (206)"
                    ))
            }
            // A store that does not answer in time says ETIMEDOUT (a server's 504, not its 502).
            if case .timedOut = error.fault { throw fail(.io(errno: ETIMEDOUT, reason: error.reason)) }
            throw fail(.io(errno: 0, reason: error.reason))
        }
        let tries = attempts.withLock { $0 }
        if let change = versionChange(response, etag: etag, lastModified: lastModified) { throw fail(.corrupt(change)) }
        if let encoded = response.encodedRangeFault { throw fail(.io(errno: 0, reason: encoded)) }
        switch response.status {
        case 206:
            guard let contentRange = response.header("content-range"), let parsed = parseContentRange(contentRange) else {
                throw fail(.corrupt("a 206 answer without a usable Content-Range (\(response.header("content-range") ?? "none"))"))
            }
            if let expectedSize, parsed.size != expectedSize {
                throw fail(
                    .corrupt("the object changed while it was read (it had \(expectedSize) bytes, now \(parsed.size)); open it again"))
            }
            let wanted = range.lowerBound..<min(range.upperBound, parsed.size)
            guard parsed.range == wanted, response.body.count == wanted.count else {
                throw fail(
                    .corrupt(
                        "asked for bytes \(wanted.lowerBound)..<\(wanted.upperBound), the server sent \(contentRange) with \(response.body.count) bytes"
                    ))
            }
            return Fetched(
                body: response.body, size: parsed.size, etag: response.etag, lastModified: response.header("last-modified"), attempts: tries
            )
        case 200:
            // Only acceptable as the whole object when that is no more than was asked for.
            guard range.lowerBound == 0, response.body.count < range.count, expectedSize == nil || expectedSize == response.body.count
            else {
                throw fail(
                    .io(
                        errno: 0,
                        reason:
                            "the server ignored the Range header (status 200 with \(response.body.count) bytes for bytes \(range.lowerBound)-\(range.upperBound - 1)): remote archives need a server that answers range requests (206)"
                    ))
            }
            return Fetched(
                body: response.body, size: response.body.count, etag: response.etag, lastModified: response.header("last-modified"),
                attempts: tries)
        case 416 where range.lowerBound == 0:
            return Fetched(body: Data(), size: 0, etag: response.etag, lastModified: response.header("last-modified"), attempts: tries)
        default:
            throw refusal(response, name: name, etag: etag, lastModified: lastModified, authority: authority)
        }
    }

    /// The error for an answer that is neither the bytes asked for nor the whole object: 412 when
    /// the pinned version changed, else the status, explained by the store where it can.
    static func refusal(
        _ response: HTTPResponse, name: String, etag: String?, lastModified: String?, authority: (any RangeRequestAuthority)?
    ) -> TileArchiveError {
        guard response.status != 412 else {
            return TileArchiveError(
                path: name,
                fault: .corrupt(
                    "the object changed while it was read (If-Match \(etag ?? "") or If-Unmodified-Since \(lastModified ?? "") failed); open it again"
                ))
        }
        return TileArchiveError(
            path: name, fault: .cannotOpen(errno: 0, reason: authority?.explain(response) ?? "HTTP status \(response.status)"))
    }

    /// `bytes first-last/size`.
    static func parseContentRange(_ text: String) -> (range: Range<Int>, size: Int)? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
        let parts = trimmed.dropFirst(6).split(separator: "/")
        guard parts.count == 2, let size = Int(parts[1]) else { return nil }
        let bounds = parts[0].split(separator: "-")
        guard bounds.count == 2, let first = Int(bounds[0]), let last = Int(bounds[1]), first <= last, last < size else { return nil }
        return (first..<(last + 1), size)
    }
}

/// Runs async HTTP exchanges for blocking callers on threads of its own (a task executor), so
/// that a caller blocked on Swift's cooperative pool never waits for a task that needs that pool.
final class RemoteExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = RemoteExecutor()
    private let queue = DispatchQueue(label: "tilepack-remote", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () async throws(E) -> T) -> Result<T, E> {
        let done = DispatchSemaphore(value: 0)
        let result = Locked<Result<T, E>?>(nil)
        Task(executorPreference: self) {
            let outcome: Result<T, E>
            do throws(E) { outcome = .success(try await body()) } catch { outcome = .failure(error) }
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        return result.withLock { $0 }!
    }
}

/// What signs the range requests of an ``HTTPByteSource`` and explains the store's error answers
/// (S3: SigV4 and its XML errors); plain http(s) has none.
protocol RangeRequestAuthority: Sendable {
    /// How the object is named in errors (`s3://BUCKET/KEY`).
    var name: String { get }
    /// The request, signed; throws the reason it cannot be (no credentials).
    func prepare(_ request: HTTPRequest) async throws(RangeRequestFailure) -> HTTPRequest
    /// An error answer in words.
    func explain(_ response: HTTPResponse) -> String
}

enum RangeRequestFailure: Error {
    case refused(String)
    case http(HTTPError)
}

/// S3's signing and error words for a byte source.
struct S3RangeAuthority: RangeRequestAuthority {
    let client: S3Client
    let location: S3Location

    var name: String { location.description }

    func prepare(_ request: HTTPRequest) async throws(RangeRequestFailure) -> HTTPRequest {
        do { return try await client.sign(request, location: location) } catch { throw .refused(error.description) }
    }

    func explain(_ response: HTTPResponse) -> String {
        // The reason alone: the error it goes into is named by the URL already.
        S3Error.answer(response, location: location, region: client.configuration.region).reason
    }
}

/// What tells one version of a remote object from the next: its size and the `ETag` (else the
/// `Last-Modified`) the server gives it.
public struct RemoteObjectVersion: Sendable, Hashable, CustomStringConvertible {
    public var size: Int
    public var etag: String?
    public var lastModified: String?

    public init(size: Int, etag: String?, lastModified: String?) {
        self.size = size
        self.etag = etag
        // The ETag pins the object when there is one; the date only without it.
        self.lastModified = etag == nil ? lastModified : nil
    }

    public var description: String {
        if let etag { return "ETag \(etag)" }
        if let lastModified { return "Last-Modified \(lastModified), \(size) bytes" }
        return "\(size) bytes"
    }
}

extension HTTPByteSource {
    /// The version this source reads (pinned when it was opened).
    public var version: RemoteObjectVersion { RemoteObjectVersion(size: count, etag: etag, lastModified: lastModified) }

    /// The version of the object at `url` now, asked with a `HEAD` (no body). A presigned URL
    /// (`X-Amz-Signature` in its query) is signed for `GET` alone, so it is asked with a range
    /// `GET` of its first byte instead, sent as it is.
    public static func currentVersion(url: URL, client: HTTPClient = .shared, options: Options = Options()) throws(TileArchiveError)
        -> RemoteObjectVersion
    {
        let query = url.query?.lowercased() ?? ""
        if query.contains("x-amz-signature=") || query.contains("signature=") {
            let first = try fetch(url: url, range: 0..<1, etag: nil, client: client, options: options, expectedSize: nil)
            return RemoteObjectVersion(size: first.size, etag: first.etag, lastModified: first.lastModified)
        }
        let request = HTTPRequest(url: url, method: "HEAD", timeout: options.timeout)
        let outcome = RemoteExecutor.shared.run { () async throws(HTTPError) -> HTTPResponse in
            try await client.send(request, retry: options.retry)
        }
        let fail = { (reason: String) in TileArchiveError(path: url.absoluteString, fault: .cannotOpen(errno: 0, reason: reason)) }
        switch outcome {
        case .failure(let error): throw fail(error.reason)
        case .success(let response):
            guard response.status == 200 else { throw fail("HTTP status \(response.status) to a HEAD") }
            guard let size = response.contentLength else { throw fail("a HEAD answer without a Content-Length") }
            return RemoteObjectVersion(size: size, etag: response.etag, lastModified: response.lastModified)
        }
    }

    /// The version of the object at `location` in S3 now (a signed `HEAD`); an object that is
    /// not there is an error naming it.
    public static func currentVersion(s3 location: S3Location, client: S3Client = .environment) throws(TileArchiveError)
        -> RemoteObjectVersion
    {
        let outcome = RemoteExecutor.shared.run { () async throws(S3Error) -> (size: Int, etag: String?, lastModified: String?)? in
            try await client.headVersion(location)
        }
        switch outcome {
        case .failure(let error):
            throw TileArchiveError(path: location.description, fault: .cannotOpen(errno: 0, reason: error.reason))
        case .success(nil):
            throw TileArchiveError(
                path: location.description, fault: .cannotOpen(errno: ENOENT, reason: "NoSuchKey: the object is not there"))
        case .success(let found?):
            return RemoteObjectVersion(size: found.size, etag: found.etag, lastModified: found.lastModified)
        }
    }
}
