import Foundation
import TilepackCore
import TilepackImaging
import TilepackStorage

/// How an ``ArchiveTileReader`` reads.
public struct ArchiveReaderOptions: Hashable, Sendable {
    /// The width and height of the archive's tiles; `nil` (the default) reads it from the
    /// archive: the layout of a raw-bitmap bundle, or the header of its first tile.
    public var archiveTileSize: Int?
    /// The byte budget of the in-memory cache of decoded tiles; 0 (the default) caches nothing.
    public var cacheByteLimit: Int
    /// The largest width or height of an image the reader decodes; larger ones are refused
    /// before any pixel memory is allocated.
    public var maximumImageDimension: Int

    public init(
        archiveTileSize: Int? = nil, cacheByteLimit: Int = 0,
        maximumImageDimension: Int = ImageDecoder.defaultMaximumDimension
    ) {
        self.archiveTileSize = archiveTileSize
        self.cacheByteLimit = cacheByteLimit
        self.maximumImageDimension = maximumImageDimension
    }
}

/// What ``ArchiveTileReader/read(_:tileSize:pixelFormat:into:isCancelled:)`` did.
public enum ArchiveReadOutcome: Hashable, Sendable {
    /// The buffer holds the tile.
    case delivered
    /// The archive has no tile there (or it failed before and is no longer served).
    case missing
    /// `isCancelled` said stop; the buffer's contents are unspecified.
    case cancelled
}

/// Reads an archive's tiles as bitmaps of any size and pixel format: the synchronous core of the
/// adapter, usable without a tile layer.
///
/// Coordinates are XYZ (row 0 at the north); an archive that stores TMS rows (MBTiles) flips
/// them itself. A tile asked for at the archive's own tile size is decoded (PNG, JPEG, WebP)
/// straight into the caller's buffer in the asked pixel format; a raw-bitmap bundle whose layout
/// matches is LZ4-decompressed straight into the buffer, with no decoding at all.
///
/// Other sizes (retina layers): a layer tile twice (four times) the archive's size is made of the
/// 4 (16) archive tiles one (two) zooms deeper, pixel for pixel, and where some are missing the
/// tile's own archive tile scaled up fills in; a layer tile half (a quarter) the archive's size
/// is cut out of the archive tile one (two) zooms up, pixel for pixel, or else the tile's own
/// archive tile scaled down.
///
/// A tile that is damaged or does not decode is reported once (``ArchiveTileFailure``, to the
/// failure handler and in ``failures``) and not served again: ``hasTile(_:tileSize:)`` answers
/// false for it from then on. I/O errors are not remembered (the next read may succeed).
/// Safe to use from many threads at once.
public final class ArchiveTileReader: Sendable {
    /// The archive read.
    public let archive: any TileArchive
    public let options: ArchiveReaderOptions
    /// The decoded-tile cache (empty and unused when ``ArchiveReaderOptions/cacheByteLimit`` is 0).
    package let cache: DecodedTileCache

    /// The most permanently failed tiles remembered; past it the record restarts.
    public static let failureLimit = 1 << 16
    /// Layer tiles are merged from archive tiles at most this many zooms deeper (16 tiles).
    public static let maximumMergeLevels = 2

    private let failureHandler: (@Sendable (ArchiveTileFailure) -> Void)?
    private let failed = Locked<[TileCoordinate: ArchiveTileFailure]>([:])
    private let detectedTileSize = Locked<Int??>(nil)

    /// - Parameters:
    ///   - archive: the archive to read.
    ///   - options: tile size, cache budget, image size limit.
    ///   - onFailure: called once for each tile that fails permanently, on the reading thread.
    public init(
        archive: any TileArchive, options: ArchiveReaderOptions = ArchiveReaderOptions(),
        onFailure: (@Sendable (ArchiveTileFailure) -> Void)? = nil
    ) {
        self.archive = archive
        self.options = options
        self.cache = DecodedTileCache(byteLimit: options.cacheByteLimit)
        self.failureHandler = onFailure
        if let size = options.archiveTileSize { detectedTileSize.withLock { $0 = .some(size) } }
    }

    /// Opens the archive at `path` (MBTiles or bundle, told apart by its bytes) and reads it.
    public convenience init(
        path: String, options: ArchiveReaderOptions = ArchiveReaderOptions(),
        onFailure: (@Sendable (ArchiveTileFailure) -> Void)? = nil
    ) throws(TileArchiveError) {
        self.init(archive: try openTileArchive(path: path), options: options, onFailure: onFailure)
    }

    // MARK: - Tile size

    /// The width and height of the archive's tiles: the option, else the raw-bitmap layout, else
    /// the size in the header of the archive's first tile; `nil` when the archive holds no
    /// square raster tile. Found once and remembered.
    public var archiveTileSize: Int? {
        if let known = detectedTileSize.withLock({ $0 }) { return known }
        let size = Self.detectTileSize(archive)
        detectedTileSize.withLock { $0 = .some(size) }
        return size
    }

    private struct StopIteration: Error {}

    static func detectTileSize(_ archive: any TileArchive) -> Int? {
        if case .rawBitmap(let layout) = archive.content {
            return layout.width == layout.height ? layout.width : nil
        }
        var size: Int?
        do {
            try archive.forEachTile { _, bytes in
                if let info = try? ImageDecoder.imageInfo(bytes), info.width == info.height { size = info.width }
                throw StopIteration()
            }
        } catch {}
        return size
    }

    enum Relation: Equatable {
        /// Layer tile z/x/y is archive tile z/x/y.
        case same
        /// Layer tiles are `2^levels` times wider: made of archive tiles `levels` zooms deeper.
        case merge(levels: Int)
        /// Layer tiles are `2^levels` times narrower: cut out of archive tiles `levels` zooms up.
        case split(levels: Int)
    }

    func relation(tileSize: Int) -> Relation {
        guard let native = archiveTileSize, TileSize.isValid(native), tileSize != native else { return .same }
        let levels = abs(tileSize.trailingZeroBitCount - native.trailingZeroBitCount)
        return tileSize > native ? .merge(levels: levels) : .split(levels: levels)
    }

    // MARK: - Existence

    /// Whether the archive can serve the layer tile `tile` at `tileSize` pixels, answered from the
    /// archive's index (no tile is read): the tile itself, or for other sizes the archive tiles it
    /// is merged from or cut out of. False for tiles that failed before.
    public func hasTile(_ tile: TileCoordinate, tileSize: Int) -> Bool {
        switch relation(tileSize: tileSize) {
        case .same:
            return exists(tile)
        case .merge(let levels):
            if exists(tile) { return true }
            return !presentDescendants(of: tile, levels: levels).isEmpty
        case .split(let levels):
            if tile.zoom >= levels, let ancestor = tile.ancestor(atZoom: tile.zoom - levels), exists(ancestor) { return true }
            return exists(tile)
        }
    }

    /// Whether the archive holds pixels of its own for the layer tile `tile` at `tileSize` pixels,
    /// rather than only a smaller tile that would be scaled up: the tile itself, the archive tiles
    /// it is merged from (at least one), or the tile it is cut out of. Answered from the index.
    public func hasPixels(for tile: TileCoordinate, tileSize: Int) -> Bool {
        switch relation(tileSize: tileSize) {
        case .merge(let levels): !presentDescendants(of: tile, levels: levels).isEmpty
        case .same, .split: hasTile(tile, tileSize: tileSize)
        }
    }

    /// Whether the archive holds `tile` and it has not failed before.
    func exists(_ tile: TileCoordinate) -> Bool {
        if isFailed(tile) { return false }
        do {
            return try archive.containsTile(at: tile)
        } catch {
            let wrapped = wrap(error, tile)
            if wrapped.reason.isTransient { return true }  // let the read say what is wrong
            record(wrapped)
            return false
        }
    }

    /// The archive tiles `levels` zooms below `tile` that exist, with their column and row in the
    /// `2^levels` grid; none beyond ``maximumMergeLevels`` or the deepest zoom.
    private func presentDescendants(of tile: TileCoordinate, levels: Int) -> [(tile: TileCoordinate, column: Int, row: Int)] {
        guard levels <= Self.maximumMergeLevels, tile.zoom + levels <= TileCoordinate.maximumZoom else { return [] }
        let n = 1 << levels
        var result: [(tile: TileCoordinate, column: Int, row: Int)] = []
        for row in 0..<n {
            for column in 0..<n {
                let child = TileCoordinate(uncheckedZoom: tile.zoom + levels, x: (tile.x << levels) + column, y: (tile.y << levels) + row)
                if exists(child) { result.append((child, column, row)) }
            }
        }
        return result
    }

    // MARK: - Failures

    /// Every tile that failed permanently, in no particular order.
    public var failures: [ArchiveTileFailure] { failed.withLock { Array($0.values) } }

    /// Whether `tile` failed permanently before (and is not served any more).
    public func isFailed(_ tile: TileCoordinate) -> Bool { failed.withLock { $0[tile] != nil } }

    /// Remembers a permanent failure and reports it, once per tile.
    private func record(_ error: ArchiveTileError) {
        guard !error.reason.isTransient else { return }
        let failure = ArchiveTileFailure(error: error)
        let isNew = failed.withLock { map -> Bool in
            guard map[error.tile] == nil else { return false }
            if map.count >= Self.failureLimit { map.removeAll() }
            map[error.tile] = failure
            return true
        }
        if isNew { failureHandler?(failure) }
    }

    private func wrap(_ error: any Error, _ tile: TileCoordinate) -> ArchiveTileError {
        switch error {
        case let error as ArchiveTileError: error
        case let error as TileArchiveError: ArchiveTileError(archivePath: archive.path, tile: tile, reason: .archive(error.fault))
        case let error as ImagingError: ArchiveTileError(archivePath: archive.path, tile: tile, reason: .decoding(error))
        default: ArchiveTileError(archivePath: archive.path, tile: tile, reason: .archive(.io(errno: 0, reason: "\(error)")))
        }
    }

    /// Wraps `error` for `tile`, records it when permanent, and returns it to throw.
    private func fail(_ error: any Error, _ tile: TileCoordinate) -> ArchiveTileError {
        let wrapped = wrap(error, tile)
        record(wrapped)
        return wrapped
    }

    // MARK: - Reading

    /// Writes layer tile `tile` at `tileSize` x `tileSize` pixels in `pixelFormat` into `buffer`,
    /// which must hold exactly `tileSize * tileSize * pixelFormat.bytesPerPixel` bytes (a tile
    /// request's buffer).
    /// - Parameter isCancelled: asked before each archive tile is read; true stops the read.
    /// - Returns: ``ArchiveReadOutcome/missing`` when the archive cannot serve the tile.
    /// - Throws: ``ArchiveTileError`` naming the archive and the archive tile at fault.
    @discardableResult
    public func read(
        _ tile: TileCoordinate, tileSize: Int, pixelFormat: PixelFormat,
        into buffer: UnsafeMutableRawBufferPointer,
        isCancelled: () -> Bool = { false }
    ) throws(ArchiveTileError) -> ArchiveReadOutcome {
        guard TileSize.isValid(tileSize) else {
            throw ArchiveTileError(archivePath: archive.path, tile: tile, reason: .tileSize(tileSize))
        }
        let expected = tileSize * tileSize * pixelFormat.bytesPerPixel
        guard buffer.count == expected, buffer.baseAddress != nil else {
            throw ArchiveTileError(archivePath: archive.path, tile: tile, reason: .bufferSize(expected: expected, actual: buffer.count))
        }
        if isCancelled() { return .cancelled }
        switch relation(tileSize: tileSize) {
        case .same:
            return try readSame(tile, size: tileSize, format: pixelFormat, into: buffer)
        case .merge(let levels):
            return try readMerged(tile, levels: levels, size: tileSize, format: pixelFormat, into: buffer, isCancelled: isCancelled)
        case .split(let levels):
            return try readSplit(tile, levels: levels, size: tileSize, format: pixelFormat, into: buffer)
        }
    }

    /// The layer tile `tile` as a new bitmap: at `tileSize` pixels when given (merged, cut or
    /// scaled as for a layer of that size), otherwise the archive tile at its own size.
    /// Returns `nil` when the archive cannot serve it.
    public func bitmap(
        at tile: TileCoordinate, tileSize: Int? = nil, pixelFormat: PixelFormat = .rgba8888,
        isCancelled: () -> Bool = { false }
    ) throws(ArchiveTileError) -> Bitmap? {
        guard let tileSize else {
            guard !isFailed(tile) else { return nil }
            return try decoded(tile, pixelFormat)
        }
        guard TileSize.isValid(tileSize) else {
            throw ArchiveTileError(archivePath: archive.path, tile: tile, reason: .tileSize(tileSize))
        }
        var pixels = [UInt8](repeating: 0, count: tileSize * tileSize * pixelFormat.bytesPerPixel)
        var outcome = ArchiveReadOutcome.missing
        var thrown: ArchiveTileError?
        pixels.withUnsafeMutableBytes { buffer in
            do throws(ArchiveTileError) {
                outcome = try read(tile, tileSize: tileSize, pixelFormat: pixelFormat, into: buffer, isCancelled: isCancelled)
            } catch {
                thrown = error
            }
        }
        if let thrown { throw thrown }
        guard outcome == .delivered else { return nil }
        return Bitmap(width: tileSize, height: tileSize, pixelFormat: pixelFormat, pixels: pixels)
    }

    /// The archive tile at its own size, straight into `buffer` where it fits.
    private func readSame(
        _ tile: TileCoordinate, size: Int, format: PixelFormat,
        into buffer: UnsafeMutableRawBufferPointer
    ) throws(ArchiveTileError) -> ArchiveReadOutcome {
        if let cached = cache.bitmap(tile, pixelFormat: format), cached.width == size, cached.height == size {
            cached.pixels.withUnsafeBytes { buffer.copyMemory(from: $0) }
            return .delivered
        }
        if isFailed(tile) { return .missing }
        var cacheable = true
        do {
            switch archive.content {
            case .rawBitmap(let layout) where layout.width == size && layout.height == size:
                if layout.pixelFormat == format {
                    // The zero-copy path: LZ4 straight into the caller's buffer.
                    guard let count = try archive.readTile(at: tile, into: buffer) else { return .missing }
                    guard count == buffer.count else {
                        throw ArchiveTileError(
                            archivePath: archive.path, tile: tile,
                            reason: .rawPayload("\(count) bytes, a \(layout) tile takes \(buffer.count)"))
                    }
                } else {
                    guard let bitmap = try rawBitmap(tile, layout: layout) else { return .missing }
                    try bitmap.write(into: buffer, pixelFormat: format)
                }
            case .rawBitmap:
                guard let bitmap = try decodedUncached(tile, format) else { return .missing }
                try bitmap.resized(width: size, height: size).write(into: buffer)
                cacheable = false
            case .encoded, nil:
                let limit = options.maximumImageDimension
                let found = try archive.withTileBytes(at: tile) { bytes -> Bool in
                    let info = try ImageDecoder.imageInfo(bytes)
                    if info.width == size && info.height == size {
                        try ImageDecoder.decode(
                            bytes, into: buffer, pixelFormat: format,
                            expectedWidth: size, expectedHeight: size, maximumDimension: limit)
                        return true
                    }
                    let bitmap = try ImageDecoder.decode(bytes, pixelFormat: format, maximumDimension: limit)
                    try bitmap.resized(width: size, height: size).write(into: buffer)
                    return false
                }
                guard let found else { return .missing }
                cacheable = found
            }
        } catch {
            throw fail(error, tile)
        }
        if cacheable, cache.byteLimit > 0,
            let bitmap = Bitmap(width: size, height: size, pixelFormat: format, pixels: [UInt8](UnsafeRawBufferPointer(buffer)))
        {
            cache.insert(bitmap, for: tile)
        }
        return .delivered
    }

    /// A layer tile `2^levels` times the archive's size, from the archive tiles `levels` zooms
    /// deeper; missing ones are filled from the tile's own archive tile scaled up.
    private func readMerged(
        _ tile: TileCoordinate, levels: Int, size: Int, format: PixelFormat,
        into buffer: UnsafeMutableRawBufferPointer, isCancelled: () -> Bool
    ) throws(ArchiveTileError) -> ArchiveReadOutcome {
        let present = presentDescendants(of: tile, levels: levels)
        if present.isEmpty {
            guard let own = try decoded(tile, format) else { return .missing }
            try write(own.resized(width: size, height: size), into: buffer, tile: tile)
            return .delivered
        }
        let n = 1 << levels
        let cell = size / n
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        var own: Bitmap??
        for row in 0..<n {
            for column in 0..<n {
                if isCancelled() { return .cancelled }
                var drawn = false
                if let child = present.first(where: { $0.column == column && $0.row == row })?.tile {
                    do throws(ArchiveTileError) {
                        if let bitmap = try decoded(child, format) {
                            let fitted = bitmap.width == cell && bitmap.height == cell ? bitmap : bitmap.resized(width: cell, height: cell)
                            Self.copy(fitted, x: 0, y: 0, size: cell, into: buffer, bufferSide: size, atX: column * cell, atY: row * cell)
                            drawn = true
                        }
                    } catch  where !error.reason.isTransient {
                        // Reported; the tile's own archive tile fills this part instead.
                    }
                }
                if !drawn {
                    if own == nil { own = .some(try? decoded(tile, format)) }
                    if let ownBitmap = own ?? nil,
                        let part = try? ownBitmap.subSquare(levelsDown: levels, column: column, row: row, outputSize: cell)
                    {
                        Self.copy(part, x: 0, y: 0, size: cell, into: buffer, bufferSide: size, atX: column * cell, atY: row * cell)
                    }
                }
            }
        }
        return .delivered
    }

    /// A layer tile `2^levels` times narrower than the archive's, cut out of the archive tile
    /// `levels` zooms up, or else the tile's own archive tile scaled down.
    private func readSplit(
        _ tile: TileCoordinate, levels: Int, size: Int, format: PixelFormat,
        into buffer: UnsafeMutableRawBufferPointer
    ) throws(ArchiveTileError) -> ArchiveReadOutcome {
        if tile.zoom >= levels, let square = tile.subsquare(inAncestorAtZoom: tile.zoom - levels), exists(square.ancestor) {
            do throws(ArchiveTileError) {
                if let ancestor = try decoded(square.ancestor, format) {
                    if ancestor.width == size << levels && ancestor.height == size << levels {
                        Self.copy(
                            ancestor, x: square.column * size, y: square.row * size, size: size,
                            into: buffer, bufferSide: size, atX: 0, atY: 0)
                    } else {
                        let part: Bitmap
                        do {
                            part = try ancestor.subSquare(levelsDown: levels, column: square.column, row: square.row, outputSize: size)
                        } catch {
                            throw fail(error, square.ancestor)
                        }
                        try write(part, into: buffer, tile: tile)
                    }
                    return .delivered
                }
            } catch  where !error.reason.isTransient {
                // Reported; fall back to the tile's own archive tile.
            }
        }
        guard let own = try decoded(tile, format) else { return .missing }
        try write(own.resized(width: size, height: size), into: buffer, tile: tile)
        return .delivered
    }

    private func write(_ bitmap: Bitmap, into buffer: UnsafeMutableRawBufferPointer, tile: TileCoordinate) throws(ArchiveTileError) {
        do {
            try bitmap.write(into: buffer)
        } catch {
            throw ArchiveTileError(archivePath: archive.path, tile: tile, reason: .decoding(error))
        }
    }

    /// Copies the `size` x `size` square at (`x`, `y`) of `bitmap` into a square buffer of
    /// `bufferSide` pixels in the same format at (`atX`, `atY`). The caller keeps both in bounds.
    static func copy(
        _ bitmap: Bitmap, x: Int, y: Int, size: Int, into buffer: UnsafeMutableRawBufferPointer,
        bufferSide: Int, atX: Int, atY: Int
    ) {
        let bpp = bitmap.pixelFormat.bytesPerPixel
        let rowBytes = size * bpp
        let sourceStride = bitmap.stride
        let destinationStride = bufferSide * bpp
        guard let destination = buffer.baseAddress, rowBytes > 0,
            x >= 0, y >= 0, x + size <= bitmap.width, y + size <= bitmap.height,
            atX >= 0, atY >= 0, atX + size <= bufferSide, (atY + size) * destinationStride <= buffer.count
        else { return }
        bitmap.pixels.withUnsafeBytes { source in
            guard let base = source.baseAddress else { return }
            for row in 0..<size {
                (destination + (atY + row) * destinationStride + atX * bpp)
                    .copyMemory(from: base + (y + row) * sourceStride + x * bpp, byteCount: rowBytes)
            }
        }
    }

    // MARK: - Decoding whole archive tiles

    /// Archive tile `tile` at its own size in `format`, from the cache or decoded (and cached);
    /// `nil` when the archive has no such tile. Failures are recorded.
    func decoded(_ tile: TileCoordinate, _ format: PixelFormat) throws(ArchiveTileError) -> Bitmap? {
        if let cached = cache.bitmap(tile, pixelFormat: format) { return cached }
        guard let bitmap = try decodedUncached(tile, format) else { return nil }
        cache.insert(bitmap, for: tile)
        return bitmap
    }

    private func decodedUncached(_ tile: TileCoordinate, _ format: PixelFormat) throws(ArchiveTileError) -> Bitmap? {
        if isFailed(tile) { return nil }
        do {
            if case .rawBitmap(let layout) = archive.content {
                return try rawBitmap(tile, layout: layout)?.converted(to: format)
            }
            let limit = options.maximumImageDimension
            return try archive.withTileBytes(at: tile) { bytes in
                try ImageDecoder.decode(bytes, pixelFormat: format, maximumDimension: limit)
            }
        } catch {
            throw fail(error, tile)
        }
    }

    /// A raw-bitmap tile's pixels in the bundle's own layout.
    private func rawBitmap(_ tile: TileCoordinate, layout: RawBitmapLayout) throws -> Bitmap? {
        guard let length = layout.byteCount else {
            throw ArchiveTileError(archivePath: archive.path, tile: tile, reason: .rawPayload("the layout \(layout) overflows"))
        }
        var pixels = [UInt8](repeating: 0, count: length)
        let count = try pixels.withUnsafeMutableBytes { try archive.readTile(at: tile, into: $0) }
        guard let count else { return nil }
        guard count == length,
            let bitmap = Bitmap(width: layout.width, height: layout.height, pixelFormat: layout.pixelFormat, pixels: pixels)
        else {
            throw ArchiveTileError(
                archivePath: archive.path, tile: tile, reason: .rawPayload("\(count) bytes, a \(layout) tile takes \(length)"))
        }
        return bitmap
    }
}

extension TileArchive {
    /// The one-call read: tile z/x/y (XYZ) as a bitmap in `pixelFormat`, or `nil` when the archive
    /// has no such tile. Without `tileSize` the tile comes at its own size; with it, the tile is
    /// made for a layer of that tile size (merged from deeper tiles, cut from a shallower one or
    /// scaled), as ``ArchiveTileReader`` does.
    /// - Throws: ``ArchiveTileError`` naming the archive and the tile.
    public func bitmap(
        at tile: TileCoordinate, tileSize: Int? = nil,
        pixelFormat: PixelFormat = .rgba8888
    ) throws(ArchiveTileError) -> Bitmap? {
        try ArchiveTileReader(archive: self).bitmap(at: tile, tileSize: tileSize, pixelFormat: pixelFormat)
    }
}
