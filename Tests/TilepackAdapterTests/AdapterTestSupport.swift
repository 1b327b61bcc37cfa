import Foundation
import Synchronization
import Testing
import TileLayer
import TilepackAdapter
import TilepackCore
import TilepackImaging
import TilepackStorage
import TilepackTestSupport

let black = RGBA8(r: 0, g: 0, b: 0)
let white = RGBA8(r: 255, g: 255, b: 255)

/// Where a tile's label starts and the size of its font pixels, for a tile of `size` pixels.
func labelOrigin(size: Int) -> (x: Int, y: Int, scale: Int) {
    let scale = max(1, size / 128)
    return (6 * scale, 10 * scale, scale)
}

/// A colour that differs for every tile of zooms 0...3.
func background(of tile: TileCoordinate) -> RGBA8 {
    RGBA8(r: UInt8(40 + 25 * (tile.x % 8)), g: UInt8(50 + 25 * (tile.y % 8)), b: UInt8(60 + 40 * (tile.zoom % 5)))
}

/// A tile drawn with its own `z/x/y` label at a fixed place and a white 6 x 6 mark in its
/// north-west corner, so that a flipped, mirrored or misplaced tile shows.
func labelledTile(_ tile: TileCoordinate, size: Int = 256) -> Bitmap {
    var bitmap = Bitmap(width: size, height: size, pixelFormat: .rgba8888, fill: background(of: tile))
    let origin = labelOrigin(size: size)
    bitmap.drawText(tile.description, x: origin.x, y: origin.y, scale: origin.scale, color: black)
    bitmap.fillRect(x: 0, y: 0, width: 6, height: 6, color: white)
    return bitmap
}

func tile(_ z: Int, _ x: Int, _ y: Int) -> TileCoordinate {
    // The tests only use valid coordinates.
    TileCoordinate(validatingZoom: z, x: x, y: y)!
}

/// Every tile of zooms `zooms`.
func allTiles(_ zooms: ClosedRange<Int>) -> [TileCoordinate] {
    zooms.flatMap { z in (0..<(1 << z)).flatMap { x in (0..<(1 << z)).map { y in tile(z, x, y) } } }
}

/// How the test archives store their tiles.
enum TestEncoding {
    case png
    case raw(PixelFormat)
}

/// Writes labelled tiles into an MBTiles file (TMS rows, by MBTilesWriter).
func writeMBTiles(
    _ path: String, tiles: [TileCoordinate], size: Int = 256,
    metadata extra: [String: String] = [:]
) throws {
    var entries = ["name": "labels", "format": "png"]
    entries.merge(extra) { $1 }
    let writer = try MBTilesWriter(creating: path, metadata: TileMetadata(entries))
    for t in tiles {
        try writer.write(try PNGEncoder.encode(labelledTile(t, size: size)), at: t)
    }
    _ = try writer.finish()
}

/// Writes labelled tiles into a bundle, as PNG or as raw LZ4 bitmaps.
func writeBundle(
    _ path: String, tiles: [TileCoordinate], size: Int = 256, encoding: TestEncoding = .png,
    metadata extra: [String: String] = [:]
) throws {
    var entries = ["name": "labels"]
    entries.merge(extra) { $1 }
    let content: TileContent
    switch encoding {
    case .png:
        content = .encoded(.png)
        entries["format"] = "png"
    case .raw(let format):
        content = .rawBitmap(RawBitmapLayout(pixelFormat: format, width: size, height: size))
    }
    let writer = try BundleWriter(destination: path, content: content, metadata: TileMetadata(entries))
    for t in tiles {
        let bitmap = labelledTile(t, size: size)
        switch encoding {
        case .png: try writer.addTile(at: t, data: try PNGEncoder.encode(bitmap))
        case .raw(let format): try writer.addTile(at: t, data: Data(bitmap.converted(to: format).pixels))
        }
    }
    _ = try writer.finish()
}

/// An archive that counts what is asked of it and can hold its reads at a gate.
final class InstrumentedArchive: TileArchive, @unchecked Sendable {
    struct Counts {
        var contains: [TileCoordinate] = []
        var reads: [TileCoordinate] = []
        var concurrentReads = 0
        var maximumConcurrentReads = 0
    }

    let base: any TileArchive
    let counts = Locked(Counts())
    /// Called at the start of every tile read, on the reading thread (a test blocks it here).
    let gate: @Sendable (TileCoordinate) -> Void

    init(_ base: any TileArchive, gate: @escaping @Sendable (TileCoordinate) -> Void = { _ in }) {
        self.base = base
        self.gate = gate
    }

    var path: String { base.path }
    var content: TileContent? { base.content }
    var snapshot: Counts { counts.withLock { $0 } }

    func metadata() throws -> TileMetadata { try base.metadata() }

    func containsTile(at tile: TileCoordinate) throws -> Bool {
        counts.withLock { $0.contains.append(tile) }
        return try base.containsTile(at: tile)
    }

    private func reading<R>(_ tile: TileCoordinate, _ body: () throws -> R) rethrows -> R {
        counts.withLock {
            $0.reads.append(tile)
            $0.concurrentReads += 1
            $0.maximumConcurrentReads = max($0.maximumConcurrentReads, $0.concurrentReads)
        }
        defer { counts.withLock { $0.concurrentReads -= 1 } }
        gate(tile)
        return try body()
    }

    func withTileBytes<R>(at tile: TileCoordinate, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        try reading(tile) { try base.withTileBytes(at: tile, body) }
    }

    func readTile(at tile: TileCoordinate, into buffer: UnsafeMutableRawBufferPointer) throws -> Int? {
        try reading(tile) { try base.readTile(at: tile, into: buffer) }
    }

    func zoomLevels() throws -> [ZoomLevelSummary] { try base.zoomLevels() }

    func forEachTile(_ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws {
        try base.forEachTile(body)
    }
}

/// A gate that holds readers until opened.
final class Gate: Sendable {
    private let open = Atomic<Bool>(false)
    /// Waits for ``release()``. The deadline only keeps a broken test from hanging: it is longer
    /// than any `eventually` a test waits for the gated state (`TestSupport.settleSeconds`), so a
    /// loaded machine never sees a read slip through on its own.
    func pass() {
        let deadline = Date().addingTimeInterval(2 * TestSupport.settleSeconds)
        while !open.load(ordering: .acquiring), Date() < deadline { usleep(500) }
    }
    func release() { open.store(true, ordering: .releasing) }
}

/// An MBTiles archive of labelled tiles of zooms 0...3 in `dir`, read through an instrumented
/// archive whose reads wait at the returned gate, served with at most `concurrency` reads at once.
func gatedLabels(_ dir: TemporaryDirectory, concurrency: Int) throws -> (
    gate: Gate, archive: InstrumentedArchive, source: ArchiveTileSource
) {
    let path = dir.file("labels.mbtiles")
    try writeMBTiles(path, tiles: allTiles(0...3))
    let gate = Gate()
    let archive = InstrumentedArchive(try MBTilesArchive(path: path), gate: { _ in gate.pass() })
    let source = ArchiveTileSource(archive: archive, options: ArchiveTileSource.Options(maximumConcurrency: concurrency))
    return (gate, archive, source)
}

/// The pixels of `region` (x, y, size) of `frame`, as a bitmap.
func crop(_ frame: Bitmap, x: Int, y: Int, size: Int) throws -> Bitmap {
    try frame.cropped(x: x, y: y, width: size, height: size)
}

/// A view over the whole world at zoom `zoom` (1024 x 1024 points at zoom 2: 16 tiles of 256).
func worldView(zoom: Int, layer: MapTileLayer) -> HeadlessMapView {
    let side = 256 << zoom
    let view = HeadlessMapView(
        viewport: ViewportSize(width: side, height: side), center: GeoCoordinate(latitude: 0, longitude: 0),
        zoomLevel: Double(zoom))
    view.addMapTileLayer(layer)
    return view
}

/// Collects failure reports.
final class FailureLog: Sendable {
    let entries = Locked<[ArchiveTileFailure]>([])
    var handler: @Sendable (ArchiveTileFailure) -> Void { { failure in self.entries.withLock { $0.append(failure) } } }
    var all: [ArchiveTileFailure] { entries.withLock { $0 } }
}
