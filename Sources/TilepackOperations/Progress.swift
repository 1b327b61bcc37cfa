/// How far an operation has come, reported through a callback so that the library needs no terminal.
public struct OperationProgress: Sendable {
    /// Items (tiles or files) done.
    public var done: Int
    /// Items in all, when known.
    public var total: Int?
    /// Bytes processed.
    public var bytes: Int
    /// Seconds since the operation started.
    public var elapsed: Double

    public init(done: Int, total: Int?, bytes: Int, elapsed: Double) {
        self.done = done
        self.total = total
        self.bytes = bytes
        self.elapsed = elapsed
    }

    /// Items per second so far.
    public var rate: Double { elapsed > 0 ? Double(done) / elapsed : 0 }

    /// Seconds left at the current rate, when the total is known.
    public var estimatedRemaining: Double? {
        guard let total, rate > 0 else { return nil }
        return Double(max(0, total - done)) / rate
    }
}

/// Receives progress; called on the operation's thread, at most a few times a second.
public typealias ProgressHandler = @Sendable (OperationProgress) -> Void
