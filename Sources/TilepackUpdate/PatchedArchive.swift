import Foundation
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage

/// A base archive as the patch makes it, read as one archive: the converter writes it like any
/// input. Its tile pass also computes the base's identity and the result's, and ends with an error
/// (before the writer commits) when either is not the patch's.
final class PatchedArchive: TileArchive, @unchecked Sendable {
    let base: any TileArchive
    let patch: TilePatch
    let patchedTiles: [TileCoordinate: Int]
    let deleted: Set<TileCoordinate>
    private let state = Locked<(failure: TilePatchError?, before: ContentIdentity, after: ContentIdentity, deleted: Int, copied: Int?)>(
        (nil, ContentIdentity(), ContentIdentity(), 0, nil))

    /// The base's tile hash index beside it, when it is this file's (``storedIndex(of:_:)``): it
    /// gives the base's identity (then only the tiles the patch replaces or deletes are hashed),
    /// and the result's index is made from it and the changed tiles.
    let storedIndex: TileHashIndex?
    /// The base's identity as its tile hash index states it.
    var storedBefore: ContentIdentity? { storedIndex?.identity }
    /// Whether the base's index says its payloads are what the writer makes of its tiles
    /// (``TileHashIndex/canonical``): then they are copied unchecked (a bundle's not decoded, a
    /// PMTiles' kept contents not read), Specs/updates.md §4.
    var trustsBase: Bool { storedIndex?.canonical == true }
    /// The base's file, held open, from which unchanged payloads are copied (``copy(into:declared:)``).
    let copySource: CopySource?

    init(base: any TileArchive, patch: TilePatch, storedIndex: TileHashIndex? = nil, copySource: CopySource? = nil) {
        self.base = base
        self.patch = patch
        self.storedIndex = storedIndex
        self.copySource = copySource
        var index: [TileCoordinate: Int] = [:]
        for (i, tile) in patch.tiles.enumerated() { index[tile.coordinate] = i }
        patchedTiles = index
        deleted = Set(patch.deletions)
        leavingTiles = LeavingTiles(Array(deleted.union(index.keys)).sorted())
    }

    /// The base's tiles the patch replaces or deletes, ascending, for passes over the base in
    /// (zoom, x, y) order (``LeavingTiles``).
    let leavingTiles: LeavingTiles

    /// Told how many base tiles the tile pass has read, every 256; what it throws ends the pass
    /// (a cancelled ``PatchRequest``).
    var onTiles: ((Int) throws(OperationError) -> Void)?

    var path: String { base.path }
    var content: TileContent? { base.content }
    var failure: TilePatchError? { state.withLock { $0.failure } }
    var checked: (before: ContentIdentity, after: ContentIdentity) { state.withLock { ($0.before, $0.after) } }
    var deletedCount: Int { state.withLock { $0.deleted } }
    /// The base tiles whose payloads the result copies (``copy(into:declared:)``), or `nil` when it was written tile by tile.
    var copied: Int? { state.withLock { $0.copied } }

    /// What can be refused before a tile is read: another tile type, another tile count.
    func checkBeforeWriting() throws(TilePatchError) {
        try patch.requireTileType(of: base)
        if let stored = storedBefore { try patch.requireBase(.identity(stored), path: base.path, metadata: try? base.metadata()) }
        if let count = try? base.tileCount() {
            // Refused by its count, yet of the target's: one pass over its tiles (nothing written)
            // says whether it is the target already, or what else it is.
            if patch.match(.tileCount(count)).isBase == false, patch.after?.tileCount == UInt64(count),
                let found = try? ContentIdentity.compute(base)
            {
                try patch.requireBase(.identity(found), path: base.path, metadata: try? base.metadata())
            }
            try patch.requireBase(.tileCount(count), path: base.path)
        }
    }

    func metadata() throws -> TileMetadata {
        var metadata = try base.metadata()
        let algorithm = metadata[TileMetadata.Key.hashAlgorithm]
        patch.apply(to: &metadata)
        for key in ContentIdentity.derivedKeys { metadata[key] = nil }
        metadata[TileMetadata.Key.aggregateTilesHash] = patch.newAggregateHash
        // The hash's algorithm (`md5`), which the patch does not carry, as the base names it.
        if patch.newAggregateHash != nil { metadata[TileMetadata.Key.hashAlgorithm] = algorithm }
        return metadata
    }

    func containsTile(at tile: TileCoordinate) throws -> Bool {
        if patchedTiles[tile] != nil { return true }
        if deleted.contains(tile) { return false }
        return try base.containsTile(at: tile)
    }

    func withTileBytes<R>(at tile: TileCoordinate, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        if let i = patchedTiles[tile] { return try patch.tiles[i].bytes.withUnsafeBytes(body) }
        if deleted.contains(tile) { return nil }
        return try base.withTileBytes(at: tile, body)
    }

    func zoomLevels() throws -> [ZoomLevelSummary] {
        var counts: [Int: Int] = [:]
        for level in try base.zoomLevels() { counts[level.zoom] = level.tileCount }
        for tile in deleted where patchedTiles[tile] == nil { if try base.containsTile(at: tile) { counts[tile.zoom, default: 0] -= 1 } }
        for tile in patch.tiles where try !base.containsTile(at: tile.coordinate) { counts[tile.coordinate.zoom, default: 0] += 1 }
        return counts.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { ZoomLevelSummary(zoom: $0.key, tileCount: $0.value) }
    }

    /// Whether the base's `tile` is not in the result as it is: the patch replaces or deletes it.
    func leaves(_ tile: TileCoordinate) -> Bool { patchedTiles[tile] != nil || deleted.contains(tile) }

    /// The base's identity and the result's, tallied in one pass: the base's from its index or
    /// from every base tile; the result's from the base's and the changed tiles alone (what
    /// replaced and deleted tiles contributed comes out, the patch's tiles go in).
    struct Tally {
        var before: ContentIdentity
        let hashesEveryTile: Bool
        var removed = ContentIdentity()
        var added = ContentIdentity()
        var dropped = 0

        /// Whether a base tile's bytes are needed: it `leaves`, or every tile is hashed.
        func needsBytes(leaving: Bool) -> Bool { hashesEveryTile || leaving }

        /// Adds what another part of the base's tiles tallied (sums: in any order).
        mutating func add(_ part: Tally) {
            before.tiles &+= part.before.tiles
            before.tileCount &+= part.before.tileCount
            removed.tiles &+= part.removed.tiles
            removed.tileCount &+= part.removed.tileCount
        }

        /// - Parameter hasher: one SHA-256 context reused from tile to tile (a new one per tile
        ///   costs more than hashing a 1 KB tile), this thread's own.
        mutating func base(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer, leaving: Bool, using hasher: ContentIdentity.TileHasher)
        {
            guard hashesEveryTile || leaving else { return }
            let hash = hasher.hash(tile, bytes)
            if hashesEveryTile {
                before.tiles &+= hash
                before.tileCount &+= 1
            }
            if leaving {
                removed.tiles &+= hash
                removed.tileCount &+= 1
            }
        }
    }

    func startTally() throws -> Tally {
        Tally(
            before: try storedBefore ?? ContentIdentity(metadata: ContentIdentity.metadataHash(base.metadata())),
            hashesEveryTile: storedBefore == nil)
    }

    /// Records both identities and how many tiles were dropped, and throws (before the writer
    /// commits) when either identity is not the patch's.
    func conclude(_ tally: Tally, copied: Int?) throws {
        let before = tally.before
        let after = ContentIdentity(
            tileCount: before.tileCount &- tally.removed.tileCount &+ tally.added.tileCount,
            tiles: before.tiles &- tally.removed.tiles &+ tally.added.tiles,
            metadata: ContentIdentity.metadataHash(try metadata()))
        var failure: TilePatchError?
        do throws(TilePatchError) {
            try patch.requireBase(.identity(before), path: base.path, metadata: try? base.metadata())
            try patch.requireTarget(.identity(after), path: base.path)
        } catch { failure = error }
        state.withLock { $0 = (failure, before, after, tally.dropped, copied) }
        if let failure { throw failure }
    }

    func forEachTile(_ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws {
        var tally = try startTally()
        let hasher = ContentIdentity.TileHasher()
        var next = 0
        let tiles = patch.tiles
        func emitPatchTile() throws {
            try tiles[next].bytes.withUnsafeBytes { bytes in
                tally.added.add(tiles[next].coordinate, bytes, using: hasher)
                try body(tiles[next].coordinate, bytes)
            }
            next += 1
        }
        /// The patch's tiles before `limit` (all of them for `nil`), in order between the base's.
        func emitPatchTiles(upTo limit: TileCoordinate?) throws {
            while next < tiles.count, limit.map({ tiles[next].coordinate < $0 }) ?? true { try emitPatchTile() }
        }
        var seen = 0
        try base.forEachTile { tile, bytes in
            seen += 1
            if seen % 256 == 0, let onTiles { try onTiles(seen) }
            try emitPatchTiles(upTo: tile)
            let replaced = next < tiles.count && tiles[next].coordinate == tile
            let dropped = !replaced && deleted.contains(tile)
            tally.base(tile, bytes, leaving: replaced || dropped, using: hasher)
            if replaced {
                try emitPatchTile()
            } else if dropped {
                tally.dropped += 1
            } else {
                try body(tile, bytes)
            }
        }
        try emitPatchTiles(upTo: nil)
        try conclude(tally, copied: nil)
    }
}

/// Tiles, ascending, asked about in ascending order: a question moves a cursor (by a binary search
/// of what is left when it passes a tile), where a set would hash every tile's coordinates; asked
/// out of order it searches from the start.
struct LeavingTiles {
    private let sorted: [TileCoordinate]
    /// The first of `sorted` not below the last tile asked about.
    private var next = 0

    init(_ sorted: [TileCoordinate]) { self.sorted = sorted }

    mutating func contains(_ tile: TileCoordinate) -> Bool {
        if next < sorted.count, sorted[next] < tile {
            next = sorted.lowerBound(from: next + 1) { $0 < tile }
        } else if next > 0, !(sorted[next - 1] < tile) {
            next = sorted.lowerBound { $0 < tile }
        }
        return next < sorted.count && sorted[next] == tile
    }
}

extension Array {
    /// The first index from `start` whose element is not `isBelow` (the array's count when there
    /// is none), by a binary search: the elements from `start` on are those that are `isBelow`,
    /// then those that are not.
    func lowerBound(from start: Int = 0, _ isBelow: (Element) -> Bool) -> Int {
        var low = start, high = count
        while low < high {
            let middle = (low + high) / 2
            if isBelow(self[middle]) { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

extension PatchedArchive {
    /// The tile hash index beside `path` (`PATH.tpindex`, Specs/updates.md §7), when that index is
    /// this file's: the archive's length, tile count and metadata hash are the index's, and the
    /// archive was last changed no later than the index. `nil` otherwise (no index, or one of
    /// another version).
    static func storedIndex(of path: String, _ archive: any TileArchive) -> TileHashIndex? {
        (try? TileHashIndex.beside(path, archive: archive)) ?? nil
    }

    /// The result's tile hashes from the base's index and the changed tiles alone: the base's
    /// hashes of the tiles kept, in (zoom, x, y) order (the base's coordinates from its index or
    /// directories, no tile read), merged with the hashes of the patch's tiles. `nil` without a
    /// base index. Reads only what does not change (safe beside the tile pass, on another thread).
    /// Ends early, with `nil`, once `abandoned` says so (checked every 4,096 tiles).
    func updatedHashes(abandoned: () -> Bool = { false }) throws -> [UInt64]? {
        guard let old = storedIndex else { return nil }
        var hashes: [UInt64] = []
        hashes.reserveCapacity(old.hashes.count + patch.tiles.count)
        let tiles = patch.tiles
        var next = 0
        func emitPatchTiles(upTo limit: TileCoordinate?) {
            while next < tiles.count, limit.map({ tiles[next].coordinate < $0 }) ?? true {
                hashes.append(tiles[next].bytes.withUnsafeBytes { TileHashIndex.hash($0) })
                next += 1
            }
        }
        var i = 0
        var leaving = leavingTiles
        struct Abandoned: Error {}
        do {
            try forEachTileCoordinate(of: base) { tile in
                guard i < old.hashes.count else {
                    throw OperationError(path: base.path, fault: .badInput("the base has more tiles than its index"))
                }
                if i % 4096 == 0, abandoned() { throw Abandoned() }
                emitPatchTiles(upTo: tile)
                if !leaving.contains(tile) { hashes.append(old.hashes[i]) }
                i += 1
            }
        } catch is Abandoned {
            return nil
        }
        emitPatchTiles(upTo: nil)
        return hashes
    }
}
