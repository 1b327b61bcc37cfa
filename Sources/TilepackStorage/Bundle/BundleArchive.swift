import Foundation
import TilepackCore

/// A `.tilepack` bundle opened for reading (see `Specs/bundle-format.md`).
///
/// Opening maps the file read-only and checks the header, the metadata block and the whole index
/// (checksums, layout, key order, zoom table), so that every later lookup can trust the index:
/// a lookup is a binary search over the mapped keys of one zoom level, and touches only the payload
/// it returns. Stored payloads are handed out without copying; LZ4 payloads are decompressed
/// straight into the caller's buffer by ``readTile(at:into:)``.
///
/// The value is immutable and holds no locks: any number of threads may read at once. Payloads are
/// checked when read (bounds, lengths, LZ4 size, and their CRC-32 unless
/// ``Options/verifiesPayloadChecksums`` is off); ``verify(checksums:)`` checks every byte of the file.
///
/// The memory-map contract: a file that is truncated or rewritten by another process *while
/// mapped* can fault the process (SIGBUS), as with any memory map. That is the default
/// (``Options/access`` `.memoryMap`) and suits files nobody else writes (an app's bundled
/// archives; bundles are written atomically by ``BundleWriter``, a new inode renamed into place,
/// which never changes a mapped file). Tools reading files that others may change use
/// `.positionalReads`: the header and index are read into memory, payloads with `pread`, and a
/// file cut underneath gives a `truncated` error instead of a crash.
public struct BundleArchive: TileArchive {
    /// How a bundle is read.
    public struct Options: Sendable, Hashable {
        /// Whether every payload read is checked against its CRC-32 (about 0.25 ns per byte).
        /// When off, a damaged stored payload is returned as is; ``BundleArchive/verify(checksums:)`` still finds it.
        public var verifiesPayloadChecksums: Bool
        /// How the file's bytes are reached.
        public var access: Access

        public init(verifiesPayloadChecksums: Bool = true, access: Access = .memoryMap) {
            self.verifiesPayloadChecksums = verifiesPayloadChecksums
            self.access = access
        }
    }

    /// How a bundle file's bytes are reached.
    public enum Access: Sendable, Hashable {
        /// Map the whole file: payloads are handed out without copying. A file cut by another
        /// process while mapped faults the reader (SIGBUS).
        case memoryMap
        /// Read the header, metadata and index into memory and each payload with `pread` when it
        /// is needed: a file cut underneath gives a `truncated` error. What the command-line
        /// tool's readers use.
        case positionalReads
    }

    public let path: String
    public let content: TileContent?
    public let options: Options
    /// The number of tiles in the index.
    public let indexedTileCount: Int
    /// The number of distinct payloads (tiles with identical bytes share one).
    public let payloadCount: Int
    /// The largest decompressed tile, in bytes: a buffer this large holds any tile of the bundle.
    public let maximumTileLength: Int

    private let bytes: MappedBytes
    private let storedMetadata: TileMetadata
    private let keysOffset: Int
    private let refsOffset: Int
    private let recordsOffset: Int
    private let dataOffset: Int
    private let dataLength: Int
    /// The first index entry of each zoom level, and one past the last entry (32 values).
    let zoomStarts: [Int]
    /// The payload length every tile of a raw-bitmap bundle has.
    private let rawTileLength: Int?

    /// Opens the bundle at `path` by memory-mapping it (``Options/access``). When the map fails
    /// (an iOS app's address space may hold no map of a multi-GB file), the bundle is read as with
    /// `.positionalReads` instead.
    public init(path: String, options: Options = Options()) throws(TileArchiveError) {
        try self.init(path: path, options: options, map: MappedBytes.init(mapping:))
    }

    /// Opens the bundle at `path`, mapping it with `map` (the tests' stand-in for a map that fails).
    init(
        path: String, options: Options, map: (String) throws(TileArchiveError) -> MappedBytes?
    ) throws(TileArchiveError) {
        let bytes: MappedBytes
        switch options.access {
        case .memoryMap:
            if let mapped = try map(path) {
                bytes = mapped
            } else {
                bytes = try MappedBytes(reading: path, residentLength: Self.residentLength)
            }
        case .positionalReads:
            bytes = try MappedBytes(reading: path, residentLength: Self.residentLength)
        }
        try self.init(bytes: bytes, path: path, options: options)
    }

    /// Opens a bundle read through `source` (an object on an HTTP server through `TilepackRemote`):
    /// the header, metadata and index are read at once (for a remote object: nothing more than
    /// its first request when they fit in it, else one more request), each payload when needed
    /// (one request), with ranges announced to the source before many tiles are read
    /// (``forEachTile(_:)``, ``forEachTile(where:_:)``). `options.access` is not used.
    public init(source: any ByteSource, options: Options = Options()) throws(TileArchiveError) {
        try Self.refuseHeldIndexPastLimit(source: source)
        try self.init(bytes: MappedBytes(source: source, residentLength: Self.residentLength), path: source.name, options: options)
    }

    /// The most bytes of index a bundle read through a byte source (a remote bundle: `info`,
    /// `extract`, `convert`, `sync` of a URL) may declare: that reader holds the index in memory
    /// whole, fetched before any tile (36 bytes a tile: 1 GiB is the index of some 29.8 million
    /// tiles). A larger one is refused before it is fetched, naming its size and this limit; a
    /// local file has no such limit (its index is read where it lies).
    public static let maximumHeldIndexLength = 1 << 30

    /// Refuses a bundle whose header (believed only when its checksum holds and its layout fits
    /// the object's size, as ``residentLength(head:size:)`` believes it) declares an index over
    /// ``maximumHeldIndexLength``: its first bytes are read (the first request's, for a remote
    /// object), nothing more.
    static func refuseHeldIndexPastLimit(source: any ByteSource) throws(TileArchiveError) {
        let head: [UInt8]
        do { head = try source.bytes(offset: 0, length: min(source.count, BundleFormat.headerLength)) } catch {
            throw MappedBytes.archiveError(error, name: source.name)
        }
        let declared = head.withUnsafeBytes { raw -> (index: Int, header: BundleHeader)? in
            let resident = residentLength(head: raw, size: source.count)
            guard resident > BundleFormat.headerLength else { return nil }
            let header = BundleHeader(decoding: raw)
            return (resident - BundleFormat.aligned(BundleFormat.headerLength + Int(header.metadataLength)), header)
        }
        guard let declared else { return }
        try refuseHeldIndex(
            length: declared.index, what: "index", tiles: Int(declared.header.tileCount), payloads: Int(declared.header.payloadCount),
            path: source.name)
    }

    /// Throws when `length` bytes of a bundle's index (`what`: the index, or its keys) are more
    /// than a reader through a byte source holds (``maximumHeldIndexLength``).
    static func refuseHeldIndex(length: Int, what: String, tiles: Int, payloads: Int, path: String) throws(TileArchiveError) {
        guard length > maximumHeldIndexLength else { return }
        throw TileArchiveError(
            path: path,
            fault: .cannotOpen(
                errno: 0,
                reason:
                    "the bundle's \(what) is declared as \(length) bytes (\(tiles) tiles, \(payloads) payloads), over the limit of \(maximumHeldIndexLength) bytes (1 GiB) that a remote bundle's \(what) may have: it is held in memory whole; download the bundle and read it as a file"
            ))
    }

    /// What reads that are not a memory map keep in memory: everything before the data section
    /// when the header's checksum holds and its length, counts and limits give the place it
    /// declares (else only the header: the checks of the header then fail on it). Nothing the
    /// header says is believed before its checksum is checked.
    static func residentLength(head: UnsafeRawBufferPointer, size: Int) -> Int {
        guard head.count >= BundleFormat.headerLength else { return head.count }
        let declaredCRC = UInt32(littleEndian: head.loadUnaligned(fromByteOffset: 124, as: UInt32.self))
        guard BundleFormat.crc32(UnsafeRawBufferPointer(rebasing: head[0..<124])) == declaredCRC else { return BundleFormat.headerLength }
        let header = BundleHeader(decoding: head)
        guard header.fileLength == UInt64(size), header.metadataLength <= UInt64(BundleFormat.maximumMetadataLength),
            header.tileCount <= UInt64(BundleFormat.maximumCount), header.payloadCount <= UInt64(BundleFormat.maximumCount)
        else { return BundleFormat.headerLength }
        let tiles = Int(header.tileCount), payloads = Int(header.payloadCount)
        let indexOffset = BundleFormat.aligned(BundleFormat.headerLength + Int(header.metadataLength))
        let records = BundleFormat.aligned(indexOffset + BundleFormat.zoomTableLength + 12 * tiles)
        let dataOffset = BundleFormat.aligned(records + BundleFormat.payloadRecordLength * payloads)
        guard header.dataOffset == UInt64(dataOffset), dataOffset <= size else { return BundleFormat.headerLength }
        return dataOffset
    }

    /// Opens a bundle held in memory (downloaded, or a fuzzer's input); `path` names it in errors.
    public init(data: Data, path: String, options: Options = Options()) throws(TileArchiveError) {
        try self.init(bytes: MappedBytes(copying: data), path: path, options: options)
    }

    private init(bytes: MappedBytes, path: String, options: Options) throws(TileArchiveError) {
        func fail(_ fault: TileArchiveError.Fault) -> TileArchiveError { TileArchiveError(path: path, fault: fault) }
        let file = bytes.buffer
        let size = bytes.fileSize
        let head = try Self.checkHead(file, size: size, path: path)
        let tileCount = head.tileCount
        let payloadCount = head.payloadCount
        guard file.count >= head.dataOffset else {
            throw fail(.truncated("the file has \(file.count) bytes before its data section, the layout needs \(head.dataOffset)"))
        }
        guard file[head.metadataEnd..<head.indexOffset].allSatisfy({ $0 == 0 }),
            file[head.indexEnd..<head.dataOffset].allSatisfy({ $0 == 0 })
        else {
            throw fail(.corrupt("alignment padding between sections is not zero"))
        }

        // Index: checksum, then the structure every lookup relies on.
        let indexCRC = BundleFormat.crc32(UnsafeRawBufferPointer(rebasing: file[head.indexOffset..<head.indexEnd]))
        guard indexCRC == head.header.indexCRC else {
            throw fail(
                .checksumMismatch(
                    region: "index (bytes \(head.indexOffset)..<\(head.indexEnd))", declared: Self.hex(head.header.indexCRC),
                    computed: Self.hex(indexCRC))
            )
        }
        guard file[(head.refsOffset + 4 * tileCount)..<head.recordsOffset].allSatisfy({ $0 == 0 }) else {
            throw fail(.corrupt("the padding after the payload numbers is not zero"))
        }
        let zoomStarts = try Self.checkKeys(
            UnsafeRawBufferPointer(rebasing: file[head.indexOffset..<head.refsOffset]), head: head, path: path)
        for i in 0..<tileCount {
            let ref = UInt32(littleEndian: file.loadUnaligned(fromByteOffset: head.refsOffset + 4 * i, as: UInt32.self))
            guard Int(ref) < payloadCount else {
                throw fail(.corrupt("index entry \(i): payload \(ref) is not one of the \(payloadCount) payloads"))
            }
        }

        self.path = path
        self.content = head.content
        self.options = options
        self.indexedTileCount = tileCount
        self.payloadCount = payloadCount
        self.maximumTileLength = head.maximumTileLength
        self.bytes = bytes
        self.storedMetadata = head.metadata
        self.keysOffset = head.keysOffset
        self.refsOffset = head.refsOffset
        self.recordsOffset = head.recordsOffset
        self.dataOffset = head.dataOffset
        self.dataLength = head.dataLength
        self.zoomStarts = zoomStarts
        self.rawTileLength = head.rawTileLength
    }

    /// What the header and metadata block of a bundle say, checked: the sections' places, the
    /// limits a payload record is checked against, the metadata.
    struct Head {
        var header: BundleHeader
        var content: TileContent
        var metadata: TileMetadata
        var tileCount: Int
        var payloadCount: Int
        var metadataEnd: Int
        var indexOffset: Int
        var keysOffset: Int
        var refsOffset: Int
        var recordsOffset: Int
        var indexEnd: Int
        var dataOffset: Int
        var dataLength: Int
        var maximumTileLength: Int
        /// The payload length every tile of a raw-bitmap bundle has.
        var rawTileLength: Int?
    }

    /// Checks the magic, the header (version, checksum, the sections' places) and the metadata
    /// block (checksum, coding) of a bundle of `size` bytes whose first bytes `file` holds (at
    /// least the header and metadata, else the error says what is missing).
    static func checkHead(_ file: UnsafeRawBufferPointer, size: Int, path: String) throws(TileArchiveError) -> Head {
        func fail(_ fault: TileArchiveError.Fault) -> TileArchiveError { TileArchiveError(path: path, fault: fault) }
        let magic = BundleFormat.magic
        let headerLength = BundleFormat.headerLength

        // Magic, then the header's version and checksum.
        guard size >= magic.count, file.count >= magic.count, zip(file.prefix(magic.count), magic).allSatisfy({ $0 == $1 }) else {
            if size < magic.count, size > 0, zip(file, magic).allSatisfy({ $0 == $1 }) {
                throw fail(.truncated("the file is \(size) bytes, shorter than the \(headerLength)-byte header"))
            }
            throw fail(.notAnArchive(detected: Self.describe(file)))
        }
        guard size >= headerLength, file.count >= headerLength else {
            throw fail(.truncated("the file is \(size) bytes, shorter than the \(headerLength)-byte header"))
        }
        let major = UInt16(littleEndian: file.loadUnaligned(fromByteOffset: 8, as: UInt16.self))
        guard major == BundleFormat.majorVersion else {
            throw fail(.unsupportedVersion("bundle format \(major).x (this reader reads 1.x)"))
        }
        let declaredHeaderCRC = UInt32(littleEndian: file.loadUnaligned(fromByteOffset: 124, as: UInt32.self))
        let headerCRC = BundleFormat.crc32(UnsafeRawBufferPointer(rebasing: file[0..<124]))
        guard declaredHeaderCRC == headerCRC else {
            throw fail(
                .checksumMismatch(region: "header (bytes 0..<124)", declared: Self.hex(declaredHeaderCRC), computed: Self.hex(headerCRC)))
        }
        let header = BundleHeader(decoding: file)
        if header.minorVersion == 0 {
            guard file[96..<124].allSatisfy({ $0 == 0 }) else {
                throw fail(.corrupt("header bytes 96..<124 are reserved and must be zero in version 1.0"))
            }
        }
        guard
            let content = BundleFormat.content(
                kind: header.contentKind, code: header.contentCode, width: header.rawWidth, height: header.rawHeight)
        else {
            throw fail(
                .corrupt(
                    "unknown content: kind \(header.contentKind), code \(header.contentCode), raw size \(header.rawWidth)x\(header.rawHeight)"
                ))
        }

        // The file's length, then each section's place, each derived from the previous one.
        guard header.fileLength == UInt64(size) else {
            if header.fileLength > UInt64(size) {
                throw fail(.truncated("the header declares \(header.fileLength) bytes, the file has \(size)"))
            }
            throw fail(
                .corrupt("\(UInt64(size) - header.fileLength) bytes follow the declared end of the bundle (\(header.fileLength) bytes)"))
        }
        guard header.metadataLength <= UInt64(BundleFormat.maximumMetadataLength) else {
            throw fail(.corrupt("metadata length \(header.metadataLength) is over the limit of \(BundleFormat.maximumMetadataLength)"))
        }
        guard header.tileCount <= UInt64(BundleFormat.maximumCount), header.payloadCount <= UInt64(BundleFormat.maximumCount) else {
            throw fail(
                .corrupt("\(header.tileCount) tiles and \(header.payloadCount) payloads: over the limit of \(BundleFormat.maximumCount)"))
        }
        guard header.payloadCount <= header.tileCount, (header.tileCount == 0) == (header.payloadCount == 0) else {
            throw fail(.corrupt("\(header.payloadCount) payloads for \(header.tileCount) tiles"))
        }
        let metadataLength = Int(header.metadataLength)
        let tileCount = Int(header.tileCount)
        let payloadCount = Int(header.payloadCount)
        let metadataEnd = headerLength + metadataLength
        let indexOffset = BundleFormat.aligned(metadataEnd)
        let refsOffset = indexOffset + BundleFormat.zoomTableLength + 8 * tileCount
        let recordsOffset = BundleFormat.aligned(refsOffset + 4 * tileCount)
        let indexEnd = recordsOffset + BundleFormat.payloadRecordLength * payloadCount
        let dataOffset = BundleFormat.aligned(indexEnd)
        guard header.indexOffset == UInt64(indexOffset) else {
            throw fail(.corrupt("the index offset is \(header.indexOffset), the layout puts it at \(indexOffset)"))
        }
        guard header.indexLength == UInt64(indexEnd - indexOffset) else {
            throw fail(
                .corrupt(
                    "the index length is \(header.indexLength), \(tileCount) tiles and \(payloadCount) payloads need \(indexEnd - indexOffset)"
                ))
        }
        guard header.dataOffset == UInt64(dataOffset) else {
            throw fail(.corrupt("the data offset is \(header.dataOffset), the layout puts it at \(dataOffset)"))
        }
        guard UInt64(dataOffset) <= header.fileLength, header.dataLength == header.fileLength - UInt64(dataOffset) else {
            if UInt64(dataOffset) > header.fileLength {
                throw fail(.truncated("the index ends at \(indexEnd), the file has \(size) bytes"))
            }
            throw fail(
                .corrupt(
                    "the data length is \(header.dataLength), the file leaves \(header.fileLength - UInt64(dataOffset)) bytes after the index"
                ))
        }
        guard Int(header.maxRawLength) <= BundleFormat.maximumTileLength else {
            throw fail(
                .corrupt(
                    "the largest tile is declared as \(header.maxRawLength) bytes, over the limit of \(BundleFormat.maximumTileLength)"))
        }
        var rawTileLength: Int?
        if case .rawBitmap(let layout) = content {
            let length = layout.byteCount ?? Int.max
            guard length <= BundleFormat.maximumTileLength else {
                throw fail(.corrupt("raw tiles of \(layout) take \(length) bytes, over the limit of \(BundleFormat.maximumTileLength)"))
            }
            guard header.maxRawLength == (payloadCount == 0 ? 0 : UInt32(length)) else {
                throw fail(.corrupt("the largest tile is declared as \(header.maxRawLength) bytes, raw tiles of \(layout) take \(length)"))
            }
            rawTileLength = length
        }

        // Metadata: checksum, then parse.
        guard file.count >= metadataEnd else {
            throw fail(.truncated("\(file.count) bytes were read, the header and metadata take \(metadataEnd)"))
        }
        let metadataBytes = UnsafeRawBufferPointer(rebasing: file[headerLength..<metadataEnd])
        let metadataCRC = BundleFormat.crc32(metadataBytes)
        guard metadataCRC == header.metadataCRC else {
            throw fail(
                .checksumMismatch(
                    region: "metadata (bytes \(headerLength)..<\(metadataEnd))", declared: Self.hex(header.metadataCRC),
                    computed: Self.hex(metadataCRC)))
        }
        let metadata: TileMetadata
        switch BundleMetadataCoding.decode(metadataBytes) {
        case .success(let value): metadata = value
        case .failure(let fault): throw fail(.corrupt("metadata block: \(fault.reason)"))
        }

        return Head(
            header: header, content: content, metadata: metadata, tileCount: tileCount, payloadCount: payloadCount,
            metadataEnd: metadataEnd, indexOffset: indexOffset, keysOffset: indexOffset + BundleFormat.zoomTableLength,
            refsOffset: refsOffset, recordsOffset: recordsOffset, indexEnd: indexEnd, dataOffset: dataOffset,
            dataLength: Int(header.dataLength), maximumTileLength: Int(header.maxRawLength), rawTileLength: rawTileLength)
    }

    /// Checks the zoom table and the keys (`table`: the index's first bytes, the zoom table then
    /// `head.tileCount` keys): each zoom's count within its level and the whole, the header's zooms,
    /// keys strictly ascending and each of its zoom. The first entry of each zoom and one past the
    /// last (32 values).
    static func checkKeys(_ table: UnsafeRawBufferPointer, head: Head, path: String) throws(TileArchiveError) -> [Int] {
        func fail(_ fault: TileArchiveError.Fault) -> TileArchiveError { TileArchiveError(path: path, fault: fault) }
        let tileCount = head.tileCount
        guard table.count >= BundleFormat.zoomTableLength + 8 * tileCount else {
            throw fail(.truncated("the index's keys end past the \(table.count) bytes read"))
        }
        var zoomStarts = [Int](repeating: 0, count: BundleFormat.zoomLevelCount + 1)
        var total = 0
        var minZoom: Int?
        var maxZoom = 0
        for zoom in 0..<BundleFormat.zoomLevelCount {
            let count = UInt64(littleEndian: table.loadUnaligned(fromByteOffset: 8 * zoom, as: UInt64.self))
            guard count <= UInt64(tileCount - total) else {
                throw fail(.corrupt("the zoom table counts more than the \(tileCount) tiles of the index (at zoom \(zoom))"))
            }
            guard count <= (1 as UInt64) << UInt64(2 * zoom) else {
                throw fail(.corrupt("the zoom table counts \(count) tiles at zoom \(zoom), which has \((1 as UInt64) << UInt64(2 * zoom))"))
            }
            if count > 0 {
                minZoom = minZoom ?? zoom
                maxZoom = zoom
            }
            total += Int(count)
            zoomStarts[zoom + 1] = total
        }
        guard total == tileCount else {
            throw fail(.corrupt("the zoom table counts \(total) tiles, the header \(tileCount)"))
        }
        guard Int(head.header.minZoom) == (minZoom ?? 0), Int(head.header.maxZoom) == maxZoom else {
            throw fail(
                .corrupt(
                    "the header's zooms \(head.header.minZoom)...\(head.header.maxZoom) disagree with the zoom table (\(minZoom ?? 0)...\(maxZoom))"
                ))
        }
        let keysOffset = BundleFormat.zoomTableLength
        var previous: UInt64? = nil
        for zoom in 0..<BundleFormat.zoomLevelCount where zoomStarts[zoom] < zoomStarts[zoom + 1] {
            let low = BundleFormat.zoomBase(zoom)
            let high = BundleFormat.zoomBase(zoom + 1)
            for i in zoomStarts[zoom]..<zoomStarts[zoom + 1] {
                let key = UInt64(littleEndian: table.loadUnaligned(fromByteOffset: keysOffset + 8 * i, as: UInt64.self))
                guard key >= low, key < high else {
                    throw fail(.corrupt("index entry \(i): key \(key) is not a zoom \(zoom) tile, as the zoom table says"))
                }
                if let previous, key <= previous {
                    throw fail(.corrupt("index entry \(i): keys are not strictly ascending"))
                }
                previous = key
            }
        }

        return zoomStarts
    }

    // MARK: TileArchive

    public func metadata() throws -> TileMetadata { storedMetadata }

    public func confirmUnchanged() throws { try bytes.confirmUnchanged() }

    public func containsTile(at tile: TileCoordinate) throws -> Bool {
        entry(of: tile) != nil
    }

    public func withTileBytes<R>(at tile: TileCoordinate, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        guard let entry = entry(of: tile) else { return nil }
        var scratch: UnsafeMutableRawBufferPointer? = nil
        defer { scratch?.deallocate() }
        let payload = try payload(number: payloadNumber(ofEntry: entry), tile: tile)
        let stored = try storedBytes(payload, tile: tile, scratch: &scratch)
        switch payload.codec {
        case .stored:
            return try body(stored)
        case .lz4Block:
            return try withUnsafeTemporaryAllocation(byteCount: payload.rawLength, alignment: 16) { buffer in
                try decompress(payload, stored, into: buffer, tile: tile)
                return try body(UnsafeRawBufferPointer(buffer))
            }
        }
    }

    public func readTile(at tile: TileCoordinate, into buffer: UnsafeMutableRawBufferPointer) throws -> Int? {
        guard let entry = entry(of: tile) else { return nil }
        let payload = try payload(number: payloadNumber(ofEntry: entry), tile: tile)
        guard payload.rawLength <= buffer.count else {
            throw TileArchiveError(path: path, fault: .bufferTooSmall(tile: tile, needed: payload.rawLength, available: buffer.count))
        }
        var scratch: UnsafeMutableRawBufferPointer? = nil
        defer { scratch?.deallocate() }
        let stored = try storedBytes(payload, tile: tile, scratch: &scratch)
        switch payload.codec {
        case .stored:
            if let source = stored.baseAddress, let destination = buffer.baseAddress {
                destination.copyMemory(from: source, byteCount: payload.rawLength)
            }
        case .lz4Block:
            try decompress(payload, stored, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<payload.rawLength]), tile: tile)
        }
        return payload.rawLength
    }

    public func zoomLevels() throws -> [ZoomLevelSummary] {
        (0..<BundleFormat.zoomLevelCount).compactMap { zoom in
            let count = zoomStarts[zoom + 1] - zoomStarts[zoom]
            return count > 0 ? ZoomLevelSummary(zoom: zoom, tileCount: count) : nil
        }
    }

    public func forEachTile(_ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws {
        var scratch: UnsafeMutableRawBufferPointer? = nil
        var readScratch: UnsafeMutableRawBufferPointer? = nil
        defer {
            scratch?.deallocate()
            readScratch?.deallocate()
        }
        var announcedZoom = -1
        try forEachEntry { entry, tile in
            if bytes.readsOnDemand, tile.zoom != announcedZoom {
                // A remote source fetches each level's payloads in few requests (neighbours together).
                announcedZoom = tile.zoom
                try bytes.willRead(try payloadRanges(entries: zoomStarts[tile.zoom]..<zoomStarts[tile.zoom + 1]))
            }
            let payload = try payload(number: payloadNumber(ofEntry: entry), tile: tile)
            let stored = try storedBytes(payload, tile: tile, scratch: &readScratch)
            switch payload.codec {
            case .stored:
                try body(tile, stored)
            case .lz4Block:
                if scratch == nil {
                    scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: maximumTileLength, alignment: 16)
                }
                guard let buffer = scratch else { return }
                let target = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<payload.rawLength])
                try decompress(payload, stored, into: target, tile: tile)
                try body(tile, UnsafeRawBufferPointer(target))
            }
        }
    }

    /// Calls `body` for the tiles `wanted` accepts, reading only those: their payloads' ranges are
    /// announced first (a remote source fetches neighbours together), then read in file order,
    /// which is the order of the calls (not (zoom, x, y)).
    public func forEachTile(
        where wanted: (TileCoordinate) -> Bool,
        _ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        var chosen: [(entry: Int, tile: TileCoordinate, payload: Payload)] = []
        try forEachEntry { entry, tile in
            if wanted(tile) { chosen.append((entry, tile, try payload(number: payloadNumber(ofEntry: entry), tile: tile))) }
        }
        chosen.sort { $0.payload.offset < $1.payload.offset }
        try bytes.willRead(chosen.map { (dataOffset + $0.payload.offset)..<(dataOffset + $0.payload.offset + $0.payload.storedLength) })
        var scratch: UnsafeMutableRawBufferPointer? = nil
        var readScratch: UnsafeMutableRawBufferPointer? = nil
        defer {
            scratch?.deallocate()
            readScratch?.deallocate()
        }
        for item in chosen {
            let stored = try storedBytes(item.payload, tile: item.tile, scratch: &readScratch)
            switch item.payload.codec {
            case .stored:
                try body(item.tile, stored)
            case .lz4Block:
                if scratch == nil { scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: maximumTileLength, alignment: 16) }
                guard let buffer = scratch else { return }
                let target = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<item.payload.rawLength])
                try decompress(item.payload, stored, into: target, tile: item.tile)
                try body(item.tile, UnsafeRawBufferPointer(target))
            }
        }
    }

    /// The data-file ranges of the payloads of `entries`, each once, ascending.
    private func payloadRanges(entries: Range<Int>) throws(TileArchiveError) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(entries.count)
        for entry in entries {
            let payload = try payload(number: payloadNumber(ofEntry: entry), tile: nil)
            ranges.append((dataOffset + payload.offset)..<(dataOffset + payload.offset + payload.storedLength))
        }
        ranges.sort { $0.lowerBound < $1.lowerBound }
        return ranges
    }

    /// Every index entry with its tile, in index order (zoom, then key).
    private func forEachEntry(_ body: (Int, TileCoordinate) throws -> Void) throws {
        for zoom in 0..<BundleFormat.zoomLevelCount {
            for entry in zoomStarts[zoom]..<zoomStarts[zoom + 1] {
                guard let tile = BundleFormat.tile(key: key(atEntry: entry), zoom: zoom) else {
                    throw TileArchiveError(path: path, fault: .corrupt("index entry \(entry) is not a tile of zoom \(zoom)"))
                }
                try body(entry, tile)
            }
        }
    }

    // MARK: Verification

    /// What ``verify(checksums:)`` checked.
    public struct Verification: Hashable, Sendable {
        public var tileCount: Int
        public var payloadCount: Int
        /// Payloads stored LZ4-compressed.
        public var lz4PayloadCount: Int
        /// Bytes of payloads as stored.
        public var storedBytes: Int
        /// Bytes of payloads once decompressed.
        public var rawBytes: Int
    }

    /// Checks every byte of the bundle: opening already checked the header, metadata and index;
    /// this checks each payload (record, place, CRC-32, LZ4 size, raw-bitmap size), that payloads
    /// follow each other with zero padding exactly as the format prescribes, that every payload is
    /// used by a tile and that the header's largest tile length is right.
    /// Calls `body` with every tile's coordinate, in index order (zoom, then key), reading no payload.
    public func forEachTileCoordinate(_ body: (TileCoordinate) throws -> Void) throws {
        try forEachEntry { _, tile in try body(tile) }
    }

    /// - Parameter checksums: `false` checks the layout only (records, ranges, padding, every
    ///   payload used), leaving each payload's CRC and LZ4 block to the reads of its tiles (which
    ///   check them), so that a caller reading every tile on several threads does not do it twice.
    public func verify(checksums: Bool = true) throws(TileArchiveError) -> Verification {
        func fail(_ text: String) -> TileArchiveError { TileArchiveError(path: path, fault: .corrupt(text)) }
        var used = [UInt64](repeating: 0, count: (payloadCount + 63) / 64)
        for entry in 0..<indexedTileCount {
            let number = payloadNumber(ofEntry: entry)
            used[number >> 6] |= 1 << UInt64(number & 63)
        }
        var scratch: UnsafeMutableRawBufferPointer? = nil
        var readScratch: UnsafeMutableRawBufferPointer? = nil
        defer {
            scratch?.deallocate()
            readScratch?.deallocate()
        }
        var result = Verification(tileCount: indexedTileCount, payloadCount: payloadCount, lz4PayloadCount: 0, storedBytes: 0, rawBytes: 0)
        var expectedOffset = 0
        var largest = 0
        for number in 0..<payloadCount {
            guard used[number >> 6] & (1 << UInt64(number & 63)) != 0 else {
                throw fail("payload \(number) is used by no tile")
            }
            let payload = try payload(number: number, tile: nil)
            guard payload.offset == expectedOffset else {
                throw fail("payload \(number) starts at data offset \(payload.offset), the layout puts it at \(expectedOffset)")
            }
            let end = payload.offset + payload.storedLength
            let next = number + 1 < payloadCount ? BundleFormat.aligned(end) : end
            // The payload and the padding after it, in one piece.
            let piece = try bytes.bytes(
                at: dataOffset + payload.offset, length: min(next, dataLength) - payload.offset,
                scratch: &readScratch, path: path)
            let stored = UnsafeRawBufferPointer(rebasing: piece[0..<payload.storedLength])
            if checksums { try checkCRC(payload, stored, tile: nil) }
            guard piece[payload.storedLength...].allSatisfy({ $0 == 0 }) else {
                throw fail("the padding after payload \(number) is not zero")
            }
            expectedOffset = next
            if payload.codec == .lz4Block {
                if checksums {
                    if scratch == nil {
                        scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: maximumTileLength, alignment: 16)
                    }
                    if let buffer = scratch {
                        try decompress(
                            payload, stored, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<payload.rawLength]), tile: nil)
                    }
                }
                result.lz4PayloadCount += 1
            }
            largest = max(largest, payload.rawLength)
            result.storedBytes += payload.storedLength
            result.rawBytes += payload.rawLength
        }
        guard expectedOffset == dataLength else {
            throw fail("the data section is \(dataLength) bytes, its payloads end at \(expectedOffset)")
        }
        guard largest == maximumTileLength else {
            throw fail("the header declares the largest tile as \(maximumTileLength) bytes, the largest is \(largest)")
        }
        return result
    }

    // MARK: Index and payloads

    @inline(__always)
    func key(atEntry entry: Int) -> UInt64 {
        UInt64(littleEndian: bytes.buffer.loadUnaligned(fromByteOffset: keysOffset + 8 * entry, as: UInt64.self))
    }

    @inline(__always)
    func payloadNumber(ofEntry entry: Int) -> Int {
        Int(UInt32(littleEndian: bytes.buffer.loadUnaligned(fromByteOffset: refsOffset + 4 * entry, as: UInt32.self)))
    }

    /// The index entry of `tile`: a binary search over the keys of its zoom level.
    private func entry(of tile: TileCoordinate) -> Int? {
        BundleFormat.entry(of: tile, zoomStarts: zoomStarts) { key(atEntry: $0) }
    }

    struct Payload {
        var codec: BundleFormat.Codec
        /// Where the stored bytes start in the data section.
        var offset: Int
        var storedLength: Int
        var rawLength: Int
        var crc: UInt32
        var number: Int
    }

    /// The stored bytes of a checked payload record, checked against its CRC-32 unless the options
    /// turn that off: a slice of the map, or read into `scratch` (valid until it is used again).
    private func storedBytes(_ payload: Payload, tile: TileCoordinate?, scratch: inout UnsafeMutableRawBufferPointer?)
        throws(TileArchiveError) -> UnsafeRawBufferPointer
    {
        let stored = try bytes.bytes(at: dataOffset + payload.offset, length: payload.storedLength, scratch: &scratch, path: path)
        if options.verifiesPayloadChecksums { try checkCRC(payload, stored, tile: tile) }
        return stored
    }

    private func checkCRC(_ payload: Payload, _ stored: UnsafeRawBufferPointer, tile: TileCoordinate?) throws(TileArchiveError) {
        try Self.checkCRC(payload, stored, tile: tile, path: path)
    }

    static func checkCRC(_ payload: Payload, _ stored: UnsafeRawBufferPointer, tile: TileCoordinate?, path: String) throws(TileArchiveError)
    {
        let computed = BundleFormat.crc32(stored)
        guard computed == payload.crc else {
            let what = tile.map { "tile \($0) (payload \(payload.number))" } ?? "payload \(payload.number)"
            throw TileArchiveError(
                path: path, fault: .checksumMismatch(region: what, declared: Self.hex(payload.crc), computed: Self.hex(computed)))
        }
    }

    /// Reads and checks payload record `number` (not its bytes); `tile` names the tile in errors.
    func payload(number: Int, tile: TileCoordinate?) throws(TileArchiveError) -> Payload {
        try Self.payload(
            record: UnsafeRawBufferPointer(rebasing: bytes.buffer[(recordsOffset + BundleFormat.payloadRecordLength * number)...]),
            number: number, tile: tile, limits: (maximumTileLength, rawTileLength, dataLength), path: path)
    }

    /// Checks the payload record at the start of `record` against the bundle's `limits` (its largest
    /// tile, its raw tiles' length, its data section's length).
    static func payload(
        record file: UnsafeRawBufferPointer, number: Int, tile: TileCoordinate?,
        limits: (maximumTileLength: Int, rawTileLength: Int?, dataLength: Int), path: String
    ) throws(TileArchiveError) -> Payload {
        let (maximumTileLength, rawTileLength, dataLength) = limits
        let offset = UInt64(littleEndian: file.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        let storedLength = Int(UInt32(littleEndian: file.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
        let rawLength = Int(UInt32(littleEndian: file.loadUnaligned(fromByteOffset: 12, as: UInt32.self)))
        let crc = UInt32(littleEndian: file.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
        let codecByte = file[20]
        // Built only on failure: the read path formats no text.
        func what() -> String { tile.map { "tile \($0) (payload \(number))" } ?? "payload \(number)" }
        func fail(_ text: String) -> TileArchiveError { TileArchiveError(path: path, fault: .corrupt("\(what()): \(text)")) }

        guard let codec = BundleFormat.Codec(rawValue: codecByte) else { throw fail("unknown codec \(codecByte)") }
        guard file[21] == 0, file[22] == 0, file[23] == 0 else {
            throw fail("reserved bytes of the payload record are not zero")
        }
        guard rawLength <= maximumTileLength else {
            throw fail("\(rawLength) bytes, more than the largest tile the header declares (\(maximumTileLength))")
        }
        if let rawTileLength, rawLength != rawTileLength {
            throw fail("\(rawLength) bytes, but every raw tile of this bundle is \(rawTileLength) bytes")
        }
        switch codec {
        case .stored:
            guard storedLength == rawLength else { throw fail("stored length \(storedLength) differs from the tile length \(rawLength)") }
        case .lz4Block:
            guard storedLength > 0, storedLength < rawLength else {
                throw fail("an LZ4 block of \(storedLength) bytes for a tile of \(rawLength) bytes (must be 1..<\(rawLength))")
            }
        }
        guard offset % UInt64(BundleFormat.alignment) == 0, offset <= UInt64(dataLength),
            UInt64(storedLength) <= UInt64(dataLength) - offset
        else {
            throw fail(
                "\(storedLength) bytes at offset \(offset) of the data section (\(dataLength) bytes) are not an aligned range inside it")
        }
        return Payload(codec: codec, offset: Int(offset), storedLength: storedLength, rawLength: rawLength, crc: crc, number: number)
    }

    /// Decompresses an LZ4 payload into `buffer` (exactly `rawLength` bytes), checking its size.
    private func decompress(
        _ payload: Payload, _ stored: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer, tile: TileCoordinate?
    ) throws(TileArchiveError) {
        try Self.decompress(payload, stored, into: buffer, tile: tile, path: path)
    }

    static func decompress(
        _ payload: Payload, _ stored: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer, tile: TileCoordinate?,
        path: String
    ) throws(TileArchiveError) {
        guard stored.baseAddress != nil, let destination = buffer.baseAddress, buffer.count >= payload.rawLength else {
            throw TileArchiveError(path: path, fault: .corrupt("payload \(payload.number): nothing to decompress"))
        }
        let produced = LZ4.decompress(stored, into: UnsafeMutableRawBufferPointer(start: destination, count: payload.rawLength))
        guard produced == payload.rawLength else {
            let what = tile.map { "tile \($0) (payload \(payload.number))" } ?? "payload \(payload.number)"
            let detail =
                produced < 0
                ? "is malformed or decompresses to more than the declared \(payload.rawLength) bytes"
                : "decompresses to \(produced) bytes, \(payload.rawLength) declared"
            throw TileArchiveError(path: path, fault: .corrupt("\(what): the LZ4 block \(detail)"))
        }
    }

    static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
    }

    /// What a file that is not a bundle looks like, for the error message.
    static func describe(_ file: UnsafeRawBufferPointer) -> String {
        if file.isEmpty { return "an empty file" }
        func starts(with text: String) -> Bool {
            let prefix = Array(text.utf8)
            return file.count >= prefix.count && zip(file, prefix).allSatisfy { $0 == $1 }
        }
        if starts(with: "SQLite format 3\u{0}") { return "an SQLite database (MBTiles?), not a .tilepack bundle" }
        if starts(with: "PMTiles") { return "a PMTiles archive, not a .tilepack bundle" }
        if let format = TileFormat.sniff(UnsafeRawBufferPointer(rebasing: file.prefix(64))), format.isRaster {
            return "a \(format) image, not a .tilepack bundle"
        }
        return "no .tilepack magic (89 54 50 4B 0D 0A 1A 0A) at the start of the file"
    }
}

// MARK: Payloads copied by a patch

extension BundleArchive {
    /// Buffers for ``forEachPayload(_:scratch:_:)``, reused from call to call (one per thread).
    package final class PayloadScratch {
        fileprivate var read: UnsafeMutableRawBufferPointer?
        fileprivate var raw: UnsafeMutableRawBufferPointer?
        package init() {}
        deinit {
            read?.deallocate()
            raw?.deallocate()
        }
    }

    /// Every index entry in index order (zoom, then key): its tile, its payload's number and its
    /// payload record (the offset counted from the start of the file), the record checked as a
    /// read checks it. No payload byte is read.
    package func forEachPayloadRecord(_ body: (TileCoordinate, Int, BundleWriter.CopiedPayload) throws -> Void) throws {
        try forEachEntry { entry, tile in
            let number = payloadNumber(ofEntry: entry)
            let payload = try payload(number: number, tile: tile)
            try body(
                tile, number,
                BundleWriter.CopiedPayload(
                    offset: dataOffset + payload.offset, storedLength: payload.storedLength, rawLength: payload.rawLength,
                    crc: payload.crc, codec: payload.codec))
        }
    }

    /// Calls `body` for the payloads `numbers` (ascending) with each one's codec, stored bytes and
    /// tile's bytes (the same buffer for a stored payload), after checking what a copy of the
    /// stored bytes relies on: their CRC-32 (whatever ``Options/verifiesPayloadChecksums`` says),
    /// the LZ4 block's size, and that the padding after the payload is zero. The data section is
    /// read in windows of about ``payloadWindowBytes`` (one read for many neighbours, not one a
    /// payload).
    package func forEachPayload(
        _ numbers: some Sequence<Int>, scratch: PayloadScratch,
        _ body: (_ number: Int, _ codec: BundleFormat.Codec, _ stored: UnsafeRawBufferPointer, _ raw: UnsafeRawBufferPointer) throws -> Void
    ) throws {
        var window = UnsafeRawBufferPointer(start: nil, count: 0)
        var windowStart = 0
        for number in numbers {
            let payload = try payload(number: number, tile: nil)
            let end = min(BundleFormat.aligned(payload.offset + payload.storedLength), dataLength)
            if payload.offset < windowStart || end > windowStart + window.count {
                let length = min(max(end - payload.offset, Self.payloadWindowBytes), dataLength - payload.offset)
                window = try bytes.bytes(at: dataOffset + payload.offset, length: length, scratch: &scratch.read, path: path)
                windowStart = payload.offset
            }
            let piece = UnsafeRawBufferPointer(rebasing: window[(payload.offset - windowStart)..<(end - windowStart)])
            let stored = UnsafeRawBufferPointer(rebasing: piece[0..<payload.storedLength])
            try checkCRC(payload, stored, tile: nil)
            guard piece[payload.storedLength...].allSatisfy({ $0 == 0 }) else {
                throw TileArchiveError(path: path, fault: .corrupt("the padding after payload \(number) is not zero"))
            }
            switch payload.codec {
            case .stored:
                try body(number, .stored, stored, stored)
            case .lz4Block:
                if scratch.raw == nil { scratch.raw = .allocate(byteCount: maximumTileLength, alignment: 16) }
                let target = UnsafeMutableRawBufferPointer(rebasing: scratch.raw![0..<payload.rawLength])
                try decompress(payload, stored, into: target, tile: nil)
                try body(number, .lz4Block, stored, UnsafeRawBufferPointer(target))
            }
        }
    }

    /// The bytes ``forEachPayload(_:scratch:_:)`` reads at once.
    static let payloadWindowBytes = 1 << 20
}

// MARK: Payload signatures

extension BundleArchive {
    /// What identifies a tile's payload without reading it: its CRC-32 and lengths, from the index
    /// and the payload record alone. Two tiles with the same signature hold the same bytes (up to a
    /// CRC-32 collision between payloads of equal lengths), so a server can build a strong ETag from
    /// it with no hashing.
    public struct PayloadSignature: Hashable, Sendable {
        /// The CRC-32 of the payload as stored (the LZ4 block for a compressed payload).
        public var crc32: UInt32
        /// The payload's length as stored.
        public var storedLength: Int
        /// The tile's length once decompressed: the length of the bytes ``withTileBytes(at:_:)`` gives.
        public var rawLength: Int
    }

    /// The signature of `tile`'s payload, or `nil` when there is no such tile: a binary search of
    /// the index and one payload record read, no payload byte touched. The values come from the
    /// index that opening checked; reading the tile still checks the payload itself.
    public func payloadSignature(at tile: TileCoordinate) -> PayloadSignature? {
        guard let entry = entry(of: tile) else { return nil }
        let record = recordsOffset + BundleFormat.payloadRecordLength * payloadNumber(ofEntry: entry)
        let file = bytes.buffer
        return PayloadSignature(
            crc32: UInt32(littleEndian: file.loadUnaligned(fromByteOffset: record + 16, as: UInt32.self)),
            storedLength: Int(UInt32(littleEndian: file.loadUnaligned(fromByteOffset: record + 8, as: UInt32.self))),
            rawLength: Int(UInt32(littleEndian: file.loadUnaligned(fromByteOffset: record + 12, as: UInt32.self))))
    }
}
