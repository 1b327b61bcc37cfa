import Foundation
import TileLayer
import TilepackCore
import TilepackStorage

/// `tilepack render`'s layer composition, as a library: each input (an archive or a URL
/// template) becomes a tile layer, bottom to top in the order given, drawn by a headless map view.
/// The command keeps its arguments and its output (the PNG, the messages).
package enum MapRender {
    /// What a render drew and what to tell the user about it.
    package struct Result: Sendable {
        /// The frame: the view's pixels and every tile drawn.
        package var frame: MapFrame
        /// One line per layer and kind of failure, and notes on archive layers ("warning: ...", "note: ...").
        package var notes: [String]
    }

    /// Renders `inputs` as layers of a view of `viewport` points at `scale`, centred on `center` at
    /// `zoom`, waiting at most `timeout` seconds for tiles.
    /// - Throws: ``RenderError`` for an input that is no layer or a view that shows no tile; an
    ///   archive's own errors (not an archive, damaged) as they are.
    package static func render(
        inputs: [String], center: GeoCoordinate, zoom: Double, viewport: ViewportSize,
        scale: ScreenScale, options: RenderLayerOptions, timeout: Double
    ) async throws -> Result {
        guard !inputs.isEmpty else { throw RenderError(.invalidInput, "give at least one layer input") }
        if let reason = TileSize.invalidReason(options.tileSize) { throw RenderError(.invalidInput, reason) }
        let view = HeadlessMapView(viewport: viewport, scale: scale, center: center, zoomLevel: zoom)
        var layers: [MapTileLayer] = []
        for (index, input) in inputs.enumerated() {
            let layer = try RenderLayerFactories.makeLayer(for: input, options: options)
            if index > 0 {
                layer.setTransparent(true)
                layer.setZIndex(index)
            }
            layer.setTileSize(options.tileSize)
            view.addMapTileLayer(layer)
            layers.append(layer)
        }

        let frame = await view.render(timeout: timeout)
        var notes: [String] = []
        for layer in layers {
            notes += failureSummary(layer: layer.name, diagnostics: layer.diagnostics)
            notes += ArchiveLayerFactory.notes(for: layer, viewZoom: zoom)
        }
        if frame.drawn.isEmpty {
            let extents = layers.compactMap(ArchiveLayerFactory.extent(of:))
            throw RenderError(
                .nothingDrawn,
                "the view (centre \(center), zoom \(zoom), \(viewport.width)x\(viewport.height)) shows no tile of any input\(extents.isEmpty ? "" : " (\(extents.joined(separator: "; ")))")",
                notes: notes)
        }
        return Result(frame: frame, notes: notes)
    }

    /// One line per layer and kind of failure, instead of the layer's diagnostics (two for each
    /// failed tile): tiles that are absent (no file, HTTP 404) are a note, as a sparse tree has
    /// them; other failures a warning with the first reason.
    package static func failureSummary(layer: String, diagnostics: [TileLayerDiagnostic]) -> [String] {
        var absent: [TileCoordinate] = []
        var failed: [TileCoordinate: String] = [:]
        var order: [TileCoordinate] = []
        var seen: Set<TileCoordinate> = []
        for diagnostic in diagnostics where diagnostic.kind == .tileFailed {
            guard let tile = diagnostic.tile, seen.insert(tile).inserted else { continue }
            if diagnostic.message.contains("no such file") || diagnostic.message.contains("HTTP status 404") {
                absent.append(tile)
            } else {
                failed[tile] = diagnostic.message
                order.append(tile)
            }
        }
        func examples(_ tiles: [TileCoordinate]) -> String {
            tiles.prefix(3).map(\.description).joined(separator: ", ") + (tiles.count > 3 ? ", ..." : "")
        }
        var lines: [String] = []
        if !absent.isEmpty {
            lines.append("note: \(layer): \(absent.count) tile\(absent.count == 1 ? "" : "s") of the view absent (\(examples(absent)))")
        }
        if let first = order.first, let reason = failed[first] {
            lines.append(
                "warning: \(layer): \(order.count) tile\(order.count == 1 ? "" : "s") failed (\(examples(order))); \(first): \(reason)")
        }
        return lines
    }
}

/// Why a render did not happen: an input that is no layer, or a view that shows no tile.
package struct RenderError: Error, CustomStringConvertible {
    package enum Kind: Sendable {
        /// An input is not a layer tilepack renders, or an option is out of range.
        case invalidInput
        /// The view shows no tile of any input.
        case nothingDrawn
    }

    package var kind: Kind
    /// The input or option at fault, when one is (`tilepack render` prints "PLACE: reason").
    package var place: String?
    package var reason: String
    /// The render's notes so far (a view that shows no tile still has them).
    package var notes: [String]

    package var description: String { place.map { "\($0): \(reason)" } ?? reason }

    package init(_ kind: Kind, _ reason: String, place: String? = nil, notes: [String] = []) {
        self.kind = kind
        self.reason = reason
        self.place = place
        self.notes = notes
    }
}

/// Options every layer of a render shares.
package struct RenderLayerOptions: Sendable {
    package var tileSize: Int
    package var flipped: Bool
    package var maximumZ: Int
    /// `--key`: every archive layer's tiles checked against its signed root (ARCHIVE.tpsig), each on its first read.
    package var key: VerifierKey?
    /// `--min-release`: the lowest signed release accepted.
    package var minimumRelease: UInt64 = 0

    package init(tileSize: Int = TileSize.default, flipped: Bool = false, maximumZ: Int = 21, key: VerifierKey? = nil, minimumRelease: UInt64 = 0) {
        self.tileSize = tileSize
        self.flipped = flipped
        self.maximumZ = maximumZ
        self.key = key
        self.minimumRelease = minimumRelease
    }
}

/// Turns one render input into a tile layer. Each kind of input is one factory; the first that
/// recognises an input makes its layer.
package protocol RenderLayerFactory: Sendable {
    /// Whether this factory handles `input`.
    func recognises(_ input: String) -> Bool
    func makeLayer(for input: String, options: RenderLayerOptions) throws -> MapTileLayer
}

package enum RenderLayerFactories {
    package static let all: [any RenderLayerFactory] = [ArchiveLayerFactory(), URLTemplateLayerFactory()]

    package static func makeLayer(for input: String, options: RenderLayerOptions) throws -> MapTileLayer {
        guard let factory = all.first(where: { $0.recognises(input) }) else {
            throw RenderError(
                .invalidInput,
                "not a layer input tilepack renders (expected an MBTiles file, a .tilepack bundle, a PMTiles file or a URL template with {z}, {x} and {y} or {-y})",
                place: input)
        }
        return try factory.makeLayer(for: input, options: options)
    }
}

/// `https://host/{z}/{x}/{y}.png`, `file:///tiles/{z}/{x}/{-y}.png` or a local path template:
/// what Core's `TileURLTemplate` recognises.
package struct URLTemplateLayerFactory: RenderLayerFactory {
    package init() {}

    package func recognises(_ input: String) -> Bool { TileURLTemplate.recognises(input) }

    package func makeLayer(for input: String, options: RenderLayerOptions) throws -> MapTileLayer {
        var template = input
        if !input.contains("://") {
            let absolute = input.hasPrefix("/") ? input : FileManager.default.currentDirectoryPath + "/" + input
            template = "file://" + absolute
        } else if let scheme = input.split(separator: ":").first?.lowercased(), !["http", "https", "file"].contains(scheme) {
            throw RenderError(.invalidInput, "only http, https and file URL templates are loaded", place: input)
        }
        let source = URLTemplateTileSource(
            urlTemplate: template, isGeometryFlipped: options.flipped,
            maximumZ: options.maximumZ, canReplaceMapContent: true)
        let layer = MapTileLayer(overlay: source, name: input)
        // Nothing says whether a template's tiles are opaque: drawn with their alpha, a
        // transparent tile shows what is below instead of black.
        layer.setTransparent(true)
        return layer
    }
}
