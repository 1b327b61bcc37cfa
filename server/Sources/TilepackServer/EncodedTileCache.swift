import Foundation
import TilepackCore

/// PNG tiles encoded from raw-bitmap bundles, kept up to a byte budget: the oldest entries go
/// first (first in, first out), so memory stays bounded whatever the requests.
final class EncodedTileCache: Sendable {
    struct Key: Hashable, Sendable {
        var name: String
        /// The version the tile was read from: a replaced archive never serves old pixels.
        var identity: ArchiveIdentity
        var tile: TileCoordinate
    }

    private struct State {
        var entries: [Key: [UInt8]] = [:]
        var order: [Key] = []
        var head = 0
        var bytes = 0
    }

    let capacity: Int
    private let state = Locked(State())

    init(capacity: Int) { self.capacity = max(0, capacity) }

    subscript(key: Key) -> [UInt8]? {
        get { state.withLock { $0.entries[key] } }
        set {
            guard let value = newValue, value.count <= capacity else { return }
            state.withLock { state in
                guard state.entries[key] == nil else { return }
                state.entries[key] = value
                state.order.append(key)
                state.bytes += value.count
                while state.bytes > capacity, state.head < state.order.count {
                    let oldest = state.order[state.head]
                    state.head += 1
                    if let removed = state.entries.removeValue(forKey: oldest) { state.bytes -= removed.count }
                }
                if state.head > 1024, state.head * 2 > state.order.count {
                    state.order.removeFirst(state.head)
                    state.head = 0
                }
            }
        }
    }

    /// Bytes held now.
    var byteCount: Int { state.withLock { $0.bytes } }
}
