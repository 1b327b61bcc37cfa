import Foundation

/// A fixed set of threads, started up front, that run CPU-bound jobs for one operation.
///
/// Dispatch's global queue is not used for this work: on Linux its thread pool grows only when
/// its monitor notices waiting work, about once a second, so a job of a few seconds ran on one
/// core for its first second (measured: `tilepack verify` of 10,000 tiles had one worker busy for
/// 0.9 s before the second started). These threads exist from the start, and there are never more
/// of them than asked for.
package final class WorkerPool: @unchecked Sendable {
    // Everything below is guarded by `condition`.
    private let condition = NSCondition()
    /// Queued jobs from `head` on; a taken slot is cleared at once, so a job (and what it holds,
    /// such as a batch of tiles) is released when it has run, not when the queue next empties.
    private var jobs: [(@Sendable () -> Void)?] = []
    private var head = 0
    private var stopping = false
    private var running = 0

    /// The number of threads.
    package let size: Int

    /// Runs `body` with a pool of `threads` threads (at least one), then lets the threads finish
    /// the queued jobs and waits for them to return.
    package static func with<Result, Failure: Error>(threads: Int, _ body: (WorkerPool) throws(Failure) -> Result) throws(Failure) -> Result {
        let pool = WorkerPool(threads: threads)
        defer { pool.shutdown() }
        return try body(pool)
    }

    /// Starts the threads; each holds the pool until ``shutdown()`` lets it return.
    private init(threads: Int) {
        size = max(1, threads)
        running = size
        for index in 0..<size {
            let thread = Thread { [self] in work() }
            thread.name = "tilepack-worker-\(index)"
            thread.start()
        }
    }

    /// Queues `job`; a free thread runs it.
    package func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        precondition(!stopping, "WorkerPool.submit after shutdown")
        jobs.append(job)
        condition.unlock()
        condition.signal()
    }

    /// Lets the threads finish the queued jobs, then waits until they have all returned.
    private func shutdown() {
        condition.lock()
        stopping = true
        condition.broadcast()
        while running > 0 { condition.wait() }
        condition.unlock()
    }

    private func work() {
        condition.lock()
        while true {
            if head < jobs.count {
                let job = jobs[head]
                jobs[head] = nil
                head += 1
                if head == jobs.count {
                    jobs.removeAll(keepingCapacity: true)
                    head = 0
                } else if head >= 256 {
                    jobs.removeFirst(head)
                    head = 0
                }
                condition.unlock()
                job?()
                condition.lock()
            } else if stopping {
                running -= 1
                condition.broadcast()
                condition.unlock()
                return
            } else {
                condition.wait()
            }
        }
    }
}
