import Foundation
import TilepackCore

/// The checks of opening a bundle, before any tile is read: the header, the metadata block, the
/// zoom table and the keys (what every lookup then trusts), and what a file that is not a bundle is.
extension BundleArchive {
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
        let (header, content) = try checkHeader(file, size: size, path: path)

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
        let metadataEnd = BundleFormat.headerLength + metadataLength
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
        let rawTileLength = try checkTileLengths(header, content: content, payloadCount: payloadCount, path: path)
        let metadata = try checkMetadata(file, header: header, end: metadataEnd, path: path)
        return Head(
            header: header, content: content, metadata: metadata, tileCount: tileCount, payloadCount: payloadCount,
            metadataEnd: metadataEnd, indexOffset: indexOffset, keysOffset: indexOffset + BundleFormat.zoomTableLength,
            refsOffset: refsOffset, recordsOffset: recordsOffset, indexEnd: indexEnd, dataOffset: dataOffset,
            dataLength: Int(header.dataLength), maximumTileLength: Int(header.maxRawLength), rawTileLength: rawTileLength)
    }

    /// Checks the magic, then the header's version, checksum and reserved bytes, and the content
    /// it declares.
    private static func checkHeader(
        _ file: UnsafeRawBufferPointer, size: Int, path: String
    ) throws(TileArchiveError) -> (BundleHeader, TileContent) {
        func fail(_ fault: TileArchiveError.Fault) -> TileArchiveError { TileArchiveError(path: path, fault: fault) }
        let magic = BundleFormat.magic
        let headerLength = BundleFormat.headerLength
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
        return (header, content)
    }

    /// Checks the largest tile the header declares against the format's limit and, for raw
    /// tiles, against their layout; returns the length every raw tile has.
    private static func checkTileLengths(
        _ header: BundleHeader, content: TileContent, payloadCount: Int, path: String
    ) throws(TileArchiveError) -> Int? {
        func fail(_ text: String) -> TileArchiveError { TileArchiveError(path: path, fault: .corrupt(text)) }
        guard Int(header.maxRawLength) <= BundleFormat.maximumTileLength else {
            throw fail("the largest tile is declared as \(header.maxRawLength) bytes, over the limit of \(BundleFormat.maximumTileLength)")
        }
        guard case .rawBitmap(let layout) = content else { return nil }
        let length = layout.byteCount ?? Int.max
        guard length <= BundleFormat.maximumTileLength else {
            throw fail("raw tiles of \(layout) take \(length) bytes, over the limit of \(BundleFormat.maximumTileLength)")
        }
        guard header.maxRawLength == (payloadCount == 0 ? 0 : UInt32(length)) else {
            throw fail("the largest tile is declared as \(header.maxRawLength) bytes, raw tiles of \(layout) take \(length)")
        }
        return length
    }

    /// The metadata block (bytes up to `end`): its checksum, then its coding.
    private static func checkMetadata(
        _ file: UnsafeRawBufferPointer, header: BundleHeader, end metadataEnd: Int, path: String
    ) throws(TileArchiveError) -> TileMetadata {
        func fail(_ fault: TileArchiveError.Fault) -> TileArchiveError { TileArchiveError(path: path, fault: fault) }
        let headerLength = BundleFormat.headerLength
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
        switch BundleMetadataCoding.decode(metadataBytes) {
        case .success(let value): return value
        case .failure(let fault): throw fail(.corrupt("metadata block: \(fault.reason)"))
        }
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
