import Foundation
import Synchronization
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage

/// What `patch` did.
public struct PatchReport: Sendable, Codable {
    public var base: String
    public var patch: String
    public var output: String
    /// Whether an MBTiles base was patched in place (one transaction) rather than rewritten.
    public var inPlace = false
    /// The base's identity and the result's, as checked (`nil`: nothing to check them against).
    public var before: String?
    public var after: String?
    public var warnings: [String] = []
    public var tilesWritten = 0
    public var tilesDeleted = 0
    public var metadataChanges = 0
    /// A bundle or PMTiles result: the base's tiles whose stored bytes were copied into it by the
    /// writer unread (Specs/updates.md §4), or `nil` when every tile went through the writer.
    public var copiedTiles: Int?
    /// The result's tile hash index written beside it, and how: `updated` from the base's index
    /// and the changed tiles, or `built` from every tile of the result.
    public var index: String?
    public var seconds = 0.0
}

/// Applies a patch (tilepack's patch file, or an MBTiles patch of tilepack's or martin's) to an
/// archive (Specs/updates.md §4). An MBTiles base without OUT is patched in place in one
/// transaction; any other base is rewritten as the converter writes (`PatchWriter`), beside the
/// destination and renamed over it, so the result is byte-identical to `tilepack convert NEW`
/// into that format. Both identities are checked before the result is visible.
public enum ArchivePatcher {
    /// Reads a patch file, recognised by its bytes.
    public static func readPatch(_ path: String) throws(OperationError) -> TilePatch {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path), options: .mappedIfSafe)
        } catch {
            throw OperationError(path: path, fault: .io("cannot read the patch: \(error.localizedDescription)"))
        }
        do {
            if TilePatch.isPatchFile(data.prefix(8)) { return try TilePatch.decode(Array(data), path: path) }
            if data.starts(with: Array("SQLite format 3\0".utf8)) { return try TilePatch.readMBTiles(path: path) }
        } catch {
            throw OperationError(path: path, fault: .badInput(error.fault.description))
        }
        throw OperationError(path: path, fault: .badInput("not a tile patch: neither a tilepack patch (TPPATCH1) nor an MBTiles patch"))
    }

    /// - Parameter writesIndex: write the result's tile hash index beside it (`OUT.tpindex`) even
    ///   when the base had none beside it (a bundle or PMTiles result; Specs/updates.md §4).
    public static func run(
        base: String, patch patchPath: String, output: String? = nil, overwrite: Bool = false, writesIndex: Bool = false
    ) throws(OperationError) -> PatchReport {
        try run(base: base, patch: patchPath, output: output, overwrite: overwrite, writesIndex: writesIndex, request: nil)
    }

    static func run(
        base: String, patch patchPath: String, output: String?, overwrite: Bool, writesIndex: Bool = false, request: PatchRequest?
    ) throws(OperationError) -> PatchReport {
        do throws(OperationError) {
            return try apply(base: base, patch: patchPath, output: output, overwrite: overwrite, writesIndex: writesIndex, request: request)
        } catch {
            // However far down the cancellation was noticed, it is said as one.
            if let request, request.isCancelled { throw request.cancellation }
            throw error
        }
    }

    private static func apply(
        base: String, patch patchPath: String, output: String?, overwrite: Bool, writesIndex: Bool, request: PatchRequest?
    ) throws(OperationError) -> PatchReport {
        let start = DispatchTime.now().uptimeNanoseconds
        let destination = output ?? base
        let patch = try readPatch(patchPath)
        var report = PatchReport(base: base, patch: patchPath, output: destination)
        let baseFormat: TileArchiveFormat
        do { baseFormat = try TileArchiveFormat.detect(path: base) } catch { throw OperationError(path: base, fault: .archive(error)) }
        let sameFile =
            FileSystem.stat(destination).map { out in
                FileSystem.stat(base).map { $0.st_ino == out.st_ino && $0.st_dev == out.st_dev } ?? false
            } ?? false
        if output != nil && !sameFile && !overwrite && FileSystem.stat(destination) != nil {
            throw OperationError(path: destination, fault: .archive(TileArchiveError(path: destination, fault: .alreadyExists)))
        }
        // BASE replaced (in place, or renamed over): a file with no write bit is meant to stay as
        // it is, even for root. (OUT elsewhere leaves BASE alone: then it may be read-only.)
        if output == nil || sameFile, let info = FileSystem.stat(base), info.st_mode & 0o222 == 0 {
            throw OperationError(
                path: base,
                fault: .archive(
                    TileArchiveError(
                        path: base,
                        fault: .io(errno: EACCES, reason: "the file is read-only: patching would replace it (give OUT to write elsewhere)"))
                ))
        }
        if baseFormat == .mbtiles && (output == nil || sameFile) {
            let outcome: PatchOutcome
            var progress: (@Sendable (Double) -> Bool)?
            if let request {
                progress = { value in
                    do throws(OperationError) {
                        try request.advance(0.95 * value)
                        return true
                    } catch { return false }
                }
            }
            do { outcome = try MBTilesPatcher.apply(patch, to: base, progress: progress) } catch {
                throw OperationError(path: base, fault: .badInput(error.fault.description))
            }
            report.inPlace = true
            report.before = outcome.before?.description
            report.after = outcome.after?.description
            report.warnings = outcome.warnings
            report.tilesWritten = outcome.tilesWritten
            report.tilesDeleted = outcome.tilesDeleted
            report.metadataChanges = outcome.metadataChanges
        } else {
            // Held open from before the base is read: its unchanged payloads are copied from it.
            let copySource = try? CopySource(path: base)
            let archive = try openLocalArchive(base)
            let hadIndex = FileSystem.stat(TileHashIndex.sidecarName(of: base)) != nil
            let storedIndex = hadIndex ? PatchedArchive.storedIndex(of: base, archive) : nil
            let patched = PatchedArchive(
                base: archive, patch: patch, storedIndex: storedIndex,
                copySource: copySource.flatMap { $0.isStill(at: base) ? $0 : nil })
            try patched.checkBeforeWriting()
            if let request {
                let total = max(1, (try? archive.tileCount()) ?? 1)
                patched.onTiles = { (done) throws(OperationError) in try request.advance(0.95 * Double(done) / Double(total)) }
            }
            let indexes = (hadIndex || writesIndex) && (try? PatchWriter.format(of: destination)) != .mbtiles
            // The result index's hashes need no tile of the result: worked out beside the tile pass
            // (and given up when the pass fails or is cancelled).
            let failed = Atomic(false)
            let hashes =
                indexes && storedIndex != nil ? Concurrent { try patched.updatedHashes { failed.load(ordering: .relaxed) } } : nil
            do {
                try PatchWriter.write(patched, patch: patchPath, to: destination)
            } catch {
                failed.store(true, ordering: .relaxed)
                _ = try? hashes?.value()
                if let failure = patched.failure { throw OperationError(path: base, fault: .badInput(failure.fault.description)) }
                throw error
            }
            report.before = patch.before.map { _ in patched.checked.before.description }
            report.after = patch.after.map { _ in patched.checked.after.description }
            if patch.before == nil && patch.aggregateHashBefore == nil {
                report.warnings.append(
                    "the patch carries no identity and no agg_tiles_hash_before_apply/after_apply (martin's older diff): applied, but nothing could be checked"
                )
            }
            report.tilesWritten = patch.tiles.count
            report.tilesDeleted = patched.deletedCount
            report.metadataChanges = patch.metadataChanges.count
            report.copiedTiles = patched.copied
            if indexes {
                // The result is in place: an index that cannot be written is said, not a failure.
                do throws(OperationError) {
                    let updated: [UInt64]?
                    do { updated = try hashes?.value() ?? nil } catch { throw OperationError.wrapping(error, path: base) }
                    report.index = try writeIndex(of: destination, patched: patched, hashes: updated)
                } catch {
                    report.warnings.append("the result's tile hash index was not written: \(error)")
                }
            }
        }
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }
}

/// A base archive as the patch makes it, read as one archive: the converter writes it like any
/// input. Its tile pass also computes the base's identity and the result's, and ends with an error
/// (before the writer commits) when either is not the patch's.
final class PatchedArchive: TileArchive, @unchecked Sendable {
    let base: any TileArchive
    let patch: TilePatch
    private let patchedTiles: [TileCoordinate: Int]
    private let deleted: Set<TileCoordinate>
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
    private let leavingTiles: LeavingTiles

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
    func checkBeforeWriting() throws(OperationError) {
        do throws(TilePatchError) {
            try patch.requireTileType(of: base)
            if let stored = storedBefore { try patch.requireBase(.identity(stored), path: base.path) }
            if let count = try? base.tileCount() { try patch.requireBase(.tileCount(count), path: base.path) }
        } catch {
            throw OperationError(path: base.path, fault: .badInput(error.fault.description))
        }
    }

    func metadata() throws -> TileMetadata {
        var metadata = try base.metadata()
        let algorithm = metadata[TileMetadata.Key.hashAlgorithm]
        patch.apply(to: &metadata)
        for key in ContentIdentity.derivedKeys { metadata[key] = nil }
        metadata[TileMetadata.Key.aggregateTilesHash] = patch.aggregateHashAfter
        // The hash's algorithm (`md5`), which the patch does not carry, as the base names it.
        if patch.aggregateHashAfter != nil { metadata[TileMetadata.Key.hashAlgorithm] = algorithm }
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
    private func leaves(_ tile: TileCoordinate) -> Bool { patchedTiles[tile] != nil || deleted.contains(tile) }

    /// The base's identity and the result's, tallied in one pass: the base's from its index or
    /// from every base tile; the result's from the base's and the changed tiles alone (what
    /// replaced and deleted tiles contributed comes out, the patch's tiles go in).
    private struct Tally {
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

    private func startTally() throws -> Tally {
        Tally(
            before: try storedBefore ?? ContentIdentity(metadata: ContentIdentity.metadataHash(base.metadata())),
            hashesEveryTile: storedBefore == nil)
    }

    /// Records both identities and how many tiles were dropped, and throws (before the writer
    /// commits) when either identity is not the patch's.
    private func conclude(_ tally: Tally, copied: Int?) throws {
        let before = tally.before
        let after = ContentIdentity(
            tileCount: before.tileCount &- tally.removed.tileCount &+ tally.added.tileCount,
            tiles: before.tiles &- tally.removed.tiles &+ tally.added.tiles,
            metadata: ContentIdentity.metadataHash(try metadata()))
        var failure: TilePatchError?
        do throws(TilePatchError) {
            try patch.requireBase(.identity(before), path: base.path)
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
    func copy(into sink: PatchWriter, declared: TileFormat?) throws -> Bool {
        guard let copySource else { return false }
        if let bundle = base as? BundleArchive, sink.format == .bundle, case .encoded = bundle.content {
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
            prepared[number] = BundleWriter.prepare(raw, unlessItMakes: stored, codec: codec, options: PatchWriter.bundleOptions)
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

/// A value worked out on a thread of its own while the caller goes on; ``value()`` waits for it.
private final class Concurrent<Value: Sendable>: @unchecked Sendable {
    private let done = DispatchGroup()
    // Written once before `done` is left, read after it is waited for.
    private var result: Result<Value, any Error>?

    init(_ work: @escaping @Sendable () throws -> Value) {
        done.enter()
        DispatchQueue.global().async {
            self.result = Result { try work() }
            self.done.leave()
        }
    }

    func value() throws -> Value {
        done.wait()
        return try result!.get()
    }
}

/// Tiles, ascending, asked about in ascending order: a question moves a cursor (by a binary search
/// of what is left when it passes a tile), where a set would hash every tile's coordinates; asked
/// out of order it searches from the start.
private struct LeavingTiles {
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
    fileprivate func lowerBound(from start: Int = 0, _ isBelow: (Element) -> Bool) -> Int {
        var low = start, high = count
        while low < high {
            let middle = (low + high) / 2
            if isBelow(self[middle]) { low = middle + 1 } else { high = middle }
        }
        return low
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

extension PatchedArchive {
    /// The tile hash index beside `path` (`PATH.tpindex`, Specs/updates.md §7), when that index is
    /// this file's: the archive's length, tile count and metadata hash are the index's, and the
    /// archive was last changed no later than the index. `nil` otherwise (no index, or one of
    /// another version).
    static func storedIndex(of path: String, _ archive: any TileArchive) -> TileHashIndex? {
        let sidecar = TileHashIndex.sidecarName(of: path)
        guard let file = FileSystem.stat(path), let indexFile = FileSystem.stat(sidecar),
            case (let changed, let indexed) = (FileVersion(file), FileVersion(indexFile)),
            (changed.modifiedSeconds, changed.modifiedNanoseconds) <= (indexed.modifiedSeconds, indexed.modifiedNanoseconds),
            let count = try? archive.tileCount(), TileHashIndex.isFileLength(Int(indexFile.st_size), tiles: count),
            let data = FileManager.default.contents(atPath: sidecar),
            let index = try? TileHashIndex.decode(Array(data), name: sidecar),
            index.archiveLength == UInt64(file.st_size), index.identity.tileCount == UInt64(count),
            let metadata = try? archive.metadata(), index.identity.metadata == ContentIdentity.metadataHash(metadata)
        else { return nil }
        return index
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

extension ArchivePatcher {
    /// Writes the tile hash index of the result at `destination` beside it: from `hashes`
    /// (``PatchedArchive/updatedHashes()``, when the base had a valid index), else from every tile
    /// of the result. Says which.
    static func writeIndex(of destination: String, patched: PatchedArchive, hashes: [UInt64]?) throws(OperationError) -> String {
        let sidecar = TileHashIndex.sidecarName(of: destination)
        do {
            if let hashes, let length = FileSystem.stat(destination)?.st_size {
                // Canonical: every payload is this writer's (prepared, checked, or the base's index said so).
                let index = TileHashIndex(archiveLength: UInt64(length), identity: patched.checked.after, hashes: hashes, canonical: true)
                try index.write(to: sidecar, overwrite: true)
                return "\(sidecar) (updated from the base's index)"
            }
        } catch {
            throw OperationError.wrapping(error, path: sidecar)
        }
        _ = try ArchiveIndexer.run(archive: destination, output: nil, overwrite: true, canonical: true)
        return "\(sidecar) (built from every tile: the base had no index of its own version)"
    }
}

/// A patch applied in the background, for an app (Specs/updates.md §4): an id, a progress in
/// [0, 1] that never decreases (the base's tiles read, or an MBTiles base's changed tiles
/// written, then 1 when the result is in place), a status, cancel and a typed error
/// (``BackgroundRequest``). The base stays readable, as the old version, until the new one
/// replaces it whole; cancelled or failed, it is left as it was.
public final class PatchRequest: BackgroundRequest<PatchReport>, @unchecked Sendable {
    /// The archive patched, the patch file, and where the result goes (`nil`: over the base).
    public let base: String
    public let patch: String
    public let output: String?

    init(base: String, patch: String, output: String?, onChange: (@Sendable (PatchRequest) -> Void)?) {
        self.base = base
        self.patch = patch
        self.output = output
        super.init(subject: output ?? base, verb: "patch", onChange: PatchRequest.relay(onChange))
    }

    /// Starts applying `patch` to `base` (into `output` when given, replacing it) on a thread of
    /// its own; `onChange` is told of every change of progress or status (on that thread).
    public static func start(
        base: String, patch: String, output: String? = nil, onChange: (@Sendable (PatchRequest) -> Void)? = nil
    ) -> PatchRequest {
        let request = PatchRequest(base: base, patch: patch, output: output, onChange: onChange)
        request.run { () throws(OperationError) in
            try ArchivePatcher.run(base: base, patch: patch, output: output, overwrite: output != nil, request: request)
        }
        return request
    }
}
