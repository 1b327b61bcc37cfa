import Foundation

/// A value guarded by a lock, for state shared between threads.
///
/// tilepack uses this rather than `Synchronization.Mutex`: on Linux, Swift 6.3's `Mutex` locks
/// with raw futex calls that ThreadSanitizer does not model, so every access it guards is
/// reported as a race (a four-line program with two threads appending under `withLock`
/// reproduces it). `NSLock` is a pthread mutex, which the sanitizer understands, so
/// `swift test --sanitize=thread` reports only real races. Like `Mutex`, the value is only
/// reachable inside ``withLock(_:)``, and values cross the lock as `sending`.
public final class Locked<Value: ~Copyable>: @unchecked Sendable {
    @usableFromInline let lock = NSLock()
    @usableFromInline var value: Value

    public init(_ value: consuming sending Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value.
    @inlinable @inline(__always)
    public func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
