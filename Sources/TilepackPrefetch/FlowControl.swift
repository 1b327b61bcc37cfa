import Foundation
import TilepackCore

/// Bounds the requests in flight to each host, and holds a host back after it asked for a pause
/// (`Retry-After` on a 429 or 503 holds every worker of that host, not only the one that got it).
final class HostGate: Sendable {
    private let limit: Int
    private let state = Locked(State())

    private struct State {
        var inFlight: [String: Int] = [:]
        var waiters: [String: [CheckedContinuation<Void, Never>]] = [:]
        var notBefore: [String: ContinuousClock.Instant] = [:]
    }

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Waits for a free slot for `host`, then for the end of any pause it asked for.
    nonisolated(nonsending) func acquire(_ host: String) async {
        // A free slot is taken at once, without suspending (the common case, once per tile).
        let (free, pause) = state.withLock { state -> (Bool, ContinuousClock.Instant?) in
            guard state.inFlight[host, default: 0] < limit, state.waiters[host]?.isEmpty ?? true else { return (false, nil) }
            state.inFlight[host, default: 0] += 1
            return (true, state.notBefore[host])
        }
        var until = pause
        if !free {
            await wait(host)
            until = state.withLock { $0.notBefore[host] }
        }
        if let until, until > .now {
            try? await Task.sleep(until: until, clock: .continuous)
        }
    }

    private nonisolated(nonsending) func wait(_ host: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                if state.inFlight[host, default: 0] < limit {
                    state.inFlight[host, default: 0] += 1
                    return true
                }
                state.waiters[host, default: []].append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    /// Frees a slot, handing it straight to the next waiter.
    func release(_ host: String) {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if var queue = state.waiters[host], !queue.isEmpty {
                let first = queue.removeFirst()
                state.waiters[host] = queue
                return first  // the slot passes on: inFlight unchanged
            }
            state.inFlight[host, default: 1] -= 1
            return nil
        }
        next?.resume()
    }

    /// Holds new requests to `host` until `delay` from now.
    func pause(_ host: String, for delay: Duration) {
        let until = ContinuousClock.now + delay
        state.withLock { state in
            if let current = state.notBefore[host], current >= until { return }
            state.notBefore[host] = until
        }
    }
}

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
