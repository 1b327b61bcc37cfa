import Atomics
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
    private let latency = LatencyHistogram(name: ServerMetrics.latencyLabel, help: "Time to build each answer.")

    static let requestsLabel = "tilepack_http_requests_total"
    static let bytesLabel = "tilepack_http_response_body_bytes_total"
    static let latencyLabel = "tilepack_http_request_duration_seconds"

    init() {
        let factory = PrometheusMetricsFactory(registry: registry)
        self.factory = factory
        var known: [Int: CoreMetrics.Counter] = [:]
        for status in [200, 204, 301, 304, 400, 401, 404, 405, 500] {
            known[status] = CoreMetrics.Counter(label: Self.requestsLabel, dimensions: [("status", String(status))], factory: factory)
        }
        knownStatuses = known
        bytes = CoreMetrics.Counter(label: Self.bytesLabel, factory: factory)
    }

    /// Counts one answered request.
    func record(status: Int, bodyBytes: Int, nanoseconds: Int64) {
        let counter =
            knownStatuses[status]
            ?? otherStatuses.withLock { counters in
                if let counter = counters[status] { return counter }
                let counter = CoreMetrics.Counter(label: Self.requestsLabel, dimensions: [("status", String(status))], factory: factory)
                counters[status] = counter
                return counter
            }
        counter.increment()
        if bodyBytes > 0 { bytes.increment(by: bodyBytes) }
        latency.record(nanoseconds: nanoseconds)
    }

    /// Counts a reload of an archive, or a failed one.
    func recordReload(archive: String, failed: Bool) {
        CoreMetrics.Counter(
            label: failed ? "tilepack_archive_reload_failures_total" : "tilepack_archive_reloads_total",
            dimensions: [("archive", archive)], factory: factory
        ).increment()
    }

    /// The metrics as Prometheus text.
    func render() -> [UInt8] { registry.emitToBuffer() + latency.render() }
}

/// A Prometheus histogram of durations whose every observation is three relaxed atomic additions,
/// no lock. swift-prometheus's histogram takes a lock per observation; shared by the event loops,
/// it made one loop wait for another that the scheduler had just taken off its core (a tail of
/// milliseconds under load, `tools/bench-serve.sh`). Rendered in the text format 0.0.4 after the
/// registry's families, with the same buckets (100 µs to 10 s).
final class LatencyHistogram: Sendable {
    let name: String
    let help: String
    /// Upper bounds in nanoseconds, and how they are written.
    static let bounds: [(nanoseconds: Int64, text: String)] = [
        (100_000, "0.0001"), (250_000, "0.00025"), (500_000, "0.0005"), (1_000_000, "0.001"), (2_500_000, "0.0025"),
        (5_000_000, "0.005"), (10_000_000, "0.01"), (25_000_000, "0.025"), (100_000_000, "0.1"), (1_000_000_000, "1.0"),
        (10_000_000_000, "10.0"),
    ]
    /// Observations per bucket (not cumulative), the last one above every bound.
    private let buckets = (0...LatencyHistogram.bounds.count).map { _ in ManagedAtomic<Int>(0) }
    private let sumNanoseconds = ManagedAtomic<Int64>(0)

    init(name: String, help: String) {
        self.name = name
        self.help = help
    }

    func record(nanoseconds: Int64) {
        let value = max(0, nanoseconds)
        let index = Self.bounds.firstIndex { value <= $0.nanoseconds } ?? Self.bounds.count
        buckets[index].wrappingIncrement(ordering: .relaxed)
        sumNanoseconds.wrappingIncrement(by: value, ordering: .relaxed)
    }

    func render() -> [UInt8] {
        var text = "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
        var cumulative = 0
        for (index, bound) in Self.bounds.enumerated() {
            cumulative += buckets[index].load(ordering: .relaxed)
            text += "\(name)_bucket{le=\"\(bound.text)\"} \(cumulative)\n"
        }
        cumulative += buckets[Self.bounds.count].load(ordering: .relaxed)
        text += "\(name)_bucket{le=\"+Inf\"} \(cumulative)\n"
        text += "\(name)_sum \(Double(sumNanoseconds.load(ordering: .relaxed)) / 1e9)\n"
        text += "\(name)_count \(cumulative)\n"
        return Array(text.utf8)
    }
}
