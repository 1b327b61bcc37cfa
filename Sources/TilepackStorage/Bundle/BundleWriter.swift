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
///
/// Its parts: adding tiles and sharing payloads (this file), the spool (`BundleWriter+Spool.swift`),
/// what ``finish()`` writes before the payloads (`BundleWriter+Finish.swift`: order, layout,
/// header, index) and the payloads' copy (`BundleWriter+PayloadCopy.swift`).
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
    let options: Options
    let file: AtomicFile
    let spool: Int32
    /// Bytes of the spool: those below `spoolFlushed` are in the file, the rest in `spoolBuffer`.
    var spoolLength = 0
    var spoolFlushed = 0
    var spoolBuffer: [UInt8] = []
    static let spoolBufferCapacity = 1 << 20
    @exclusivity(unchecked) private var finished = false

    struct TileEntry {
        var key: UInt64
        var payload: UInt32
    }
    struct PayloadEntry {
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
    @exclusivity(unchecked) var tiles: [TileEntry] = []
    @exclusivity(unchecked) var payloads: [PayloadEntry] = []
    /// The files stored payloads are copied from at ``finish()`` instead of the spool.
    var sources: [SourceFile] = []
    /// A payload's key (CRC, stored length, codec: equal for equal raw bytes, the coding being a
    /// function of the bytes and the options) -> the first payload with that key; further ones
    /// chain in `collisions`.
    @exclusivity(unchecked) private var byKey = FirstPayloadTable()
    @exclusivity(unchecked) private var collisions: [UInt32: UInt32] = [:]
    var compareBuffer: UnsafeMutableRawBufferPointer
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
    public init(
        destination: String, content: TileContent, metadata: TileMetadata = TileMetadata(),
        options: Options = Options(), overwrite: Bool = false
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
        self.file = try AtomicFile(destination: destination, overwrite: overwrite)
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

    func ioError(_ what: String) -> TileArchiveError {
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
