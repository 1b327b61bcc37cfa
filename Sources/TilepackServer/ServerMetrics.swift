import CoreMetrics
import Foundation
import Prometheus
import TilepackCore

/// Requests by status, response bytes, latency and archive reloads, in the Prometheus text format
/// (`/_/metrics`). Each server has its own registry, so that several servers in one process (tests)
/// do not share counts and nothing global is bootstrapped.
final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    /// Counters of the statuses the server gives, made up front; others are made on first use.
    private let knownStatuses: [Int: CoreMetrics.Counter]
    private let otherStatuses = Locked<[Int: CoreMetrics.Counter]>([:])
    private let bytes: CoreMetrics.Counter
    private let latency: CoreMetrics.Timer

    static let requestsLabel = "tilepack_http_requests_total"
    static let bytesLabel = "tilepack_http_response_body_bytes_total"
    static let latencyLabel = "tilepack_http_request_duration_seconds"

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5),
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(100), .seconds(1), .seconds(10),
        ]
        self.factory = factory
        var known: [Int: CoreMetrics.Counter] = [:]
        for status in [200, 204, 301, 304, 400, 401, 404, 405, 500] {
            known[status] = CoreMetrics.Counter(label: Self.requestsLabel, dimensions: [("status", String(status))], factory: factory)
        }
        knownStatuses = known
        bytes = CoreMetrics.Counter(label: Self.bytesLabel, factory: factory)
        latency = CoreMetrics.Timer(label: Self.latencyLabel, factory: factory)
    }

    /// Counts one answered request.
    func record(status: Int, bodyBytes: Int, nanoseconds: Int64) {
        let counter = knownStatuses[status] ?? otherStatuses.withLock { counters in
            if let counter = counters[status] { return counter }
            let counter = CoreMetrics.Counter(label: Self.requestsLabel, dimensions: [("status", String(status))], factory: factory)
            counters[status] = counter
            return counter
        }
        counter.increment()
        if bodyBytes > 0 { bytes.increment(by: bodyBytes) }
        latency.recordNanoseconds(nanoseconds)
    }

    /// Counts a reload of an archive, or a failed one.
    func recordReload(archive: String, failed: Bool) {
        CoreMetrics.Counter(
            label: failed ? "tilepack_archive_reload_failures_total" : "tilepack_archive_reloads_total",
            dimensions: [("archive", archive)], factory: factory
        ).increment()
    }

    /// The metrics as Prometheus text.
    func render() -> [UInt8] { registry.emitToBuffer() }
}
