import ArgumentParser
import Foundation
import TilepackCore
import TilepackCurl
import TilepackHTTP
import TilepackOperations
import TilepackPrefetch

/// `--zoom 3-12` or `--zoom 7`.
struct ZoomRangeArgument: CheckedArgument {
    var zooms: ClosedRange<Int>

    static func parse(_ text: String) throws(ArgumentValueError) -> ZoomRangeArgument {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false).map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard (1...2).contains(parts.count), let low = parts[0], let high = parts[parts.count - 1] else {
            throw ArgumentValueError("the zooms are MIN-MAX or Z, whole numbers")
        }
        for zoom in [low, high] where !(0...TileCoordinate.maximumZoom).contains(zoom) {
            throw ArgumentValueError("zoom \(zoom) is outside 0-\(TileCoordinate.maximumZoom)")
        }
        guard low <= high else { throw ArgumentValueError("the lowest zoom \(low) is above the highest \(high)") }
        return ZoomRangeArgument(zooms: low...high)
    }
}

struct FetchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "Download the tiles of a box, a route corridor or a polygon region from a tile server into an MBTiles archive.",
        discussion: """
            The URL template takes {z} {x} {y} (or {-y} for TMS rows), {scale} and {s} (subdomains), as MKTileOverlay and \
            Leaflet do. Every body is checked before it is stored: an HTML error page, an empty body, \
            a damaged or truncated image, or an image of another size is never stored. Timeouts, \
            dropped connections, 5xx and 429 are retried with back-off (Retry-After honoured); 404 and \
            204 are recorded as absent. Running the same command on the same output resumes: stored \
            and absent tiles are not requested again. Ctrl-C stops cleanly. tile.openstreetmap.org \
            forbids bulk downloads and is refused.

            Exit status: 0 when every tile of the area is stored or absent at the source, 1 when some \
            failed after their retries (listed with --json) or the request was refused (Error: URL: reason), \
            130 when interrupted.
            """
    )

    @Argument(help: "The URL template, e.g. https://tiles.example/{z}/{x}/{y}.png")
    var urlTemplate: String

    @Argument(help: "The MBTiles archive to fill (created if missing, resumed if present).")
    var output: String

    // --bbox and --region as extract's (AreaOptions), declared here so that giving two of
    // them with --route is one message: exactly one of the three.
    @Option(help: ArgumentHelp(SharedHelp.bbox, valueName: SharedHelp.bboxValue), transform: BoundingBoxArgument.parse)
    var bbox: BoundingBoxArgument?

    @Option(help: ArgumentHelp(SharedHelp.region, valueName: SharedHelp.regionValue), transform: RegionArgument.parse)
    var region: RegionArgument?

    @Option(help: "\(SharedHelp.route)")
    var route: String?

    @Option(help: "\(SharedHelp.radius) (at least 500).")
    var radius: Double?

    @Option(name: .customLong("min-zoom"), help: "\(SharedHelp.minZoom) to download (default 0).")
    var minZoom: Int?

    @Option(name: .customLong("max-zoom"), help: "\(SharedHelp.maxZoom) to download.")
    var maxZoom: Int?

    /// The older spelling, kept: `--zoom 8-12` is `--min-zoom 8 --max-zoom 12`.
    @Option(
        help: ArgumentHelp("MIN-MAX or Z, the same as --min-zoom MIN --max-zoom MAX.", valueName: "zooms"),
        transform: ZoomRangeArgument.parse)
    var zoom: ZoomRangeArgument?

    @Flag(help: "Print the tile count and a byte estimate; download no tile into the archive.")
    var estimate = false

    @OptionGroup var server: TileServerOptions

    @Option(
        help:
            "The store's capacity in MB: past it, tiles of no kept region (earlier fetches' leftovers) are evicted; it never limits this fetch, whose region is kept: --budget does.")
    var capacity: Int = 256

    @OptionGroup(title: "Within a budget (as plan TEMPLATE plans it)") var budgetOptions: BudgetOptions

    @Flag(
        help:
            "Revalidate stored tiles (If-None-Match / If-Modified-Since) and ask again for absent ones; what changed is switched in in one transaction at the end."
    )
    var refresh = false

    @Option(
        name: .customLong("version-url"),
        help:
            "A TileJSON (its version, else its ETag) naming the tiles' version: {version} in the template takes it, and a refresh that sees it change starts again."
    )
    var versionURL: String?

    @Flag(name: .customLong("retry-failed"), help: "Request only the tiles recorded as failed.")
    var retryFailed = false

    @OptionGroup var outputOptions: OutputOptions

    /// The zooms asked for, by --min-zoom and --max-zoom or by --zoom.
    func zooms() throws -> ClosedRange<Int> {
        if let zoom {
            guard minZoom == nil && maxZoom == nil else {
                throw ValidationError("give --zoom MIN-MAX or --min-zoom/--max-zoom, not both")
            }
            return zoom.zooms
        }
        guard let maxZoom else { throw ValidationError("give the zooms: --max-zoom Z (from --min-zoom, default 0), or --zoom MIN-MAX") }
        try checkZooms(minZoom: minZoom, maxZoom: maxZoom)
        return (minZoom ?? 0)...maxZoom
    }

    func validate() throws {
        _ = try zooms()
        if [bbox != nil, route != nil, region != nil].filter({ $0 }).count != 1 {
            throw ValidationError("give exactly one of --bbox, --route and --region")
        }
        if route != nil && radius == nil { throw ValidationError("--route needs --radius METRES") }
        if route == nil && radius != nil { throw ValidationError("--radius goes with --route") }
        if capacity < 0 { throw ValidationError("--capacity must not be negative") }
        if estimate && (refresh || retryFailed) { throw ValidationError("--estimate downloads nothing: no --refresh or --retry-failed") }
        if estimate && budgetOptions.budget != nil {
            throw ValidationError("--estimate with --budget is a plan: run `tilepack plan TEMPLATE` with the same area, zooms and --budget")
        }
        if retryFailed && budgetOptions.budget != nil { throw ValidationError("--retry-failed asks again for failed tiles only: no --budget") }
    }

    func run() async throws {
        let request = PrefetchRequest(area: try area(), zooms: try zooms())
        // A refused fetch leaves nothing: a store this run creates is removed when the fetch is
        // refused before its first request (a store being resumed is the user's and stays).
        let storeExisted = estimate || FileSystem.lstat(output) != nil
        let prefetcher = try MapDataPrefetcher(
            storePath: output, source: prefetchSource(), configuration: prefetchConfiguration(), createStore: !estimate,
            transport: server.transport.make(concurrency: server.concurrency))
        if estimate { return try await runEstimate(request, with: prefetcher) }

        let events = prefetcher.events()
        let submission = prefetcher.fetchMapData(
            for: request,
            options: PrefetchOptions(
                refresh: refresh, onlyFailed: retryFailed, budget: budgetOptions.budget?.bytes, focus: try budgetOptions.planFocus()))
        guard submission.accepted else {
            await prefetcher.close()
            if !storeExisted {
                for suffix in ["", "-journal"] { try? FileManager.default.removeItem(atPath: output + suffix) }
            }
            throw refusal("\(submission.reason ?? "refused") (\(submission.error))")
        }
        let interrupt = Interrupt { prefetcher.cancel(submission.requestId) }
        let report = await finalReport(of: submission.requestId, from: events)
        interrupt.cancel()
        await prefetcher.close()
        guard let report else { throw ExitCode(1) }
        try printReport(report)
        // Every tile absent: nothing of the region exists on the server, which is a mistake (a box
        // with latitude and longitude swapped), not a success.
        let allAbsent = report.tiles > 0 && report.absent == report.tiles
        if allAbsent {
            printError(everyTileAbsent("the \(report.tiles) tiles"))
        }
        switch report.status {
        case .success where !allAbsent: return
        case .cancelled: throw ExitCode(130)
        default: throw ExitCode(1)
        }
    }

    /// The area of `--bbox`, `--route` with `--radius`, or `--region`.
    private func area() throws -> PrefetchArea {
        if let bbox {
            if let note = bbox.box.antimeridianNote { printError("note: \(note)") }
            return .boundingBox(bbox.box)
        } else if let route, let radius {
            return .route(try RouteFile.read(path: route), radius: radius)
        } else if let region {
            return .region(region.region)
        }
        throw CommandFailure("give exactly one of --bbox, --route and --region")
    }

    private func prefetchConfiguration() -> PrefetchConfiguration {
        var configuration = server.configuration()
        configuration.capacity = capacity * 1024 * 1024
        return configuration
    }

    private func prefetchSource() -> PrefetchSource {
        var source = server.source(template: urlTemplate)
        source.versionURL = versionURL
        return source
    }

    /// `--estimate`: prints the estimate of `request`; exit 1 when it has no byte estimate or
    /// every sample is absent.
    private func runEstimate(_ request: PrefetchRequest, with prefetcher: MapDataPrefetcher) async throws {
        let result = await prefetcher.estimate(request)
        if let reason = result.error, result.requestId < 0 { throw refusal(reason) }
        // Every sample absent: the box is outside what the server has (or its latitude and
        // longitude are swapped); "about 0 B" would hide that.
        let allAbsent = result.success && result.sampled > 0 && result.sampledPresent == 0
        if outputOptions.json {
            try printJSON(result)
        } else if allAbsent {
            printError(everyTileAbsent("the \(result.sampled) sample tiles of the \(result.tiles) tiles"))
        } else if result.success {
            print(
                "\(result.tiles) tiles, \(result.missing) not yet in \(output); about \(Self.bytes(result.bytes)) ± \(Self.bytes(result.margin)) (\(result.kilobytes) KB), from \(result.sampled) sample tiles"
            )
        } else {
            print("\(result.tiles) tiles, \(result.missing) not yet in \(output); no byte estimate: \(result.error ?? "unknown")")
        }
        await prefetcher.close()
        if !result.success || allAbsent { throw ExitCode(1) }
    }

    /// Draws the progress of request `id` from `events` until its final status; its report (nil
    /// when the events end first).
    private func finalReport(of id: Int, from events: AsyncStream<PrefetchEvent>) async -> PrefetchReport? {
        let bar = ProgressBar.start(label: "fetch", quiet: outputOptions.quiet)
        var report: PrefetchReport?
        for await event in events {
            switch event {
            case .progress(let progress) where progress.requestId == id:
                bar?.draw(
                    OperationProgress(done: progress.done, total: progress.tiles, bytes: progress.bytes, elapsed: progress.elapsed),
                    detail: "\(Self.bytes(progress.bytes))" + (progress.failed > 0 ? ", \(progress.failed) failed" : ""))
            case .status(let eventId, let status, let final) where eventId == id && status.isFinal:
                report = final
            default:
                break
            }
            if report != nil { break }
        }
        bar?.finish()
        return report
    }

    /// The fetch's summary: as JSON, or a line and, unless -q, the first failures.
    private func printReport(_ report: PrefetchReport) throws {
        if outputOptions.json {
            try printJSON(report)
            return
        }
        let rate = report.seconds > 0 ? Double(report.downloaded) / report.seconds : 0
        print(
            "\(report.status): \(report.downloaded) tiles downloaded (\(Self.bytes(report.bytes))) into \(output) in \(String(format: "%.2f", report.seconds)) s (\(Int(rate)) tiles/s); \(report.alreadyPresent) already present, \(report.absent) absent, \(report.failed) failed of \(report.tiles)"
        )
        if let budget = report.budget { print(Self.budgetLine(budget)) }
        // Per tile: -q leaves them to --json (the summary counts them).
        if !outputOptions.quiet {
            for failure in report.failures.prefix(10) { printError("failed: \(failure)") }
            if report.failures.count > 10 { printError("... and \(report.failed - 10) more failed (see --json)") }
        }
        if let error = report.error { printError("error: \(error)") }
    }

    /// What a fetch with --budget carried out.
    static func budgetLine(_ budget: PrefetchBudgetReport) -> String {
        let complete = budget.completeZoom.map { "every tile to zoom \($0)" } ?? "not every tile of the lowest zoom"
        let left = budget.leftOut > 0 ? "; \(budget.leftOut) planned tiles left out: the area's bytes reached the budget" : ""
        return "budget \(bytes(budget.budget)): planned \(budget.plannedTiles) tiles, \(complete), the deepest at zoom \(budget.deepestZoom.map(String.init) ?? "-"), about \(bytes(budget.plannedBytes)) ± \(bytes(budget.margin)) of tiles\(left)"
    }

    /// What a fetch or estimate says when every tile it asked for is absent.
    private func everyTileAbsent(_ tiles: String) -> String {
        "error: every one of \(tiles) is absent from \(urlTemplate) (404 or 204): is the box outside what the server has, or are its latitude and longitude swapped (the order is west,south,east,north)?"
    }

    /// A request the prefetcher refused: "Error: URL: reason", exit 1, as every command's refusal.
    private func refusal(_ reason: String) -> Error {
        CommandFailure(urlTemplate, reason)
    }

    static func bytes(_ count: Int) -> String {
        let value = Double(count)
        if value >= 1e9 { return String(format: "%.2f GB", value / 1e9) }
        if value >= 1e6 { return String(format: "%.1f MB", value / 1e6) }
        if value >= 1e3 { return String(format: "%.1f kB", value / 1e3) }
        return "\(count) B"
    }
}

/// `--transport`: what moves the bytes of `fetch`. On Linux the command does not link URLSession
/// (FoundationNetworking would load libcurl and some thirty libraries at every start of every
/// command); the library's URLSession path is measured by `tools/bench-fetch.sh`'s floor rows.
enum FetchTransport: String, ExpressibleByArgument, CaseIterable {
    #if os(Linux)
    case curl

    static let platformDefault = FetchTransport.curl
    #else
    case urlsession

    static let platformDefault = FetchTransport.urlsession
    #endif

    /// What the removed `--transport sockets` and `--pipeline` say.
    #if os(Linux)
    static let removal = "libcurl is the transport (HTTP/2 multiplexing on https): leave out --transport, or give --transport curl"
    #else
    static let removal = "URLSession is the transport: leave out --transport"
    #endif

    static func parse(_ text: String) throws(ArgumentValueError) -> FetchTransport {
        if let transport = FetchTransport(rawValue: text) { return transport }
        if text == "sockets" { throw ArgumentValueError("tilepack's own sockets transport was removed; \(removal)") }
        throw ArgumentValueError("the transport is '\(platformDefault.rawValue)'")
    }

    /// The transport with `concurrency` connections per host, or `nil` for the library's
    /// URLSessions.
    func make(concurrency: Int) -> (any HTTPTransport)? {
        #if os(Linux)
        CurlTransport(maximumConnectionsPerHost: concurrency)
        #else
        nil
        #endif
    }

    /// Makes the command's transport the one of every client made without one (reading remote
    /// archives): libcurl on Linux; elsewhere URLSession stays, found by ``HTTPTransportSystem``.
    static func bootstrap() {
        #if os(Linux)
        HTTPTransportSystem.bootstrap { connections in CurlTransport(maximumConnectionsPerHost: connections) }
        #endif
    }
}

/// Ctrl-C calls `action` once (a clean stop); a second Ctrl-C exits at once (the archive stays
/// valid: SQLite rolls the unfinished batch back at the next open).
final class Interrupt {
    private let source: any DispatchSourceSignal

    init(_ action: @escaping @Sendable () -> Void) {
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        let count = Locked(0)
        source.setEventHandler {
            let times = count.withLock {
                $0 += 1
                return $0
            }
            if times == 1 {
                printError("\nstopping (Ctrl-C again to quit at once)")
                action()
            } else {
                exit(130)
            }
        }
        source.resume()
        self.source = source
    }

    func cancel() {
        source.cancel()
        signal(SIGINT, SIG_DFL)
    }
}
