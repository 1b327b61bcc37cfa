import Foundation
import TilepackCore
import TilepackImaging
import TilepackStorage

/// Options of ``ArchiveConverter``.
package struct ConvertOptions: Sendable {
    /// How the output is written (`--force`, `--agg-tiles-hash`, `--keep-mixed-compression`, `--index`).
    package var writing = ArchiveWriteOptions()
    /// MBTiles output: store identical tiles once (`map` + `images`); otherwise flat.
    package var deduplicate = false
    /// Bundle output: decode every image and store raw pixels in this format.
    package var encode: PixelFormat?
    /// Re-encode every raster tile (`--format`, `--quality`, `--lossless`).
    package var format: TileEncoding?
    /// The most tiles written one by one (`--max-tiles`, default 500,000,000): a larger input is
    /// refused before anything is written, unless it is PMTiles copied into PMTiles as runs.
    package var maximumTiles = TileCountLimit.defaultMaximum
    package init() {}
}

/// What a conversion did.
package struct ConvertReport: Sendable, Codable {
    package var source: String
    package var destination: String
    package var tiles = 0
    package var bytesIn = 0
    package var bytesOut = 0
    package var seconds = 0.0
    /// What the converter decided for the user (a name given to an unnamed archive).
    package var notes: [String] = []
    /// With `--format`: each zoom's bytes before and after, and the PSNR of the new tiles.
    package var reencoded: [ReencodedZoom]?
    /// Metadata values the output's format cannot hold, each mapped or dropped (see ``MetadataMapping``).
    package var warnings: [String] = []
}

/// Copies every tile and the metadata from one archive into a new one: MBTiles <-> bundle, and
/// MBTiles flat <-> deduplicated. Tile bytes are kept as they are unless `encode` asks for raw
/// pixels (or a raw-bitmap bundle is written to MBTiles, whose tiles are then PNG-encoded), so
/// `agg_tiles_hash` of the output equals the input's. An MBTiles output carries one when the
/// source does (computed again for the bytes written) or when asked.
package enum ArchiveConverter {
    package static func run(
        source: String, destination: String, options: ConvertOptions,
        progress: ProgressHandler? = nil, opened: (any TileArchive)? = nil
    ) throws(OperationError) -> ConvertReport {
        let start = DispatchTime.now().uptimeNanoseconds
        // `opened`: an archive made in memory (a patched base), `source` naming it in messages.
        let input: any TileArchive
        if let opened { input = opened } else { input = try ArchiveLocation.open(source) }
        try OutputIsInput.refuse(output: destination, inputs: [source])
        let format = try ArchiveOutput.format(of: destination)
        let sourceRaw: RawBitmapLayout? = if case .rawBitmap(let layout) = input.content { layout } else { nil }
        let encodeToPNG = sourceRaw != nil && (!format.storesRawPixels || options.encode == nil)
        var (metadata, total, notes) = try sourceMetadata(of: input, source: source)
        let fitted = MetadataMapping.fitted(metadata, for: format)
        metadata = fitted.metadata
        // PMTiles to PMTiles carries runs as runs (`copyRuns`); every other way writes each tile,
        // and so does a tile hash index: a count past the limit is refused before the output exists.
        let carriesRuns =
            input is PMTilesArchive && format == .pmtiles && options.encode == nil && options.format == nil && !options.writing.tileIndex
        if !carriesRuns, let total {
            try TileCountLimit.check(total, limit: options.maximumTiles, source: source, writing: "convert into \(destination)")
        }
        var sinkOptions = options.writing.sinkOptions(carriesHash: metadata[TileMetadata.Key.aggregateTilesHash] != nil, inputs: [input])
        sinkOptions.deduplicate = options.deduplicate
        let sink = try ArchiveOutput.open(destination, format: format, metadata: metadata, encode: options.encode, options: sinkOptions)

        if format == .mbtiles, total == 0, metadata[TileMetadata.Key.format] == nil {
            throw OperationError(
                path: source,
                fault: .badInput(
                    "holds no tiles and declares no format, and an MBTiles file must name its tiles' format: nothing to copy it from (a .tilepack bundle can hold it)"
                ))
        }
        var report = ConvertReport(source: source, destination: destination)
        report.notes = notes
        report.warnings = fitted.notes
        do {
            if let encoding = options.format {
                guard options.encode == nil, sourceRaw == nil else {
                    throw OperationError(
                        path: sourceRaw != nil ? source : destination,
                        fault: .badInput("--format re-encodes images: it does not go with raw pixels (--encode, or a raw bundle as input)"))
                }
                try TileReencoder.run(
                    input: input, source: source, sink: sink, encoding: encoding, report: &report, total: total, progress: progress,
                    start: start)
                metadata[TileMetadata.Key.aggregateTilesHash] = nil
                metadata[TileMetadata.Key.format] = encoding.format.metadataValue
            } else if let pmtiles = input as? PMTilesArchive, let runs = sink.pmtilesWriter, options.encode == nil {
                // PMTiles to PMTiles: runs are carried as ranges, each run's bytes read once, so a
                // run of billions of ocean tiles costs what one tile costs (a tile-by-tile copy
                // would write the same file, tile by tile).
                try copyRuns(
                    from: pmtiles, to: sink, runs: runs, metadata: metadata, report: &report, progress: progress, total: total,
                    start: start)
            } else {
                let transcoder = TileTranscoder(
                    source: source, encode: options.encode, sourceRaw: sourceRaw, storesRawPixels: format.storesRawPixels,
                    declared: (try? metadata.format) ?? nil)
                try copyTiles(
                    from: input, to: sink, transcoder: transcoder, report: &report, progress: progress, total: total, start: start)
                if options.encode != nil || encodeToPNG {
                    // The bytes changed: the old hash and format no longer describe them.
                    metadata[TileMetadata.Key.aggregateTilesHash] = nil
                    metadata[TileMetadata.Key.format] = encodeToPNG ? TileFormat.png.metadataValue : nil
                }
            }
            try sink.finish(metadata: metadata)
        } catch {
            throw OperationError.wrapping(error, path: destination)
        }
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    /// The source's metadata, less its content identity (kept only where a patch checks it: an
    /// MBTiles file patched in place), named after its file when it has no name (as import names
    /// a tileset after its folder); its tile count; and the note saying so.
    private static func sourceMetadata(
        of input: any TileArchive, source: String
    ) throws(OperationError) -> (TileMetadata, Int?, [String]) {
        var metadata: TileMetadata
        let total: Int?
        do {
            metadata = try input.metadata()
            for key in [ContentIdentity.metadataKey, MBTilesIdentityStamp.key] { metadata[key] = nil }
            total = try input.tileCount()
        } catch {
            throw OperationError.wrapping(error, path: source)
        }
        var notes: [String] = []
        if metadata.name?.isEmpty ?? true {
            let name = URL(fileURLWithPath: source).deletingPathExtension().lastPathComponent
            metadata.name = name
            notes.append("\(source) has no name in its metadata: named '\(name)' after its file")
        }
        return (metadata, total, notes)
    }

    /// Copies every tile of `input` into `sink` as `transcoder` makes it, tile by tile.
    private static func copyTiles(
        from input: any TileArchive, to sink: TileSink, transcoder: TileTranscoder, report: inout ConvertReport,
        progress: ProgressHandler?, total: Int?, start: UInt64
    ) throws {
        var began = false
        var lastReport = start
        try input.forEachTile { tile, bytes in
            report.bytesIn += bytes.count
            let (payload, content) = try transcoder.payload(of: tile, bytes: bytes)
            if !began {
                try sink.begin(content: content)
                began = true
            }
            if let payload {
                try payload.withUnsafeBytes { try sink.add(tile, bytes: $0) }
                report.bytesOut += payload.count
            } else {
                try sink.add(tile, bytes: bytes)
                report.bytesOut += bytes.count
            }
            report.tiles += 1
            let now = DispatchTime.now().uptimeNanoseconds
            if let progress, now - lastReport > 200_000_000 {
                lastReport = now
                progress(OperationProgress(done: report.tiles, total: total, bytes: report.bytesIn, elapsed: Double(now - start) / 1e9))
            }
        }
    }
}

/// What a tile-by-tile conversion writes for each tile: its bytes as they are, decoded to raw
/// pixels (`--encode`), a raw tile's pixels converted, or a raw tile encoded as PNG.
private struct TileTranscoder {
    let source: String
    /// The raw pixel format asked for (`--encode`).
    let encode: PixelFormat?
    /// The source's raw-bitmap layout, when it is a raw bundle.
    let sourceRaw: RawBitmapLayout?
    /// Whether the output's format stores raw pixels.
    let storesRawPixels: Bool
    /// The format the source's metadata declares.
    let declared: TileFormat?

    /// The payload to write (nil: `bytes` as they are) and what it holds.
    func payload(of tile: TileCoordinate, bytes: UnsafeRawBufferPointer) throws -> ([UInt8]?, TileContent) {
        if let pixelFormat = encode, sourceRaw == nil {
            // Decode to raw pixels.
            let bitmap = try ImageDecoder.decode(bytes, pixelFormat: pixelFormat)
            guard bitmap.width == bitmap.height else {
                throw OperationError(
                    path: source, fault: .badInput("tile \(tile) is \(bitmap.width)x\(bitmap.height): a raw tile must be square"))
            }
            return (bitmap.pixels, .rawBitmap(RawBitmapLayout(pixelFormat: pixelFormat, width: bitmap.width, height: bitmap.height)))
        }
        if let raw = sourceRaw {
            guard let bitmap = Bitmap(width: raw.width, height: raw.height, pixelFormat: raw.pixelFormat, pixels: Array(bytes)) else {
                throw OperationError(path: source, fault: .badInput("tile \(tile): \(bytes.count) bytes do not make a \(raw) bitmap"))
            }
            if let pixelFormat = encode, storesRawPixels {
                let converted = bitmap.converted(to: pixelFormat)
                return (converted.pixels, .rawBitmap(RawBitmapLayout(pixelFormat: pixelFormat, width: raw.width, height: raw.height)))
            }
            return (Array(try PNGEncoder.encode(bitmap)), .encoded(.png))
        }
        guard let format = TileFormat.sniff(bytes) ?? declared else {
            throw OperationError(path: source, fault: .badInput("tile \(tile) is of no known format"))
        }
        return (nil, .encoded(format))
    }
}

extension ArchiveConverter {
    /// How many runs are announced to the source at once (a remote source fetches them in few
    /// requests); a bound on the memory the copy holds.
    static let runsPerBatch = 4096

    /// Copies a PMTiles archive's runs into a PMTiles writer as ranges, in tile-id order, each
    /// run's bytes read once.
    fileprivate static func copyRuns(
        from input: PMTilesArchive, to sink: TileSink, runs: PMTilesWriter, metadata: TileMetadata, report: inout ConvertReport,
        progress: ProgressHandler?, total: Int?, start: UInt64
    ) throws {
        let base = Int(input.header.tileDataOffset)
        let declared = (try? metadata.format) ?? nil
        var batch: [(ids: Range<UInt64>, offset: UInt64, length: Int)] = []
        var began = false
        var lastReport = start
        func drain() throws {
            try input.source.willRead(batch.map { (base + Int($0.offset))..<(base + Int($0.offset) + $0.length) })
            for run in batch {
                try input.source.withBytes(offset: base + Int(run.offset), length: run.length) { bytes in
                    if !began {
                        guard let format = TileFormat.sniff(bytes) ?? declared else {
                            let tile = PMTilesFormat.tile(ofID: run.ids.lowerBound).map { "\($0)" } ?? "id \(run.ids.lowerBound)"
                            throw OperationError(path: report.source, fault: .badInput("tile \(tile) is of no known format"))
                        }
                        try sink.begin(content: .encoded(format))
                        began = true
                    }
                    try runs.addRun(ids: run.ids, bytes: bytes)
                }
                let tiles = run.ids.count
                let (bytes, overflow) = tiles.multipliedReportingOverflow(by: run.length)
                report.tiles += tiles
                let (sum, over) = report.bytesIn.addingReportingOverflow(bytes)
                report.bytesIn = overflow || over ? Int.max : sum  // addressed bytes, as a tile-by-tile copy counts them
                report.bytesOut = report.bytesIn
            }
            batch.removeAll(keepingCapacity: true)
            let now = DispatchTime.now().uptimeNanoseconds
            if let progress, now - lastReport > 200_000_000 {
                lastReport = now
                progress(OperationProgress(done: report.tiles, total: total, bytes: report.bytesIn, elapsed: Double(now - start) / 1e9))
            }
        }
        try input.forEachRun { _, ids, offset, length in
            batch.append((ids, offset, length))
            if batch.count >= runsPerBatch { try drain() }
        }
        try drain()
    }
}
