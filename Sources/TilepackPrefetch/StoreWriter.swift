import Dispatch
import Foundation
import TilepackCore
import TilepackStorage

/// Writes a fetch's outcomes into the store, in the order they are handed over, on a queue of its
/// own: a worker hands its tile over and goes on with the next one, so no worker waits for SQLite
/// or for a commit's syncs, and workers on different threads never contend for the store's lock.
///
/// Bounded: past ``maximumQueuedBytes`` of tile data (or ``maximumQueuedWrites``) waiting, a
/// worker waits until the writer has caught up, so a slow disk slows the download instead of
/// filling memory. A write that fails is reported once through `onError` (the fetch then ends as
/// a failure); later writes are dropped.
///
/// Batched: an idle writer is woken when ``wakeWrites`` writes (or ``wakeBytes``) wait, or
/// ``wakeDelay`` after the first of them, not for each tile: waking a thread costs more than
/// storing a small tile. (What waits is in memory only; the store commits in batches anyway.)
final class StoreWriter: Sendable {
    enum Write: Sendable {
        /// A tile's bytes (when given) and its bookkeeping row.
        case record(TileStateRecord, Data?)
        /// A 304: the tile marked used now, or recorded as `otherwise` when it has no bookkeeping row.
        case touch(TileCoordinate, attempts: Int, at: Double, otherwise: TileStateRecord)
        /// A refresh's outcome, staged until the refresh is switched in.
        case stage(TileStateRecord, Data?)
    }

    static let maximumQueuedBytes = 32 << 20
    static let maximumQueuedWrites = 4096
    static let wakeWrites = 64
    static let wakeBytes = 1 << 20
    static let wakeDelay = DispatchTimeInterval.milliseconds(5)

    private let store: MBTilesTileStore
    private let queue = DispatchQueue(label: "tilepack-store-writer")
    private let state = Locked(State())
    private let onError: @Sendable (String) -> Void
    /// Called on the writer's queue after each batch, with the tiles it stored.
    private let afterBatch: @Sendable (Int) -> Void

    private struct State {
        var pending: [Write] = []
        var pendingBytes = 0
        var running = false
        /// Whether a delayed wake is on its way.
        var armed = false
        var failed = false
        /// Workers waiting for room.
        var waitingForRoom: [CheckedContinuation<Void, Never>] = []
        /// Callers of flush() waiting for the writer to be idle.
        var waitingForIdle: [CheckedContinuation<Void, Never>] = []

        var isFull: Bool { pendingBytes >= StoreWriter.maximumQueuedBytes || pending.count >= StoreWriter.maximumQueuedWrites }

        /// Marks a drain as started when none runs and writes wait; returns whether it did.
        mutating func claimDrain() -> Bool {
            guard !running, !pending.isEmpty else { return false }
            running = true
            return true
        }
    }

    init(store: MBTilesTileStore, onError: @escaping @Sendable (String) -> Void, afterBatch: @escaping @Sendable (Int) -> Void) {
        self.store = store
        self.onError = onError
        self.afterBatch = afterBatch
    }

    /// Hands a write over; waits only while the writer is too far behind.
    nonisolated(nonsending) func submit(_ write: Write) async {
        let bytes: Int
        switch write {
        case .record(_, let data?), .stage(_, let data?): bytes = data.count
        default: bytes = 0
        }
        let (start, arm, full) = state.withLock { state -> (Bool, Bool, Bool) in
            guard !state.failed else { return (false, false, false) }
            state.pending.append(write)
            state.pendingBytes += bytes
            guard !state.running else { return (false, false, state.isFull) }
            if state.pending.count >= Self.wakeWrites || state.pendingBytes >= Self.wakeBytes || state.isFull {
                state.running = true
                return (true, false, state.isFull)
            }
            let arm = !state.armed
            state.armed = true
            return (false, arm, false)
        }
        if start { queue.async { self.drain() } }
        if arm { queue.asyncAfter(deadline: .now() + Self.wakeDelay) { self.delayedWake() } }
        if full {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let wait = state.withLock { state -> Bool in
                    guard state.isFull, state.running else { return false }
                    state.waitingForRoom.append(continuation)
                    return true
                }
                if !wait { continuation.resume() }
            }
        }
    }

    /// Waits until every write handed over is done.
    func flush() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (wait, start) = state.withLock { state -> (Bool, Bool) in
                let start = state.claimDrain()
                guard state.running else { return (false, false) }
                state.waitingForIdle.append(continuation)
                return (true, start)
            }
            if start { queue.async { self.drain() } }
            if !wait { continuation.resume() }
        }
    }

    /// The delayed wake: drains what waits, unless a drain is already under way (on the queue).
    private func delayedWake() {
        let start = state.withLock { state -> Bool in
            state.armed = false
            return state.claimDrain()
        }
        if start { drain() }
    }

    private func drain() {
        while true {
            let (batch, room) = state.withLock { state -> ([Write], [CheckedContinuation<Void, Never>]) in
                let batch = state.pending
                state.pending.removeAll(keepingCapacity: true)
                state.pendingBytes = 0
                defer { state.waitingForRoom.removeAll() }
                return (batch, state.waitingForRoom)
            }
            for continuation in room { continuation.resume() }
            guard !batch.isEmpty else {
                let idle = state.withLock { state -> [CheckedContinuation<Void, Never>]? in
                    // Something handed over since the batch was taken: go round again.
                    guard state.pending.isEmpty else { return nil }
                    state.running = false
                    defer { state.waitingForIdle.removeAll() }
                    return state.waitingForIdle
                }
                guard let idle else { continue }
                for continuation in idle { continuation.resume() }
                return
            }
            var stored = 0
            for write in batch {
                do {
                    switch write {
                    case .record(let record, let data):
                        try store.record(record, data: data)
                        if data != nil { stored += 1 }
                    case .stage(let record, let data):
                        try store.stage(record, data: data)
                    case .touch(let tile, let attempts, let time, let otherwise):
                        if try !store.touch(tile, attempts: attempts, at: time) {
                            try store.record(otherwise, data: nil)
                        }
                    }
                } catch {
                    let first = state.withLock { state -> Bool in
                        defer { state.failed = true }
                        return !state.failed
                    }
                    if first { onError("writing to the store failed: \(error)") }
                    break
                }
            }
            if stored > 0 { afterBatch(stored) }
        }
    }
}
