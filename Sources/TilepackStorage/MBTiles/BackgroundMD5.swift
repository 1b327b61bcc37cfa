import Foundation

/// An MD5 of bytes fed in order, computed on a thread of its own: the feeding thread only copies
/// the bytes into 1 MiB chunks. The MBTiles writer uses it for `agg_tiles_hash`, so that hashing
/// every tile does not slow its single SQLite thread.
///
/// Not for concurrent feeding: ``update(_:)``, ``finalize()`` and ``cancel()`` are called from one
/// thread (the writer's). At most ``maximumQueuedChunks`` chunks wait for the hashing thread, so
/// memory stays bounded if hashing falls behind.
final class BackgroundMD5: @unchecked Sendable {
    static let chunkSize = 1 << 20
    static let maximumQueuedChunks = 2

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var queued: [[UInt8]] = []
    private var spare: [[UInt8]] = []
    private var closing = false
    private var cancelled = false
    private var digest: [UInt8]?
    private var threadDone = false

    // The feeding thread's own.
    private var chunk: [UInt8] = []

    init() {
        chunk.reserveCapacity(Self.chunkSize + 4096)
        let thread = Thread { [self] in run() }
        thread.name = "tilepack-md5"
        thread.start()
    }

    /// Adds bytes to the hash.
    func update(_ bytes: UnsafeRawBufferPointer) {
        chunk.append(contentsOf: bytes)
        if chunk.count >= Self.chunkSize { handOff() }
    }

    /// The MD5 of everything fed; the thread ends.
    func finalize() -> [UInt8] {
        handOff()
        condition.lock()
        closing = true
        condition.broadcast()
        while digest == nil { condition.wait() }
        let result = digest!
        while !threadDone { condition.wait() }
        condition.unlock()
        return result
    }

    /// Stops hashing and lets the thread end (waiting for it).
    func cancel() {
        condition.lock()
        closing = true
        cancelled = true
        condition.broadcast()
        while !threadDone { condition.wait() }
        condition.unlock()
    }

    private func handOff() {
        guard !chunk.isEmpty else { return }
        condition.lock()
        while queued.count >= Self.maximumQueuedChunks { condition.wait() }
        queued.append(chunk)
        chunk = spare.popLast() ?? []
        condition.signal()
        condition.unlock()
        chunk.removeAll(keepingCapacity: true)
        chunk.reserveCapacity(Self.chunkSize + 4096)
    }

    private func run() {
        let md5 = MD5()
        condition.lock()
        while true {
            if cancelled { break }
            if !queued.isEmpty {
                let next = queued.removeFirst()
                condition.broadcast()  // room in the queue
                condition.unlock()
                next.withUnsafeBytes { md5.update($0) }
                condition.lock()
                if spare.count < 2 { spare.append(next) }
                continue
            }
            if closing {
                digest = md5.finalize()
                break
            }
            condition.wait()
        }
        threadDone = true
        condition.broadcast()
        condition.unlock()
    }
}
