import Foundation
import TilepackCore

/// A bundle read through a byte source (a remote object) without its whole index, for `sync`
/// (Specs/updates.md §8.1): opening reads the header, the metadata and the zoom table and keys
/// (8 bytes a tile); a tile's payload number (4 bytes) and payload record (24 bytes) are read
/// when the tile is, and ``forEachTile(where:_:)`` announces those of all the tiles it reads to
/// the source before reading them, then their payloads, so that a remote source fetches each in
/// few requests. A bundle's index is 36 bytes a tile; a sync of a few changed tiles reads 8.
///
/// Without the whole index its CRC cannot be checked. Every value read is checked as
/// ``BundleArchive`` checks it (the header and metadata by their CRCs, the keys ascending and of
/// their zoom, a payload number below the count, a record inside the data section, a payload by
/// its CRC-32 and LZ4 size), so nothing is read out of bounds; a caller that must trust the
/// values themselves checks them otherwise (`sync`: each tile against its hash, the result
/// against the index's identity).
package final class SparseBundleArchive: TileArchive, @unchecked Sendable {
    package let path: String
    package let content: TileContent?
    let source: any ByteSource
    /// What the payload numbers and records are read through (``source`` unless told otherwise).
    let entries: any ByteSource
    let head: BundleArchive.Head
    /// The zoom table and the keys, as the index holds them.
    let table: [UInt8]
    /// The first index entry of each zoom level, and one past the last (32 values).
    let zoomStarts: [Int]

    /// Whether `source` holds a bundle (by its magic).
    package static func isBundle(_ source: any ByteSource) -> Bool {
        (try? source.bytes(offset: 0, length: min(source.count, BundleFormat.magic.count))) == BundleFormat.magic
    }

    /// Opens the bundle `source` holds; `entries` (the same object) is what payload numbers and
    /// records are read through, when that is to be told apart from the payloads' reads.
    package init(source: any ByteSource, entries: (any ByteSource)? = nil) throws(TileArchiveError) {
        self.source = source
        self.entries = entries ?? source
        path = source.name
        let size = source.count
        func read(_ offset: Int, _ length: Int) throws(TileArchiveError) -> [UInt8] {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(min(length, MappedBytes.residentChunk))
            do {
                // In pieces: memory grows with the bytes received, not with a length a header claims.
                while bytes.count < length {
                    let piece = min(MappedBytes.residentChunk, length - bytes.count)
                    try source.withBytes(offset: offset + bytes.count, length: piece) { bytes.append(contentsOf: $0) }
                }
            } catch {
                throw MappedBytes.archiveError(error, name: source.name)
            }
            return bytes
        }
        // The header, then the header and metadata (of at most the format's limit) checked together.
        let first = try read(0, min(size, BundleFormat.headerLength))
        var metadataEnd = first.count
        if first.count == BundleFormat.headerLength {
            let declared = first.withUnsafeBytes { BundleHeader(decoding: $0).metadataLength }
            metadataEnd = BundleFormat.headerLength + Int(min(declared, UInt64(BundleFormat.maximumMetadataLength)))
        }
        let front = try read(0, min(size, metadataEnd))
        let head: BundleArchive.Head
        do { head = try front.withUnsafeBytes { try BundleArchive.checkHead($0, size: size, path: source.name) } } catch {
            throw MappedBytes.archiveError(error, name: source.name)
        }
        self.head = head
        content = head.content
        try BundleArchive.refuseHeldIndex(
            length: head.refsOffset - head.indexOffset, what: "index keys (its zoom table and 8 bytes a tile)", tiles: head.tileCount,
            payloads: head.payloadCount, path: source.name)
        table = try read(head.indexOffset, head.refsOffset - head.indexOffset)
        do { zoomStarts = try table.withUnsafeBytes { try BundleArchive.checkKeys($0, head: head, path: source.name) } } catch {
            throw MappedBytes.archiveError(error, name: source.name)
        }
    }

    /// The tiles' coordinates in index order, (zoom, x, y).
    package func tileCoordinates() throws(TileArchiveError) -> [TileCoordinate] {
        var tiles: [TileCoordinate] = []
        tiles.reserveCapacity(head.tileCount)
        for zoom in 0..<BundleFormat.zoomLevelCount {
            for entry in zoomStarts[zoom]..<zoomStarts[zoom + 1] {
                guard let tile = BundleFormat.tile(key: key(atEntry: entry), zoom: zoom) else {
                    throw TileArchiveError(path: path, fault: .corrupt("index entry \(entry) is not a tile of zoom \(zoom)"))
                }
                tiles.append(tile)
            }
        }
        return tiles
    }

    private func key(atEntry entry: Int) -> UInt64 {
        table.withUnsafeBytes {
            UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: BundleFormat.zoomTableLength + 8 * entry, as: UInt64.self))
        }
    }

    private func entry(of tile: TileCoordinate) -> Int? {
        BundleFormat.entry(of: tile, zoomStarts: zoomStarts) { key(atEntry: $0) }
    }

    /// The checked payload record of index entry `entry`.
    private func payload(ofEntry entry: Int, tile: TileCoordinate) throws -> BundleArchive.Payload {
        let number = Int(
            try entries.withBytes(offset: head.refsOffset + 4 * entry, length: 4) {
                UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self))
            })
        guard number < head.payloadCount else {
            throw TileArchiveError(
                path: path, fault: .corrupt("index entry \(entry): payload \(number) is not one of the \(head.payloadCount) payloads"))
        }
        return try entries.withBytes(
            offset: head.recordsOffset + BundleFormat.payloadRecordLength * number, length: BundleFormat.payloadRecordLength
        ) {
            try BundleArchive.payload(
                record: $0, number: number, tile: tile, limits: (head.maximumTileLength, head.rawTileLength, head.dataLength), path: path)
        }
    }

    /// The tile's bytes, its payload checked and decompressed.
    private func withBytes<R>(of payload: BundleArchive.Payload, tile: TileCoordinate, _ body: (UnsafeRawBufferPointer) throws -> R) throws
        -> R
    {
        try source.withBytes(offset: head.dataOffset + payload.offset, length: payload.storedLength) { stored in
            try BundleArchive.checkCRC(payload, stored, tile: tile, path: path)
            switch payload.codec {
            case .stored:
                return try body(stored)
            case .lz4Block:
                return try withUnsafeTemporaryAllocation(byteCount: payload.rawLength, alignment: 16) { buffer in
                    try BundleArchive.decompress(payload, stored, into: buffer, tile: tile, path: path)
                    return try body(UnsafeRawBufferPointer(buffer))
                }
            }
        }
    }

    // MARK: TileArchive

    package func metadata() throws -> TileMetadata { head.metadata }

    package func containsTile(at tile: TileCoordinate) throws -> Bool { entry(of: tile) != nil }

    package func withTileBytes<R>(at tile: TileCoordinate, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        guard let entry = entry(of: tile) else { return nil }
        return try withBytes(of: payload(ofEntry: entry, tile: tile), tile: tile, body)
    }

    package func zoomLevels() throws -> [ZoomLevelSummary] {
        (0..<BundleFormat.zoomLevelCount).compactMap { zoom in
            let count = zoomStarts[zoom + 1] - zoomStarts[zoom]
            return count > 0 ? ZoomLevelSummary(zoom: zoom, tileCount: count) : nil
        }
    }

    package func forEachTile(_ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws {
        for tile in try tileCoordinates() {
            _ = try withTileBytes(at: tile) { try body(tile, $0) }
        }
    }

    /// Calls `body` for the tiles `wanted` accepts, in file order: the payload numbers of those
    /// tiles are announced to the source and read, then their payload records, then their payloads.
    package func forEachTile(where wanted: (TileCoordinate) -> Bool, _ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws
    {
        var chosen: [(entry: Int, tile: TileCoordinate)] = []
        for (entry, tile) in try tileCoordinates().enumerated() where wanted(tile) { chosen.append((entry, tile)) }
        try entries.willRead(chosen.map { (head.refsOffset + 4 * $0.entry)..<(head.refsOffset + 4 * $0.entry + 4) })
        var numbers: [Int] = []
        numbers.reserveCapacity(chosen.count)
        for item in chosen {
            numbers.append(
                Int(
                    try entries.withBytes(offset: head.refsOffset + 4 * item.entry, length: 4) {
                        UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self))
                    }))
        }
        let recordLength = BundleFormat.payloadRecordLength
        try entries.willRead(
            numbers.filter { $0 < head.payloadCount }.map {
                (head.recordsOffset + recordLength * $0)..<(head.recordsOffset + recordLength * ($0 + 1))
            })
        var payloads: [(tile: TileCoordinate, payload: BundleArchive.Payload)] = []
        payloads.reserveCapacity(chosen.count)
        for item in chosen { payloads.append((item.tile, try payload(ofEntry: item.entry, tile: item.tile))) }
        payloads.sort { $0.payload.offset < $1.payload.offset }
        try source.willRead(
            payloads.map { (head.dataOffset + $0.payload.offset)..<(head.dataOffset + $0.payload.offset + $0.payload.storedLength) })
        for item in payloads {
            try withBytes(of: item.payload, tile: item.tile) { try body(item.tile, $0) }
        }
    }
}
