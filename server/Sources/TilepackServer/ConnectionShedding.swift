import Atomics
import Foundation
import HummingbirdCore
import NIOCore
import TilepackCore

/// The open connections and when each last brought a whole request head, so that at the
/// connection limit the server can close the one that has gone longest without a request (a
/// client trickling a head, or one idle since long), as nginx closes its idle keep-alive
/// connections when it runs out of connections. Without it, clients that hold connections
/// without ever completing a request (1,100 of them over `--max-connections`, issue 29) keep every
/// other client waiting in the listen backlog.
final class ConnectionRegistry: Sendable {
    /// A connection's last progress: the uptime (ns) when it opened or last completed a head.
    final class Entry: Sendable {
        let channel: any Channel
        let progress: ManagedAtomic<UInt64>
        let condemned = ManagedAtomic<Bool>(false)

        init(channel: any Channel, now: UInt64) {
            self.channel = channel
            self.progress = ManagedAtomic(now)
        }

        func madeProgress(at now: UInt64) { progress.store(now, ordering: .relaxed) }
    }

    /// How long a connection keeps its place after its last request, however full the server:
    /// a client between two requests of a page's burst is not shed.
    static let grace: UInt64 = 1_000_000_000

    private let entries = Locked<[ObjectIdentifier: Entry]>([:])
    /// Whether a shed is scheduled (one at a time).
    private let pending = ManagedAtomic<Bool>(false)

    func add(_ entry: Entry) { entries.withLock { $0[ObjectIdentifier(entry.channel)] = entry } }
    func remove(_ entry: Entry) { _ = entries.withLock { $0.removeValue(forKey: ObjectIdentifier(entry.channel)) } }
    var count: Int { entries.withLock { $0.count } }

    /// Closes the connection that has gone longest without a request head, once that is at
    /// least ``grace``; if the stalest is younger, comes back when it would be that old.
    func shedStalest() {
        guard pending.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        let stalest = entries.withLock { entries in
            entries.values.filter { !$0.condemned.load(ordering: .relaxed) }
                .min { $0.progress.load(ordering: .relaxed) < $1.progress.load(ordering: .relaxed) }
        }
        guard let stalest else {
            pending.store(false, ordering: .releasing)
            return
        }
        let now = DispatchTime.now().uptimeNanoseconds
        let due = stalest.progress.load(ordering: .relaxed) &+ Self.grace
        if due <= now {
            stalest.condemned.store(true, ordering: .relaxed)
            stalest.channel.close(promise: nil)
            pending.store(false, ordering: .releasing)
        } else {
            stalest.channel.eventLoop.scheduleTask(in: .nanoseconds(Int64(due - now))) { [self] in
                pending.store(false, ordering: .releasing)
                shedStalest()
            }
        }
    }
}

/// Hummingbird's connection limit (``MaximumAvailableConnections``) that, at the limit, sheds
/// the stalest connection (``ConnectionRegistry/shedStalest()``) to make room for new ones.
struct SheddingConnections: AvailableConnectionsDelegate {
    let maximum: Int
    let registry: ConnectionRegistry
    private var open = 0

    init(maximum: Int, registry: ConnectionRegistry) {
        self.maximum = maximum
        self.registry = registry
    }

    mutating func connectionOpened() { open += 1 }
    mutating func connectionClosed() { open -= 1 }

    func isAcceptingNewConnections() -> Bool {
        guard open < maximum else {
            registry.shedStalest()
            return false
        }
        return true
    }
}
