import TilepackCore
import TilepackImaging

/// An in-memory cache of decoded archive tiles, bounded by the bytes of their pixels.
///
/// Keys are an archive tile and a pixel format; the least recently used bitmaps are dropped
/// first when an insertion would pass ``byteLimit``. A bitmap larger than the whole budget is not
/// kept. A limit of 0 keeps nothing. Safe to use from any thread.
package final class DecodedTileCache: Sendable {
    struct Key: Hashable {
        var tile: TileCoordinate
        var pixelFormat: PixelFormat
    }

    struct Entry {
        var bitmap: Bitmap
        var lastUse: UInt64
    }

    struct State {
        var entries: [Key: Entry] = [:]
        var bytes = 0
        var clock: UInt64 = 0
        var hits = 0
        var misses = 0
        var evictions = 0
    }

    /// The most pixel bytes held at once.
    package let byteLimit: Int
    private let state = Locked(State())

    package init(byteLimit: Int) {
        self.byteLimit = max(0, byteLimit)
    }

    /// Pixel bytes held now (at most ``byteLimit``).
    package var byteCount: Int { state.withLock { $0.bytes } }
    /// Bitmaps held now.
    package var count: Int { state.withLock { $0.entries.count } }
    /// Lookups answered, lookups missed and bitmaps dropped for room, since creation.
    package var statistics: (hits: Int, misses: Int, evictions: Int) {
        state.withLock { ($0.hits, $0.misses, $0.evictions) }
    }

    /// The cached bitmap of `tile` in `pixelFormat`, marking it recently used.
    package func bitmap(_ tile: TileCoordinate, pixelFormat: PixelFormat) -> Bitmap? {
        guard byteLimit > 0 else { return nil }
        return state.withLock { s in
            let key = Key(tile: tile, pixelFormat: pixelFormat)
            guard var entry = s.entries[key] else {
                s.misses += 1
                return nil
            }
            s.clock += 1
            entry.lastUse = s.clock
            s.entries[key] = entry
            s.hits += 1
            return entry.bitmap
        }
    }

    /// Keeps `bitmap` as `tile` in its pixel format, dropping least recently used bitmaps for room.
    package func insert(_ bitmap: Bitmap, for tile: TileCoordinate) {
        let cost = bitmap.pixels.count
        guard byteLimit > 0, cost <= byteLimit else { return }
        state.withLock { s in
            let key = Key(tile: tile, pixelFormat: bitmap.pixelFormat)
            if let old = s.entries.removeValue(forKey: key) { s.bytes -= old.bitmap.pixels.count }
            if s.bytes + cost > byteLimit {
                // Oldest first. A sort per eviction round is fine: a round frees at least `cost` bytes,
                // so it happens at most once per insertion, and the budget holds few hundred tiles.
                let oldest = s.entries.sorted { $0.value.lastUse < $1.value.lastUse }
                for (victim, entry) in oldest where s.bytes + cost > byteLimit {
                    s.entries[victim] = nil
                    s.bytes -= entry.bitmap.pixels.count
                    s.evictions += 1
                }
            }
            s.clock += 1
            s.entries[key] = Entry(bitmap: bitmap, lastUse: s.clock)
            s.bytes += cost
        }
    }

    /// Drops every bitmap.
    package func removeAll() {
        state.withLock { s in
            s.entries.removeAll()
            s.bytes = 0
        }
    }
}
