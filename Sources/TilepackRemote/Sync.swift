import Foundation
import TilepackCore
import TilepackStorage
import TilepackUpdate

/// What `sync` did.
public struct SyncReport: Sendable, Codable {
    public var local: String
    public var url: String
    /// `index` (only the tiles whose hash differs were fetched) or `full` (no index: the whole
    /// archive was downloaded).
    public var mode = "index"
    /// Why the archive was downloaded whole, when it was.
    public var fullReason: String?
    /// The identity of the result, checked against the index's (`nil` for a full download).
    public var identity: String?
    public var tiles = 0
    /// Remote tiles whose bytes the local copy had (by hash), and tiles fetched.
    public var tilesReused = 0
    public var tilesFetched = 0
    /// The bytes of the fetched tiles (as the archive stores them).
    public var fetchedTileBytes = 0
    /// The index's length.
    public var indexBytes = 0
    /// Body bytes received: ranges (tiles, gaps merged across, directories) and the index.
    public var bytesReceived = 0
    /// Bytes an interrupted sync had staged that this one used.
    public var resumedBytes = 0
    /// The sync plan's transfer units (Specs/updates.md §8.1) and the bytes they span, gaps
    /// included (0 for a full download).
    public var planUnits = 0
    public var planBytes = 0
    /// Of ``planBytes``, the tiles' own stored bytes (the rest are the gaps the units span).
    public var planTileBytes = 0
    /// HTTP requests made (the first, for the header, and the index's included; retries counted).
    public var requests = 0
    /// Whether the server answered several ranges in one request (`nil`: never asked).
    public var multipleRanges: Bool?
    public var notes: [String] = []
    public var seconds = 0.0
    /// With a key: the signed root the result was checked against (now `LOCAL.tpsig`).
    public var signed: Signed?

    /// The signed root of a verified sync.
    public struct Signed: Sendable, Codable {
        public var origin: String
        public var release: UInt64
        public var time: String
        /// The key that signed it, `name+keyid`.
        public var key: String
        init(root: SignedRoot, key: VerifierKey) {
            origin = root.origin
            release = root.release
            time = root.time
            self.key = key.description
        }
    }
}

/// Brings a local archive to the version published at an `http(s)://` URL or in an `s3://` object
/// (Specs/updates.md §8):
/// with the tile hash index published beside it (`URL.tpindex`), only the tiles whose bytes the
/// local copy lacks are fetched, in coalesced (multi-)range requests pinned by the object's ETag
/// and staged beside LOCAL (`LOCAL.tpsync`) so that an interrupted sync resumes; the result is
/// written beside LOCAL, its identity checked against the index's, and renamed over LOCAL. Without
/// an index the archive is downloaded whole (said so in the report). The command's `tilepack sync`
/// runs it; an app runs it in the background with ``SyncRequest``.
public enum ArchiveSync {
    /// Merging two ranges of a multipart request across a gap of this many bytes costs less than
    /// the part's own boundary and headers (about 100 bytes) twice.
    public static let multipartGap = 192
    /// One request's headers (about 300 bytes both ways) against a gap's bytes.
    public static let singleRangeGap = 1024

    /// - Parameters:
    ///   - s3: for an `s3://BUCKET/KEY` URL, the client whose configuration and credentials
    ///   sign the requests (`nil`: the environment's, `S3Client.environment`).
    ///   - key: check the publisher's signature (`URL.tpsig`, Specs/signing.md §7): its key, its
    ///   release against the local archive's own `LOCAL.tpsig` and the lowest accepted, every tile
    ///   of the result before it replaces LOCAL; `LOCAL.tpsig` is then replaced with it.
    ///   - transport: who fetches the sync plan's units (`nil`: tilepack's own HTTP transport); an
    ///   app's downloader, or the units it saved (``DeliveredUnits``), Specs/updates.md §8.1.
    public static func run(
        local: String, url text: String, options: HTTPByteSource.Options = .init(), s3: S3Client? = nil, key: SyncKey? = nil,
        transport: (any SyncTransport)? = nil
    ) throws(OperationError) -> SyncReport {
        try run(local: local, url: text, options: options, s3: s3, key: key, delivery: SyncDelivery(transport: transport), request: nil)
    }

    static func run(
        local: String, url text: String, options: HTTPByteSource.Options, s3: S3Client? = nil, key: SyncKey? = nil,
        delivery: SyncDelivery = SyncDelivery(), request: SyncRequest?
    ) throws(OperationError) -> SyncReport {
        let start = DispatchTime.now().uptimeNanoseconds
        var report = SyncReport(local: local, url: text)
        let format = try SyncWriter.format(of: local)
        let (remote, fetchIndex, indexName) = try openRemote(text, options: options, s3: s3)
        // Checked before anything is staged: a replay or a foreign root costs no tile.
        let signature = try key.map { trust throws(OperationError) in
            try SyncSignature(url: text, local: local, trust: trust, options: options, s3: s3)
        }
        if let signature { report.signed = SyncReport.Signed(root: signature.root, key: signature.key) }
        let staging: StagedByteSource
        do { staging = try StagedByteSource(remote: remote, path: local + ".tpsync") } catch {
            throw OperationError(path: local, fault: .archive(error))
        }
        if let discarded = staging.discarded { report.notes.append(discarded) }
        // A bundle is opened without its whole index (36 bytes a tile): its keys now, the entries
        // of the tiles to fetch when they are known.
        let archive: any TileArchive
        do {
            archive =
                SparseBundleArchive.isBundle(staging) ? try SparseBundleArchive(source: staging) : try openTileArchive(source: staging)
        } catch { throw OperationError(path: text, fault: .archive(error)) }
        do {
            try SyncWriter.check(archive.content, source: text, into: format, local: local)
            try signature?.checkMetadata(of: archive, source: text)
        } catch {
            staging.remove()
            throw error
        }
        do {
            let tiles = try tileCoordinates(of: archive, staging: staging)
            // The index can be no longer than 8 bytes a tile.
            let limit = TileHashIndex.headerLength + 8 * tiles.count + 4
            switch try fetchIndex(limit) {
            case .absent(let status):
                try bind(staging, to: nil, report: &report)
                report.mode = "full"
                report.fullReason = "\(text) has no tile index (\(indexName): HTTP \(status)): synced by a full download"
                try fullDownload(
                    archive: archive, staging: staging, local: local, format: format, source: text, signature: signature, request: request,
                    report: &report)
            case .index(let bytes, let multipleRanges):
                if let multipleRanges { remote.assumeMultipleRanges(multipleRanges) }
                report.indexBytes = bytes.count
                report.bytesReceived += bytes.count
                let index = try TileHashIndex.decode(bytes, name: indexName)
                try bind(staging, to: index.identity, report: &report)
                try indexedSync(
                    archive: archive, tiles: tiles, index: index, indexName: indexName, staging: staging, local: local, format: format,
                    source: text, signature: signature, delivery: delivery, request: request, report: &report)
            }
        } catch let error as OperationError {
            throw error
        } catch {
            throw OperationError.wrapping(error, path: text)
        }
        report.bytesReceived += remote.receivedBytes
        report.requests = remote.requestCount + 1  // and the index's
        report.multipleRanges = remote.answersMultipleRanges
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    /// The archive at `text` (an `http(s)://` URL, or an `s3://` object read with signed requests),
    /// how to fetch its tile index beside it (at most `limit` bytes), and the index's name.
    static func openRemote(_ text: String, options: HTTPByteSource.Options, s3: S3Client?) throws(OperationError) -> (
        HTTPByteSource, (_ limit: Int) throws(TileArchiveError) -> RemoteTileIndex.Answer, String
    ) {
        let indexName = TileHashIndex.sidecarName(of: text)
        if S3Location.isS3(text) {
            guard let location = S3Location(text), !location.key.isEmpty else {
                throw OperationError(path: text, fault: .badInput("not an s3://BUCKET/KEY URL of a bundle or PMTiles archive"))
            }
            let client = s3 ?? .environment
            let remote: HTTPByteSource
            do { remote = try HTTPByteSource(s3: location, client: client, options: options) } catch {
                throw OperationError(path: text, fault: .archive(error))
            }
            let indexLocation = S3Location(bucket: location.bucket, key: TileHashIndex.sidecarName(of: location.key))
            return (
                remote,
                { limit throws(TileArchiveError) in
                    try RemoteTileIndex.fetch(s3: indexLocation, client: client, limit: limit, options: options)
                },
                indexName
            )
        }
        guard text.lowercased().hasPrefix("http://") || text.lowercased().hasPrefix("https://"), let url = URL(string: text),
            let indexURL = URL(string: indexName)
        else {
            throw OperationError(
                path: text, fault: .badInput("sync takes an http://, https:// or s3:// URL of a bundle or PMTiles archive"))
        }
        let remote: HTTPByteSource
        do { remote = try HTTPByteSource(url: url, options: options) } catch { throw OperationError(path: text, fault: .archive(error)) }
        return (
            remote, { limit throws(TileArchiveError) in try RemoteTileIndex.fetch(url: indexURL, limit: limit, options: options) },
            indexName
        )
    }

    /// The remote archive's tiles, ascending: a bundle's from its keys, a PMTiles' from its
    /// directories (its metadata and leaf directories, which lie together, staged in one request).
    static func tileCoordinates(of archive: any TileArchive, staging: StagedByteSource) throws -> [TileCoordinate] {
        if let pmtiles = archive as? PMTilesArchive {
            let header = pmtiles.header
            let sections = [
                Int(header.metadataOffset)..<Int(header.metadataOffset + header.metadataLength),
                Int(header.leafOffset)..<Int(header.leafOffset + header.leafLength),
            ]
            try staging.stage(sections.filter { !$0.isEmpty }, gap: 64 << 10, maximumRangesPerRequest: 1)
        }
        if let bundle = archive as? SparseBundleArchive { return try bundle.tileCoordinates() }
        var tiles: [TileCoordinate] = []
        try forEachTileCoordinate(of: archive) { tiles.append($0) }
        return tiles.sorted()
    }

    /// Binds the staged bytes to the version's index identity (`nil`: none, a full download), so
    /// that a resume is tied to what was fetched, never to the URL (``StagedByteSource/bind(index:)``).
    static func bind(_ staging: StagedByteSource, to identity: ContentIdentity?, report: inout SyncReport) throws {
        if let note = try staging.bind(index: identity) { report.notes.append(note) }
        report.resumedBytes = staging.resumedBytes
    }

    /// Only the tiles whose hash the local copy lacks.
    static func indexedSync(
        archive: any TileArchive, tiles: [TileCoordinate], index: TileHashIndex, indexName: String, staging: StagedByteSource,
        local: String, format: TileArchiveFormat, source: String, signature: SyncSignature?, delivery: SyncDelivery, request: SyncRequest?,
        report: inout SyncReport
    ) throws {
        let metadata = try checkBinding(index, of: archive, tiles: tiles, indexName: indexName, staging: staging, source: source)
        report.tiles = tiles.count
        // What the local copy holds, by hash.
        let localArchive: (any TileArchive)? = FileSystem.stat(local) != nil ? try open(local) : nil
        var held: [UInt64: TileCoordinate] = [:]
        if let localArchive {
            try localArchive.forEachTile { tile, bytes in
                let h = TileHashIndex.hash(bytes)
                if held[h] == nil { held[h] = tile }
            }
        }
        // One remote tile for each hash the local copy lacks.
        var wanted: [TileCoordinate: UInt64] = [:]
        var seen = Set<UInt64>()
        for (tile, h) in zip(tiles, index.hashes) {
            if held[h] == nil {
                report.tilesFetched += 1
                if seen.insert(h).inserted { wanted[tile] = h }
            } else {
                report.tilesReused += 1
            }
        }
        // Fetch them by the sync plan's units, staged, each tile checked against its hash as it is read.
        let fetched = try fetchWanted(
            archive: archive, wanted: wanted, identity: index.identity.description, staging: staging, source: source, delivery: delivery,
            request: request, report: &report)
        // The new version: the local tiles that stay, the fetched ones, the remote metadata.
        let synced = SyncedArchive(
            remote: archive, local: localArchive, tiles: tiles, hashes: index.hashes, held: held, fetched: fetched, metadata: metadata,
            request: request)
        let identity = try writeAndSwap(
            synced, local: local, format: format, source: source, expected: index.identity, staging: staging, signature: signature,
            request: request, report: &report)
        report.identity = identity?.description
    }

    /// Checks that `index` is the index of the remote archive (Specs/updates.md §7.2: its length,
    /// tile count and metadata hash) before any tile is fetched; the archive's metadata.
    static func checkBinding(
        _ index: TileHashIndex, of archive: any TileArchive, tiles: [TileCoordinate], indexName: String, staging: StagedByteSource,
        source: String
    ) throws -> TileMetadata {
        func mismatch(_ what: String) -> OperationError {
            OperationError(
                path: indexName,
                fault: .badInput(
                    "the index is not the index of \(source): \(what) (they are of different versions: the publisher may be replacing them; sync again later)"
                ))
        }
        guard index.archiveLength == UInt64(staging.count) else {
            throw mismatch("it was made for an archive of \(index.archiveLength) bytes, the archive has \(staging.count)")
        }
        guard index.hashes.count == tiles.count else {
            throw mismatch("it lists \(index.hashes.count) tiles, the archive has \(tiles.count)")
        }
        let metadata = try archive.metadata()
        guard ContentIdentity.metadataHash(metadata) == index.identity.metadata else {
            throw mismatch("its identity's metadata hash is not the archive's metadata's")
        }
        return metadata
    }

    /// The whole archive, in ranges of at most 8 MiB, staged, then written as LOCAL's format.
    static func fullDownload(
        archive: any TileArchive, staging: StagedByteSource, local: String, format: TileArchiveFormat, source: String,
        signature: SyncSignature?, request: SyncRequest?, report: inout SyncReport
    ) throws {
        let step = staging.remote.options.maximumRequestBytes
        let chunks = stride(from: 0, to: staging.count, by: step).map { $0..<min($0 + step, staging.count) }
        try staging.stage(chunks, gap: 0, maximumRangesPerRequest: 1) { total, staged in
            try request?.advance(0.9 * Double(staged) / Double(max(total, 1)))
        }
        // Everything is staged: opened whole (a bundle's index checked by its CRC).
        let whole = try openTileArchive(source: staging)
        report.tiles = try whole.tileCount()
        report.tilesFetched = report.tiles
        report.fetchedTileBytes = staging.count
        _ = try writeAndSwap(
            whole, local: local, format: format, source: source, expected: nil, staging: staging, signature: signature, request: request,
            report: &report)
    }

    /// Writes `archive` beside LOCAL (in LOCAL's format, by its extension), checks the written
    /// file's identity against `expected`, and has the sink put it in place unless the request was
    /// cancelled meanwhile; the staging file is removed.
    static func writeAndSwap(
        _ archive: any TileArchive, local: String, format: TileArchiveFormat, source: String, expected: ContentIdentity?,
        staging: StagedByteSource, signature: SyncSignature?, request: SyncRequest?, report: inout SyncReport
    ) throws -> ContentIdentity? {
        let sink: TileSink
        do {
            let written = try SyncWriter.write(archive, source: source, to: local, format: format)
            sink = written.sink
            report.notes += written.notes
        } catch {
            throw OperationError.wrapping(error, path: local)
        }
        let identity = try checkStaged(
            sink.stagedPath, local: local, source: source, expected: expected, staging: staging, signature: signature)
        if let expected, identity.metadata != expected.metadata {
            // The publisher's metadata was checked against the index before it was written; the
            // writer of LOCAL's format fills keys of its own (bounds, zooms, a name).
            let ext = URL(fileURLWithPath: local).pathExtension
            report.notes.append(
                "\(local)'s metadata is the publisher's with the keys \(ext.isEmpty ? "its" : ext) writer fills (its identity \(identity), the publisher's \(expected))"
            )
        }
        // The last moment a cancel leaves LOCAL as it was (the staging file kept, to resume from).
        let signatureFile = try signature?.stage(beside: local)
        try request?.advance(0)
        do {
            try sink.commit()
            // After the archive: a LOCAL.tpsig never names tiles LOCAL does not hold yet.
            try signatureFile?.commit()
        } catch { throw OperationError.wrapping(error, path: local) }
        staging.remove()
        return expected == nil ? nil : identity
    }

    /// The one check of the staged result before it replaces LOCAL: every check of what a sync
    /// made goes here (the written file's tiles against the index's identity and, with a key,
    /// against the signed tree, Specs/signing.md §7). Throws, with the staging file removed, when
    /// the result must not replace LOCAL; returns the written file's identity.
    static func checkStaged(
        _ stagedPath: String, local: String, source: String, expected: ContentIdentity?, staging: StagedByteSource,
        signature: SyncSignature? = nil
    ) throws -> ContentIdentity {
        let identity: ContentIdentity
        if let signature {
            do { identity = try signature.checkTiles(of: open(stagedPath), local: local, source: source) } catch {
                staging.remove()
                throw error
            }
        } else {
            identity = try ContentIdentity.compute(open(stagedPath))
        }
        if let expected, identity.tileCount != expected.tileCount || identity.tiles != expected.tiles {
            staging.remove()
            throw OperationError(
                path: local,
                fault: .badInput(
                    "the synced archive's tiles are \(identity.tilesDescription), the index of \(source) says \(expected.tilesDescription): \(local) was left as it was"
                ))
        }
        return identity
    }

    /// A local archive, read with `pread` (another process may cut the file).
    static func open(_ path: String) throws(OperationError) -> any TileArchive {
        do { return try openTileArchive(path: path, bundleAccess: .positionalReads) } catch {
            throw OperationError(path: path, fault: .archive(error))
        }
    }
}

/// The staged source read by the fetching pass: the archive announces the ranges of the tiles it
/// is about to read (``willRead(_:)``), which are staged (fetched where missing) before it reads.
final class StagingPlanner: ByteSource, @unchecked Sendable {
    let staging: StagedByteSource
    let gap: Int
    let request: SyncRequest?
    init(staging: StagedByteSource, gap: Int, request: SyncRequest?) {
        self.staging = staging
        self.gap = gap
        self.request = request
    }
    var name: String { staging.name }
    var count: Int { staging.count }
    func withBytes<R>(offset: Int, length: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try staging.withBytes(offset: offset, length: length, body)
    }
    func willRead(_ ranges: [Range<Int>]) throws {
        try staging.stage(ranges, gap: gap) { [request] total, staged in
            try request?.advance(0.9 * Double(staged) / Double(max(total, 1)))
        }
    }
}

/// The remote version as it will be written: every remote tile, in (zoom, x, y) order, its bytes
/// from the local copy (by hash) or from the staged remote object; the remote metadata.
final class SyncedArchive: TileArchive, @unchecked Sendable {
    let remote: any TileArchive
    let local: (any TileArchive)?
    let tiles: [TileCoordinate]
    let hashes: [UInt64]
    let held: [UInt64: TileCoordinate]
    let fetched: [UInt64: TileCoordinate]
    let storedMetadata: TileMetadata
    let request: SyncRequest?
    private let positions: [TileCoordinate: Int]

    init(
        remote: any TileArchive, local: (any TileArchive)?, tiles: [TileCoordinate], hashes: [UInt64], held: [UInt64: TileCoordinate],
        fetched: [UInt64: TileCoordinate], metadata: TileMetadata, request: SyncRequest?
    ) {
        self.request = request
        self.remote = remote
        self.local = local
        self.tiles = tiles
        self.hashes = hashes
        self.held = held
        self.fetched = fetched
        self.storedMetadata = metadata
        var positions: [TileCoordinate: Int] = [:]
        for (i, tile) in tiles.enumerated() { positions[tile] = i }
        self.positions = positions
    }

    var path: String { remote.path }
    var content: TileContent? { remote.content }
    func metadata() throws -> TileMetadata { storedMetadata }
    func containsTile(at tile: TileCoordinate) throws -> Bool { positions[tile] != nil }

    func withTileBytes<R>(at tile: TileCoordinate, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        guard let i = positions[tile] else { return nil }
        let h = hashes[i]
        if let local, let there = held[h] { return try local.withTileBytes(at: there, body) }
        guard let there = fetched[h] else {
            throw TileArchiveError(path: remote.path, fault: .corrupt("tile \(tile) was neither held locally nor fetched"))
        }
        return try remote.withTileBytes(at: there, body)
    }

    func zoomLevels() throws -> [ZoomLevelSummary] {
        var counts: [Int: Int] = [:]
        for tile in tiles { counts[tile.zoom, default: 0] += 1 }
        return counts.keys.sorted().map { ZoomLevelSummary(zoom: $0, tileCount: counts[$0]!) }
    }

    func forEachTile(_ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws {
        for (i, tile) in tiles.enumerated() {
            _ = try withTileBytes(at: tile) { try body(tile, $0) }
            if i % 256 == 255 { try request?.advance(0.9 + 0.1 * Double(i + 1) / Double(tiles.count)) }
        }
    }
}

/// A sync running in the background, for an app (Specs/updates.md §8): an id, a progress in
/// [0, 1] that never decreases (0.9 when the tiles are fetched, 1 when LOCAL is replaced), a
/// status, cancel, and a typed error (``BackgroundRequest``). Cancelled, it leaves LOCAL as it was
/// and its staging file in place, so the next sync of the same version resumes from it.
///
/// The remote is an `http(s)://` URL or an `s3://BUCKET/KEY` object read with the app's own
/// ``S3Client`` (its endpoint, region and ``S3CredentialsProvider``), as
/// ``RemoteArchive/open(s3:client:options:)`` reads one.
public final class SyncRequest: BackgroundRequest<SyncReport>, @unchecked Sendable {
    public let local: String
    public let url: String

    init(local: String, url: String, onChange: (@Sendable (SyncRequest) -> Void)?) {
        self.local = local
        self.url = url
        super.init(subject: local, verb: "sync", onChange: SyncRequest.relay(onChange))
    }

    /// Starts syncing `local` (its format by its extension; created when missing) from `url` on a
    /// thread of its own; `onChange` is told of every change of progress or status (on that thread).
    /// - Parameter s3: for an `s3://BUCKET/KEY` URL, the client whose configuration and credentials
    ///   sign the requests (`nil`: the environment's, ``S3Client/environment``).
    /// - Parameter key: check the publisher's signature, as ``ArchiveSync/run(local:url:options:s3:key:)`` does.
    public static func start(
        local: String, url: String, options: HTTPByteSource.Options = .init(), s3: S3Client? = nil, key: SyncKey? = nil,
        onChange: (@Sendable (SyncRequest) -> Void)? = nil
    ) -> SyncRequest {
        let request = SyncRequest(local: local, url: url, onChange: onChange)
        request.run { () throws(OperationError) in
            try ArchiveSync.run(local: local, url: url, options: options, s3: s3, key: key, request: request)
        }
        return request
    }
}
