import Foundation
import TilepackCore
internal import CTilepackLZ4

/// Writes a `.tilepack` bundle (see `Specs/bundle-format.md`), streaming.
///
/// Tiles may be added in any order. Each new payload is compressed (LZ4 kept only when it saves at
/// least ``Options/minimumLZ4Saving``) and appended to an unlinked spool file beside the destination;
/// memory holds only the index: 16 bytes per tile and about 40 per distinct payload. Identical tiles
/// share one payload, found by hash and confirmed by comparing bytes. ``finish()`` writes the header,
/// metadata and index, then copies the payloads in order of zoom and Hilbert curve position (so
/// tiles near each other on the map are near each other in the file) into a temporary file that is
/// fsynced and renamed over the destination. The output depends only on the tiles, the content and
/// the metadata, never on the order of ``addTile(at:bytes:)`` calls.
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

        public init(minimumLZ4Saving: Double = 1.0 / 32, compresses: Bool = true) {
            self.minimumLZ4Saving = minimumLZ4Saving
            self.compresses = compresses
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
    private let metadata: TileMetadata
    private let options: Options
    private let file: AtomicFile
    private let spool: Int32
    private var spoolLength = 0
    private var finished = false

    private struct TileEntry {
        var key: UInt64
        var payload: UInt32
    }
    private struct PayloadEntry {
        var spoolOffset: Int
        var storedLength: UInt32
        var rawLength: UInt32
        var crc: UInt32
        var codec: BundleFormat.Codec
    }
    private var tiles: [TileEntry] = []
    private var payloads: [PayloadEntry] = []
    /// Hash of the raw bytes -> the first payload with that hash; further ones chain in `collisions`.
    private var byHash: [Int: UInt32] = [:]
    private var collisions: [UInt32: UInt32] = [:]
    private var compressBuffer: UnsafeMutableRawBufferPointer
    private var compareBuffer: UnsafeMutableRawBufferPointer

    /// Prepares to write a bundle of `content` tiles at `destination`.
    ///
    /// - Throws: ``TileArchiveError/Fault/alreadyExists`` when the destination exists and
    ///   `overwrite` is false; ``TileArchiveError/Fault/invalidMetadata(_:)`` when the metadata's
    ///   `format` contradicts `content`, or the metadata is over the format's limit.
    public init(destination: String, content: TileContent, metadata: TileMetadata = TileMetadata(),
                options: Options = Options(), overwrite: Bool = false) throws(TileArchiveError) {
        func fail(_ fault: TileArchiveError.Fault) -> TileArchiveError { TileArchiveError(path: destination, fault: fault) }
        if case .encoded(let format) = content, let declared = metadata[TileMetadata.Key.format],
           TileFormat(metadataValue: declared) != format {
            throw fail(.invalidMetadata("format '\(declared)' contradicts the bundle's content (\(format))"))
        }
        if case .rawBitmap(let layout) = content {
            guard (1...BundleFormat.maximumBitmapSide).contains(layout.width), (1...BundleFormat.maximumBitmapSide).contains(layout.height),
                  let length = layout.byteCount, length <= BundleFormat.maximumTileLength else {
                throw fail(.invalidMetadata("raw tiles of \(layout): width and height must be 1...\(BundleFormat.maximumBitmapSide)"))
            }
        }
        guard BundleMetadataCoding.encode(metadata).count <= BundleFormat.maximumMetadataLength else {
            throw fail(.invalidMetadata("the metadata is over the format's limit of \(BundleFormat.maximumMetadataLength) bytes"))
        }
        self.destination = destination
        self.content = content
        self.metadata = metadata
        self.options = options
        self.file = try AtomicFile(destination: destination, overwrite: overwrite)
        // The spool lives beside the destination and is unlinked at once: it vanishes with the
        // writer, even if the process dies.
        let spoolPath = file.temporaryPath + ".spool"
        let fd = open(spoolPath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            throw fail(.io(errno: code, reason: "create \(spoolPath): \(String(cString: strerror(code)))"))
        }
        unlink(spoolPath)
        spool = fd
        compressBuffer = .allocate(byteCount: 0, alignment: 16)
        compareBuffer = .allocate(byteCount: 0, alignment: 16)
    }

    deinit {
        close(spool)
        compressBuffer.deallocate()
        compareBuffer.deallocate()
        if !finished { file.discard() }
    }

    /// Adds a tile. For a raw-bitmap bundle the bytes are the pixels, exactly the layout's size.
    public func addTile(at tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws(TileArchiveError) {
        precondition(!finished, "BundleWriter used after finish()")
        func fail(_ reason: String) -> TileArchiveError {
            TileArchiveError(path: destination, fault: .invalidTile(tile: tile, reason: reason))
        }
        guard bytes.count <= BundleFormat.maximumTileLength else {
            throw TileArchiveError(path: destination, fault: .tileTooLarge(tile: tile, size: bytes.count, limit: BundleFormat.maximumTileLength))
        }
        if case .rawBitmap(let layout) = content, bytes.count != layout.byteCount {
            throw fail("\(bytes.count) bytes, but a raw \(layout) tile is \(layout.byteCount ?? 0) bytes")
        }
        guard tiles.count < BundleFormat.maximumCount else { throw fail("a bundle holds at most \(BundleFormat.maximumCount) tiles") }
        var hasher = Hasher()
        hasher.combine(bytes.count)
        hasher.combine(bytes: bytes)
        let hash = hasher.finalize()

        // A payload with the same hash and the same bytes is shared.
        var candidate = byHash[hash]
        while let number = candidate {
            if try payload(Int(number), equals: bytes) {
                tiles.append(TileEntry(key: BundleFormat.key(of: tile), payload: number))
                return
            }
            candidate = collisions[number]
        }

        let number = UInt32(payloads.count)
        let entry = try appendPayload(bytes)
        payloads.append(entry)
        if let first = byHash[hash] {
            // Chain the new payload after the first one with this hash.
            collisions[number] = collisions[first]
            collisions[first] = number
        } else {
            byHash[hash] = number
        }
        tiles.append(TileEntry(key: BundleFormat.key(of: tile), payload: number))
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
        for (i, entry) in tiles.enumerated() {
            while entry.key >= BundleFormat.zoomBase(zoom + 1) { zoom += 1 }
            guard let tile = BundleFormat.tile(key: entry.key, zoom: zoom) else { continue }
            if i > 0, tiles[i - 1].key == entry.key {
                throw TileArchiveError(path: destination, fault: .invalidTile(tile: tile, reason: "added twice"))
            }
            zoomCounts[zoom] += 1
            let hilbert = BundleFormat.hilbertKey(of: tile)
            firstUse[Int(entry.payload)] = min(firstUse[Int(entry.payload)], hilbert)
        }
        let order = payloads.indices.sorted { firstUse[$0] < firstUse[$1] }
        firstUse = []
        var renumber = [UInt32](repeating: 0, count: payloads.count)
        for (position, old) in order.enumerated() { renumber[old] = UInt32(position) }

        // Layout.
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

        let fd = open(file.temporaryPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
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
        for count in zoomCounts { try out.write(littleEndian: count) }
        for entry in tiles { try out.write(littleEndian: entry.key) }
        for entry in tiles { try out.write(littleEndian: renumber[Int(entry.payload)]) }
        try out.write(zeros: recordsOffset - out.position)
        for (position, old) in order.enumerated() {
            let payload = payloads[old]
            try out.write(littleEndian: UInt64(offsets[position]))
            try out.write(littleEndian: payload.storedLength)
            try out.write(littleEndian: payload.rawLength)
            try out.write(littleEndian: payload.crc)
            try out.write(littleEndian: payload.codec.rawValue)
            try out.write(zeros: 3)
        }
        out.computesCRC = false
        header.indexCRC = out.crc
        try out.write(zeros: dataOffset - out.position)

        // Payloads from the spool, in their new order, each at its aligned offset.
        for (position, old) in order.enumerated() {
            try out.write(zeros: dataOffset + offsets[position] - out.position)
            let payload = payloads[old]
            try readSpool(payload, into: &compressBuffer)
            try out.write(UnsafeRawBufferPointer(rebasing: compressBuffer[0..<Int(payload.storedLength)]))
        }
        try out.flush()
        guard out.position == Int(header.fileLength) else {
            throw TileArchiveError(path: destination, fault: .io(errno: 0, reason: "wrote \(out.position) bytes, planned \(header.fileLength)"))
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

    /// Compresses (when it pays) and appends a payload to the spool.
    private func appendPayload(_ bytes: UnsafeRawBufferPointer) throws(TileArchiveError) -> PayloadEntry {
        var stored = bytes
        var codec = BundleFormat.Codec.stored
        let saving = max(1, Int((Double(bytes.count) * options.minimumLZ4Saving).rounded(.up)))
        if options.compresses, bytes.count > saving, let source = bytes.baseAddress {
            // LZ4 fails (returns 0) when the output would not fit: exactly "does not pay".
            let capacity = bytes.count - saving
            ensure(&compressBuffer, capacity: capacity)
            let produced = LZ4_compress_default(
                source.assumingMemoryBound(to: CChar.self),
                compressBuffer.baseAddress?.assumingMemoryBound(to: CChar.self),
                Int32(bytes.count), Int32(capacity))
            if produced > 0 {
                stored = UnsafeRawBufferPointer(rebasing: compressBuffer[0..<Int(produced)])
                codec = .lz4Block
            }
        }
        let entry = PayloadEntry(
            spoolOffset: spoolLength, storedLength: UInt32(stored.count), rawLength: UInt32(bytes.count),
            crc: BundleFormat.crc32(stored), codec: codec)
        var done = 0
        while done < stored.count {
            let n = pwrite(spool, stored.baseAddress?.advanced(by: done), stored.count - done, off_t(spoolLength + done))
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw ioError("write spool") }
            done += n
        }
        spoolLength += stored.count
        return entry
    }

    /// Whether payload `number` holds exactly `bytes` (read back from the spool and decompressed).
    private func payload(_ number: Int, equals bytes: UnsafeRawBufferPointer) throws(TileArchiveError) -> Bool {
        let payload = payloads[number]
        guard Int(payload.rawLength) == bytes.count else { return false }
        try readSpool(payload, into: &compareBuffer)
        guard let other = bytes.baseAddress, let spooled = compareBuffer.baseAddress else { return bytes.isEmpty }
        switch payload.codec {
        case .stored:
            return memcmp(spooled, other, bytes.count) == 0
        case .lz4Block:
            ensure(&compressBuffer, capacity: bytes.count)
            guard let decompressed = compressBuffer.baseAddress else { return false }
            let produced = LZ4_decompress_safe(
                spooled.assumingMemoryBound(to: CChar.self),
                decompressed.assumingMemoryBound(to: CChar.self),
                Int32(payload.storedLength), Int32(bytes.count))
            guard produced == Int32(bytes.count) else {
                throw TileArchiveError(path: destination, fault: .io(errno: 0, reason: "the spool file changed under the writer"))
            }
            return memcmp(decompressed, other, bytes.count) == 0
        }
    }

    private func readSpool(_ payload: PayloadEntry, into buffer: inout UnsafeMutableRawBufferPointer) throws(TileArchiveError) {
        let length = Int(payload.storedLength)
        ensure(&buffer, capacity: length)
        var done = 0
        while done < length {
            let n = pread(spool, buffer.baseAddress?.advanced(by: done), length - done, off_t(payload.spoolOffset + done))
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw ioError("read spool") }
            done += n
        }
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

/// A write buffer over a file descriptor that can compute a CRC-32 of what passes through it.
private final class BufferedOutput {
    let fd: Int32
    let path: String
    private var buffer: [UInt8] = []
    private(set) var position = 0
    var crc: UInt32 = 0
    var computesCRC = false
    private let capacity = 1 << 20

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
        buffer.reserveCapacity(capacity)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(TileArchiveError) {
        if computesCRC { crc = BundleFormat.crc32(bytes, continuing: crc) }
        position += bytes.count
        if buffer.count + bytes.count > capacity { try flush() }
        if bytes.count >= capacity {
            try writeAll(bytes)
        } else {
            buffer.append(contentsOf: bytes)
        }
    }

    func write<T: FixedWidthInteger>(littleEndian value: T) throws(TileArchiveError) {
        try withUnsafeBytes(of: value.littleEndian) { raw in Result { () throws(TileArchiveError) in try write(raw) } }.get()
    }

    func write(zeros count: Int) throws(TileArchiveError) {
        guard count > 0 else { return }
        try write([UInt8](repeating: 0, count: count))
    }

    func write(_ bytes: [UInt8]) throws(TileArchiveError) {
        try bytes.withUnsafeBytes { raw in Result { () throws(TileArchiveError) in try write(raw) } }.get()
    }

    func flush() throws(TileArchiveError) {
        try buffer.withUnsafeBytes { raw in Result { () throws(TileArchiveError) in try writeAll(raw) } }.get()
        buffer.removeAll(keepingCapacity: true)
    }

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
