import Foundation
import TilepackChecksum
import TilepackCore
import TilepackStorage
import TilepackUpdate

extension StagedByteSource.State {
    /// Drops the records that overlap `range` (a discard record: their bytes were found wrong).
    mutating func discard(_ range: Range<Int>) {
        let kept = ranges.filter { !$0.range.overlaps(range) }
        stagedBytes -= ranges.filter { $0.range.overlaps(range) }.reduce(0) { $0 + $1.range.count }
        ranges = kept
        pendingBytes -= pending.filter { $0.range.overlaps(range) }.reduce(0) { $0 + $1.range.count }
        pending = pending.filter { !$0.range.overlaps(range) }
    }
}

/// The journal's plan records (Specs/updates.md §8.1): the staging file records the sync plan
/// once it is made, beside the ranges that arrived, so that a sync killed at any point and started
/// again takes up the same plan and asks only for the units that did not arrive.
extension StagedByteSource {
    /// Appends a record of the special `mark` with `bytes` and flushes the file.
    private func appendSpecial(_ mark: UInt64, _ bytes: [UInt8]) throws(TileArchiveError) {
        let crc = bytes.withUnsafeBytes { CRC32.checksum($0) }
        let record = Self.le64(Int(truncatingIfNeeded: mark)) + Self.le32(bytes.count) + Self.le32(Int(crc)) + bytes
        let at = state.withLock { state in
            defer { state.end += record.count }
            return state.end
        }
        try Self.write(descriptor, record, at: at, path: path)
        _ = fsync(descriptor)
    }

    /// The plan of this version: the one recorded, when it is of the same object and index and its
    /// units cover `ranges`; else one made of `ranges` and recorded.
    package func plan(for ranges: [Range<Int>], index: String, maximumGap: Int) throws(TileArchiveError) -> SyncPlan {
        if let data = state.withLock({ $0.plan }), let recorded = try? SyncPlan.decode(data, name: path), recorded.index == index,
            recorded.objectLength == count, recorded.etag == etag, ranges.allSatisfy({ Self.covers(recorded, $0) })
        {
            return recorded
        }
        let plan = SyncPlan(
            objectLength: count, etag: etag, index: index, ranges: ranges,
            maximumUnitBytes: min(SyncPlan.maximumUnitBytes, remote.options.maximumRequestBytes), maximumGap: maximumGap)
        let bytes = [UInt8](plan.encoded())
        try appendSpecial(Self.planMark, bytes)
        state.withLock { $0.plan = Data(bytes) }
        return plan
    }

    /// Whether the units of `plan` hold every byte of `range`.
    static func covers(_ plan: SyncPlan, _ range: Range<Int>) -> Bool {
        var at = range.lowerBound
        while at < range.upperBound {
            guard let unit = plan.unit(containing: at) else { return false }
            at = unit.range.upperBound
        }
        return true
    }

    /// Records that the staged bytes of `range` are wrong: they are dropped (now and when the file
    /// is read again), so that the range is fetched again.
    package func discard(_ range: Range<Int>) throws(TileArchiveError) {
        try appendSpecial(Self.discardMark, Self.le64(range.lowerBound) + Self.le64(range.upperBound))
        state.withLock { $0.discard(range) }
    }

    /// Whether every byte of `range` is staged.
    package func holds(_ range: Range<Int>) -> Bool { missing([range], gap: 0).isEmpty }

    /// Flushes the staging file to disk.
    func flush() { _ = fsync(descriptor) }
}

/// The staged source the tile pass reads (Specs/updates.md §8.1): the archive announces the ranges
/// of the tiles it is about to read; they are joined into a ``SyncPlan`` (or the journal's plan of
/// this version is taken up again), and the units not staged yet are transferred, by tilepack's
/// HTTP transport or the app's ``SyncTransport``, then read from the staging file.
final class UnitSource: ByteSource, @unchecked Sendable {
    let staging: StagedByteSource
    let identity: String
    let transport: (any SyncTransport)?
    let request: SyncRequest?
    /// Told the plan before any unit is transferred (what throws stops there).
    let planned: ((SyncPlan) throws -> Void)?
    private(set) var plan: SyncPlan?
    /// The last range read, to name the unit a wrong tile came in.
    private(set) var lastRead: Range<Int>?
    private(set) var notes: [String] = []

    init(
        staging: StagedByteSource, identity: String, transport: (any SyncTransport)?, request: SyncRequest?,
        planned: ((SyncPlan) throws -> Void)?
    ) {
        self.staging = staging
        self.identity = identity
        self.transport = transport
        self.request = request
        self.planned = planned
    }

    var name: String { staging.name }
    var count: Int { staging.count }
    var single: Bool { staging.remote.answersMultipleRanges == false }

    func withBytes<R>(offset: Int, length: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        lastRead = offset..<(offset + length)
        return try staging.withBytes(offset: offset, length: length, body)
    }

    func willRead(_ ranges: [Range<Int>]) throws {
        // Joined across a gap only where it costs fewer bytes than the request or part it saves.
        let gap = single ? ArchiveSync.singleRangeGap : ArchiveSync.multipartGap
        let plan = try staging.plan(for: ranges, index: identity, maximumGap: gap)
        self.plan = plan
        try planned?(plan)
        try transfer(plan)
    }

    /// The units of the plan that hold bytes of `range`.
    func units(overlapping range: Range<Int>?) -> [TransferUnit] {
        guard let range, let plan else { return [] }
        return plan.units.filter { $0.range.overlaps(range) }
    }

    func transfer(_ plan: SyncPlan) throws {
        let pending = plan.units.filter { !staging.holds($0.range) }
        guard !pending.isEmpty else { return }
        let total = pending.reduce(0) { $0 + $1.length }
        guard let transport else {
            try staging.stage(pending.map(\.range), gap: 0, maximumRangesPerRequest: single ? 1 : 256) { [request] total, staged in
                try request?.advance(0.9 * Double(staged) / Double(max(total, 1)))
            }
            return
        }
        var asked = pending, staged = 0
        for attempt in 0..<2 {
            try transport.transfer(asked, of: plan) { unit, data in
                guard unit.id >= 0, unit.id < plan.units.count, plan.units[unit.id] == unit else {
                    throw OperationError(
                        path: staging.path,
                        fault: .badInput("a unit that is not one of the sync plan's was delivered (\(unit.rangeHeader))"))
                }
                guard data.count == unit.length else {
                    notes.append("unit \(unit.id) (\(unit.rangeHeader)) arrived with \(data.count) bytes, not \(unit.length): not kept")
                    return
                }
                guard !staging.holds(unit.range) else { return }  // delivered twice
                try staging.appendMissing(unit.range, data)
                staging.flush()
                staged += unit.length
                try request?.advance(0.9 * Double(staged) / Double(max(total, 1)))
            }
            asked = pending.filter { !staging.holds($0.range) }
            if asked.isEmpty { return }
            if attempt == 0 { notes.append("\(Self.describe(asked)) not delivered: asked again") }
        }
        throw OperationError(
            path: staging.name,
            fault: .badInput(
                "\(Self.describe(asked)) not delivered; what arrived is kept in \(staging.path), and the next sync asks only for the rest"))
    }

    /// "unit 3 (bytes=a-b) was" or "units 3 (bytes=a-b), 7 (...) were", at most 8 named.
    static func describe(_ units: [TransferUnit]) -> String {
        let named = units.prefix(8).map { "\($0.id) (\($0.rangeHeader))" }.joined(separator: ", ")
        let more = units.count > 8 ? " and \(units.count - 8) more" : ""
        return units.count == 1 ? "unit \(named) was" : "units \(named)\(more) were"
    }
}

/// A tile of a delivered unit whose bytes are not what the index says: the unit is fetched again once.
struct WrongUnits: Error {
    var units: [TransferUnit]
    var tile: TileCoordinate
}

extension ArchiveSync {
    /// Reads the tiles of `wanted` (each tile's hash) from the remote through a ``UnitSource``, each
    /// checked against its hash as it is read: a wrong tile's unit is discarded from the journal and
    /// fetched again once, then a wrong tile is an error naming it. Returns the fetched tiles by hash.
    static func fetchWanted(
        archive: any TileArchive, wanted: [TileCoordinate: UInt64], identity: String, staging: StagedByteSource, source: String,
        delivery: SyncDelivery, request: SyncRequest?, report: inout SyncReport
    ) throws -> [UInt64: TileCoordinate] {
        let units = UnitSource(
            staging: staging, identity: identity, transport: delivery.transport, request: request, planned: delivery.planned)
        let gap = staging.remote.answersMultipleRanges == false ? singleRangeGap : multipartGap
        var refetched = Set<Int>()
        while true {
            var fetched: [UInt64: TileCoordinate] = [:]
            var fetchedBytes = 0
            func check(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer) throws {
                let h = TileHashIndex.hash(bytes)
                guard h == wanted[tile] else {
                    let wrong = units.units(overlapping: units.lastRead)
                    if !wrong.isEmpty, refetched.isDisjoint(with: wrong.map(\.id)) { throw WrongUnits(units: wrong, tile: tile) }
                    staging.remove()
                    throw OperationError(
                        path: source,
                        fault: .badInput(
                            "tile \(tile)'s bytes (hash \(String(h, radix: 16))) are not what the index says (\(String(wanted[tile] ?? 0, radix: 16))): the server sent other bytes; nothing was changed"
                        ))
                }
                fetchedBytes += bytes.count
                fetched[h] = tile
            }
            do {
                if archive is SparseBundleArchive {
                    // The payload numbers and records of the tiles to fetch, then their payloads.
                    let entries = StagingPlanner(staging: staging, gap: gap, request: nil)
                    try SparseBundleArchive(source: units, entries: entries).forEachTile(where: { wanted[$0] != nil }, check)
                } else if let pmtiles = try openTileArchive(source: units) as? PMTilesArchive {
                    try pmtiles.forEachTile(where: { wanted[$0] != nil }, check)
                } else {
                    try archive.forEachTile { tile, bytes in if wanted[tile] != nil { try check(tile, bytes) } }
                }
            } catch let error as TileArchiveError {
                // A payload whose CRC-32 is not the one its record declares (a bundle checks it as
                // it reads): the unit it came in is wrong, as a tile of another hash is.
                guard case .checksumMismatch = error.fault else { throw error }
                let wrong = units.units(overlapping: units.lastRead)
                guard !wrong.isEmpty, refetched.isDisjoint(with: wrong.map(\.id)) else { throw error }
                try refetch(wrong, because: "of \(error)", staging: staging, refetched: &refetched, report: &report)
                continue
            } catch let wrong as WrongUnits {
                try refetch(
                    wrong.units, because: "that are not what the index says of tile \(wrong.tile)", staging: staging, refetched: &refetched,
                    report: &report)
                continue
            }
            report.notes += units.notes
            report.fetchedTileBytes = fetchedBytes
            if let plan = units.plan {
                report.planUnits = plan.units.count
                report.planBytes = plan.fetchBytes
                report.planTileBytes = plan.changedBytes
            }
            return fetched
        }
    }

    /// Drops the staged bytes of `units` (a discard record in the journal), so that the next pass
    /// fetches them again, said in the report.
    static func refetch(
        _ units: [TransferUnit], because reason: String, staging: StagedByteSource, refetched: inout Set<Int>, report: inout SyncReport
    ) throws {
        for unit in units {
            try staging.discard(unit.range)
            refetched.insert(unit.id)
        }
        report.notes.append("\(UnitSource.describe(units)) delivered with bytes \(reason): fetched again")
    }

    /// The sync plan of bringing `local` to the version at `url`, made (and recorded in the journal,
    /// `LOCAL.tpsync`) without fetching a tile: the archive's header, directories and tile index
    /// are read. An app hands its units to its own downloader, saves each to a file
    /// (``DeliveredUnits``), and applies them with ``run(local:url:options:s3:key:transport:)``.
    public static func plan(local: String, url: String, options: HTTPByteSource.Options = .init(), s3: S3Client? = nil)
        throws(OperationError) -> SyncPlan
    {
        let made = Locked<SyncPlan?>(nil)
        let delivery = SyncDelivery(transport: nil) { plan in
            made.withLock { $0 = plan }
            throw CancellationError()
        }
        do { _ = try run(local: local, url: url, options: options, s3: s3, key: nil, delivery: delivery, request: nil) } catch {
            guard let plan = made.withLock({ $0 }) else { throw error }
            return plan
        }
        // Nothing to fetch (LOCAL already holds every tile): an empty plan, and LOCAL is the version.
        return SyncPlan(objectLength: 0, etag: nil, index: "", ranges: [])
    }
}

/// Who transfers the units of a sync, and who is told its plan first.
struct SyncDelivery {
    var transport: (any SyncTransport)?
    var planned: ((SyncPlan) throws -> Void)?
}
