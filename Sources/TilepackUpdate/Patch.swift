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
    /// The base was already the version the patch makes: nothing was written (Specs/updates.md §4 item 2).
    public var alreadyApplied = false
    /// An MBTiles base patched in place: whether its stored identity was trusted (the file
    /// provably unchanged since it was stored) rather than computed from every tile.
    public var usedStoredIdentity: Bool?
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
            try applyInPlace(patch, to: base, request: request, report: &report)
        } else {
            try rewrite(
                base: base, patch: patch, patchPath: patchPath, to: destination, writesIndex: writesIndex, request: request, report: &report
            )
        }
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    /// An MBTiles base patched in place, in one transaction (``MBTilesPatcher``).
    private static func applyInPlace(_ patch: TilePatch, to base: String, request: PatchRequest?, report: inout PatchReport)
        throws(OperationError)
    {
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
            if report.notes(alreadyApplied: error) { return }
            throw OperationError(path: base, fault: .badInput(error.fault.description))
        }
        report.inPlace = true
        report.usedStoredIdentity = outcome.usedStoredIdentity
        report.before = outcome.before?.description
        report.after = outcome.after?.description
        report.warnings = outcome.warnings
        report.tilesWritten = outcome.tilesWritten
        report.tilesDeleted = outcome.tilesDeleted
        report.metadataChanges = outcome.metadataChanges
    }

    /// Any other base (or any base patched into OUT) read through the patch and written as the
    /// converter writes (``PatchWriter``), with its tile hash index beside it where it had one or
    /// `writesIndex` asks for one.
    private static func rewrite(
        base: String, patch: TilePatch, patchPath: String, to destination: String, writesIndex: Bool, request: PatchRequest?,
        report: inout PatchReport
    ) throws(OperationError) {
        // Held open from before the base is read: its unchanged payloads are copied from it.
        let copySource = try? CopySource(path: base)
        let archive = try openLocalArchive(base)
        let hadIndex = FileSystem.stat(TileHashIndex.sidecarName(of: base)) != nil
        let storedIndex = hadIndex ? PatchedArchive.storedIndex(of: base, archive) : nil
        let patched = PatchedArchive(
            base: archive, patch: patch, storedIndex: storedIndex,
            copySource: copySource.flatMap { $0.isStill(at: base) ? $0 : nil })
        do { try patched.checkBeforeWriting() } catch {
            if report.notes(alreadyApplied: error) { return }
            throw OperationError(path: base, fault: .badInput(error.fault.description))
        }
        if let request {
            let total = max(1, (try? archive.tileCount()) ?? 1)
            patched.onTiles = { (done) throws(OperationError) in try request.advance(0.95 * Double(done) / Double(total)) }
        }
        let indexes = (hadIndex || writesIndex) && TileArchiveFormat.named(by: destination) != .mbtiles
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
            if let failure = patched.failure {
                if report.notes(alreadyApplied: failure) { return }
                throw OperationError(path: base, fault: .badInput(failure.fault.description))
            }
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
}

extension PatchReport {
    /// Whether `error` says the base is already the version the patch makes, which is no
    /// failure: then the report says so and that nothing was written.
    fileprivate mutating func notes(alreadyApplied error: TilePatchError) -> Bool {
        guard case .alreadyApplied(let version) = error.fault else { return false }
        alreadyApplied = true
        after = version
        return true
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
