import Foundation
import TilepackCore

/// Bounds the requests in flight to each host, and holds a host back after it asked for a pause
/// (`Retry-After` on a 429 or 503 holds every worker of that host, not only the one that got it).
final class HostGate: Sendable {
    private let limit: Int
    private let hosts = Locked([String: Host]())

    /// One host's slots, waiters and pause (one lookup per call: this runs twice per tile).
    fileprivate struct Host {
        var inFlight = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
        var notBefore: ContinuousClock.Instant?
    }

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Waits for a free slot for `host`, then for the end of any pause it asked for.
    nonisolated(nonsending) func acquire(_ host: String) async {
        // A free slot is taken at once, without suspending (the common case, once per tile).
        let (free, pause) = hosts.withLock { hosts -> (Bool, ContinuousClock.Instant?) in
            hosts[host, default: Host()].take(limit: limit)
        }
        var until = pause
        if !free {
            await wait(host)
            until = hosts.withLock { $0[host]?.notBefore }
        }
        if let until, until > .now {
            try? await Task.sleep(until: until, clock: .continuous)
        }
    }

    private nonisolated(nonsending) func wait(_ host: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = hosts.withLock { hosts -> Bool in
                hosts[host, default: Host()].grantOrQueue(continuation, limit: limit)
            }
            if granted { continuation.resume() }
        }
    }

    /// Frees a slot, handing it straight to the next waiter.
    func release(_ host: String) {
        let next = hosts.withLock { hosts -> CheckedContinuation<Void, Never>? in
            hosts[host, default: Host()].release()
        }
        next?.resume()
    }

    /// Holds new requests to `host` until `delay` from now.
    func pause(_ host: String, for delay: Duration) {
        let until = ContinuousClock.now + delay
        hosts.withLock { hosts in
            hosts[host, default: Host()].pause(until: until)
        }
    }
}

extension HostGate.Host {
    /// Takes a free slot when there is one and nobody waits for it; returns whether it did, and
    /// the pause to respect.
    mutating func take(limit: Int) -> (Bool, ContinuousClock.Instant?) {
        guard inFlight < limit, waiters.isEmpty else { return (false, nil) }
        inFlight += 1
        return (true, notBefore)
    }

    /// Takes a slot freed meanwhile, or queues `continuation` for the next one.
    mutating func grantOrQueue(_ continuation: CheckedContinuation<Void, Never>, limit: Int) -> Bool {
        if inFlight < limit {
            inFlight += 1
            return true
        }
        waiters.append(continuation)
        return false
    }

    /// Frees a slot: the first waiter gets it (`inFlight` unchanged), or it is counted free.
    mutating func release() -> CheckedContinuation<Void, Never>? {
        guard waiters.isEmpty else { return waiters.removeFirst() }
        inFlight = max(0, inFlight - 1)
        return nil
    }

    mutating func pause(until instant: ContinuousClock.Instant) {
        if let current = notBefore, current >= instant { return }
        notBefore = instant
    }
}
