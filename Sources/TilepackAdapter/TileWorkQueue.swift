import Dispatch
import Foundation
import Synchronization
import TilepackCore

/// A bounded concurrent executor for tile jobs: at most ``maximumConcurrency`` jobs run at once,
/// on Dispatch's worker threads (never the submitting thread); the rest wait in a queue.
///
/// Waiting jobs run newest first: on a map that scrolls, the tiles asked for last are the ones on
/// screen. A job can be cancelled while it waits (it is then never run; its `cancelled` handler is
/// called instead) or while it runs (its `isCancelled` flag turns true and the job decides when
/// to stop). Safe to use from any thread.
package final class TileWorkQueue: Sendable {
    /// A job's view of its own cancellation.
    package final class Token: Sendable {
        private let flag = Atomic<Bool>(false)
        /// Whether the job was cancelled.
        package var isCancelled: Bool { flag.load(ordering: .acquiring) }
        func cancel() { flag.store(true, ordering: .releasing) }
    }

    struct Job: Sendable {
        var id: UInt64
        var tile: TileCoordinate
        var token: Token
        var run: @Sendable (Token) -> Void
        var cancelled: @Sendable () -> Void
    }

    struct State {
        var waiting: [Job] = []
        var running: [UInt64: (tile: TileCoordinate, token: Token)] = [:]
        var workers = 0
        var nextID: UInt64 = 0
    }

    /// The most jobs running at once.
    package let maximumConcurrency: Int
    private let state = Locked(State())
    private let queue: DispatchQueue

    /// - Parameter maximumConcurrency: at least 1; default the number of active processors.
    package init(maximumConcurrency: Int = ProcessInfo.processInfo.activeProcessorCount, label: String = "tilepack.adapter") {
        self.maximumConcurrency = max(1, maximumConcurrency)
        self.queue = DispatchQueue(label: label, qos: .userInitiated, attributes: .concurrent)
    }

    /// Jobs waiting to run.
    package var waitingCount: Int { state.withLock { $0.waiting.count } }
    /// Jobs running now.
    package var runningCount: Int { state.withLock { $0.running.count } }

    /// Queues a job for `tile`. `run` is called later on a worker thread with the job's token;
    /// `cancelled` instead, on the cancelling thread, if the job is cancelled before it starts.
    /// Returns the job's token, for ``cancel(_:)``.
    @discardableResult
    package func submit(
        _ tile: TileCoordinate, run: @escaping @Sendable (Token) -> Void,
        cancelled: @escaping @Sendable () -> Void
    ) -> Token {
        let token = Token()
        let startWorker = state.withLock { s -> Bool in
            s.nextID += 1
            s.waiting.append(Job(id: s.nextID, tile: tile, token: token, run: run, cancelled: cancelled))
            guard s.workers < maximumConcurrency else { return false }
            s.workers += 1
            return true
        }
        if startWorker { queue.async { self.work() } }
        return token
    }

    /// Cancels the one job `token` belongs to: dropped (its `cancelled` handler called) if it
    /// waits, its token cancelled if it runs. Returns whether it was waiting.
    @discardableResult
    package func cancel(_ token: Token) -> Bool {
        let dropped = state.withLock { s -> Job? in
            guard let index = s.waiting.firstIndex(where: { $0.token === token }) else { return nil }
            return s.waiting.remove(at: index)
        }
        token.cancel()
        dropped?.cancelled()
        return dropped != nil
    }

    /// Runs waiting jobs, newest first, until none is left.
    private func work() {
        while let job = next() {
            job.run(job.token)
            state.withLock { _ = $0.running.removeValue(forKey: job.id) }
        }
    }

    private func next() -> Job? {
        state.withLock { s in
            guard let job = s.waiting.popLast() else {
                s.workers -= 1
                return nil
            }
            s.running[job.id] = (job.tile, job.token)
            return job
        }
    }

    /// Cancels every job whose tile matches: waiting ones are dropped and their `cancelled` handler
    /// called; running ones see their token cancelled. Returns how many waiting jobs were dropped.
    @discardableResult
    package func cancel(where matches: (TileCoordinate) -> Bool) -> Int {
        let dropped = state.withLock { s -> [Job] in
            var dropped: [Job] = []
            s.waiting.removeAll { job in
                guard matches(job.tile) else { return false }
                dropped.append(job)
                return true
            }
            for (_, entry) in s.running where matches(entry.tile) { entry.token.cancel() }
            return dropped
        }
        for job in dropped {
            job.token.cancel()
            job.cancelled()
        }
        return dropped.count
    }
}
