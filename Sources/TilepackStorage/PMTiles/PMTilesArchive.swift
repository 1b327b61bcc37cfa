import Foundation
@_spi(TilepackInternal) internal import TilepackCompression
import TilepackCore

/// A PMTiles v3 archive opened for reading (see `Specs/pmtiles.md`), from a local file or any
/// ``ByteSource`` (a remote object through `TilepackRemote`).
///
/// Opening reads the first 16 KiB (the header and, as every writer places it, the root directory)
/// and checks the header and the root; a lookup follows at most
/// ``PMTilesFormat/maximumDirectoryDepth`` directories, each checked when it is first read and
/// then kept in a bounded cache, and reads only the tile's bytes. The metadata is read on first use.
///
/// Tiles are returned as stored: a tile compressed as a whole (gzip MVT) stays compressed, as an
/// MBTiles archive holds it. Safe to use from many threads at once.
public struct PMTilesArchive: TileArchive {
    public var path: String { source.name }
    public let content: TileContent?
    public let header: PMTilesHeader
    public let source: any ByteSource

    let root: PMTilesDirectory
    let leaves: LeafCache
    /// `source` when it is a local file: read without a call through the protocol.
    private let file: FileByteSource?
    private let cachedMetadata = Locked<TileMetadata?>(nil)
    /// ``zoomLevels()``, a walk of every directory, made once (the archive does not change).
    private let cachedZoomLevels = Locked<[ZoomLevelSummary]?>(nil)

    /// Opens the PMTiles file at `path`, read with `pread` (a file cut by another process while it
    /// is read gives a `truncated` error, never a SIGBUS).
    public init(path: String) throws(TileArchiveError) {
        try self.init(source: FileByteSource(path: path))
    }

    /// Opens an archive from any byte source.
    public init(source: any ByteSource) throws(TileArchiveError) {
        try self.init(source: source, keepingLeafEntries: LeafCache.maximumEntries)
    }

    /// Opens an archive that keeps leaf directories of at most `keepingLeafEntries` entries in all.
    init(source: any ByteSource, keepingLeafEntries: Int) throws(TileArchiveError) {
        let name = source.name
        func fail(_ fault: TileArchiveError.Fault) -> TileArchiveError { TileArchiveError(path: name, fault: fault) }
        let size = source.count
        let initial = min(size, PMTilesFormat.initialFetchLength)
        let headerBytes: [UInt8]
        do {
            headerBytes = try source.bytes(offset: 0, length: min(initial, PMTilesFormat.headerLength))
        } catch {
            throw Self.archiveError(error, name: name)
        }
        try Self.checkMagic(headerBytes, size: size, name: name)
        let decoded = headerBytes.withUnsafeBytes { raw in
            Result { () throws(PMTilesFormat.DirectoryFault) in try PMTilesHeader(decoding: raw) }
        }
        let header: PMTilesHeader
        switch decoded {
        case .success(let value): header = value
        case .failure(let fault): throw fail(.corrupt("header: \(fault.reason)"))
        }
        switch header.internalCompression {
        case .none, .gzip: break
        case .brotli, .zstd:
            throw fail(
                .unsupportedVersion(
                    "PMTiles directories compressed with \(header.internalCompression): tilepack reads directories and metadata compressed with gzip or not at all (convert the archive with `pmtiles convert` or go-pmtiles)"
                ))
        case .unknown:
            throw fail(.corrupt("the header's internal compression is 0 (unknown): directories cannot be read"))
        }
        // Every section inside the file.
        let sections: [(String, UInt64, UInt64)] = [
            ("root directory", header.rootOffset, header.rootLength),
            ("metadata", header.metadataOffset, header.metadataLength),
            ("leaf directories", header.leafOffset, header.leafLength),
            ("tile data", header.tileDataOffset, header.tileDataLength),
        ]
        for (what, offset, length) in sections {
            let (end, overflow) = offset.addingReportingOverflow(length)
            guard !overflow, offset >= UInt64(PMTilesFormat.headerLength) || length == 0 else {
                throw fail(.corrupt("the \(what) section (offset \(offset), \(length) bytes) overlaps the header or overflows"))
            }
            guard end <= UInt64(size) else {
                throw fail(.truncated("the \(what) section ends at byte \(end), the file has \(size)"))
            }
        }
        guard header.rootLength > 0 else { throw fail(.corrupt("the root directory is empty (0 bytes)")) }
        // Each named with its declared size and its own limit (one message for both said neither).
        guard header.rootLength <= UInt64(PMTilesFormat.maximumDirectoryLength) else {
            throw fail(
                .corrupt(
                    "the header declares a root directory of \(header.rootLength) bytes, over the limit of \(PMTilesFormat.maximumDirectoryLength) bytes (32 MiB) for a directory"
                ))
        }
        guard header.metadataLength <= UInt64(PMTilesFormat.maximumMetadataLength) else {
            throw fail(
                .corrupt(
                    "the header declares metadata of \(header.metadataLength) bytes, over the limit of \(PMTilesFormat.maximumMetadataLength) bytes (16 MiB) for metadata"
                ))
        }
        guard header.minZoom <= header.maxZoom, Int(header.maxZoom) <= 31 else {
            throw fail(.corrupt("the header's zooms \(header.minZoom)...\(header.maxZoom) are not a zoom range"))
        }
        let root = try Self.readDirectory(
            source: source, header: header, offset: Int(header.rootOffset), length: Int(header.rootLength), what: "the root directory")
        self.source = source
        self.file = source as? FileByteSource
        self.header = header
        self.root = PMTilesDirectory(root)
        self.leaves = LeafCache(maximumEntries: keepingLeafEntries)
        if let format = header.tileType.tileFormat {
            content = .encoded(format)
        } else {
            content = nil
        }
    }

    /// Checks the magic and the version; a v2 archive, another version or another file is named.
    static func checkMagic(_ head: [UInt8], size: Int, name: String) throws(TileArchiveError) {
        func fail(_ fault: TileArchiveError.Fault) -> TileArchiveError { TileArchiveError(path: name, fault: fault) }
        if head.count >= 4, head[0] == 0x50, head[1] == 0x4D, head[2] == 2, head[3] == 0 {
            throw fail(.unsupportedVersion("PMTiles version 2 (tilepack reads version 3; `pmtiles convert` upgrades a v2 archive)"))
        }
        guard head.count >= PMTilesFormat.magic.count, head.starts(with: PMTilesFormat.magic) else {
            if head.isEmpty { throw fail(.notAnArchive(detected: "an empty file")) }
            if head.count < PMTilesFormat.magic.count, PMTilesFormat.magic.starts(with: head) {
                throw fail(.truncated("the file is \(size) bytes, shorter than the \(PMTilesFormat.headerLength)-byte PMTiles header"))
            }
            throw fail(.notAnArchive(detected: TileArchiveFormat.describe(head) + ", not PMTiles"))
        }
        guard head.count > 7 else {
            throw fail(.truncated("the file is \(size) bytes, shorter than the \(PMTilesFormat.headerLength)-byte PMTiles header"))
        }
        let version = head[7]
        guard version == PMTilesFormat.version else {
            if version == 0x33 {
                throw fail(
                    .unsupportedVersion(
                        "PMTiles spec version byte 0x33 (the character '3', not the number 3: a copy of the spec's raster example from before it was fixed in November 2022); tilepack reads version 3"
                    ))
            }
            throw fail(.unsupportedVersion("PMTiles spec version \(version) (tilepack reads version 3)"))
        }
        guard size >= PMTilesFormat.headerLength, head.count >= PMTilesFormat.headerLength else {
            throw fail(.truncated("the file is \(size) bytes, shorter than the \(PMTilesFormat.headerLength)-byte PMTiles header"))
        }
    }

    /// Reads, decompresses and checks one directory.
    static func readDirectory(source: any ByteSource, header: PMTilesHeader, offset: Int, length: Int, what: String)
        throws(TileArchiveError) -> [PMTilesFormat.Entry]
    {
        let name = source.name
        let result: Result<[PMTilesFormat.Entry], PMTilesFormat.DirectoryFault>
        do {
            result = try source.withBytes(offset: offset, length: length) { raw in
                try decompress(
                    raw, compression: header.internalCompression, limit: PMTilesFormat.maximumDirectoryLength, what: what, name: name
                )
                .withUnsafeBytes { bytes in
                    PMTilesFormat.decodeDirectory(bytes, tileDataLength: header.tileDataLength, leafDataLength: header.leafLength)
                }
            }
        } catch {
            throw archiveError(error, name: name)
        }
        switch result {
        case .success(let entries): return entries
        case .failure(let fault): throw TileArchiveError(path: name, fault: .corrupt("\(what): \(fault.reason)"))
        }
    }

    static func decompress(_ raw: UnsafeRawBufferPointer, compression: PMTilesFormat.Compression, limit: Int, what: String, name: String)
        throws(TileArchiveError) -> [UInt8]
    {
        switch compression {
        case .gzip:
            switch Gzip.decompress(raw, limit: limit) {
            case .success(let bytes): return bytes
            case .failure(let failure): throw TileArchiveError(path: name, fault: .corrupt("\(what): \(failure.reason)"))
            }
        default:
            guard raw.count <= limit else {
                throw TileArchiveError(path: name, fault: .corrupt("\(what) is \(raw.count) bytes, over the limit of \(limit)"))
            }
            return Array(raw)
        }
    }

    static func archiveError(_ error: any Error, name: String) -> TileArchiveError {
        if let error = error as? TileArchiveError { return error }
        return TileArchiveError(path: name, fault: .io(errno: 0, reason: "\(error)"))
    }

    // MARK: Directories

    /// The leaf directory that entry `index` of `parent` points to: kept in `parent` once read.
    func leaf(at index: Int, in parent: PMTilesDirectory) throws(TileArchiveError) -> PMTilesDirectory {
        if let cached = parent.child(at: index) { return cached }
        let entry = parent[index]
        let leaf = PMTilesDirectory(
            try Self.readDirectory(
                source: source, header: header, offset: Int(header.leafOffset + entry.offset), length: Int(entry.length),
                what: "the leaf directory at offset \(entry.offset)"))
        leaves.keep(leaf, at: index, in: parent, root: root)
        return leaf
    }

    /// Where the tile's bytes are in the tile data section, or `nil` when it is not there.
    public func location(of tile: TileCoordinate) throws(TileArchiveError) -> (offset: UInt64, length: Int)? {
        try location(ofID: PMTilesFormat.tileID(of: tile))
    }

    func location(ofID id: UInt64) throws(TileArchiveError) -> (offset: UInt64, length: Int)? {
        // The root searched where it is (no reference to it taken: a retain and a release fewer).
        guard let rootIndex = root.lastEntry(atMost: id) else { return nil }
        let rootEntry = root[rootIndex]
        if rootEntry.runLength > 0 {
            return id - rootEntry.tileID < UInt64(rootEntry.runLength) ? (rootEntry.offset, Int(rootEntry.length)) : nil
        }
        var directory = try leaf(at: rootIndex, in: root)
        for _ in 1..<PMTilesFormat.maximumDirectoryDepth {
            guard let index = directory.lastEntry(atMost: id) else { return nil }
            let entry = directory[index]
            if entry.runLength > 0 {
                return id - entry.tileID < UInt64(entry.runLength) ? (entry.offset, Int(entry.length)) : nil
            }
            directory = try leaf(at: index, in: directory)
        }
        throw TileArchiveError(path: path, fault: .corrupt("directories nest deeper than \(PMTilesFormat.maximumDirectoryDepth) levels"))
    }

    /// Refuses a directory nested deeper than PMTiles allows (a hostile file's cycle of leaves).
    func checkDepth(_ depth: Int) throws(TileArchiveError) {
        guard depth < PMTilesFormat.maximumDirectoryDepth else {
            throw TileArchiveError(
                path: path, fault: .corrupt("directories nest deeper than \(PMTilesFormat.maximumDirectoryDepth) levels"))
        }
    }

    /// Calls `body` with every tile entry in tile-id order (runs not expanded), following the leaves.
    /// Throws when the ids of the whole tree are not strictly ascending, leaves nest too deep, a run
    /// reaches a zoom outside the header's zooms, or the runs address more tiles than the header's
    /// count (when it gives one): counts a file cannot mean.
    public func forEachEntry(_ body: (PMTilesFormat.Entry) throws -> Void) throws {
        var next: UInt64 = 0
        var addressed: UInt64 = 0
        let lowest = min(Int(header.minZoom), TileCoordinate.maximumZoom), highest = min(Int(header.maxZoom), TileCoordinate.maximumZoom)
        let zoomIDs = PMTilesFormat.firstID(ofZoom: lowest)..<PMTilesFormat.firstID(ofZoom: highest + 1)
        func walk(_ directory: PMTilesDirectory, depth: Int, end: UInt64) throws {
            try checkDepth(depth)
            for i in 0..<directory.count {
                let entry = directory[i]
                guard entry.tileID >= next, entry.tileID < end else {
                    throw TileArchiveError(
                        path: path,
                        fault: .corrupt(
                            "tile id \(entry.tileID) is out of order across directories (a leaf outside its root entry's range)"))
                }
                if entry.runLength > 0 {
                    let end = entry.tileID + UInt64(entry.runLength)
                    guard zoomIDs.contains(entry.tileID), end <= zoomIDs.upperBound else {
                        let last = PMTilesFormat.zoom(ofID: min(end - 1, PMTilesFormat.idLimit - 1))
                        throw TileArchiveError(
                            path: path,
                            fault: .corrupt(
                                "a run of \(entry.runLength) tiles from tile id \(entry.tileID) covers zooms \(PMTilesFormat.zoom(ofID: entry.tileID))...\(last), outside the header's zooms \(header.minZoom)...\(header.maxZoom)"
                            ))
                    }
                    addressed += UInt64(entry.runLength)
                    guard header.addressedTiles == 0 || addressed <= header.addressedTiles else {
                        throw TileArchiveError(
                            path: path, fault: .corrupt("the directories address more tiles than the header's \(header.addressedTiles)"))
                    }
                    try body(entry)
                    next = end
                } else {
                    let leafEnd = i + 1 < directory.count ? directory[i + 1].tileID : end
                    try walk(try leaf(at: i, in: directory), depth: depth + 1, end: leafEnd)
                }
            }
        }
        try walk(root, depth: 0, end: PMTilesFormat.idLimit)
    }

    /// Every run of tiles cut at zoom boundaries, in tile-id order: the zoom, the ids, and where their
    /// shared bytes are in the tile data section. A run is never expanded here.
    public func forEachRun(_ body: (_ zoom: Int, _ ids: Range<UInt64>, _ offset: UInt64, _ length: Int) throws -> Void) throws {
        try forEachEntry { entry in
            let ids = entry.tileID..<(entry.tileID + UInt64(entry.runLength))
            // Most runs lie in one zoom: no list of parts made for them.
            let zoom = PMTilesFormat.zoom(ofID: ids.lowerBound)
            if ids.upperBound <= PMTilesFormat.firstID(ofZoom: zoom + 1) {
                try body(zoom, ids, entry.offset, Int(entry.length))
                return
            }
            for part in PMTilesFormat.split(byZoom: ids) {
                try body(part.zoom, part.ids, entry.offset, Int(entry.length))
            }
        }
    }

    /// Every tile's coordinates in (zoom, x, y) order (as ``forEachTile(_:)`` visits them), from the
    /// directories alone.
    public func forEachTileCoordinate(_ body: (TileCoordinate) throws -> Void) throws {
        try forEachLocatedTile(stripBytes: 0) { tile, _, _, _ in try body(tile) }
    }

    /// The most tiles of one zoom sorted by (x, y) in memory (24 bytes each); a zoom holding more
    /// (a run of billions of ocean tiles) is visited in tile-id order instead, in bounded memory.
    static let maximumSortedLevel = 1 << 22

    /// Every tile with its place in the tile data section, one zoom at a time, sorted by (x, y)
    /// (in tile-id order for a zoom of more than ``maximumSortedLevel`` tiles). With `stripBytes`
    /// above 0, `body` is told where each strip of columns starts: the widest power of two of
    /// columns whose tiles hold about `stripBytes` (see ``stripWidth(of:zoom:bytes:)``).
    private func forEachLocatedTile(
        stripBytes: Int, _ body: (_ tile: TileCoordinate, _ offset: UInt64, _ length: Int, _ startsStrip: Bool) throws -> Void
    ) throws {
        var zoom = -1
        var runs: [(ids: Range<UInt64>, offset: UInt64, length: Int)] = []
        var tiles = 0
        var level: [(key: UInt64, offset: UInt64, length: Int)] = []
        let remote = !(source is FileByteSource)
        let base = Int(header.tileDataOffset)
        func flush() throws {
            guard zoom >= 0 else { return }
            defer {
                runs.removeAll(keepingCapacity: true)
                tiles = 0
            }
            guard tiles <= Self.maximumSortedLevel else {
                for run in runs {
                    for id in run.ids { try body(PMTilesFormat.tile(ofID: id)!, run.offset, run.length, false) }
                }
                return
            }
            if remote {
                // A remote source fetches the level's tiles in few requests (neighbours together).
                try source.willRead(runs.map { (base + Int($0.offset))..<(base + Int($0.offset) + $0.length) })
            }
            for run in runs {
                for id in run.ids {
                    let tile = PMTilesFormat.tile(ofID: id)!
                    level.append(((UInt64(tile.x) << UInt64(zoom)) | UInt64(tile.y), run.offset, run.length))
                }
            }
            level.sort { $0.key < $1.key }
            let mask = (UInt64(1) << UInt64(zoom)) - 1
            let width = stripBytes > 0 ? Self.stripWidth(of: level, zoom: zoom, bytes: stripBytes) : 0
            var strip = -1
            for item in level {
                let tile = TileCoordinate(uncheckedZoom: zoom, x: Int(item.key >> UInt64(zoom)), y: Int(item.key & mask))
                let starts = width > 0 && tile.x / width != strip
                if starts { strip = tile.x / width }
                try body(tile, item.offset, item.length, starts)
            }
            level.removeAll(keepingCapacity: true)
        }
        try forEachRun { runZoom, ids, offset, length in
            if runZoom != zoom {
                try flush()
                zoom = runZoom
            }
            runs.append((ids, offset, length))
            tiles += ids.count
        }
        try flush()
    }

    /// How many columns of a zoom (a power of two) hold about `bytes` of tiles, at the level's
    /// mean bytes a column (`level`: the zoom's tiles sorted by column). A file in tile-id order
    /// (Hilbert) holds an aligned square of 2^k × 2^k tiles as one stretch, so the tiles of an
    /// aligned strip of 2^k columns lie in stretches of 4^k tiles each: a pass that reads a strip at
    /// a time makes a call per stretch, where reading column by column made one per tile.
    static func stripWidth(of level: [(key: UInt64, offset: UInt64, length: Int)], zoom: Int, bytes: Int) -> Int {
        var columns = 0, total = 0, last = UInt64.max
        for item in level {
            total += item.length
            let column = item.key >> UInt64(zoom)
            if column != last {
                columns += 1
                last = column
            }
        }
        let perColumn = max(1, total / max(1, columns))
        var width = 1
        while width < 1 << zoom, width <= bytes / (2 * perColumn) { width *= 2 }
        return width
    }

    /// The tiles two rectangles of one zoom share.
    static func intersection(_ a: TileRange, _ b: TileRange) -> TileRange? {
        guard a.zoom == b.zoom, a.columns.overlaps(b.columns), a.rows.overlaps(b.rows) else { return nil }
        return TileRange(uncheckedZoom: a.zoom, columns: a.columns.clamped(to: b.columns), rows: a.rows.clamped(to: b.rows))
    }

    // MARK: TileArchive

    public func confirmUnchanged() throws { try source.confirmUnchanged() }

    public func metadata() throws -> TileMetadata {
        if let cached = cachedMetadata.withLock({ $0 }) { return cached }
        let json: [UInt8]
        if header.metadataLength == 0 {
            json = Array("{}".utf8)
        } else {
            let name = path
            let compression = header.internalCompression
            json = try source.withBytes(offset: Int(header.metadataOffset), length: Int(header.metadataLength)) { raw in
                try Self.decompress(raw, compression: compression, limit: PMTilesFormat.maximumMetadataLength, what: "metadata", name: name)
            }
        }
        var metadata: TileMetadata
        switch PMTilesMetadata.decode(json) {
        case .success(let value): metadata = value
        case .failure(let fault): throw TileArchiveError(path: path, fault: .corrupt("metadata: \(fault.reason)"))
        }
        PMTilesMetadata.fillFromHeader(&metadata, header: header)
        let result = metadata
        cachedMetadata.withLock { $0 = result }
        return result
    }

    public func containsTile(at tile: TileCoordinate) throws -> Bool {
        try location(of: tile) != nil
    }

    public func withTileBytes<R>(at tile: TileCoordinate, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        guard let (offset, length) = try location(of: tile) else { return nil }
        let start = Int(header.tileDataOffset + offset)
        // Reached in place, not bound to a copy (a copy retained and released the file and its name).
        if let result = try file?.withBytes(offset: start, length: length, body) { return result }
        return try source.withBytes(offset: start, length: length, body)
    }

    /// Counts runs as ranges (a run of 2^32 - 1 tiles costs what one tile costs); bytes are counted
    /// as addressed (a run's bytes once per tile), an error past `Int.max`.
    public func zoomLevels() throws -> [ZoomLevelSummary] {
        if let cached = cachedZoomLevels.withLock({ $0 }) { return cached }
        let levels = try countZoomLevels()
        cachedZoomLevels.withLock { $0 = levels }
        return levels
    }

    private func countZoomLevels() throws -> [ZoomLevelSummary] {
        // By zoom (a run's zoom is at most the deepest, checked by the walk).
        var counts = [(tiles: Int, bytes: Int)](repeating: (0, 0), count: TileCoordinate.maximumZoom + 1)
        var all = 0
        try forEachRun { zoom, ids, _, length in
            let n = ids.count
            let (runBytes, overMultiply) = n.multipliedReportingOverflow(by: length)
            let (total, overAdd) = all.addingReportingOverflow(runBytes)
            guard !overMultiply, !overAdd else {
                throw TileArchiveError(
                    path: path,
                    fault: .corrupt("the runs address more than \(Int.max) bytes of tiles (at zoom \(zoom), \(n) tiles of \(length) bytes)")
                )
            }
            all = total
            counts[zoom].tiles += n
            counts[zoom].bytes += runBytes
        }
        return counts.indices.filter { counts[$0].tiles > 0 }.map {
            ZoomLevelSummary(zoom: $0, tileCount: counts[$0].tiles, byteCount: counts[$0].bytes)
        }
    }

    public func forEachTile(_ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws {
        let reader = TileReader(source: source, base: Int(header.tileDataOffset), holding: TileReader.stripFactor)
        try forEachLocatedTile(stripBytes: reader.budget) { tile, offset, length, startsStrip in
            if startsStrip { try reader.flush(body) }
            try reader.add(tile, offset: offset, length: length, body)
        }
        try reader.flush(body)
    }

    /// Calls `body` for the tiles `wanted` accepts, reading only those: the tiles' ranges are
    /// announced to the source first (a remote source fetches neighbours together), then read in
    /// file order. The order of the calls is the order of the tile data, not (zoom, x, y).
    public func forEachTile(
        where wanted: (TileCoordinate) -> Bool,
        _ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try forEachTile(in: TileSelection(), where: wanted, body)
    }

    /// How many tiles ``forEachTile(in:where:_:)`` offers for `selection` (before its `wanted`),
    /// counted as it cuts them: a run's ids in the zooms, its squares inside the box; a run's
    /// tiles are never visited (but for runs of at most 64, as there).
    package func tileCount(in selection: TileSelection) throws -> Int {
        var count = 0
        try forEachRun { zoom, ids, _, _ in
            guard selection.zooms?.contains(zoom) ?? true else { return }
            guard let bounds = selection.bounds, ids.count > 64 else {
                if selection.bounds == nil {
                    count += ids.count
                } else {
                    for id in ids where selection.contains(PMTilesFormat.tile(ofID: id)!) { count += 1 }
                }
                return
            }
            let region = try bounds.tileRanges(atZoom: zoom)
            for square in PMTilesFormat.squares(of: ids) {
                for part in region {
                    if let cut = Self.intersection(square, part) { count += cut.count }
                }
            }
        }
        return count
    }

    /// As ``forEachTile(where:_:)``, with the tiles outside `selection` cut from each run as ranges
    /// first (its zooms as id ranges, its box as squares of the run), so a run of billions of tiles
    /// costs only the tiles it shares with the selection.
    public func forEachTile(
        in selection: TileSelection, where wanted: (TileCoordinate) -> Bool,
        _ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        var chosen: [(tile: TileCoordinate, offset: UInt64, length: Int)] = []
        try forEachRun { zoom, ids, offset, length in
            guard selection.zooms?.contains(zoom) ?? true else { return }
            guard let bounds = selection.bounds, ids.count > 64 else {
                for id in ids {
                    let tile = PMTilesFormat.tile(ofID: id)!
                    if selection.contains(tile), wanted(tile) { chosen.append((tile, offset, length)) }
                }
                return
            }
            let region = try bounds.tileRanges(atZoom: zoom)
            for square in PMTilesFormat.squares(of: ids) {
                for part in region {
                    guard let cut = Self.intersection(square, part) else { continue }
                    for tile in cut where wanted(tile) { chosen.append((tile, offset, length)) }
                }
            }
        }
        chosen.sort { $0.offset < $1.offset }
        let base = Int(header.tileDataOffset)
        var ranges: [Range<Int>] = []
        for item in chosen {
            let range = (base + Int(item.offset))..<(base + Int(item.offset) + item.length)
            if ranges.last != range { ranges.append(range) }
        }
        try source.willRead(ranges)
        let reader = TileReader(source: source, base: base)
        for item in chosen { try reader.add(item.tile, offset: item.offset, length: item.length, body) }
        try reader.flush(body)
    }
}
