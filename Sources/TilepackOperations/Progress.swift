/// How far an operation has come, reported through a callback so that the library needs no terminal.
package struct OperationProgress: Sendable {
    /// Items (tiles or files) done.
    package var done: Int
    /// Items in all, when known.
    package var total: Int?
    /// Bytes processed.
    package var bytes: Int
    /// Seconds since the operation started.
    package var elapsed: Double

    package init(done: Int, total: Int?, bytes: Int, elapsed: Double) {
        self.done = done
        self.total = total
        self.bytes = bytes
        self.elapsed = elapsed
    }

    /// Items per second so far.
    package var rate: Double { elapsed > 0 ? Double(done) / elapsed : 0 }

    /// Seconds left at the current rate, when the total is known.
    package var estimatedRemaining: Double? {
        guard let total, rate > 0 else { return nil }
        return Double(max(0, total - done)) / rate
    }
}

/// Receives progress; called on the operation's thread, at most a few times a second.
package typealias ProgressHandler = @Sendable (OperationProgress) -> Void
