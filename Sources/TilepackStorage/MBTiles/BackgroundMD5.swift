import Foundation
internal import TilepackChecksum

/// An MD5 of bytes fed in order, computed on a thread of its own: the feeding thread only copies
/// small pieces into 1 MiB chunks, and hands over large arrays (tiles of ``sharedLength`` or more)
/// as they are, without a copy. The MBTiles writer uses it for `agg_tiles_hash`, so that hashing
/// every tile does not slow its single SQLite thread.
///
/// Not for concurrent feeding: ``update(_:)``, ``update(sharing:)``, ``finalize()`` and
/// ``cancel()`` are called from one thread (the writer's). Pieces of at most
/// ``maximumQueuedBytes`` wait for the hashing thread or are being hashed (three full chunks), so memory stays bounded
/// if hashing falls behind.
final class BackgroundMD5: @unchecked Sendable {
    static let chunkSize = 1 << 20
    static let maximumQueuedBytes = 3 * chunkSize
    /// Arrays this long or longer are queued as they are by ``update(sharing:)``.
    static let sharedLength = 16 << 10

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var queued: [[UInt8]] = []
    private var queuedBytes = 0
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

    /// Adds the bytes of `array` to the hash; a large array is queued itself (shared, not copied).
    func update(sharing array: [UInt8]) {
        guard array.count >= Self.sharedLength else {
            array.withUnsafeBytes { update($0) }
            return
        }
        handOff()
        enqueue(array)
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
        enqueue(chunk)
        condition.lock()
        chunk = spare.popLast() ?? []
        condition.unlock()
        chunk.removeAll(keepingCapacity: true)
        chunk.reserveCapacity(Self.chunkSize + 4096)
    }

    /// Queues `piece` for the hashing thread, once the queue has room.
    private func enqueue(_ piece: [UInt8]) {
        condition.lock()
        while queuedBytes > 0 && queuedBytes + piece.count > Self.maximumQueuedBytes { condition.wait() }
        queued.append(piece)
        queuedBytes += piece.count
        condition.signal()
        condition.unlock()
    }

    private func run() {
        let md5 = Digest(.md5)
        condition.lock()
        while true {
            if cancelled { break }
            if !queued.isEmpty {
                let next = queued.removeFirst()
                condition.unlock()
                next.withUnsafeBytes { md5.update($0) }
                condition.lock()
                queuedBytes -= next.count
                condition.broadcast()  // room in the queue
                // A chunk of ours is kept for reuse; a shared array is let go.
                if spare.count < 2, next.capacity >= Self.chunkSize { spare.append(next) }
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
