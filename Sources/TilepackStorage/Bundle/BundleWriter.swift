import Foundation
import TilepackCore

/// Writes a `.tilepack` bundle (see `Specs/bundle-format.md`), streaming.
///
/// Tiles may be added in any order. Each new payload is compressed (LZ4 kept only when it saves at
/// least ``Options/minimumLZ4Saving``; a large payload that is already entropy-coded is sampled
/// first, see `lz4MaySave(_:options:)`) and appended (small ones through a 1 MiB buffer) to an
/// unlinked spool file beside the destination, padded as in the data section; memory holds only the index: 16 bytes per tile and about 40 per
/// distinct payload (and, for a payload copied from its file, the file's path and version).
/// Identical tiles share one payload, found by CRC and length and confirmed by
/// comparing bytes.
///
/// The compression and the CRC can be done on other threads: ``prepare(_:options:crc:)`` is a pure
/// function that makes a ``PreparedPayload``, which ``addTile(at:payload:)`` then stores. ``finish()`` writes the header,
/// metadata and index, then copies the payloads in order of zoom and Hilbert curve position (so
/// tiles near each other on the map are near each other in the file) into a temporary file that is
/// fsynced and renamed over the destination; long runs are copied by the kernel, file to file. The output depends only on the tiles, the content and
/// the metadata, never on the order of ``addTile(at:bytes:)`` calls.
///
/// A large payload stored as it is whose bytes are a whole file (`prepare(_:options:crc:source:)`
/// with a `SourceFile`: an import's tile files) is not spooled: ``finish()`` copies it from that
/// file, after checking that the file is the version that was read (device, inode, size, mtime
/// and ctime); a file changed meanwhile fails the write with an error naming it, and no bundle is
/// left. The bytes written are the same either way.
///
/// Not thread-safe: one writer is used from one thread.
public final class BundleWriter {
    /// Choices that change the bytes written (not their meaning).
    public struct Options: Sendable, Hashable {
        /// LZ4 is kept only when the compressed payload is at least this fraction smaller (default
        /// 1/32): a stored payload is read without copying, so a tiny saving is not worth it.
        public var minimumLZ4Saving: Double
        /// Whether payloads are LZ4-compressed at all.
        public var compresses: Bool
        /// Whether `format`, `bounds`, `center`, `minzoom`, `maxzoom` are filled from the tiles.
        /// By default the bundle holds exactly the metadata it is given; `tilepack import` and
        /// `convert` ask for `.fillMissing`, as the MBTiles writer does by default.
        public var derivation: MetadataDerivation

        public init(minimumLZ4Saving: Double = 1.0 / 32, compresses: Bool = true, derivation: MetadataDerivation = .none) {
            self.minimumLZ4Saving = minimumLZ4Saving
            self.compresses = compresses
            self.derivation = derivation
        }
    }

    /// What ``finish()`` wrote.
    public struct Summary: Hashable, Sendable {
        public var tileCount: Int
        public var payloadCount: Int
        public var lz4PayloadCount: Int
        public var fileLength: Int
    }

    public let destination: String
    public let content: TileContent
    /// The metadata to write; may be changed until ``finish()``.
    public var metadata: TileMetadata
    private let options: Options
    private let file: AtomicFile
    private let spool: Int32
    /// Bytes of the spool: those below `spoolFlushed` are in the file, the rest in `spoolBuffer`.
    private var spoolLength = 0
    private var spoolFlushed = 0
    private var spoolBuffer: [UInt8] = []
    private static let spoolBufferCapacity = 1 << 20
    @exclusivity(unchecked) private var finished = false

    private struct TileEntry {
        var key: UInt64
        var payload: UInt32
    }
    private struct PayloadEntry {
        /// Where the payload is in the spool; -1 when it is copied from ``sources``.
        var spoolOffset: Int
        /// The index in ``sources`` of the file the payload is copied from, or -1.
        var source: Int32 = -1
        var storedLength: UInt32
        var rawLength: UInt32
        var crc: UInt32
        var codec: BundleFormat.Codec
        /// Where the payload is in ``copySource`` (a patch's base), or -1.
        var copied = -1
    }
    // The writer's tables, changed for every tile added: one thread at a time uses a writer (its
    // contract), so their exclusive access is not checked at run time (those checks cost a
    // patch's copy of tens of thousands of tiles more than the appends).
    @exclusivity(unchecked) private var tiles: [TileEntry] = []
    @exclusivity(unchecked) private var payloads: [PayloadEntry] = []
    /// The files stored payloads are copied from at ``finish()`` instead of the spool.
    private var sources: [SourceFile] = []
    /// A payload's key (CRC, stored length, codec: equal for equal raw bytes, the coding being a
    /// function of the bytes and the options) -> the first payload with that key; further ones
    /// chain in `collisions`.
    @exclusivity(unchecked) private var byKey = FirstPayloadTable()
    @exclusivity(unchecked) private var collisions: [UInt32: UInt32] = [:]
    private var compareBuffer: UnsafeMutableRawBufferPointer
    /// Whether ``finish()`` lets the kernel copy long runs of payloads (tests turn it off to
    /// compare with the copy through memory, which must give the same file).
    var copiesInKernel = BundleWriter.kernelCopyAvailable
    /// Whether payloads given with a ``SourceFile`` are copied from it (tests turn it off to
    /// compare with the spool, which must give the same file).
    var copiesFromSources = true
    /// The file the payloads of ``addTile(at:copying:)`` are copied from at ``finish()``.
    package var copySource: CopySource?

    /// A payload of another bundle, ``copySource``, stored as this writer stores it: copied from
    /// that file at ``finish()``, unread (a patch's unchanged tiles, Specs/updates.md §4).
    package struct CopiedPayload: Sendable, Hashable {
        /// Where its stored bytes start in the copy source (from the start of the file).
        package var offset: Int
        package var storedLength: Int
        package var rawLength: Int
        package var crc: UInt32
        package var codec: BundleFormat.Codec
    }

    /// Prepares to write a bundle of `content` tiles at `destination`.
    ///
    /// - Throws: ``TileArchiveError/Fault/alreadyExists`` when the destination exists and
    ///   `overwrite` is false; ``TileArchiveError/Fault/invalidMetadata(_:)`` when the metadata's
    ///   `format` contradicts `content`, or the metadata is over the format's limit.
    public convenience init(
        destination: String, content: TileContent, metadata: TileMetadata = TileMetadata(),
        options: Options = Options(), overwrite: Bool = false
    ) throws(TileArchiveError) {
        try self.init(destination: destination, content: content, metadata: metadata, options: options) { () throws(TileArchiveError) in
            try AtomicFile(destination: destination, overwrite: overwrite)
        }
    }

    /// Prepares to write a bundle into the file `staging` makes (a ``TileSink``'s: the sink puts it in place).
    package init(
        destination: String, content: TileContent, metadata: TileMetadata, options: Options,
        staging: () throws(TileArchiveError) -> AtomicFile
    ) throws(TileArchiveError) {
        func fail(_ fault: TileArchiveError.Fault) -> TileArchiveError { TileArchiveError(path: destination, fault: fault) }
        if case .encoded(let format) = content, let declared = metadata[TileMetadata.Key.format],
            TileFormat(metadataValue: declared) != format
        {
            throw fail(.invalidMetadata("format '\(declared)' contradicts the bundle's content (\(format))"))
        }
        if case .rawBitmap(let layout) = content {
            // Raw tiles are map tiles: square, of a side Core's one rule takes (a reader still
            // opens any side the format's fields allow, 1...4096).
            guard layout.width == layout.height, TileSize.isValid(layout.width),
                let length = layout.byteCount, length <= BundleFormat.maximumTileLength
            else {
                throw fail(.invalidMetadata("raw tiles of \(layout): a tile is a square whose side is \(TileSize.rule)"))
            }
        }
        if let violation = MetadataLimits.violation(metadata) { throw fail(.invalidMetadata(violation)) }
        self.destination = destination
        self.content = content
        self.metadata = metadata
        self.options = options
        self.file = try staging()
        // The spool lives beside the destination and is unlinked at once: it vanishes with the
        // writer, even if the process dies.
        let spoolPath = file.temporaryPath + ".spool"
        let fd = FileSystem.open(spoolPath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            throw fail(.io(errno: code, reason: "create \(spoolPath): \(String(cString: strerror(code)))"))
        }
        _ = FileSystem.unlink(spoolPath)
        spool = fd
        compareBuffer = .allocate(byteCount: 0, alignment: 16)
        spoolBuffer.reserveCapacity(Self.spoolBufferCapacity)
    }

    deinit {
        close(spool)
        compareBuffer.deallocate()
        if !finished { file.discard() }
    }

    /// A tile's payload made ready for the bundle: its stored bytes (LZ4-compressed when that pays,
    /// else the raw bytes), how they are coded, and their CRC-32. Made by ``prepare(_:options:crc:)``,
    /// on any thread.
    public struct PreparedPayload: Sendable {
        let stored: [UInt8]
        let codec: BundleFormat.Codec
        let rawLength: Int
        let crc: UInt32
        /// The file whose whole content `stored` is, for a payload that the writer may copy from it.
        let source: SourceFile?

        init(stored: [UInt8], codec: BundleFormat.Codec, rawLength: Int, crc: UInt32, source: SourceFile? = nil) {
            self.stored = stored
            self.codec = codec
            self.rawLength = rawLength
            self.crc = crc
            self.source = source
        }
    }

    /// Compresses `raw` when LZ4 saves at least ``Options/minimumLZ4Saving`` and computes the CRC
    /// of what will be stored. Pure: safe to call from any thread, for a writer with `options`.
    ///
    /// - Parameter crc: the CRC-32 of `raw` when the caller already has it (used when the payload
    ///   is stored as it is; it must be right).
    public static func prepare(_ raw: UnsafeRawBufferPointer, options: Options, crc: UInt32? = nil) -> PreparedPayload {
        if let compressed = compress(raw, options: options) { return compressed }
        return PreparedPayload(stored: Array(raw), codec: .stored, rawLength: raw.count, crc: crc ?? BundleFormat.crc32(raw))
    }

    /// ``prepare(_:options:crc:)`` of `raw`, unless that makes exactly `stored` coded as `codec`
    /// (a payload another bundle holds for the tile: then it can be copied as it is, `nil`).
    package static func prepare(
        _ raw: UnsafeRawBufferPointer, unlessItMakes stored: UnsafeRawBufferPointer, codec: BundleFormat.Codec, options: Options
    ) -> PreparedPayload? {
        let made = prepare(raw, options: options)
        let same =
            made.codec == codec && made.stored.count == stored.count
            && (stored.isEmpty || made.stored.withUnsafeBytes { memcmp($0.baseAddress!, stored.baseAddress!, stored.count) == 0 })
        return same ? nil : made
    }

    /// ``prepare(_:options:crc:)`` for bytes the caller gives up (kept without copying when stored as they are).
    ///
    /// - Parameter crc: the CRC-32 of `raw` when the caller already has it (an import derives it
    ///   from a PNG's chunk CRCs, which it checks anyway); used, instead of a pass over the bytes,
    ///   when the payload is stored as it is. It must be right: it is written as the payload's CRC.
    /// - Parameter source: the file `raw` was read from whole, with its identity taken before the
    ///   read (and unchanged after it). A payload of ``sourceCopyBytes`` or more that is stored as
    ///   it is will be copied from that file at ``finish()`` instead of through the spool.
    package static func prepare(
        _ raw: consuming [UInt8], options: Options, crc: UInt32? = nil,
        source: SourceFile? = nil
    ) -> PreparedPayload {
        if let compressed = raw.withUnsafeBytes({ compress($0, options: options) }) { return compressed }
        let crc = crc ?? raw.withUnsafeBytes { BundleFormat.crc32($0) }
        let copied = source.flatMap { $0.identity.size == Int64(raw.count) && raw.count >= sourceCopyBytes ? $0 : nil }
        return PreparedPayload(stored: raw, codec: .stored, rawLength: raw.count, crc: crc, source: copied)
    }

    /// Stored payloads this long or longer, given with their `SourceFile`, are copied from it at
    /// ``finish()`` rather than spooled: below this, opening the file again costs more than the
    /// copy through the spool saves.
    public static let sourceCopyBytes = 32 << 10

    /// Payloads longer than this that are already entropy-coded (they begin as a PNG, JPEG, WebP
    /// or GIF, or as gzip) are sampled before LZ4 is tried on them: see `lz4MaySave(_:options:)`.
    static let sampledPayloadLength = 16 << 10
    /// The length of each sample.
    static let sampleLength = 4 << 10

    /// Whether LZ4 is worth trying on the whole of `raw`. For a payload over
    /// ``sampledPayloadLength`` that is already entropy-coded, only when LZ4 saves at least
    /// ``Options/minimumLZ4Saving`` on one of two samples of ``sampleLength`` bytes, a third and
    /// two thirds of the way in (inside the coded data: a JPEG's first bytes are its tables, which
    /// shrink). Such payloads almost never shrink (a 92 KB aerial PNG does not), and trying costs
    /// a pass over the bytes; the samples cost a tenth of that. The rule depends on the bytes
    /// alone, so the output stays a function of the tiles.
    static func lz4MaySave(_ raw: UnsafeRawBufferPointer, options: Options) -> Bool {
        guard raw.count > sampledPayloadLength, let source = raw.baseAddress,
            TileFormat.isGzip(raw) || [.png, .jpeg, .webp, .gif].contains(TileFormat.sniff(raw))
        else { return true }
        let saving = max(1, Int((Double(sampleLength) * options.minimumLZ4Saving).rounded(.up)))
        let capacity = sampleLength - saving
        return withUnsafeTemporaryAllocation(byteCount: capacity, alignment: 16) { buffer in
            for start in [(raw.count - sampleLength) / 3, 2 * (raw.count - sampleLength) / 3] {
                let produced = LZ4.compress(UnsafeRawBufferPointer(start: source + start, count: sampleLength), into: buffer)
                if produced > 0 { return true }
            }
            return false
        }
    }

    /// The LZ4 payload, or nil when LZ4 is off or does not pay.
    private static func compress(_ raw: UnsafeRawBufferPointer, options: Options) -> PreparedPayload? {
        let saving = max(1, Int((Double(raw.count) * options.minimumLZ4Saving).rounded(.up)))
        guard options.compresses, raw.count > saving, raw.count <= BundleFormat.maximumTileLength,
            let source = raw.baseAddress, lz4MaySave(raw, options: options)
        else { return nil }
        // LZ4 fails (returns 0) when the output would not fit: exactly "does not pay".
        let capacity = raw.count - saving
        // Compressed into a temporary buffer, then copied at its exact size: the payload may wait
        // in a batch for a while, and should not hold the raw size.
        let stored: [UInt8] = withUnsafeTemporaryAllocation(byteCount: capacity, alignment: 16) { buffer in
            let produced = LZ4.compress(UnsafeRawBufferPointer(start: source, count: raw.count), into: buffer)
            return produced > 0 ? Array(UnsafeRawBufferPointer(rebasing: buffer[0..<produced])) : []
        }
        guard !stored.isEmpty else { return nil }
        let crc = stored.withUnsafeBytes { BundleFormat.crc32($0) }
        return PreparedPayload(stored: stored, codec: .lz4Block, rawLength: raw.count, crc: crc)
    }

    /// Adds a tile. For a raw-bitmap bundle the bytes are the pixels, exactly the layout's size.
    public func addTile(at tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws(TileArchiveError) {
        try checkTile(tile, rawLength: bytes.count)
        try addTile(at: tile, payload: Self.prepare(bytes, options: options))
    }

    /// Adds a tile whose payload was made by ``prepare(_:options:crc:)`` with this writer's options.
    public func addTile(at tile: TileCoordinate, payload prepared: PreparedPayload) throws(TileArchiveError) {
        try checkTile(tile, rawLength: prepared.rawLength)
        // A payload with the same key and the same stored bytes is shared.
        let storedLength = prepared.stored.count, codec = prepared.codec
        let first = byKey.first(crc: prepared.crc) { number in
            let payload = payloads[Int(number)]
            return Int(payload.storedLength) == storedLength && payload.codec == codec
        }
        var candidate = first
        while let number = candidate {
            if try payload(Int(number), equals: prepared) {
                tiles.append(TileEntry(key: BundleFormat.key(of: tile), payload: number))
                return
            }
            candidate = collisions[number]
        }

        let number = UInt32(payloads.count)
        payloads.append(try appendPayload(prepared))
        addNewPayload(number, crc: prepared.crc, after: first, for: tile)
    }

    /// Adds a tile whose payload is `copied`, a payload of ``copySource``. The caller vouches that
    /// its stored bytes (checked against their CRC-32, with zero padding after them in their
    /// file) are what ``prepare(_:options:crc:)`` makes of the tile with this writer's options:
    /// the bundle written is then the one ``addTile(at:payload:)`` would write. Equal payloads are
    /// shared as for any tile: the same copied payload without reading it, others by their bytes.
    package func addTile(at tile: TileCoordinate, copying copied: CopiedPayload) throws(TileArchiveError) {
        try checkTile(tile, rawLength: copied.rawLength)
        guard let copySource else { preconditionFailure("BundleWriter.addTile(at:copying:) without a copySource") }
        let first = byKey.first(crc: copied.crc) { number in
            let payload = payloads[Int(number)]
            return Int(payload.storedLength) == copied.storedLength && payload.codec == copied.codec
        }
        var candidate = first
        var bytes: PreparedPayload?
        while let number = candidate {
            if payloads[Int(number)].copied == copied.offset {
                tiles.append(TileEntry(key: BundleFormat.key(of: tile), payload: number))
                return
            }
            if bytes == nil {
                var stored = Self.unfilled(copied.storedLength)
                try stored.withUnsafeMutableBytes { buffer in
                    Result { () throws(TileArchiveError) in try copySource.read(into: buffer, at: copied.offset) }
                }.get()
                bytes = PreparedPayload(stored: stored, codec: copied.codec, rawLength: copied.rawLength, crc: copied.crc)
            }
            if let bytes, try payload(Int(number), equals: bytes) {
                tiles.append(TileEntry(key: BundleFormat.key(of: tile), payload: number))
                return
            }
            candidate = collisions[number]
        }
        let number = UInt32(payloads.count)
        payloads.append(
            PayloadEntry(
                spoolOffset: -1, storedLength: UInt32(copied.storedLength), rawLength: UInt32(copied.rawLength), crc: copied.crc,
                codec: copied.codec, copied: copied.offset))
        addNewPayload(number, crc: copied.crc, after: first, for: tile)
    }

    /// Makes room for `tiles` tiles and `payloads` payloads in the writer's index, which otherwise
    /// grows (copied each time) as they are added: a caller that knows how many are coming (a
    /// patch, its base's counts) saves those copies.
    package func reserveCapacity(tiles count: Int, payloads payloadCount: Int) {
        tiles.reserveCapacity(count)
        payloads.reserveCapacity(payloadCount)
        byKey.reserve(payloadCount)
    }

    /// Files payload `number` (just appended) under its key, chained after `first`, the first
    /// payload with that key when there is one, and gives it to `tile`.
    private func addNewPayload(_ number: UInt32, crc: UInt32, after first: UInt32?, for tile: TileCoordinate) {
        if let first {
            collisions[number] = collisions[first]
            collisions[first] = number
        } else {
            byKey.insert(crc: crc, payload: number)
        }
        tiles.append(TileEntry(key: BundleFormat.key(of: tile), payload: number))
    }

    private func checkTile(_ tile: TileCoordinate, rawLength: Int) throws(TileArchiveError) {
        precondition(!finished, "BundleWriter used after finish()")
        func fail(_ reason: String) -> TileArchiveError {
            TileArchiveError(path: destination, fault: .invalidTile(tile: tile, reason: reason))
        }
        guard rawLength <= BundleFormat.maximumTileLength else {
            throw TileArchiveError(
                path: destination, fault: .tileTooLarge(tile: tile, size: rawLength, limit: BundleFormat.maximumTileLength))
        }
        if case .rawBitmap(let layout) = content, rawLength != layout.byteCount {
            throw fail("\(rawLength) bytes, but a raw \(layout) tile is \(layout.byteCount ?? 0) bytes")
        }
        guard tiles.count < BundleFormat.maximumCount else { throw fail("a bundle holds at most \(BundleFormat.maximumCount) tiles") }
    }

    /// Adds a tile from `Data`.
    public func addTile(at tile: TileCoordinate, data: Data) throws(TileArchiveError) {
        try data.withUnsafeBytes { bytes in Result { () throws(TileArchiveError) in try addTile(at: tile, bytes: bytes) } }.get()
    }

    /// Writes the bundle and renames it into place.
    @discardableResult
    public func finish() throws(TileArchiveError) -> Summary {
        precondition(!finished, "BundleWriter.finish() called twice")
        finished = true
        do throws(TileArchiveError) {
            return try write()
        } catch {
            file.discard()
            throw error
        }
    }

    // MARK: Writing

    private func write() throws(TileArchiveError) -> Summary {
        tiles.sort { $0.key < $1.key }
        var zoomCounts = [UInt64](repeating: 0, count: BundleFormat.zoomLevelCount)
        // Payload order: the smallest Hilbert key of the tiles using each payload.
        var firstUse = [UInt64](repeating: .max, count: payloads.count)
        var zoom = 0
        var levels: [TileContentSummary.Level] = []
        for (i, entry) in tiles.enumerated() {
            while entry.key >= BundleFormat.zoomBase(zoom + 1) { zoom += 1 }
            guard let tile = BundleFormat.tile(key: entry.key, zoom: zoom) else { continue }
            if i > 0, tiles[i - 1].key == entry.key {
                throw TileArchiveError(path: destination, fault: .invalidTile(tile: tile, reason: "added twice"))
            }
            zoomCounts[zoom] += 1
            if let last = levels.last, last.zoom == zoom {
                levels[levels.count - 1].tileCount += 1
                levels[levels.count - 1].minX = min(last.minX, tile.x)
                levels[levels.count - 1].maxX = max(last.maxX, tile.x)
                levels[levels.count - 1].minY = min(last.minY, tile.y)
                levels[levels.count - 1].maxY = max(last.maxY, tile.y)
            } else {
                levels.append(TileContentSummary.Level(zoom: zoom, tileCount: 1, minX: tile.x, maxX: tile.x, minY: tile.y, maxY: tile.y))
            }
            let hilbert = BundleFormat.hilbertKey(of: tile)
            firstUse[Int(entry.payload)] = min(firstUse[Int(entry.payload)], hilbert)
        }
        // Sorted as (key, payload) pairs in one array (a comparison that looks the keys up costs
        // twice as much). The keys differ (each tile has its own, and uses one payload), so the
        // order does not depend on the sort's stability.
        var byFirstUse = firstUse.enumerated().map { (key: $0.element, payload: $0.offset) }
        firstUse = []
        byFirstUse.sort { $0.key < $1.key }
        let order = byFirstUse.map(\.payload)
        byFirstUse = []
        var renumber = [UInt32](repeating: 0, count: payloads.count)
        for (position, old) in order.enumerated() { renumber[old] = UInt32(position) }

        // Metadata: what the caller set, completed from the tiles. Raw pixels have no `format` key.
        var sniffed: TileFormat?
        if case .encoded(let format) = content { sniffed = format }
        TileContentSummary(levels: levels, sniffedFormat: sniffed).derive(into: &metadata, mode: options.derivation)

        // Layout. The metadata may have changed since init: held to the reader's limits again.
        if let violation = MetadataLimits.violation(metadata) {
            throw TileArchiveError(path: destination, fault: .invalidMetadata(violation))
        }
        let metadataBytes = BundleMetadataCoding.encode(metadata)
        var header = BundleHeader()
        let codes = BundleFormat.contentCodes(content)
        header.contentKind = codes.kind
        header.contentCode = codes.code
        header.rawWidth = codes.width
        header.rawHeight = codes.height
        header.minZoom = UInt8(zoomCounts.firstIndex { $0 > 0 } ?? 0)
        header.maxZoom = UInt8(zoomCounts.lastIndex { $0 > 0 } ?? 0)
        header.maxRawLength = payloads.map(\.rawLength).max() ?? 0
        header.tileCount = UInt64(tiles.count)
        header.payloadCount = UInt64(payloads.count)
        header.metadataLength = UInt64(metadataBytes.count)
        let indexOffset = BundleFormat.aligned(BundleFormat.headerLength + metadataBytes.count)
        let refsEnd = indexOffset + BundleFormat.zoomTableLength + 12 * tiles.count
        let recordsOffset = BundleFormat.aligned(refsEnd)
        let indexEnd = recordsOffset + BundleFormat.payloadRecordLength * payloads.count
        let dataOffset = BundleFormat.aligned(indexEnd)
        var offsets = [Int](repeating: 0, count: payloads.count)
        var dataLength = 0
        for (position, old) in order.enumerated() {
            if position > 0 { dataLength = BundleFormat.aligned(dataLength) }
            offsets[position] = dataLength
            dataLength += Int(payloads[old].storedLength)
        }
        header.indexOffset = UInt64(indexOffset)
        header.indexLength = UInt64(indexEnd - indexOffset)
        header.dataOffset = UInt64(dataOffset)
        header.dataLength = UInt64(dataLength)
        header.fileLength = UInt64(dataOffset + dataLength)
        header.metadataCRC = metadataBytes.withUnsafeBytes { BundleFormat.crc32($0) }

        let fd = FileSystem.open(file.temporaryPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ioError("create \(file.temporaryPath)") }
        defer { close(fd) }
        let out = BufferedOutput(fd: fd, path: destination)

        // Header placeholder, metadata, padding.
        try out.write(zeros: BundleFormat.headerLength)
        try out.write(metadataBytes)
        try out.write(zeros: indexOffset - out.position)

        // Index, with its CRC computed as it is written.
        out.crc = 0
        out.computesCRC = true
        // Built in 64 KiB pieces, each written (and checksummed) at once.
        let piece = IndexPiece(out: out)
        for count in zoomCounts { try piece.put(count) }
        for entry in tiles { try piece.put(entry.key) }
        for entry in tiles { try piece.put(renumber[Int(entry.payload)]) }
        for _ in 0..<(recordsOffset - refsEnd) { try piece.put(UInt8(0)) }
        for (position, old) in order.enumerated() {
            let payload = payloads[old]
            try piece.put(UInt64(offsets[position]))
            try piece.put(payload.storedLength)
            try piece.put(payload.rawLength)
            try piece.put(payload.crc)
            try piece.put(payload.codec.rawValue)
            try piece.put(UInt8(0))
            try piece.put(UInt8(0))
            try piece.put(UInt8(0))
        }
        try piece.flush()
        out.computesCRC = false
        header.indexCRC = out.crc
        try out.write(zeros: dataOffset - out.position)

        // Payloads from the spool, in their new order, each at its aligned offset.
        try flushSpool()
        try copyPayloads(in: order, to: out) { position in dataOffset + offsets[position] }
        try out.flush()
        guard out.position == Int(header.fileLength) else {
            throw TileArchiveError(
                path: destination, fault: .io(errno: 0, reason: "wrote \(out.position) bytes, planned \(header.fileLength)"))
        }
        let headerBytes = header.encoded()
        let written = headerBytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard written == headerBytes.count else { throw ioError("write header") }
        try file.commit()
        return Summary(
            tileCount: tiles.count, payloadCount: payloads.count,
            lz4PayloadCount: payloads.reduce(0) { $0 + ($1.codec == .lz4Block ? 1 : 0) },
            fileLength: Int(header.fileLength))
    }

    // MARK: Payloads

    /// Appends a payload to the spool, laid out as the data section lays payloads out: each at a
    /// multiple of 8, followed by zeros up to the next. Payloads that follow each other in the
    /// spool and in the bundle are then one run of bytes, copied as they are by ``finish()``.
    /// Small payloads go through the spool's buffer; one of ``directSpoolBytes`` or more is written
    /// from its own array.
    private func appendPayload(_ prepared: PreparedPayload) throws(TileArchiveError) -> PayloadEntry {
        let length = prepared.stored.count
        if let source = prepared.source, copiesFromSources {
            sources.append(source)
            return PayloadEntry(
                spoolOffset: -1, source: Int32(sources.count - 1), storedLength: UInt32(length),
                rawLength: UInt32(prepared.rawLength), crc: prepared.crc, codec: prepared.codec)
        }
        let entry = PayloadEntry(
            spoolOffset: spoolLength, storedLength: UInt32(length), rawLength: UInt32(prepared.rawLength),
            crc: prepared.crc, codec: prepared.codec)
        let padding = BundleFormat.aligned(length) - length
        if length >= Self.directSpoolBytes {
            // What the buffer holds, the payload and its padding: one system call.
            try spoolBuffer.withUnsafeBytes { buffered in
                prepared.stored.withUnsafeBytes { bytes in
                    Self.zeroPadding.withUnsafeBytes { zeros in
                        Result { () throws(TileArchiveError) in
                            try writeSpool([buffered, bytes, UnsafeRawBufferPointer(rebasing: zeros[0..<padding])])
                        }
                    }
                }
            }.get()
            spoolBuffer.removeAll(keepingCapacity: true)
        } else {
            if spoolBuffer.count + length + padding > Self.spoolBufferCapacity { try flushSpool() }
            // From a borrowed buffer: `append(contentsOf:)` of the array would retain and release
            // it, an object last touched by the worker thread that made it.
            prepared.stored.withUnsafeBytes { spoolBuffer.append(contentsOf: $0) }
            if padding > 0 { spoolBuffer.append(contentsOf: repeatElement(0, count: padding)) }
        }
        spoolLength += length + padding
        return entry
    }

    private static let zeroPadding = [UInt8](repeating: 0, count: BundleFormat.alignment)

    /// Payloads this long or longer skip the spool's buffer.
    static let directSpoolBytes = 64 << 10

    private func flushSpool() throws(TileArchiveError) {
        guard !spoolBuffer.isEmpty else { return }
        try spoolBuffer.withUnsafeBytes { bytes in Result { () throws(TileArchiveError) in try writeSpool([bytes]) } }.get()
        spoolBuffer.removeAll(keepingCapacity: true)
    }

    /// Writes `pieces`, one after the other, at the end of the spool file (one `pwritev` if the
    /// kernel takes it all).
    private func writeSpool(_ pieces: [UnsafeRawBufferPointer]) throws(TileArchiveError) {
        var vectors = pieces.filter { !$0.isEmpty }.map {
            iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count)
        }
        let total = pieces.reduce(0) { $0 + $1.count }
        try transferSpool(&vectors, at: spoolFlushed, length: total, writing: true)
        spoolFlushed += total
    }

    /// Copies the spooled payloads to `out` in the order `order`, payload `order[i]` at `offset(i)`.
    ///
    /// Payloads that follow each other both in the spool and in `order` form runs (the spool pads
    /// them as the data section does). A run of ``kernelCopyBytes`` or more is copied by the
    /// kernel from the spool to the file (`sendfile(2)` on Linux: no copy through this process);
    /// shorter runs are gathered into chunks of about ``copyChunkBytes`` and copied through
    /// memory: within a chunk the spool ranges are read in spool order, neighbours less than
    /// ``copyGapBytes`` apart in one `pread`, then written out in the new order.
    private func copyPayloads(in order: [Int], to out: BufferedOutput, offset: (Int) -> Int) throws(TileArchiveError) {
        var staging: [UInt8] = []
        var gap: [UInt8] = []
        // Positions gathered to copy through memory: always a range, since anything else copied
        // first copies what is gathered.
        var gathered = 0..<0
        var gatheredBytes = 0
        var sinceFlush = 0
        var kernelCopies = copiesInKernel
        func gather(_ positions: Range<Int>) {
            assert(gathered.isEmpty || gathered.upperBound == positions.lowerBound)
            gathered = (gathered.isEmpty ? positions.lowerBound : gathered.lowerBound)..<positions.upperBound
        }
        func copyGathered() throws(TileArchiveError) {
            guard !gathered.isEmpty else { return }
            try copyThroughMemory(gathered, order: order, staging: &staging, gap: &gap, to: out, offset: offset)
            sinceFlush += gatheredBytes
            gathered = 0..<0
            gatheredBytes = 0
        }
        var position = 0
        if order.contains(where: { payloads[$0].copied >= 0 }) { try copySource?.checkUnchanged() }
        while position < order.count {
            if payloads[order[position]].copied >= 0, let copySource {
                // The run starting here: payloads back to back in the copy source, in this order
                // (their padding, zero in that file too, copied with them).
                try copyGathered()
                let start = payloads[order[position]].copied
                var runEnd = start + Int(payloads[order[position]].storedLength)
                var end = position + 1
                while end < order.count, payloads[order[end]].copied == BundleFormat.aligned(runEnd) {
                    runEnd = payloads[order[end]].copied + Int(payloads[order[end]].storedLength)
                    end += 1
                }
                try out.write(zeros: offset(position) - out.position)
                try copyRange(of: copySource, at: start, length: runEnd - start, to: out, staging: &staging, kernelCopies: &kernelCopies)
                sinceFlush += runEnd - start
                position = end
                if sinceFlush >= Self.copyChunkBytes {
                    file.flushInBackground()
                    sinceFlush = 0
                }
                continue
            }
            if payloads[order[position]].source >= 0 {
                try copyGathered()
                try out.write(zeros: offset(position) - out.position)
                try copyFromSource(payloads[order[position]], to: out, staging: &staging, kernelCopies: &kernelCopies)
                sinceFlush += Int(payloads[order[position]].storedLength)
                position += 1
                if sinceFlush >= Self.copyChunkBytes {
                    file.flushInBackground()
                    sinceFlush = 0
                }
                continue
            }
            // The run starting here: payloads back to back in the spool, in this order.
            let start = payloads[order[position]].spoolOffset
            var runEnd = start + Int(payloads[order[position]].storedLength)
            var end = position + 1
            while end < order.count, payloads[order[end]].source < 0, payloads[order[end]].spoolOffset == BundleFormat.aligned(runEnd) {
                runEnd = payloads[order[end]].spoolOffset + Int(payloads[order[end]].storedLength)
                end += 1
            }
            let runLength = runEnd - start
            if kernelCopies && runLength >= Self.kernelCopyBytes {
                try copyGathered()
                try out.write(zeros: offset(position) - out.position)
                // With the zeros after it, unless it ends the data section (the spool has them too).
                let copied = end < order.count ? BundleFormat.aligned(runEnd) - start : runLength
                kernelCopies = try out.copy(from: spool, at: start, length: copied, what: "the spool")
                if kernelCopies {
                    sinceFlush += copied
                } else {
                    // The kernel cannot copy between these files: through memory from now on.
                    gather(position..<end)
                    gatheredBytes += runLength
                }
            } else {
                gather(position..<end)
                gatheredBytes += runLength
            }
            if gatheredBytes >= Self.copyChunkBytes { try copyGathered() }
            position = end
            if sinceFlush >= Self.copyChunkBytes {
                // Let the disk take what is written while the next payloads are copied.
                file.flushInBackground()
                sinceFlush = 0
            }
        }
        try copyGathered()
        if order.contains(where: { payloads[$0].copied >= 0 }) { try copySource?.checkUnchanged() }
    }

    /// Appends `length` bytes of `source` from `offset`: by the kernel when it can, else through
    /// `staging` in chunks of ``copyChunkBytes``.
    private func copyRange(
        of source: CopySource, at offset: Int, length: Int, to out: BufferedOutput, staging: inout [UInt8], kernelCopies: inout Bool
    ) throws(TileArchiveError) {
        if kernelCopies {
            kernelCopies = try out.copy(from: source.fd, at: offset, length: length, what: source.path)
            if kernelCopies { return }
        }
        if staging.count < min(length, Self.copyChunkBytes) { staging = Self.unfilled(min(length, Self.copyChunkBytes)) }
        var done = 0
        while done < length {
            let n = min(length - done, staging.count)
            try staging.withUnsafeMutableBytes { buffer in
                Result { () throws(TileArchiveError) in
                    let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n])
                    try source.read(into: chunk, at: offset + done)
                    try out.write(UnsafeRawBufferPointer(chunk))
                }
            }.get()
            done += n
        }
    }

    /// Appends a payload from its source file, checked to be the version read before and after
    /// the copy; by the kernel when it can, else through `staging`.
    private func copyFromSource(
        _ payload: PayloadEntry, to out: BufferedOutput, staging: inout [UInt8],
        kernelCopies: inout Bool
    ) throws(TileArchiveError) {
        let source = sources[Int(payload.source)]
        let length = Int(payload.storedLength)
        let fd = try source.openUnchanged()
        defer { close(fd) }
        if kernelCopies {
            kernelCopies = try out.copy(from: fd, at: 0, length: length, what: source.path)
        }
        if !kernelCopies {
            if staging.count < length { staging = Self.unfilled(length) }
            try staging.withUnsafeMutableBytes { buffer in
                Result { () throws(TileArchiveError) in
                    try MappedBytes.readFully(
                        fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length]), at: 0, path: source.path)
                    try out.write(UnsafeRawBufferPointer(rebasing: buffer[0..<length]))
                }
            }.get()
        }
        try source.checkUnchanged(fd)
    }

    /// Copies the spooled payloads at `positions` of `order` through `staging`, which is laid out
    /// as that stretch of the data section: each payload is read from the spool straight to its
    /// place there, with the zero padding that follows it in the spool as in the data section
    /// (the spool is read in its own order, payloads close to each other in it in one `preadv`,
    /// the bytes between them into `gap`), then the stretch is written in one call.
    private func copyThroughMemory(
        _ positions: Range<Int>, order: [Int], staging: inout [UInt8], gap: inout [UInt8],
        to out: BufferedOutput, offset: (Int) -> Int
    ) throws(TileArchiveError) {
        guard let first = positions.first else { return }
        let last = positions.upperBound - 1
        let start = offset(first)
        let length = offset(last) + Int(payloads[order[last]].storedLength) - start
        try out.write(zeros: start - out.position)
        if staging.count < length { staging = Self.unfilled(max(length, staging.count + staging.count / 2)) }
        if gap.count < Self.copyGapBytes { gap = Self.unfilled(Self.copyGapBytes) }
        // Spool order: payloads are spooled in the order of their (old) numbers.
        var bySpool = positions.map { (payload: order[$0], position: $0) }
        bySpool.sort { $0.payload < $1.payload }
        try staging.withUnsafeMutableBytes { buffer in
            gap.withUnsafeMutableBytes { gapBuffer in
                Result { () throws(TileArchiveError) in
                    var vectors: [iovec] = []
                    vectors.reserveCapacity(64)
                    var readFrom = -1  // spool offset where `vectors` start, -1 when there are none
                    var readEnd = 0  // and where they end
                    var gapBytes = 0  // read and not used: at most another chunk's worth
                    func read() throws(TileArchiveError) {
                        guard readFrom >= 0 else { return }
                        try transferSpool(&vectors, at: readFrom, length: readEnd - readFrom, writing: false)
                        vectors.removeAll(keepingCapacity: true)
                        readFrom = -1
                    }
                    for (number, position) in bySpool {
                        let payload = payloads[number]
                        // With its padding, but for the stretch's last payload (the next byte is not ours).
                        let span = position == last ? Int(payload.storedLength) : BundleFormat.aligned(Int(payload.storedLength))
                        guard span > 0 else { continue }
                        if readFrom >= 0 {
                            let skip = payload.spoolOffset - readEnd
                            if skip < 0 || skip > Self.copyGapBytes || gapBytes + skip > Self.copyChunkBytes
                                || vectors.count + 2 > Self.vectorsPerCall
                            {
                                try read()
                            } else if skip > 0 {
                                vectors.append(iovec(iov_base: gapBuffer.baseAddress, iov_len: skip))
                                gapBytes += skip
                            }
                        }
                        if readFrom < 0 { readFrom = payload.spoolOffset }
                        vectors.append(iovec(iov_base: buffer.baseAddress! + (offset(position) - start), iov_len: span))
                        readEnd = payload.spoolOffset + span
                    }
                    try read()
                    try out.write(UnsafeRawBufferPointer(rebasing: buffer[0..<length]))
                }
            }
        }.get()
    }

    /// Vectors per `preadv` (Linux's IOV_MAX).
    static let vectorsPerCall = 1024

    /// Writes `vectors` to the spool at `offset` (`pwritev`), or reads them from it (`preadv`):
    /// `length` bytes in all, however many calls the kernel takes (`vectors` is changed).
    private func transferSpool(_ vectors: inout [iovec], at offset: Int, length: Int, writing: Bool) throws(TileArchiveError) {
        var done = 0
        var first = 0  // the first vector not transferred whole
        while done < length {
            let n = vectors.withUnsafeBufferPointer { v in
                writing
                    ? pwritev(spool, v.baseAddress! + first, Int32(v.count - first), off_t(offset + done))
                    : preadv(spool, v.baseAddress! + first, Int32(v.count - first), off_t(offset + done))
            }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw ioError(writing ? "write spool" : "read spool") }
            done += n
            // Skip what was transferred: whole vectors, then part of the next.
            var left = n
            while first < vectors.count, left >= vectors[first].iov_len {
                left -= vectors[first].iov_len
                first += 1
            }
            if left > 0 {
                vectors[first].iov_base = vectors[first].iov_base.map { $0 + left }
                vectors[first].iov_len -= left
            }
        }
    }

    /// A buffer of `count` bytes that a read fills before any is used: not zeroed first (zeroing
    /// the staging buffers of ``copyPayloads(in:to:offset:)`` was 2% of a 50,000-tile import's
    /// writer thread, mostly first-touch page faults it spends on pages the read touches anyway).
    private static func unfilled(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { _, initialized in initialized = count }
    }

    /// Stored bytes copied per chunk through memory at ``finish()``.
    static let copyChunkBytes = 2 << 20
    /// Spool bytes between two payloads of a chunk that are read rather than seeked over.
    static let copyGapBytes = 64 << 10
    /// Runs of spooled payloads this long or longer are copied by the kernel (where it can):
    /// below this, a system call per run costs more than copying through a buffer.
    static let kernelCopyBytes = 32 << 10
    #if os(Linux)
    static let kernelCopyAvailable = true
    #else
    static let kernelCopyAvailable = false
    #endif

    /// Whether payload `number` stores exactly the bytes `prepared` would.
    private func payload(_ number: Int, equals prepared: PreparedPayload) throws(TileArchiveError) -> Bool {
        let payload = payloads[number]
        let length = prepared.stored.count
        guard Int(payload.rawLength) == prepared.rawLength, Int(payload.storedLength) == length,
            payload.codec == prepared.codec
        else { return false }
        guard length > 0 else { return true }
        let spooled: UnsafeRawPointer
        if payload.copied >= 0, let copySource {
            ensure(&compareBuffer, capacity: length)
            try copySource.read(into: UnsafeMutableRawBufferPointer(rebasing: compareBuffer[0..<length]), at: payload.copied)
            return prepared.stored.withUnsafeBytes { memcmp(compareBuffer.baseAddress!, $0.baseAddress!, length) == 0 }
        }
        if payload.source >= 0 {
            let source = sources[Int(payload.source)]
            let fd = try source.openUnchanged()
            defer { close(fd) }
            ensure(&compareBuffer, capacity: length)
            try MappedBytes.readFully(
                fd, into: UnsafeMutableRawBufferPointer(rebasing: compareBuffer[0..<length]), at: 0, path: source.path)
            try source.checkUnchanged(fd)
            return prepared.stored.withUnsafeBytes { memcmp(compareBuffer.baseAddress!, $0.baseAddress!, length) == 0 }
        }
        if payload.spoolOffset >= spoolFlushed {
            // Still in the buffer.
            let start = payload.spoolOffset - spoolFlushed
            return spoolBuffer.withUnsafeBytes { buffer in
                prepared.stored.withUnsafeBytes { memcmp(buffer.baseAddress! + start, $0.baseAddress!, length) == 0 }
            }
        }
        ensure(&compareBuffer, capacity: length)
        var done = 0
        while done < length {
            let n = pread(spool, compareBuffer.baseAddress?.advanced(by: done), length - done, off_t(payload.spoolOffset + done))
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw ioError("read spool") }
            done += n
        }
        spooled = UnsafeRawPointer(compareBuffer.baseAddress!)
        return prepared.stored.withUnsafeBytes { memcmp(spooled, $0.baseAddress!, length) == 0 }
    }

    private func ensure(_ buffer: inout UnsafeMutableRawBufferPointer, capacity: Int) {
        guard buffer.count < capacity else { return }
        buffer.deallocate()
        buffer = .allocate(byteCount: max(capacity, buffer.count * 2), alignment: 16)
    }

    private func ioError(_ what: String) -> TileArchiveError {
        let code = errno
        return TileArchiveError(path: destination, fault: .io(errno: code, reason: "\(what): \(String(cString: strerror(code)))"))
    }
}

/// The first payload of each key (CRC, stored length, codec), found by the key's CRC: an
/// open-addressing table (linear probing, at most half full) of 8-byte slots, each a payload
/// number and its CRC; the caller checks the rest of the key against the payload. A `Dictionary`
/// hashes each key with SipHash, grows by rehashing and keeps keys and values apart (two cache
/// misses per lookup in a table of 50,000 payloads): the lookup was 8% of a 50,000-tile import's
/// writer thread. A CRC is already well spread: one multiplication places it.
private struct FirstPayloadTable {
    /// `payload << 32 | crc`, or `empty`.
    private var slots: [UInt64] = []
    private var count = 0
    private var shift: UInt64 = 64
    private static let empty = UInt64.max  // payload number UInt32.max: a bundle holds fewer payloads

    private func slot(of crc: UInt32) -> Int {
        Int(truncatingIfNeeded: (UInt64(crc) &* 0x9E37_79B9_7F4A_7C15) >> shift)
    }

    /// The first payload added with `crc` for which `matches` holds.
    func first(crc: UInt32, where matches: (UInt32) -> Bool) -> UInt32? {
        guard !slots.isEmpty else { return nil }
        let mask = slots.count - 1
        var i = slot(of: crc)
        while slots[i] != Self.empty {
            let entry = slots[i]
            if UInt32(truncatingIfNeeded: entry) == crc, matches(UInt32(truncatingIfNeeded: entry >> 32)) {
                return UInt32(truncatingIfNeeded: entry >> 32)
            }
            i = (i + 1) & mask
        }
        return nil
    }

    mutating func insert(crc: UInt32, payload: UInt32) {
        if 2 * (count + 1) > slots.count { grow() }
        let mask = slots.count - 1
        var i = slot(of: crc)
        while slots[i] != Self.empty { i = (i + 1) & mask }
        slots[i] = UInt64(payload) << 32 | UInt64(crc)
        count += 1
    }

    /// Room for `payloads` payloads without growing again.
    mutating func reserve(_ payloads: Int) {
        while 2 * payloads > slots.count { grow() }
    }

    private mutating func grow() {
        let old = slots
        let capacity = max(1024, 2 * slots.count)
        slots = [UInt64](repeating: Self.empty, count: capacity)
        shift = UInt64(64 - capacity.trailingZeroBitCount)
        count = 0
        for entry in old where entry != Self.empty {
            insert(crc: UInt32(truncatingIfNeeded: entry), payload: UInt32(truncatingIfNeeded: entry >> 32))
        }
    }
}

/// The index as it is built: little-endian values stored into a 64 KiB buffer written to `out`
/// when full (a stored value costs a bounds check and a store, not an array access).
private final class IndexPiece {
    private let out: BufferedOutput
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
    private var filled = 0

    init(out: BufferedOutput) { self.out = out }
    deinit { buffer.deallocate() }

    @inline(__always)
    func put<T: FixedWidthInteger>(_ value: T) throws(TileArchiveError) {
        let size = MemoryLayout<T>.size
        if filled + size > buffer.count { try flush() }
        buffer.storeBytes(of: value.littleEndian, toByteOffset: filled, as: T.self)
        filled += size
    }

    func flush() throws(TileArchiveError) {
        try out.write(UnsafeRawBufferPointer(rebasing: buffer[0..<filled]))
        filled = 0
    }
}

/// A write buffer over a file descriptor that can compute a CRC-32 of what passes through it.
final class BufferedOutput {
    let fd: Int32
    let path: String
    private let buffer: UnsafeMutableRawBufferPointer
    private var buffered = 0
    private(set) var position = 0
    var crc: UInt32 = 0
    var computesCRC = false
    private static let capacity = 1 << 20

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
        buffer = .allocate(byteCount: Self.capacity, alignment: 16)
    }

    deinit { buffer.deallocate() }

    func write(_ bytes: UnsafeRawBufferPointer) throws(TileArchiveError) {
        if computesCRC { crc = BundleFormat.crc32(bytes, continuing: crc) }
        position += bytes.count
        if buffered + bytes.count > Self.capacity { try flush() }
        if bytes.count >= Self.capacity {
            try writeAll(bytes)
        } else if let source = bytes.baseAddress {
            (buffer.baseAddress! + buffered).copyMemory(from: source, byteCount: bytes.count)
            buffered += bytes.count
        }
    }

    func write<T: FixedWidthInteger>(littleEndian value: T) throws(TileArchiveError) {
        try withUnsafeBytes(of: value.littleEndian) { raw in Result { () throws(TileArchiveError) in try write(raw) } }.get()
    }

    func write(zeros count: Int) throws(TileArchiveError) {
        var left = count
        while left > 0 {
            let n = min(left, Self.zeros.count)
            try Self.zeros.withUnsafeBytes { raw in
                Result { () throws(TileArchiveError) in try write(UnsafeRawBufferPointer(rebasing: raw[0..<n])) }
            }.get()
            left -= n
        }
    }
    private static let zeros = [UInt8](repeating: 0, count: 4096)

    func write(_ bytes: [UInt8]) throws(TileArchiveError) {
        try bytes.withUnsafeBytes { raw in Result { () throws(TileArchiveError) in try write(raw) } }.get()
    }

    func flush() throws(TileArchiveError) {
        try writeAll(UnsafeRawBufferPointer(rebasing: buffer[0..<buffered]))
        buffered = 0
    }

    /// Appends `length` bytes of file `source` from `offset`, copied by the kernel:
    /// `copy_file_range(2)` (which a file system may do without copying: a reflink, a server-side
    /// copy), else `sendfile(2)`. Returns false, having written nothing, when the kernel cannot copy
    /// between these two files.
    func copy(from source: Int32, at offset: Int, length: Int, what: String) throws(TileArchiveError) -> Bool {
        #if os(Linux)
        precondition(!computesCRC, "a checksummed section is not copied by the kernel")
        try flush()
        var from = off_t(offset)
        var done = 0
        if let copyFileRange = Self.copyFileRange {
            while done < length {
                let n = copyFileRange(source, &from, fd, nil, length - done, 0)
                if n < 0 {
                    let code = errno
                    if code == EINTR || code == EAGAIN { continue }
                    // Not between these files (another file system on an old kernel, say): sendfile.
                    if done == 0, code == EXDEV || code == EINVAL || code == ENOSYS || code == EOPNOTSUPP || code == EBADF { break }
                    throw TileArchiveError(
                        path: path, fault: .io(errno: code, reason: "copy from \(what): \(String(cString: strerror(code)))"))
                }
                guard n > 0 else {
                    throw TileArchiveError(
                        path: path, fault: .io(errno: 0, reason: "copy from \(what): it ended \(length - done) bytes early"))
                }
                done += n
            }
            if done == length {
                position += length
                return true
            }
        }
        while done < length {
            let n = sendfile(fd, source, &from, length - done)
            if n < 0 {
                let code = errno
                if code == EINTR || code == EAGAIN { continue }
                if done == 0, code == EINVAL || code == ENOSYS || code == EOPNOTSUPP { return false }
                throw TileArchiveError(path: path, fault: .io(errno: code, reason: "copy from \(what): \(String(cString: strerror(code)))"))
            }
            guard n > 0 else {
                throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "copy from \(what): it ended \(length - done) bytes early"))
            }
            done += n
        }
        position += length
        return true
        #else
        return false
        #endif
    }

    #if os(Linux)
    /// glibc's `copy_file_range` (2.27 and later), looked up at run time: Swift's Glibc module does
    /// not declare it (it is a GNU extension).
    private static let copyFileRange: CopyFileRange? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "copy_file_range") else { return nil }
        return unsafeBitCast(symbol, to: CopyFileRange.self)
    }()
    private typealias CopyFileRange =
        @convention(c) (Int32, UnsafeMutablePointer<off_t>?, Int32, UnsafeMutablePointer<off_t>?, Int, UInt32) -> Int
    #endif

    private func writeAll(_ bytes: UnsafeRawBufferPointer) throws(TileArchiveError) {
        var done = 0
        while done < bytes.count {
            let n = Foundation.write(fd, bytes.baseAddress?.advanced(by: done), bytes.count - done)
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                let code = errno
                throw TileArchiveError(path: path, fault: .io(errno: code, reason: "write: \(String(cString: strerror(code)))"))
            }
            done += n
        }
    }
}
