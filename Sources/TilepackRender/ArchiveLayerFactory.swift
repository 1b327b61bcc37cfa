import Foundation
import TileLayer
import TilepackAdapter
import TilepackCore
import TilepackOperations
import TilepackStorage

/// An archive (MBTiles, bundle, PMTiles; a file or an http(s) URL), told apart by its first bytes
/// (never its name), served through the adapter: the layer takes the archive's bounds, zoom levels
/// and transparency.
package struct ArchiveLayerFactory: RenderLayerFactory {
    package init() {}

    package func recognises(_ input: String) -> Bool {
        // An http(s) archive (PMTiles by range requests), unless it is a URL template.
        if ArchiveLocation.isRemote(input) { return !URLTemplateLayerFactory().recognises(input) }
        // Any existing file that is not a URL template: makeLayer says what it is if it is no archive.
        guard let info = FileSystem.stat(input), (info.st_mode & S_IFMT) != S_IFDIR else { return false }
        return !URLTemplateLayerFactory().recognises(input)
    }

    package func makeLayer(for input: String, options: RenderLayerOptions) throws -> MapTileLayer {
        var archive = try ArchiveLocation.open(input, bundleAccess: .memoryMap)
        if let key = options.key {
            archive = try VerifiedTileArchive(base: archive, key: key, minimumRelease: options.minimumRelease)
        }
        let source = ArchiveTileSource(
            archive: archive,
            options: ArchiveTileSource.Options(
                reader: ArchiveReaderOptions(cacheByteLimit: 64 << 20)))
        return source.makeLayer(name: input, tileSize: options.tileSize)
    }

    /// Where an archive layer has tiles ("covers W,S,E,N at zooms a...b"), for a view that
    /// shows none; `nil` for other layers.
    package static func extent(of layer: MapTileLayer) -> String? {
        guard let source = layer.dataSource as? ArchiveTileSource else { return nil }
        let configuration = source.layerConfiguration(tileSize: layer.tileSize)
        let box = configuration.boundingBox.map { "covers \($0)" } ?? "has no bounds"
        let zooms = configuration.archiveZoomLevels.map { " at zooms \($0.lowerBound)...\($0.upperBound)" } ?? ""
        return "\(layer.name) \(box)\(zooms)"
    }

    /// What to tell the user about an archive layer after a render: tiles that failed, and a
    /// view zoom outside the levels the archive covers.
    package static func notes(for layer: MapTileLayer, viewZoom: Double) -> [String] {
        guard let source = layer.dataSource as? ArchiveTileSource else { return [] }
        var notes = source.failures.map { "warning: \($0)" }
        let level = Int(viewZoom.rounded(.down))
        if !layer.isShown(atZoomLevel: level) {
            let zooms = source.layerConfiguration(tileSize: layer.tileSize).archiveZoomLevels
            notes.append(
                "note: \(layer.name) is not shown at zoom \(level)"
                    + (zooms.map { " (the archive has zoom levels \($0.lowerBound)...\($0.upperBound))" } ?? ""))
        } else if let served = source.layerConfiguration(tileSize: layer.tileSize).servedZoomLevels, level > served.upperBound {
            notes.append("note: \(layer.name): zoom \(level) is past the archive's deepest level; its tiles are scaled up (overzoom)")
        }
        return notes
    }
}
