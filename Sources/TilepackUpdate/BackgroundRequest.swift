import Foundation
import TilepackCore

/// Where a background operation is: the prefetcher's four statuses.
public enum BackgroundStatus: Sendable, Equatable {
    case inProgress, success, failure, cancelled
}

/// An operation running on a thread of its own for an app, with the prefetcher's semantics
/// (Specs/updates.md §8): an id, a progress in [0, 1] that never decreases and is 1 on success,
/// a status, cancel, a typed error, and a callback told of every change. `PatchRequest`
/// (TilepackOperations, in the `Tilepack` product) and `SyncRequest` (TilepackRemote) are its two
/// kinds; a cancelled one leaves its file as it was.
///
/// `open` only so that its two kinds, in modules above this one, can subclass it: its initializer
/// is `package`, so no code outside tilepack can.
open class BackgroundRequest<Report: Sendable>: @unchecked Sendable {
    public typealias Status = BackgroundStatus

    public let id = UUID()
    /// The file the operation replaces, named by its cancellation.
    package let subject: String
    /// What the operation is called in its cancellation ("sync", "patch").
    package let verb: String
    private struct State {
        var status = BackgroundStatus.inProgress
        var progress = 0.0
        var cancelled = false
        var report: Report?
        var error: OperationError?
        var waiters: [CheckedContinuation<BackgroundStatus, Never>] = []
    }
    private let state = Locked(State())
    private let done = DispatchSemaphore(value: 0)
    private let onChange: (@Sendable (BackgroundRequest<Report>) -> Void)?

    public var status: BackgroundStatus { state.withLock { $0.status } }
    public var progress: Double { state.withLock { $0.progress } }
    /// What the operation did, once it succeeded.
    public var report: Report? { state.withLock { $0.report } }
    /// Why it failed (or that it was cancelled), once it ended so.
    public var error: OperationError? { state.withLock { $0.error } }

    package init(subject: String, verb: String, onChange: (@Sendable (BackgroundRequest<Report>) -> Void)?) {
        self.subject = subject
        self.verb = verb
        self.onChange = onChange
    }

    /// A subclass's callback as this class's: told of the request it was made for.
    package static func relay<Request: BackgroundRequest<Report>>(_ handler: (@Sendable (Request) -> Void)?)
        -> (@Sendable (BackgroundRequest<Report>) -> Void)?
    {
        guard let handler else { return nil }
        return { request in
            if let request = request as? Request { handler(request) }
        }
    }

    /// Runs `body` on a thread of its own, then records its outcome.
    package func run(_ body: @escaping @Sendable () throws(OperationError) -> Report) {
        let thread = Thread { [self] in
            let outcome: Result<Report, OperationError>
            do throws(OperationError) { outcome = .success(try body()) } catch { outcome = .failure(error) }
            finish(outcome)
        }
        thread.start()
    }

    /// Stops the operation at its next step; its file stays as it was.
    public func cancel() { state.withLock { $0.cancelled = true } }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Blocks until the operation ends; its status.
    @discardableResult public func wait() -> BackgroundStatus {
        done.wait()
        done.signal()
        return status
    }

    /// Waits, without holding a thread, until the operation ends; its status.
    public func finished() async -> BackgroundStatus {
        await withCheckedContinuation { continuation in
            let ended = state.withLock { state -> BackgroundStatus? in
                guard state.status == .inProgress else { return state.status }
                state.waiters.append(continuation)
                return nil
            }
            if let ended { continuation.resume(returning: ended) }
        }
    }

    /// The error a cancelled operation ends with.
    package var cancellation: OperationError {
        OperationError(path: subject, fault: .conflict("the \(verb) was cancelled; \(subject) was left as it was"))
    }

    /// Moves the progress forward (never back, at most to 1); throws when the request was cancelled.
    package func advance(_ value: Double) throws(OperationError) {
        let (cancelled, changed) = state.withLock { state -> (Bool, Bool) in
            let next = min(1, max(state.progress, value))
            defer { state.progress = next }
            return (state.cancelled, next > state.progress)
        }
        if cancelled { throw cancellation }
        if changed { onChange?(self) }
    }

    private func finish(_ outcome: Result<Report, OperationError>) {
        let (status, waiters) = state.withLock { state in
            switch outcome {
            case .success(let report):
                state.report = report
                state.progress = 1
                state.status = .success
            case .failure(let error):
                state.error = error
                state.status = state.cancelled ? .cancelled : .failure
            }
            defer { state.waiters = [] }
            return (state.status, state.waiters)
        }
        onChange?(self)
        done.signal()
        for waiter in waiters { waiter.resume(returning: status) }
    }
}
