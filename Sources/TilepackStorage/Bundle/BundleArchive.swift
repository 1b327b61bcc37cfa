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
///
/// Its parts: opening and reading (this file), the checks of the header, metadata and keys made on
/// opening (`BundleArchive+OpeningChecks.swift`), ``verify(checksums:)``
/// (`BundleArchive+Verification.swift`), and the payload records a patch copies and a server's
/// ETags (`BundleArchive+PayloadRecords.swift`).
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

    let bytes: MappedBytes
    private let storedMetadata: TileMetadata
    private let keysOffset: Int
    private let refsOffset: Int
    let recordsOffset: Int
    let dataOffset: Int
    let dataLength: Int
    /// The first index entry of each zoom level, and one past the last entry (32 values).
    private let zoomStarts: [Int]
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
    func forEachEntry(_ body: (Int, TileCoordinate) throws -> Void) throws {
        for zoom in 0..<BundleFormat.zoomLevelCount {
            for entry in zoomStarts[zoom]..<zoomStarts[zoom + 1] {
                guard let tile = BundleFormat.tile(key: key(atEntry: entry), zoom: zoom) else {
                    throw TileArchiveError(path: path, fault: .corrupt("index entry \(entry) is not a tile of zoom \(zoom)"))
                }
                try body(entry, tile)
            }
        }
    }

    /// Calls `body` with every tile's coordinate, in index order (zoom, then key), reading no payload.
    public func forEachTileCoordinate(_ body: (TileCoordinate) throws -> Void) throws {
        try forEachEntry { _, tile in try body(tile) }
    }

    // MARK: Index and payloads

    @inline(__always)
    private func key(atEntry entry: Int) -> UInt64 {
        UInt64(littleEndian: bytes.buffer.loadUnaligned(fromByteOffset: keysOffset + 8 * entry, as: UInt64.self))
    }

    @inline(__always)
    func payloadNumber(ofEntry entry: Int) -> Int {
        Int(UInt32(littleEndian: bytes.buffer.loadUnaligned(fromByteOffset: refsOffset + 4 * entry, as: UInt32.self)))
    }

    /// The index entry of `tile`: a binary search over the keys of its zoom level.
    func entry(of tile: TileCoordinate) -> Int? {
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

    func checkCRC(_ payload: Payload, _ stored: UnsafeRawBufferPointer, tile: TileCoordinate?) throws(TileArchiveError) {
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
    func decompress(
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
}
