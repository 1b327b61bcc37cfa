import Foundation
import TilepackCore
@_spi(TilepackInternal) internal import TilepackCompression

/// Writes a PMTiles v3 archive (see `Specs/pmtiles.md`): clustered (tile data in tile-id order,
/// that is by zoom and along the Hilbert curve), identical tiles stored once (compared byte for
/// byte, not by hash alone), consecutive tiles with the same bytes as one run-length entry,
/// directories and metadata gzip-compressed, and leaf directories when the root would not fit in
/// the first 16 KiB with the header.
///
/// Tiles may come in any order, one at a time or as runs of consecutive tile ids that share their
/// bytes (`addRun(ids:bytes:)`, for the package: a copy of another PMTiles carries its runs as ranges, so a run of
/// billions of ocean tiles costs what one tile costs). Their distinct bytes go to a spool file beside the destination
/// (unlinked at once); ``finish()`` writes the archive to a temporary file and renames it into
/// place, so a writer dropped before `finish` leaves nothing behind. One thread at a time.
public final class PMTilesWriter {
    public let destination: String
    /// The metadata written as the JSON metadata (``finish()`` fills what the tiles tell).
    public var metadata: TileMetadata
    /// Vector tiles some of which are gzip-compressed and some not: by default the others are
    /// gzip-compressed too, so that the header can say gzip, as MapLibre Native needs (it reads
    /// only gzip or none; the spec's `unknown` it refuses), and `agg_tiles_hash`, which described
    /// the old bytes, is dropped. True keeps every tile's bytes and says `unknown`.
    public var keepsMixedTileCompression = false

    private let file: AtomicFile
    private let spool: Int32
    private var spoolBuffer: [UInt8] = []
    private var spoolFlushed = 0
    private var spoolLength = 0
    private static let spoolBufferCapacity = 1 << 20
    @exclusivity(unchecked) private var finished = false

    /// `runLength` consecutive tile ids from `tileID`, sharing one content.
    private struct TileEntry {
        var tileID: UInt64
        var content: UInt32
        var runLength: UInt32
    }
    private struct Content {
        var spoolOffset: Int
        var length: UInt32
        /// Where the bytes are in ``copySource`` (a patch's base), or -1: then in the spool.
        var copied = -1
    }
    // The writer's tables, changed for every tile added: one thread at a time uses a writer (its
    // contract), so their exclusive access is not checked at run time (those checks cost a
    // patch's copy of tens of thousands of runs more than the appends).
    @exclusivity(unchecked) private var tiles: [TileEntry] = []
    @exclusivity(unchecked) private var contents: [Content] = []
    /// Hash of the bytes (with their length) -> the contents with that hash.
    @exclusivity(unchecked) private var byHash: [Int: [UInt32]] = [:]
    /// Where a content copied from ``copySource`` lies there -> the content that holds its bytes.
    @exclusivity(unchecked) private var byCopied = CopiedContents()
    @exclusivity(unchecked) private var formats: [TileFormat: UInt64] = [:]
    @exclusivity(unchecked) private var gzipTiles: UInt64 = 0
    /// The tiles added (a run counts its tiles).
    @exclusivity(unchecked) private var addressed: UInt64 = 0
    private var compare: [UInt8] = []
    /// The file the contents of ``addRun(ids:copying:bytes:)`` are copied from at ``finish()``.
    package var copySource: CopySource?
    /// Whether ``finish()`` lets the kernel copy what comes from ``copySource`` (tests turn it off
    /// to compare with the copy through memory, which must give the same file).
    package var copiesInKernel = BundleWriter.kernelCopyAvailable

    /// What ``finish()`` wrote.
    public struct Summary: Hashable, Sendable {
        public var addressedTiles: Int
        public var tileEntries: Int
        public var tileContents: Int
        public var leafDirectories: Int
        public var fileLength: Int
        public var header: PMTilesHeader
        /// Distinct vector tiles gzip-compressed by the writer (see ``PMTilesWriter/keepsMixedTileCompression``).
        public var gzippedContents = 0
    }

    /// Prepares to write at `destination`.
    /// - Throws: ``TileArchiveError/Fault/alreadyExists`` when it exists and `overwrite` is false.
    public convenience init(destination: String, metadata: TileMetadata = TileMetadata(), overwrite: Bool = false)
        throws(TileArchiveError)
    {
        try self.init(destination: destination, metadata: metadata, staging: AtomicFile(destination: destination, overwrite: overwrite))
    }

    /// Prepares to write into `staging` (a ``TileSink``'s: the sink puts it in place).
    package init(destination: String, metadata: TileMetadata, staging: AtomicFile) throws(TileArchiveError) {
        self.destination = destination
        self.metadata = metadata
        file = staging
        let spoolPath = file.temporaryPath + ".spool"
        let fd = open(spoolPath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            throw TileArchiveError(
                path: destination, fault: .io(errno: code, reason: "create \(spoolPath): \(String(cString: strerror(code)))"))
        }
        unlink(spoolPath)
        spool = fd
    }

    deinit {
        close(spool)
        if !finished { file.discard() }
    }

    /// Adds one tile (XYZ); its bytes are copied.
    public func addTile(at tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws(TileArchiveError) {
        let id = PMTilesFormat.tileID(of: tile)
        try add(ids: id..<(id + 1), bytes: bytes)
    }

    /// Adds the tiles of the tile ids `ids` (in any zooms), all with the same bytes, which are
    /// copied once: a run, kept as a range however many tiles it holds.
    /// - Throws: ``TileArchiveError/Fault/invalidTile(tile:reason:)`` for ids past the deepest zoom.
    package func addRun(ids: Range<UInt64>, bytes: UnsafeRawBufferPointer) throws(TileArchiveError) {
        guard !ids.isEmpty else { return }
        try add(ids: ids, bytes: bytes)
    }

    /// ``addRun(ids:bytes:)`` for bytes that lie at `offset` in ``copySource`` (a patch's base,
    /// Specs/updates.md §4): they are compared as any tile's to find an equal content, and when
    /// they are new they are not spooled but copied from that file at ``finish()``, unread.
    package func addRun(ids: Range<UInt64>, copying offset: Int, bytes: UnsafeRawBufferPointer) throws(TileArchiveError) {
        precondition(copySource != nil, "PMTilesWriter.addRun(ids:copying:bytes:) without a copySource")
        guard !ids.isEmpty else { return }
        try add(ids: ids, bytes: bytes, copied: offset)
    }

    /// A kept run of a patch's canonical base, for ``addRuns(copyingUnread:format:gzip:)``: the
    /// tile ids, and where their bytes lie in ``copySource``.
    package struct UnreadRun {
        package var ids: Range<UInt64>
        package var offset: Int
        package var length: Int

        package init(ids: Range<UInt64>, offset: Int, length: Int) {
            self.ids = ids
            self.offset = offset
            self.length = length
        }
    }

    /// ``addRun(ids:copying:bytes:)`` for bytes not read: each run's `length` bytes at `offset`
    /// in ``copySource`` (the kept contents of a patch's canonical base, Specs/updates.md §4). The
    /// caller vouches that they equal no content of this writer but those copied from the same
    /// offset (with which they are shared), and gives what the writer would sniff from every one
    /// of them: their `format` and whether they are gzip. They are copied at ``finish()``, unread.
    /// (Many runs in one call: their format and compression are counted once, not per run.)
    package func addRuns(copyingUnread runs: [UnreadRun], format: TileFormat?, gzip: Bool) throws(TileArchiveError) {
        precondition(copySource != nil, "PMTilesWriter.addRuns(copyingUnread:...) without a copySource")
        let before = addressed
        for run in runs where !run.ids.isEmpty {
            try checkAdding(ids: run.ids, length: run.length)
            let content: UInt32
            if let shared = sharedCopy(at: run.offset, length: run.length) {
                content = shared
            } else {
                content = UInt32(contents.count)
                contents.append(Content(spoolOffset: -1, length: UInt32(run.length), copied: run.offset))
                byCopied.insert(content, at: run.offset)
            }
            addEntries(ids: run.ids, content: content)
        }
        if let format { formats[format, default: 0] += addressed - before }
        if gzip { gzipTiles += addressed - before }
    }

    /// Makes room for `entries` entries (tiles or runs added) and `contents` distinct contents,
    /// which otherwise grow (copied each time) as they are added: a caller that knows how many are
    /// coming (a patch, from its base's directories) saves those copies.
    package func reserveCapacity(entries: Int, contents count: Int) {
        tiles.reserveCapacity(entries)
        contents.reserveCapacity(count)
        byCopied.reserveCapacity(count)
    }

    /// The content already holding the bytes copied from `offset`, when they are `length` long.
    private func sharedCopy(at offset: Int, length: Int) -> UInt32? {
        guard let content = byCopied.content(at: offset), contents[Int(content)].length == UInt32(length) else { return nil }
        return content
    }

    /// What every added tile must be: no empty tile, none over the format's limit, no id past the last zoom.
    private func checkAdding(ids: Range<UInt64>, length: Int) throws(TileArchiveError) {
        guard !finished else { throw TileArchiveError(path: destination, fault: .io(errno: 0, reason: "the writer is already finished")) }
        guard ids.upperBound <= PMTilesFormat.idLimit, length > 0, length <= PMTilesFormat.maximumTileLength else {
            // The run's first tile, named in the error (not worked out for every run added).
            let first = PMTilesFormat.tile(ofID: ids.lowerBound) ?? TileCoordinate(uncheckedZoom: 0, x: 0, y: 0)
            guard ids.upperBound <= PMTilesFormat.idLimit else {
                throw TileArchiveError(
                    path: destination,
                    fault: .invalidTile(tile: first, reason: "a run of tile ids \(ids) reaches past zoom \(TileCoordinate.maximumZoom)"))
            }
            guard length > 0 else {
                throw TileArchiveError(
                    path: destination, fault: .invalidTile(tile: first, reason: "an empty tile (PMTiles entries have a length above zero)"))
            }
            throw TileArchiveError(
                path: destination, fault: .tileTooLarge(tile: first, size: length, limit: PMTilesFormat.maximumTileLength))
        }
    }

    private func add(ids: Range<UInt64>, bytes: UnsafeRawBufferPointer, copied: Int = -1) throws(TileArchiveError) {
        try checkAdding(ids: ids, length: bytes.count)
        let count = UInt64(ids.count)
        if let format = TileFormat.sniff(bytes) { formats[format, default: 0] += count }
        if TileFormat.isGzip(bytes) { gzipTiles += count }
        if copied >= 0, let shared = sharedCopy(at: copied, length: bytes.count) {
            addEntries(ids: ids, content: shared)
            return
        }
        var hasher = Hasher()
        hasher.combine(bytes.count)
        hasher.combine(bytes: bytes)
        let hash = hasher.finalize()
        var content: UInt32?
        for candidate in byHash[hash] ?? [] {
            var same = copied >= 0 && contents[Int(candidate)].copied == copied
            if !same { same = try spooledBytes(of: Int(candidate), equal: bytes) }
            if same {
                content = candidate
                break
            }
        }
        if content == nil {
            let index = UInt32(contents.count)
            if copied >= 0 {
                contents.append(Content(spoolOffset: -1, length: UInt32(bytes.count), copied: copied))
            } else {
                contents.append(Content(spoolOffset: spoolLength, length: UInt32(bytes.count)))
                try appendSpool(bytes)
            }
            byHash[hash, default: []].append(index)
            content = index
        }
        if copied >= 0, let content { byCopied.insert(content, at: copied) }
        addEntries(ids: ids, content: content!)
    }

    /// Gives the tiles `ids` the content `content`.
    private func addEntries(ids: Range<UInt64>, content: UInt32) {
        Self.append(ids: ids, content: content, to: &tiles)
        addressed += UInt64(ids.count)
    }

    /// Appends the entries of the tiles `ids` with the content `content` to `tiles`: entries of at
    /// most UInt32.max tiles, the format's longest run.
    private static func append(ids: Range<UInt64>, content: UInt32, to tiles: inout [TileEntry]) {
        var start = ids.lowerBound
        while start < ids.upperBound {
            let length = min(ids.upperBound - start, UInt64(UInt32.max))
            tiles.append(TileEntry(tileID: start, content: content, runLength: UInt32(length)))
            start += length
        }
    }

    public func addTile(at tile: TileCoordinate, bytes: [UInt8]) throws(TileArchiveError) {
        try bytes.withUnsafeBytes { raw in Result { () throws(TileArchiveError) in try addTile(at: tile, bytes: raw) } }.get()
    }

    // MARK: Spool

    private func appendSpool(_ bytes: UnsafeRawBufferPointer) throws(TileArchiveError) {
        if spoolBuffer.count + bytes.count > Self.spoolBufferCapacity { try flushSpool() }
        spoolBuffer.append(contentsOf: bytes)
        spoolLength += bytes.count
    }

    private func flushSpool() throws(TileArchiveError) {
        guard !spoolBuffer.isEmpty else { return }
        var done = 0
        while done < spoolBuffer.count {
            let n = spoolBuffer.withUnsafeBytes { pwrite(spool, $0.baseAddress! + done, $0.count - done, off_t(spoolFlushed + done)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw ioError("write spool") }
            done += n
        }
        spoolFlushed += spoolBuffer.count
        spoolBuffer.removeAll(keepingCapacity: true)
    }

    /// Reads a spooled content into `compare` and calls `body` with it.
    private func withSpooled<R>(_ index: Int, _ body: (UnsafeRawBufferPointer) throws(TileArchiveError) -> R) throws(TileArchiveError) -> R
    {
        let content = contents[index]
        let length = Int(content.length)
        if content.copied >= 0, let copySource {
            if compare.count < length { compare = [UInt8](repeating: 0, count: length) }
            try compare.withUnsafeMutableBytes { raw in
                Result { () throws(TileArchiveError) in
                    try copySource.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<length]), at: content.copied)
                }
            }.get()
            return try compare.withUnsafeBytes { raw in
                Result { () throws(TileArchiveError) in try body(UnsafeRawBufferPointer(rebasing: raw[0..<length])) }
            }.get()
        }
        if content.spoolOffset >= spoolFlushed {
            let start = content.spoolOffset - spoolFlushed
            return try spoolBuffer.withUnsafeBytes { raw in
                Result { () throws(TileArchiveError) in try body(UnsafeRawBufferPointer(rebasing: raw[start..<(start + length)])) }
            }.get()
        }
        if compare.count < length { compare = [UInt8](repeating: 0, count: length) }
        var done = 0
        while done < length {
            let n = compare.withUnsafeMutableBytes {
                pread(spool, $0.baseAddress! + done, length - done, off_t(content.spoolOffset + done))
            }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw ioError("read spool") }
            done += n
        }
        return try compare.withUnsafeBytes { raw in
            Result { () throws(TileArchiveError) in try body(UnsafeRawBufferPointer(rebasing: raw[0..<length])) }
        }.get()
    }

    private func spooledBytes(of index: Int, equal bytes: UnsafeRawBufferPointer) throws(TileArchiveError) -> Bool {
        guard Int(contents[index].length) == bytes.count else { return false }
        return try withSpooled(index) { stored in memcmp(stored.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }
    }

    // MARK: Finish

    /// Writes the archive and moves it into place.
    /// - Throws: ``TileArchiveError/Fault/invalidTile(tile:reason:)`` for a tile added twice.
    @discardableResult
    public func finish() throws(TileArchiveError) -> Summary {
        guard !finished else { throw TileArchiveError(path: destination, fault: .io(errno: 0, reason: "the writer is already finished")) }
        finished = true
        do throws(TileArchiveError) {
            let summary = try write()
            try file.commit()
            return summary
        } catch {
            file.discard()
            throw error
        }
    }

    private func write() throws(TileArchiveError) -> Summary {
        try flushSpool()
        tiles.sort { $0.tileID < $1.tileID }
        for i in tiles.indices.dropFirst() where tiles[i].tileID < tiles[i - 1].tileID + UInt64(tiles[i - 1].runLength) {
            let tile = PMTilesFormat.tile(ofID: tiles[i].tileID) ?? TileCoordinate(uncheckedZoom: 0, x: 0, y: 0)
            throw TileArchiveError(path: destination, fault: .invalidTile(tile: tile, reason: "added twice"))
        }

        var gzipped = 0
        if resolvedTileType() == .mvt, gzipTiles > 0, gzipTiles < addressed, !keepsMixedTileCompression {
            gzipped = try gzipPlainContents()
        }

        let (order, dataLength, entries) = clusteredEntries()
        let (root, leaves, leafCount) = Self.directories(entries)
        var header = header(describing: entries)
        let metadataBytes = Gzip.compress(PMTilesMetadata.encode(metadata))
        guard metadataBytes.count <= PMTilesFormat.maximumMetadataLength else {
            throw TileArchiveError(
                path: destination, fault: .invalidMetadata("the metadata is over the limit of \(PMTilesFormat.maximumMetadataLength) bytes")
            )
        }
        header.rootOffset = UInt64(PMTilesFormat.headerLength)
        header.rootLength = UInt64(root.count)
        header.metadataOffset = header.rootOffset + header.rootLength
        header.metadataLength = UInt64(metadataBytes.count)
        header.leafOffset = header.metadataOffset + header.metadataLength
        header.leafLength = UInt64(leaves.count)
        header.tileDataOffset = header.leafOffset + header.leafLength
        header.tileDataLength = dataLength

        let fd = open(file.temporaryPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ioError("create \(file.temporaryPath)") }
        defer { close(fd) }
        let out = BufferedOutput(fd: fd, path: destination)
        try out.write(header.encoded())
        try out.write(root)
        try out.write(metadataBytes)
        try out.write(leaves)
        try writeContents(order, to: out)
        try out.flush()
        let fileLength = Int(header.tileDataOffset + header.tileDataLength)
        guard out.position == fileLength else {
            throw TileArchiveError(path: destination, fault: .io(errno: 0, reason: "wrote \(out.position) bytes, planned \(fileLength)"))
        }
        return Summary(
            addressedTiles: Int(addressed), tileEntries: entries.count, tileContents: contents.count,
            leafDirectories: leafCount, fileLength: fileLength, header: header, gzippedContents: gzipped)
    }

    /// The directory entries, clustered: each content placed where its first tile (in tile-id
    /// order) needs it, consecutive tiles of one content merged into runs; with the contents in
    /// the order they are written and the tile data's length.
    private func clusteredEntries() -> (order: [Int], dataLength: UInt64, entries: [PMTilesFormat.Entry]) {
        var placed = [UInt64](repeating: .max, count: contents.count)
        var order: [Int] = []
        order.reserveCapacity(contents.count)
        var dataLength: UInt64 = 0
        var entries: [PMTilesFormat.Entry] = []
        for tile in tiles {
            let content = Int(tile.content)
            if placed[content] == .max {
                placed[content] = dataLength
                dataLength += UInt64(contents[content].length)
                order.append(content)
            }
            if var last = entries.last, last.tileID + UInt64(last.runLength) == tile.tileID, last.offset == placed[content],
                UInt64(last.runLength) + UInt64(tile.runLength) <= UInt64(UInt32.max)
            {
                last.runLength += tile.runLength
                entries[entries.count - 1] = last
            } else {
                entries.append(
                    PMTilesFormat.Entry(
                        tileID: tile.tileID, offset: placed[content], length: contents[content].length, runLength: tile.runLength))
            }
        }

        return (order, dataLength, entries)
    }

    /// The header's description of the tiles: clustered, its compressions and tile type, its counts,
    /// zooms, bounds and center.
    private func header(describing entries: [PMTilesFormat.Entry]) -> PMTilesHeader {
        var header = PMTilesHeader()
        header.clustered = true
        header.internalCompression = .gzip
        let tileType = resolvedTileType()
        header.tileType = tileType
        header.tileCompression =
            tileType == .mvt ? (gzipTiles == addressed && addressed > 0 ? .gzip : (gzipTiles == 0 ? .none : .unknown)) : .none
        header.addressedTiles = addressed
        header.tileEntries = UInt64(entries.count)
        header.tileContents = UInt64(contents.count)
        let minZoom = tiles.first.map { PMTilesFormat.zoom(ofID: $0.tileID) } ?? 0
        let maxZoom = tiles.last.map { PMTilesFormat.zoom(ofID: $0.tileID + UInt64($0.runLength) - 1) } ?? 0
        header.minZoom = UInt8(minZoom)
        header.maxZoom = UInt8(maxZoom)
        setPlace(&header, minZoom: minZoom, maxZoom: maxZoom)

        return header
    }

    /// Appends the contents in `order`: spooled ones through memory, runs of contents that lie back
    /// to back in ``copySource`` copied from it by the kernel where it can (checked unchanged before
    /// and after).
    private func writeContents(_ order: [Int], to out: BufferedOutput) throws(TileArchiveError) {
        let copies = copySource != nil && order.contains { contents[$0].copied >= 0 }
        if copies { try copySource?.checkUnchanged() }
        var kernelCopies = copiesInKernel
        // Where copied bytes pass through memory, when the kernel cannot copy between the files.
        var staging: [UInt8] = []
        var position = 0
        var flushedUpTo = out.position
        // Lets the disk take what is written while the next contents are written, as the bundle
        // writer does, so that the commit's fsync finds little left to write.
        func flushEveryChunk() {
            guard out.position - flushedUpTo >= BundleWriter.copyChunkBytes else { return }
            file.flushInBackground()
            flushedUpTo = out.position
        }
        while position < order.count {
            flushEveryChunk()
            let first = contents[order[position]]
            guard first.copied >= 0, let copySource else {
                try withSpooled(order[position]) { bytes throws(TileArchiveError) in try out.write(bytes) }
                position += 1
                continue
            }
            var end = position + 1
            var runEnd = first.copied + Int(first.length)
            while end < order.count, contents[order[end]].copied == runEnd {
                runEnd += Int(contents[order[end]].length)
                end += 1
            }
            // In chunks, the disk given each as it is copied (a patch's kept data is most of the file).
            var from = first.copied
            while from < runEnd {
                let length = min(runEnd - from, BundleWriter.copyChunkBytes)
                if kernelCopies { kernelCopies = try out.copy(from: copySource.fd, at: from, length: length, what: copySource.path) }
                if !kernelCopies {
                    if staging.count < length { staging = [UInt8](repeating: 0, count: BundleWriter.copyChunkBytes) }
                    try staging.withUnsafeMutableBytes { raw in
                        Result { () throws(TileArchiveError) in
                            let chunk = UnsafeMutableRawBufferPointer(rebasing: raw[0..<length])
                            try copySource.read(into: chunk, at: from)
                            try out.write(UnsafeRawBufferPointer(chunk))
                        }
                    }.get()
                }
                from += length
                flushEveryChunk()
            }
            position = end
        }
        if copies { try copySource?.checkUnchanged() }
    }

    /// Gzip-compresses every spooled content that is not gzip (appended to the spool, the content
    /// pointed at the new bytes); drops `agg_tiles_hash`, which hashed the old bytes. Returns how
    /// many contents it compressed.
    private func gzipPlainContents() throws(TileArchiveError) -> Int {
        var count = 0
        for index in contents.indices {
            let packed: [UInt8]? = try withSpooled(index) { (bytes) throws(TileArchiveError) in
                TileFormat.isGzip(bytes) ? nil : Gzip.compress(bytes)
            }
            guard let packed else { continue }
            guard packed.count <= PMTilesFormat.maximumTileLength else {
                let tile = tiles.first { $0.content == index }.flatMap { PMTilesFormat.tile(ofID: $0.tileID) }
                throw TileArchiveError(
                    path: destination,
                    fault: .tileTooLarge(
                        tile: tile ?? TileCoordinate(uncheckedZoom: 0, x: 0, y: 0), size: packed.count,
                        limit: PMTilesFormat.maximumTileLength))
            }
            let offset = spoolLength
            try packed.withUnsafeBytes { raw in Result { () throws(TileArchiveError) in try appendSpool(raw) } }.get()
            contents[index] = Content(spoolOffset: offset, length: UInt32(packed.count))
            count += 1
        }
        try flushSpool()
        gzipTiles = addressed
        metadata[TileMetadata.Key.aggregateTilesHash] = nil
        metadata[TileMetadata.Key.hashAlgorithm] = nil
        return count
    }

    /// The tile type: the metadata's `format` when it names one, else the tiles' most common format.
    private func resolvedTileType() -> PMTilesFormat.TileType {
        if let format = (try? metadata.format) ?? nil { return PMTilesFormat.TileType(format) }
        if let (format, _) = formats.max(by: { ($0.value, $0.key.rawValue) < ($1.value, $1.key.rawValue) }) {
            return PMTilesFormat.TileType(format)
        }
        return .unknown
    }

    /// Bounds and center from the metadata where it has them, else from the tiles.
    private func setPlace(_ header: inout PMTilesHeader, minZoom: Int, maxZoom: Int) {
        func e7(_ degrees: Double) -> Int32 { Int32(clamping: Int64((degrees * 1e7).rounded())) }
        var box = (try? metadata.bounds) ?? nil
        if box == nil, !tiles.isEmpty {
            // The extent of the highest zoom's tiles (a run's as the squares it covers).
            var minX = Int.max, maxX = Int.min, minY = Int.max, maxY = Int.min
            let top = PMTilesFormat.firstID(ofZoom: maxZoom)
            for entry in tiles.reversed() {
                let end = entry.tileID + UInt64(entry.runLength)
                guard end > top else { break }
                for square in PMTilesFormat.squares(of: max(entry.tileID, top)..<end) {
                    minX = min(minX, square.columns.lowerBound)
                    maxX = max(maxX, square.columns.upperBound)
                    minY = min(minY, square.rows.lowerBound)
                    maxY = max(maxY, square.rows.upperBound)
                }
            }
            let level = TileContentSummary.Level(zoom: maxZoom, tileCount: 0, minX: minX, maxX: maxX, minY: minY, maxY: maxY)
            box = level.extent
        }
        let bounds = box ?? GeoBoundingBox(west: -180, south: -85.0511287, east: 180, north: 85.0511287)
        header.minLonE7 = e7(bounds.west)
        header.minLatE7 = e7(bounds.south)
        header.maxLonE7 = e7(bounds.east)
        header.maxLatE7 = e7(bounds.north)
        if let center = (try? metadata.center) ?? nil {
            header.centerLonE7 = e7(center.coordinate.longitude)
            header.centerLatE7 = e7(center.coordinate.latitude)
            header.centerZoom = UInt8(clamping: center.zoom ?? minZoom)
        } else {
            header.centerLonE7 = e7((bounds.west + bounds.east) / 2)
            header.centerLatE7 = e7((bounds.south + bounds.north) / 2)
            header.centerZoom = UInt8(clamping: minZoom)
        }
    }

    private func ioError(_ what: String) -> TileArchiveError {
        let code = errno
        return TileArchiveError(path: destination, fault: .io(errno: code, reason: "\(what): \(String(cString: strerror(code)))"))
    }
}
