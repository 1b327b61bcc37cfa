import Foundation
import TilepackCore
import TilepackHTTP

/// The pauses hosts asked for: a `Retry-After` on a 429 or 503 holds every request to that host,
/// not only the one that got it.
///
/// It does not bound the requests in flight: the transport's connections per host do that, once
/// (``HostLine`` waits a request for a free connection and starts its deadline then). A fetch runs
/// enough workers to keep those connections busy, and nothing else counts them.
final class HostPauses: Sendable {
    private let until = Locked([String: ContinuousClock.Instant]())

    /// Waits out the pause `host` asked for, if one is running.
    nonisolated(nonsending) func wait(_ host: String) async {
        guard let instant = until.withLock({ $0[host] }), instant > .now else { return }
        try? await Task.sleep(until: instant, clock: .continuous)
    }

    /// Holds new requests to `host` until `delay` from now (a later pause already asked for stays).
    func pause(_ host: String, for delay: Duration) {
        let instant = ContinuousClock.now + delay
        until.withLock { until in
            if let current = until[host], current >= instant { return }
            until[host] = instant
        }
    }
}
