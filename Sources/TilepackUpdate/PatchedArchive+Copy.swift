import Foundation
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage

// MARK: Copying the base's unchanged payloads

extension PatchedArchive {
    /// Writes the result into `sink` with the base's unchanged payloads copied from its file, unread
    /// by the writer (Specs/updates.md §4): a bundle into a bundle, a PMTiles into a PMTiles, from
    /// a local base held open (``copySource``). Returns false, having added nothing, for any other
    /// pair; then the converter reads every tile (``forEachTile(_:)``). The writer is begun with
    /// the content the converter would give it (the first tile's format, else `declared`).
    ///
    /// The result is the file the tile pass writes. A bundle payload is copied only when it is what
    /// the writer makes of its tile (`BundleWriter.prepare` of the tile's bytes gives the same
    /// codec and stored bytes), else the tile is written as prepared; a PMTiles tile's stored
    /// bytes are the tile, and the writer compares every content's bytes to share equal ones as it
    /// does for any tile. So a base of another writer (another LZ4, no compression, contents not
    /// shared) gives the same file too, with fewer payloads copied.
    func copy(into sink: TileSink, declared: TileFormat?) throws -> Bool {
        guard let copySource else { return false }
        if let bundle = base as? BundleArchive, sink.format == .archive(.bundle), case .encoded = bundle.content {
            try sink.begin(content: try resultContent(declared: declared))
            guard let writer = sink.bundleWriter else { return false }
            writer.copySource = copySource
            try copyBundle(bundle, into: writer)
            return true
        }
        if let pmtiles = base as? PMTilesArchive, pmtiles.source is FileByteSource, let writer = sink.pmtilesWriter {
            try sink.begin(content: try resultContent(declared: declared))
            writer.copySource = copySource
            try copyPMTiles(pmtiles, into: writer, from: copySource)
            return true
        }
        return false
    }

    /// What the converter's tile pass begins its sink with: the format of the result's first tile
    /// in (zoom, x, y) order, else the one the metadata declares.
    private func resultContent(declared: TileFormat?) throws -> TileContent {
        var first = patch.tiles.first?.coordinate
        struct Found: Error {}
        do {
            try forEachTileCoordinate(of: base) { tile in
                if let known = first, known < tile { throw Found() }
                if !leaves(tile) {
                    first = tile
                    throw Found()
                }
            }
        } catch is Found {}
        guard let first else { return .encoded(declared ?? .png) }
        guard let format = try withTileBytes(at: first, { TileFormat.sniff($0) }) ?? declared else {
            throw OperationError(path: patch.tiles.isEmpty ? base.path : path, fault: .badInput("tile \(first) is of no known format"))
        }
        return .encoded(format)
    }

    private func addPatchTiles(
        _ add: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void, to tally: inout Tally, using hasher: ContentIdentity.TileHasher
    ) throws {
        for tile in patch.tiles {
            try tile.bytes.withUnsafeBytes { bytes in
                tally.added.add(tile.coordinate, bytes, using: hasher)
                try add(tile.coordinate, bytes)
            }
        }
    }

    /// A bundle: every kept tile's payload is checked once (its CRC, the padding after it, and that
    /// `BundleWriter.prepare` of its tile gives the same stored bytes), then copied; unless the
    /// base's index says they are the writer's (``trustsBase``): then only the payloads of the tiles
    /// that leave are read (to hash those tiles). The payloads are read in file order, in windows,
    /// and checked (and their tiles hashed) on every core; the writer is then given the tiles in
    /// index order.
    private func copyBundle(_ bundle: BundleArchive, into writer: BundleWriter) throws {
        var tally = try startTally()
        writer.reserveCapacity(tiles: bundle.indexedTileCount + patch.tiles.count, payloads: bundle.payloadCount + patch.tiles.count)
        let hasher = ContentIdentity.TileHasher()
        try addPatchTiles({ tile, bytes in try writer.addTile(at: tile, bytes: bytes) }, to: &tally, using: hasher)
        // Each payload's uses that need its bytes (every tile when every tile is hashed, else the
        // tiles leaving), in payload order; and which payloads a kept tile uses.
        var uses: [PayloadUse] = []
        var keptPayloads = [Bool](repeating: false, count: bundle.payloadCount)
        var leavers = leavingTiles
        try bundle.forEachPayloadRecord { tile, number, _ in
            let leaving = leavers.contains(tile)
            if tally.needsBytes(leaving: leaving) { uses.append((UInt32(number), tile, leaving)) }
            if !leaving { keptPayloads[number] = true }
        }
        uses.sort { $0.number < $1.number }
        // The kept payloads to check: all of them, or none when the base's index vouches for them.
        let checked = trustsBase ? [Bool](repeating: false, count: bundle.payloadCount) : keptPayloads
        var numbers: [Int] = []
        var next = 0
        for number in 0..<bundle.payloadCount {
            let used = next < uses.count && Int(uses[next].number) == number
            while next < uses.count, Int(uses[next].number) == number { next += 1 }
            if used || checked[number] { numbers.append(number) }
        }
        let prepared = try checkPayloads(bundle, numbers: numbers, uses: uses, kept: checked, into: &tally)
        var copies = 0
        var seen = 0
        leavers = leavingTiles
        try bundle.forEachPayloadRecord { tile, number, record in
            seen += 1
            // Tiles given to the writer: at least the payloads checked, so the progress goes on.
            if seen % 256 == 0, let onTiles { try onTiles(seen) }
            if leavers.contains(tile) {
                if patchedTiles[tile] == nil { tally.dropped += 1 }
            } else if !prepared.isEmpty, let made = prepared[number] {
                try writer.addTile(at: tile, payload: made)
            } else {
                try writer.addTile(at: tile, copying: record)
                copies += 1
            }
        }
        try conclude(tally, copied: copies)
    }

    /// The payload checks of ``copyBundle(_:into:)``, on a worker pool of one thread per core:
    /// the payloads in chunks of 128, a chunk per thread at a time, each chunk's tally (sums, so
    /// the chunks add up in any order) added to `tally`; between two batches `onTiles` is told how
    /// many payloads were checked (and may end the checks). Returns the payloads that are not what
    /// the writer makes, as it makes them.
    private func checkPayloads(
        _ bundle: BundleArchive, numbers: [Int], uses: [PayloadUse], kept: [Bool], into tally: inout Tally
    ) throws -> [Int: BundleWriter.PreparedPayload] {
        let chunk = 128
        let chunks = stride(from: 0, to: numbers.count, by: chunk).map { $0..<min(numbers.count, $0 + chunk) }
        let hashesEveryTile = tally.hashesEveryTile
        var prepared: [Int: BundleWriter.PreparedPayload] = [:]
        var parts: [Tally] = []
        try WorkerPool.with(threads: ProcessInfo.processInfo.activeProcessorCount) { pool in
            for first in stride(from: 0, to: chunks.count, by: pool.size) {
                let batch = ParallelBatch<Range<Int>, Result<ChunkCheck, any Error>, BundleArchive.PayloadScratch>(
                    Array(chunks[first..<min(chunks.count, first + pool.size)]))
                batch.start(on: pool, makeState: { BundleArchive.PayloadScratch() }) { scratch, range in
                    Result {
                        try Self.check(
                            bundle, numbers: numbers[range], uses: uses, kept: kept, hashesEveryTile: hashesEveryTile, scratch: scratch)
                    }
                }
                batch.wait()
                for i in batch.inputs.indices {
                    let result = try batch[i].get()
                    parts.append(result.tally)
                    prepared.merge(result.prepared) { first, _ in first }
                }
                if let onTiles { try onTiles(batch.inputs.last?.upperBound ?? 0) }
            }
        }
        for part in parts { tally.add(part) }
        return prepared
    }

    /// A payload's use by a tile whose bytes are needed (hashed), in payload order.
    private typealias PayloadUse = (number: UInt32, tile: TileCoordinate, leaving: Bool)
    private typealias ChunkCheck = (tally: Tally, prepared: [Int: BundleWriter.PreparedPayload])

    /// Checks the payloads `numbers` (ascending), hashing the tiles of `uses` that use them.
    private static func check(
        _ bundle: BundleArchive, numbers: ArraySlice<Int>, uses: [PayloadUse], kept: [Bool], hashesEveryTile: Bool,
        scratch: BundleArchive.PayloadScratch
    ) throws -> ChunkCheck {
        var part = Tally(before: ContentIdentity(), hashesEveryTile: hashesEveryTile)
        let hasher = ContentIdentity.TileHasher()
        var prepared: [Int: BundleWriter.PreparedPayload] = [:]
        guard let firstNumber = numbers.first.map(UInt32.init) else { return (part, prepared) }
        // The uses of these payloads: from the first use of the first one.
        var use = uses.lowerBound { $0.number < firstNumber }
        try bundle.forEachPayload(numbers, scratch: scratch) { number, codec, stored, raw in
            while use < uses.count, uses[use].number == UInt32(number) {
                part.base(uses[use].tile, raw, leaving: uses[use].leaving, using: hasher)
                use += 1
            }
            guard kept[number] else { return }
            prepared[number] = BundleWriter.prepare(raw, unlessItMakes: stored, codec: codec, options: TileSink.bundleOptions)
        }
        return (part, prepared)
    }

    /// A PMTiles: every kept run's bytes are read once, to share equal contents as the writer does
    /// (and to hash each tile when the base has no index), and copied; unless the base's index
    /// says its contents are the writer's (``unreadCopies(_:)``): then only the runs of the tiles
    /// that leave (to hash those tiles) and of the tiles whose 64-bit hash a patch tile has (to
    /// share equal bytes) are read, and every other kept run is copied unread.
    private func copyPMTiles(_ pmtiles: PMTilesArchive, into writer: PMTilesWriter, from source: CopySource) throws {
        var tally = try startTally()
        let hasher = ContentIdentity.TileHasher()
        try addPatchTiles({ tile, bytes in try writer.addTile(at: tile, bytes: bytes) }, to: &tally, using: hasher)
        // The tile ids the patch touches, ascending: a run none of them falls in is kept whole.
        let touched = (patch.tiles.map(\.coordinate) + patch.deletions).map { PMTilesFormat.tileID(of: $0) }.sorted()
        let unread = tally.hashesEveryTile ? nil : try unreadCopies(pmtiles)
        // The base's header says how many entries and contents it has: bounded by what its
        // directories hold (a header may say anything), room made for them in the writer.
        let entries = min(Int(clamping: pmtiles.header.tileEntries), try pmtiles.tileCount(), 1 << 24)
        writer.reserveCapacity(
            entries: entries + patch.tiles.count, contents: min(Int(clamping: pmtiles.header.tileContents), entries) + patch.tiles.count)
        let dataOffset = Int(pmtiles.header.tileDataOffset)
        let reader = WindowReader(source)
        var seen = 0
        var copies = 0
        // Kept runs copied unread, given to the writer together (in order: before any run read).
        var unreadRuns: [PMTilesWriter.UnreadRun] = []
        func addUnreadRuns() throws {
            guard let unread, !unreadRuns.isEmpty else { return }
            try writer.addRuns(copyingUnread: unreadRuns, format: unread.format, gzip: unread.gzip)
            unreadRuns.removeAll(keepingCapacity: true)
        }
        try pmtiles.forEachRun { _, ids, offset, length in
            if (seen + ids.count) / 256 > seen / 256, let onTiles { try onTiles(seen + ids.count) }
            seen += ids.count
            let at = dataOffset + Int(offset)
            let keptWhole = !Self.meets(touched, ids)
            if let unread, keptWhole, !Self.meets(unread.mayBeShared, ids) {
                unreadRuns.append(PMTilesWriter.UnreadRun(ids: ids, offset: at, length: length))
                copies += ids.count
                return
            }
            try addUnreadRuns()
            try reader.withBytes(at: at, length: length) { bytes in
                if !tally.hashesEveryTile, keptWhole {
                    try writer.addRun(ids: ids, copying: at, bytes: bytes)
                    copies += ids.count
                    return
                }
                var kept: UInt64?
                for id in ids {
                    guard let tile = PMTilesFormat.tile(ofID: id) else { continue }
                    let leaving = leaves(tile)
                    tally.base(tile, bytes, leaving: leaving, using: hasher)
                    if leaving {
                        if let start = kept { try writer.addRun(ids: start..<id, copying: at, bytes: bytes) }
                        kept = nil
                        if patchedTiles[tile] == nil { tally.dropped += 1 }
                    } else {
                        if kept == nil { kept = id }
                        copies += 1
                    }
                }
                if let start = kept { try writer.addRun(ids: start..<ids.upperBound, copying: at, bytes: bytes) }
            }
        }
        try addUnreadRuns()
        try conclude(tally, copied: copies)
    }

    /// Whether one of `sorted` (ascending tile ids) falls in `ids`.
    private static func meets(_ sorted: [UInt64], _ ids: Range<UInt64>) -> Bool {
        let low = sorted.lowerBound { $0 < ids.lowerBound }
        return low < sorted.count && sorted[low] < ids.upperBound
    }

    /// What the writer is told of a kept run copied unread (``PMTilesWriter/addRuns(copyingUnread:format:gzip:)``).
    private struct UnreadCopies {
        /// The base's tiles whose bytes a patch tile may hold (the same 64-bit hash), ascending ids.
        var mayBeShared: [UInt64]
        /// What the writer would sniff from every kept content.
        var format: TileFormat
        var gzip: Bool
    }

    /// When the base's index says its contents are the writer's (``trustsBase``: no two equal),
    /// and what the writer would sniff from a kept content can be told from the base's header
    /// without reading it: the result's metadata names its format (so the tile type does not come
    /// from counting the tiles' formats), the base's header says that type, and for vector tiles
    /// says gzip or none (so every kept content is gzip, or none is). `nil` otherwise.
    private func unreadCopies(_ pmtiles: PMTilesArchive) throws -> UnreadCopies? {
        guard trustsBase, let index = storedIndex, let declared = try metadata().format,
            PMTilesFormat.TileType(declared) == pmtiles.header.tileType, let format = pmtiles.header.tileType.tileFormat
        else { return nil }
        let compression = pmtiles.header.tileCompression
        guard pmtiles.header.tileType != .mvt || compression == .gzip || compression == .none else { return nil }
        // A patch tile equal to a kept content shares it: those contents are found by the index's
        // hashes (in (zoom, x, y) order) and read to be compared.
        let wanted = Set(patch.tiles.map { $0.bytes.withUnsafeBytes { TileHashIndex.hash($0) } })
        let ranks = index.hashes.indices.filter { wanted.contains(index.hashes[$0]) }
        var mayBeShared: [UInt64] = []
        if !ranks.isEmpty {
            var rank = 0, next = 0
            try pmtiles.forEachTileCoordinate { tile in
                if next < ranks.count, ranks[next] == rank {
                    mayBeShared.append(PMTilesFormat.tileID(of: tile))
                    next += 1
                }
                rank += 1
            }
            mayBeShared.sort()
        }
        return UnreadCopies(mayBeShared: mayBeShared, format: format, gzip: compression == .gzip)
    }
}

/// Reads a file front to back in windows of a mebibyte (a canonical PMTiles' contents lie in the
/// order its runs are visited), a range outside the window by a read of its own.
private final class WindowReader {
    private let source: CopySource
    private var window: [UInt8] = []
    private var start = 0
    private var end = 0
    private static let windowBytes = 1 << 20

    init(_ source: CopySource) { self.source = source }

    func withBytes<R>(at offset: Int, length: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        if offset < start || offset + length > end {
            let size = max(length, Self.windowBytes)
            let available = max(length, min(size, source.size - offset))
            if window.count < available { window = [UInt8](repeating: 0, count: available) }
            try window.withUnsafeMutableBytes { buffer in
                try source.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<available]), at: offset)
            }
            start = offset
            end = offset + available
        }
        return try window.withUnsafeBytes { buffer in
            try body(UnsafeRawBufferPointer(rebasing: buffer[(offset - start)..<(offset - start + length)]))
        }
    }
}
