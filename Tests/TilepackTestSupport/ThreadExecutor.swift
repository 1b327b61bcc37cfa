import Foundation

/// Runs `body`, and every child task it makes, on a thread of its own rather than on the
/// cooperative pool. The pool has two threads on a 2-core machine and hundreds of tests share
/// them: a test awaiting a reply there waits its turn behind every other test's work, and in
/// full runs such waits added up to minutes. Tests whose assertion depends on how long the code
/// under test waits between steps (a connection kept alive between two requests, which libcurl
/// drops after 118 s idle) run here, where the gaps are their own.
public func onOwnThread<T: Sendable>(_ body: () async throws -> T) async rethrows -> T {
    let executor = ThreadExecutor()
    defer { executor.stop() }
    return try await withTaskExecutorPreference(executor) { try await body() }
}

/// A task executor with one thread, which runs the jobs given to it in turn until stopped.
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false

    init() {
        let thread = Thread { [self] in run() }
        thread.name = "test-executor"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Lets the thread end once the jobs given so far have run.
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
