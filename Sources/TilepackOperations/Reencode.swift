import Foundation
import TilepackCore
import TilepackImaging
import TilepackStorage

/// What re-encoding did at one zoom (`convert --format`).
package struct ReencodedZoom: Sendable, Codable, Hashable {
    package var zoom: Int
    package var tiles = 0
    package var bytesBefore = 0
    package var bytesAfter = 0
    /// The median and the lowest PSNR (dB) of the re-encoded tiles against the originals, over
    /// the pixels both draw opaque; nil when no tile had such pixels. Identical tiles count as 99 dB.
    package var medianPSNR: Double?
    package var lowestPSNR: Double?
}

/// `convert --format`: every raster tile decoded and encoded again (``TileEncoding``), on every
/// core, in batches read in the archive's order and written in that order, with each zoom's bytes
/// before and after and the PSNR of the new tiles against the originals.
package enum TileReencoder {
    /// Tiles per batch (two batches in flight: a few tens of MB of 100 KB tiles at most).
    static let batchTiles = 128

    /// PSNR reported for a tile whose pixels did not change.
    static let identicalPSNR = 99.0

    private struct Result: Sendable {
        var bytes: [UInt8]
        var psnr: Double?
        var failure: String?
    }

    /// One tile decoded and encoded again, and the PSNR of the new pixels against the old
    /// (``identicalPSNR`` when equal; nil when no pixel is opaque in both).
    package static func reencode(_ tile: [UInt8], encoding: TileEncoding, zoom: Int) throws -> (bytes: [UInt8], psnr: Double?) {
        let original = try tile.withUnsafeBytes { raw in try ImageDecoder.decode(raw, pixelFormat: .rgba8888) }
        let encoded = try encoding.encode(original, zoom: zoom)
        let again = try ImageDecoder.decode(encoded, pixelFormat: .rgba8888)
        return (Array(encoded), peakSignalToNoise(original, again).map { $0.isInfinite ? identicalPSNR : $0 })
    }

    static func run(
        input: any TileArchive, source: String, sink: TileSink, encoding: TileEncoding, report: inout ConvertReport,
        total: Int?, progress: ProgressHandler?, start: UInt64
    ) throws {
        try sink.begin(content: .encoded(encoding.format))
        var zooms: [Int: ReencodedZoom] = [:]
        var psnrs: [Int: [Double]] = [:]
        var batch: [(tile: TileCoordinate, bytes: [UInt8])] = []
        var lastReport = start
        let threads = ProcessInfo.processInfo.activeProcessorCount
        try WorkerPool.with(threads: threads) { pool in
            func drain() throws {
                guard !batch.isEmpty else { return }
                let work = ParallelBatch<(tile: TileCoordinate, bytes: [UInt8]), Result, Void>(batch)
                work.start(on: pool, makeState: {}) { _, item in
                    do {
                        let (bytes, psnr) = try reencode(item.bytes, encoding: encoding, zoom: item.tile.zoom)
                        return Result(bytes: bytes, psnr: psnr)
                    } catch {
                        return Result(bytes: [], failure: "tile \(item.tile): \(error)")
                    }
                }
                work.wait()
                for (i, item) in batch.enumerated() {
                    let result = work[i]
                    if let failure = result.failure { throw OperationError(path: source, fault: .badInput(failure)) }
                    try result.bytes.withUnsafeBytes { try sink.add(item.tile, bytes: $0) }
                    var zoom = zooms[item.tile.zoom] ?? ReencodedZoom(zoom: item.tile.zoom)
                    zoom.tiles += 1
                    zoom.bytesBefore += item.bytes.count
                    zoom.bytesAfter += result.bytes.count
                    zooms[item.tile.zoom] = zoom
                    if let psnr = result.psnr { psnrs[item.tile.zoom, default: []].append(psnr) }
                    report.tiles += 1
                    report.bytesIn += item.bytes.count
                    report.bytesOut += result.bytes.count
                }
                batch.removeAll(keepingCapacity: true)
                let now = DispatchTime.now().uptimeNanoseconds
                if let progress, now - lastReport > 200_000_000 {
                    lastReport = now
                    progress(OperationProgress(done: report.tiles, total: total, bytes: report.bytesIn, elapsed: Double(now - start) / 1e9))
                }
            }
            try input.forEachTile { tile, bytes in
                guard let format = TileFormat.sniff(bytes), format.isRaster else {
                    throw OperationError(
                        path: source,
                        fault: .badInput("tile \(tile) is not a PNG, JPEG or WebP image: --format re-encodes raster tiles only"))
                }
                batch.append((tile, Array(bytes)))
                if batch.count >= batchTiles { try drain() }
            }
            try drain()
        }
        report.reencoded = zooms.keys.sorted().map { zoom in
            var entry = zooms[zoom]!
            let sorted = (psnrs[zoom] ?? []).sorted()
            entry.medianPSNR = sorted.isEmpty ? nil : sorted[sorted.count / 2]
            entry.lowestPSNR = sorted.first
            return entry
        }
    }
}
