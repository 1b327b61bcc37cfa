import Foundation
import TilepackCore

/// What ``BundleWriter/finish()`` writes, in file order: the tiles sorted and summed up, the
/// payloads' new order, the layout of the sections and the header that declares it, the metadata,
/// the index (with its CRC-32), then the payloads (`BundleWriter+PayloadCopy.swift`).
extension BundleWriter {
    func write() throws(TileArchiveError) -> Summary {
        tiles.sort { $0.key < $1.key }
        var (zoomCounts, levels, firstUse) = try summarizeSortedTiles()
        let order = Self.payloadOrder(releasing: &firstUse)
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
        var layout = layout(order: order, metadataBytes: metadataBytes, zoomCounts: zoomCounts)

        let fd = FileSystem.open(file.temporaryPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ioError("create \(file.temporaryPath)") }
        defer { close(fd) }
        let out = BufferedOutput(fd: fd, path: destination)

        // Header placeholder, metadata, padding.
        try out.write(zeros: BundleFormat.headerLength)
        try out.write(metadataBytes)
        try out.write(zeros: layout.indexOffset - out.position)
        layout.header.indexCRC = try writeIndex(layout, zoomCounts: zoomCounts, order: order, renumber: renumber, to: out)
        try out.write(zeros: layout.dataOffset - out.position)

        // Payloads from the spool, in their new order, each at its aligned offset.
        try flushSpool()
        let dataOffset = layout.dataOffset, offsets = layout.offsets
        try copyPayloads(in: order, to: out) { position in dataOffset + offsets[position] }
        try out.flush()
        let header = layout.header
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

    /// One pass over the tiles, sorted by key: the tiles at each zoom, each zoom's extent, and
    /// each payload's first use (the smallest Hilbert key of the tiles using it, which orders the
    /// payloads). A tile added twice fails the write.
    private func summarizeSortedTiles() throws(TileArchiveError) -> (
        zoomCounts: [UInt64], levels: [TileContentSummary.Level], firstUse: [UInt64]
    ) {
        var zoomCounts = [UInt64](repeating: 0, count: BundleFormat.zoomLevelCount)
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
        return (zoomCounts, levels, firstUse)
    }

    /// The payloads in the order of their first use: `order[position]` is the payload written at
    /// `position`. `firstUse` is emptied as soon as it is read (it is as long as the payloads).
    private static func payloadOrder(releasing firstUse: inout [UInt64]) -> [Int] {
        // Sorted as (key, payload) pairs in one array (a comparison that looks the keys up costs
        // twice as much). The keys differ (each tile has its own, and uses one payload), so the
        // order does not depend on the sort's stability.
        var byFirstUse = firstUse.enumerated().map { (key: $0.element, payload: $0.offset) }
        firstUse = []
        byFirstUse.sort { $0.key < $1.key }
        return byFirstUse.map(\.payload)
    }

    /// Where each section goes (Specs/bundle-format.md), and the header that says so, but for its
    /// index CRC.
    struct Layout {
        var header: BundleHeader
        var indexOffset: Int
        /// The end of the payload numbers, where the padding before the payload records starts.
        var refsEnd: Int
        var recordsOffset: Int
        var dataOffset: Int
        /// The offset of the payload at each position in the data section.
        var offsets: [Int]
    }

    private func layout(order: [Int], metadataBytes: [UInt8], zoomCounts: [UInt64]) -> Layout {
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
        header.indexOffset = UInt64(indexOffset)
        header.indexLength = UInt64(indexEnd - indexOffset)
        header.dataOffset = UInt64(dataOffset)
        header.dataLength = UInt64(dataLength)
        header.fileLength = UInt64(dataOffset + dataLength)
        header.metadataCRC = metadataBytes.withUnsafeBytes { BundleFormat.crc32($0) }
        return Layout(
            header: header, indexOffset: indexOffset, refsEnd: refsEnd, recordsOffset: recordsOffset, dataOffset: dataOffset,
            offsets: offsets)
    }

    /// Writes the index (zoom table, keys, payload numbers, padding, payload records) to `out`,
    /// which is at `layout.indexOffset`, and returns its CRC-32, computed as it is written.
    private func writeIndex(
        _ layout: Layout, zoomCounts: [UInt64], order: [Int], renumber: [UInt32], to out: BufferedOutput
    ) throws(TileArchiveError) -> UInt32 {
        out.crc = 0
        out.computesCRC = true
        // Built in 64 KiB pieces, each written (and checksummed) at once.
        let piece = IndexPiece(out: out)
        for count in zoomCounts { try piece.put(count) }
        for entry in tiles { try piece.put(entry.key) }
        for entry in tiles { try piece.put(renumber[Int(entry.payload)]) }
        for _ in 0..<(layout.recordsOffset - layout.refsEnd) { try piece.put(UInt8(0)) }
        for (position, old) in order.enumerated() {
            let payload = payloads[old]
            try piece.put(UInt64(layout.offsets[position]))
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
        return out.crc
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
