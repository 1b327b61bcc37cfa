import TilepackCore

/// The tile layer settings an archive implies: what ``ArchiveTileSource/configure(_:tileSize:)``
/// applies to a layer.
public struct ArchiveLayerConfiguration: Hashable, Sendable {
    /// The layer's tile size: the one asked for, else the archive's when it keeps Core's `TileSize`
    /// rule, else ``TileSize/default`` (256).
    public var tileSize: Int
    /// The archive's `bounds`: tiles fully outside are never requested. `nil`: unbounded.
    public var boundingBox: GeoBoundingBox?
    /// The archive's zoom levels: `minzoom`...`maxzoom` from the metadata, else the levels that
    /// hold tiles. `nil` for an archive with neither.
    public var archiveZoomLevels: ClosedRange<Int>?
    /// The map view levels at which the layer is shown: from the first level whose tiles (at
    /// ``tileSize``) the archive can serve up to the view's deepest level, 20. Past the archive's
    /// deepest zoom the layer's fallback draws the deepest tiles cropped and scaled up (overzoom;
    /// `hasTile` says no there). `nil`: none.
    public var visibleZoomLevels: ClosedRange<Int>?
    /// The view levels at which the archive serves tiles of the layer's own zoom, within 0...20;
    /// deeper visible levels are overzoomed. `nil`: none.
    public var servedZoomLevels: ClosedRange<Int>?
    /// Whether the tiles may be transparent: false for JPEG, for raw bitmaps without alpha and for
    /// PNG/WebP whose first tile cannot hold alpha; true otherwise and for `type` = `overlay`.
    public var transparent: Bool
    /// Metadata that could not be used, and how each setting was found.
    public var notes: [String]
}

extension ArchiveLayerConfiguration {
    /// The configuration of a layer of `tileSize` (nil: the archive's own) over `reader`'s archive.
    static func make(reader: ArchiveTileReader, tileSize: Int?) -> ArchiveLayerConfiguration {
        let archive = reader.archive
        var notes: [String] = []
        let native = reader.archiveTileSize.flatMap { TileSize.isValid($0) ? $0 : nil }
        let size = tileSize ?? native ?? TileSize.default
        if tileSize == nil {
            notes.append(
                native.map { "tile size \($0) from the archive" }
                    ?? reader.archiveTileSize.map {
                        "tile size \(TileSize.default): the archive's \($0) px tiles break the rule (\(TileSize.rule))"
                    }
                    ?? "tile size \(TileSize.default) (the archive shows none)")
        }

        var metadata = TileMetadata()
        do {
            metadata = try archive.metadata()
        } catch {
            notes.append("metadata unreadable: \(error)")
        }

        var box: GeoBoundingBox?
        do {
            box = try metadata.bounds
            if box == nil { notes.append("no bounds: unbounded") }
        } catch {
            notes.append("\(error): unbounded")
        }

        let zooms = archiveZoomLevels(archive, metadata: metadata, notes: &notes)
        let (visible, served) = zooms.map { viewLevels(showing: $0, reader: reader, tileSize: size) } ?? (nil, nil)
        let transparent = mayBeTransparent(archive, metadata: metadata, notes: &notes)
        return ArchiveLayerConfiguration(
            tileSize: size, boundingBox: box, archiveZoomLevels: zooms,
            visibleZoomLevels: visible, servedZoomLevels: served,
            transparent: transparent, notes: notes)
    }

    /// `minzoom`...`maxzoom` from the metadata, else (either missing) from the levels that hold
    /// tiles; nil, with a note, when they are unknown or out of order.
    private static func archiveZoomLevels(
        _ archive: any TileArchive, metadata: TileMetadata, notes: inout [String]
    ) -> ClosedRange<Int>? {
        var declaredMin: Int?, declaredMax: Int?
        do { declaredMin = try metadata.minZoom } catch { notes.append("\(error)") }
        do { declaredMax = try metadata.maxZoom } catch { notes.append("\(error)") }
        let stored = (try? archive.zoomLevels()) ?? []
        let low = declaredMin ?? stored.first?.zoom
        let high = declaredMax ?? stored.last?.zoom
        if let low, let high, low <= high {
            if declaredMin == nil || declaredMax == nil {
                notes.append("zoom levels \(low)...\(high) partly from the tiles (minzoom/maxzoom missing)")
            }
            return low...high
        } else if let low, let high {
            notes.append("minzoom \(low) is above maxzoom \(high): zoom levels unknown")
        }
        return nil
    }

    /// The view levels showing the archive's `zooms` in a layer of `tileSize`: those where the
    /// layer is visible and those the archive serves (see ``visibleZoomLevels`` and ``servedZoomLevels``).
    private static func viewLevels(
        showing zooms: ClosedRange<Int>, reader: ArchiveTileReader, tileSize size: Int
    ) -> (visible: ClosedRange<Int>?, served: ClosedRange<Int>?) {
        // The layer tile zooms the archive serves, then the view levels showing them.
        var tileZooms = zooms
        switch reader.relation(tileSize: size) {
        case .same: break
        case .merge(let levels):
            tileZooms = max(0, zooms.lowerBound - min(levels, ArchiveTileReader.maximumMergeLevels))...zooms.upperBound
        case .split(let levels): tileZooms = zooms.lowerBound...min(TileCoordinate.maximumZoom, zooms.upperBound + levels)
        }
        let shift = size.trailingZeroBitCount - 8  // view level = tile zoom + shift
        let first = tileZooms.lowerBound == 0 ? 0 : max(0, tileZooms.lowerBound + shift)
        let last = min(20, tileZooms.upperBound + shift)
        if first <= last {
            return (first...20, first...last)
        } else if last < 0 {
            return (0...20, nil)  // every archive tile is shallower than the view's first level: all overzoom
        }
        return (nil, nil)
    }

    /// Whether the tiles may be transparent (see ``transparent``), with a note where it is assumed
    /// or forced by `type` = `overlay`.
    private static func mayBeTransparent(_ archive: any TileArchive, metadata: TileMetadata, notes: inout [String]) -> Bool {
        var transparent = true
        switch archive.content {
        case .rawBitmap(let layout):
            transparent = layout.pixelFormat.hasAlpha
        case .encoded(.jpeg):
            transparent = false
        case .encoded, nil:
            if let alpha = AlphaProbe.firstTileMayHaveAlpha(archive) {
                transparent = alpha
            } else {
                notes.append("transparency unknown: assumed transparent")
            }
        }
        if (try? metadata.layerType) == .overlay, !transparent {
            transparent = true
            notes.append("type overlay: transparent")
        }
        return transparent
    }
}

/// Whether an image can hold transparent pixels, from its headers: PNG colour types with alpha or
/// a `tRNS` chunk; WebP `VP8X` with the alpha flag or lossless (`VP8L`) with its alpha hint.
enum AlphaProbe {
    static func firstTileMayHaveAlpha(_ archive: any TileArchive) -> Bool? {
        struct Stop: Error {}
        var answer: Bool?
        try? archive.forEachTile { _, bytes in
            answer = mayHaveAlpha(bytes)
            throw Stop()
        }
        return answer
    }

    /// `nil` for bytes that are neither PNG nor WebP or that end too early.
    static func mayHaveAlpha(_ bytes: UnsafeRawBufferPointer) -> Bool? {
        switch TileFormat.sniff(bytes) {
        case .png: return pngMayHaveAlpha(bytes)
        case .webp: return webpMayHaveAlpha(bytes)
        case .jpeg: return false
        default: return nil
        }
    }

    private static func u32be(_ b: UnsafeRawBufferPointer, _ at: Int) -> Int {
        Int(b[at]) << 24 | Int(b[at + 1]) << 16 | Int(b[at + 2]) << 8 | Int(b[at + 3])
    }

    static func pngMayHaveAlpha(_ b: UnsafeRawBufferPointer) -> Bool? {
        guard b.count >= 33 else { return nil }
        let colourType = b[25]
        if colourType == 4 || colourType == 6 { return true }
        // Walk the chunks up to the image data looking for tRNS (at most 64 chunks).
        var offset = 8
        for _ in 0..<64 {
            guard offset + 8 <= b.count else { return false }
            let length = u32be(b, offset)
            let type = (b[offset + 4], b[offset + 5], b[offset + 6], b[offset + 7])
            if type == (0x74, 0x52, 0x4E, 0x53) { return true }  // tRNS
            if type == (0x49, 0x44, 0x41, 0x54) || type == (0x49, 0x45, 0x4E, 0x44) { return false }  // IDAT, IEND
            guard length <= b.count else { return false }
            offset += 12 + length
        }
        return false
    }

    static func webpMayHaveAlpha(_ b: UnsafeRawBufferPointer) -> Bool? {
        guard b.count >= 30 else { return nil }
        let chunk = (b[12], b[13], b[14], b[15])
        switch chunk {
        case (0x56, 0x50, 0x38, 0x58): return b[20] & 0x10 != 0  // VP8X: the alpha flag
        case (0x56, 0x50, 0x38, 0x4C):  // VP8L: bit 28 of the 32 bits after the 0x2F signature
            let bits = UInt32(b[21]) | UInt32(b[22]) << 8 | UInt32(b[23]) << 16 | UInt32(b[24]) << 24
            return bits & (1 << 28) != 0
        case (0x56, 0x50, 0x38, 0x20): return false  // VP8: lossy, no alpha
        default: return nil
        }
    }
}
