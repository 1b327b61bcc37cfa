import Foundation
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
    public var seconds = 0.0
}

/// Applies a patch (tilepack's patch file, or an MBTiles patch of tilepack's or martin's) to an
/// archive (Specs/updates.md §4). An MBTiles base without OUT is patched in place in one
/// transaction; any other base is rewritten through the converter's writers, beside the
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

    public static func run(base: String, patch patchPath: String, output: String? = nil, overwrite: Bool = false) throws(OperationError)
        -> PatchReport
    {
        try run(base: base, patch: patchPath, output: output, overwrite: overwrite, request: nil)
    }

    static func run(base: String, patch patchPath: String, output: String?, overwrite: Bool, request: PatchRequest?) throws(OperationError)
        -> PatchReport
    {
        do throws(OperationError) {
            return try apply(base: base, patch: patchPath, output: output, overwrite: overwrite, request: request)
        } catch {
            // However far down the cancellation was noticed, it is said as one.
            if let request, request.isCancelled { throw request.cancellation }
            throw error
        }
    }

    private static func apply(base: String, patch patchPath: String, output: String?, overwrite: Bool, request: PatchRequest?)
        throws(OperationError) -> PatchReport
    {
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
            let archive = try ArchiveLocation.open(base)
            let patched = PatchedArchive(
                base: archive, patch: patch, storedBefore: patch.before == nil ? nil : PatchedArchive.storedIdentity(of: base, archive))
            try patched.checkBeforeWriting()
            if let request {
                let total = max(1, (try? archive.tileCount()) ?? 1)
                patched.onTiles = { (done) throws(OperationError) in try request.advance(0.95 * Double(done) / Double(total)) }
            }
            var options = ConvertOptions()
            options.overwrite = true
            do {
                _ = try ArchiveConverter.run(source: patchPath, destination: destination, options: options, opened: patched)
            } catch {
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
    private let state = Locked<(failure: TilePatchError?, before: ContentIdentity, after: ContentIdentity, deleted: Int)>(
        (nil, ContentIdentity(), ContentIdentity(), 0))

    /// The base's identity as its tile hash index states it, when it has one (then only the
    /// tiles the patch replaces or deletes are hashed).
    let storedBefore: ContentIdentity?

    init(base: any TileArchive, patch: TilePatch, storedBefore: ContentIdentity? = nil) {
        self.base = base
        self.patch = patch
        self.storedBefore = storedBefore
        var index: [TileCoordinate: Int] = [:]
        for (i, tile) in patch.tiles.enumerated() { index[tile.coordinate] = i }
        patchedTiles = index
        deleted = Set(patch.deletions)
    }

    /// Told how many base tiles the tile pass has read, every 256; what it throws ends the pass
    /// (a cancelled ``PatchRequest``).
    var onTiles: ((Int) throws(OperationError) -> Void)?

    var path: String { base.path }
    var content: TileContent? { base.content }
    var failure: TilePatchError? { state.withLock { $0.failure } }
    var checked: (before: ContentIdentity, after: ContentIdentity) { state.withLock { ($0.before, $0.after) } }
    var deletedCount: Int { state.withLock { $0.deleted } }

    /// What can be refused before a tile is read: another tile type, another tile count.
    func checkBeforeWriting() throws(OperationError) {
        if let expected = patch.content, let found = base.content?.description, expected != found {
            throw OperationError(
                path: base.path, fault: .badInput(TilePatchError.Fault.wrongTileType(patch: expected, base: found).description))
        }
        if let expected = patch.before, let stored = storedBefore, stored != expected {
            throw OperationError(
                path: base.path,
                fault: .badInput(TilePatchError.Fault.wrongBase(expected: expected.description, found: stored.description).description))
        }
        if let expected = patch.before, let count = try? base.tileCount(), UInt64(count) != expected.tileCount {
            throw OperationError(
                path: base.path,
                fault: .badInput(
                    TilePatchError.Fault.wrongBase(expected: expected.description, found: "one of \(count) tiles").description))
        }
    }

    func metadata() throws -> TileMetadata {
        var metadata = try base.metadata()
        patch.apply(to: &metadata)
        for key in ContentIdentity.derivedKeys { metadata[key] = nil }
        metadata[TileMetadata.Key.aggregateTilesHash] = patch.aggregateHashAfter
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

    func forEachTile(_ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws {
        var before = try storedBefore ?? ContentIdentity(metadata: ContentIdentity.metadataHash(base.metadata()))
        let hashesEveryTile = storedBefore == nil
        // The result's identity follows from the base's and the changed tiles alone (each base
        // tile is hashed once): what replaced and deleted tiles contributed comes out, the
        // patch's tiles go in.
        var removed = ContentIdentity()
        var added = ContentIdentity()
        var next = 0
        var deletedCount = 0
        let tiles = patch.tiles
        func emitPatchTile() throws {
            try tiles[next].bytes.withUnsafeBytes { bytes in
                added.add(tiles[next].coordinate, bytes)
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
            if hashesEveryTile || replaced || dropped {
                let hash = ContentIdentity.tileHash(tile, bytes)
                if hashesEveryTile {
                    before.tiles &+= hash
                    before.tileCount &+= 1
                }
                if replaced || dropped {
                    removed.tiles &+= hash
                    removed.tileCount &+= 1
                }
            }
            if replaced {
                try emitPatchTile()
            } else if dropped {
                deletedCount += 1
            } else {
                try body(tile, bytes)
            }
        }
        try emitPatchTiles(upTo: nil)
        let after = ContentIdentity(
            tileCount: before.tileCount &- removed.tileCount &+ added.tileCount, tiles: before.tiles &- removed.tiles &+ added.tiles,
            metadata: ContentIdentity.metadataHash(try metadata()))
        let failure: TilePatchError? =
            if let expected = patch.before, expected != before {
                TilePatchError(path: base.path, fault: .wrongBase(expected: expected.description, found: before.description))
            } else if let expected = patch.after, expected != after {
                TilePatchError(path: base.path, fault: .resultMismatch(expected: expected.description, found: after.description))
            } else { nil }
        state.withLock { $0 = (failure, before, after, deletedCount) }
        if let failure { throw failure }
    }
}

extension PatchedArchive {
    /// The identity of the archive at `path` as its tile hash index beside it states it
    /// (`PATH.tpindex`, Specs/updates.md §7), when that index is this file's: the archive's
    /// length, tile count and metadata hash are the index's, and the archive was last changed no
    /// later than the index. `nil` otherwise (no index, or one of another version).
    static func storedIdentity(of path: String, _ archive: any TileArchive) -> ContentIdentity? {
        let sidecar = TileHashIndex.sidecarName(of: path)
        guard let file = FileSystem.stat(path), let indexFile = FileSystem.stat(sidecar),
            case (let changed, let indexed) = (FileVersion(file), FileVersion(indexFile)),
            (changed.modifiedSeconds, changed.modifiedNanoseconds) <= (indexed.modifiedSeconds, indexed.modifiedNanoseconds),
            let count = try? archive.tileCount(), Int(indexFile.st_size) == TileHashIndex.headerLength + 8 * count + 4,
            let data = FileManager.default.contents(atPath: sidecar),
            let index = try? TileHashIndex.decode(Array(data), name: sidecar),
            index.archiveLength == UInt64(file.st_size), index.identity.tileCount == UInt64(count),
            let metadata = try? archive.metadata(), index.identity.metadata == ContentIdentity.metadataHash(metadata)
        else { return nil }
        return index.identity
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
