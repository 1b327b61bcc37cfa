import Foundation
import TilepackCore

/// At most `rate` requests per second: each request takes the next slot, `1 / rate` after the previous.
final class RateLimiter: Sendable {
    private let interval: Duration
    private let next = Locked<ContinuousClock.Instant?>(nil)

    init?(requestsPerSecond: Double?) {
        guard let rate = requestsPerSecond, rate > 0, rate.isFinite else { return nil }
        interval = .nanoseconds(Int64(max(1, (1e9 / rate).rounded())))
    }

    nonisolated(nonsending) func wait() async {
        let now = ContinuousClock.now
        let slot = next.withLock { next -> ContinuousClock.Instant in
            let slot = max(now, next ?? now)
            next = slot + interval
            return slot
        }
        if slot > now { try? await Task.sleep(until: slot, clock: .continuous) }
    }
}
