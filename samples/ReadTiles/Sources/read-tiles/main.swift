// read-tiles: show the tiles of an archive through a tile layer, as an app would, and save the view.
//
//   swift run read-tiles [archive] [output.png]
//
// `archive` is an MBTiles file or a .tilepack bundle (told apart by its bytes); it defaults to the
// sample archive `samples/sample.tilepack`. The PNG defaults to `read-tiles.png`.
import Foundation
import Tilepack

/// samples/ReadTiles/Sources/read-tiles/main.swift -> samples/sample.tilepack
let defaultArchive = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("sample.tilepack").path
let arguments = Array(CommandLine.arguments.dropFirst())
let archivePath = arguments.first ?? defaultArchive
let outputPath = arguments.count > 1 ? arguments[1] : "read-tiles.png"

do {
    // 0. The read API alone: metadata, zoom levels and one tile's bytes (XYZ rows, whatever the format).
    let archive = try openTileArchive(path: archivePath)
    let levels = try archive.zoomLevels().map { "z\($0.zoom): \($0.tileCount)" }.joined(separator: ", ")
    print("\(try archive.metadata().name ?? "unnamed") (\(archive.content.map { "\($0)" } ?? "empty")): \(levels)")
    if let bytes = try archive.tileData(at: TileCoordinate(zoom: 1, x: 1, y: 0)) {
        print("tile 1/1/0: \(bytes.count) bytes of \(TileFormat.sniff(bytes).map { "\($0)" } ?? "unknown format")")
    }

    // 1. Open the archive as a data source. Failed tiles are reported once, with the archive and tile.
    let source = try ArchiveTileSource(path: archivePath) { failure in
        FileHandle.standardError.write(Data("warning: \(failure)\n".utf8))
    }

    // 2. A tile layer configured from the archive: bounds, zoom levels, tile size, transparency.
    let layer = source.makeLayer(pixelFormat: .rgba8888)
    let configuration = source.layerConfiguration()

    // 3. A headless map view over the archive's area, at its lowest zoom level, on a 2x screen.
    let zoom = configuration.visibleZoomLevels?.lowerBound ?? 0
    let center =
        configuration.boundingBox.map {
            GeoCoordinate(latitude: ($0.south + $0.north) / 2, longitude: ($0.west + $0.east) / 2)
        } ?? GeoCoordinate(latitude: 0, longitude: 0)
    let view = HeadlessMapView(
        viewport: ViewportSize(width: 512, height: 512), scale: .x2,
        center: center, zoomLevel: Double(zoom + 1))
    view.addMapTileLayer(layer)

    // 4. Render: the view requests the tiles; the adapter decodes them off this thread.
    let frame = await view.render()
    try PNGEncoder.encode(frame.bitmap).write(to: URL(fileURLWithPath: outputPath))
    print("\(archivePath): \(frame.drawn.count) tiles drawn -> \(outputPath) (\(frame.bitmap.width)x\(frame.bitmap.height) px)")

    // Without a layer: one tile as a bitmap in the pixel format an app draws with.
    if let tile = try source.archive.bitmap(at: TileCoordinate(zoom: 0, x: 0, y: 0), pixelFormat: .bgra8888Premultiplied) {
        print("tile 0/0/0: \(tile.width)x\(tile.height) \(tile.pixelFormat)")
    }
} catch {
    FileHandle.standardError.write(Data("read-tiles: \(error)\n".utf8))
    exit(1)
}
