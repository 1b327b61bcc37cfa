// The code of the article "Showing an archive in a tile layer" (Sources/Tilepack/Tilepack.docc),
// compiled here and run by DocSampleTests. tools/check-docs.sh checks that the article shows the
// lines between the markers, unchanged.
// docs:begin
import Tilepack

/// Shows the archive at `path` in a tile layer of a 512x512-point view on a 2x screen, centred
/// on the archive's area one zoom level above its lowest, and renders one frame, waiting for its
/// tiles at most `timeout` seconds.
func showArchive(path: String, timeout: Double = 60) async throws -> MapFrame {
    // The archive as a data source; a tile that fails is reported once, naming archive and tile.
    let source = try ArchiveTileSource(path: path) { failure in
        print("warning: \(failure)")
    }

    // A layer configured from the archive: bounds, zoom levels, tile size, transparency.
    let layer = source.makeLayer(pixelFormat: .rgba8888)
    let configuration = source.layerConfiguration()

    // A map view (headless here; a map SDK's view in an app) showing the layer.
    let zoom = configuration.visibleZoomLevels?.lowerBound ?? 0
    let box = configuration.boundingBox ?? GeoBoundingBox(west: -180, south: -85, east: 180, north: 85)
    let center = GeoCoordinate(latitude: (box.south + box.north) / 2, longitude: (box.west + box.east) / 2)
    let view = HeadlessMapView(viewport: ViewportSize(width: 512, height: 512), scale: .x2,
                               center: center, zoomLevel: Double(zoom + 1))
    view.addMapTileLayer(layer)

    // The view asks the layer for its tiles; the source decodes them off this thread.
    return await view.render(timeout: timeout)
}
// docs:end
