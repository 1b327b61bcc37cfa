import ArgumentParser
import Foundation
import TileLayer
import TilepackCore
import TilepackImaging
import TilepackOperations
import TilepackStorage

/// `tilepack render`: draw a view of one or more tile layers into a PNG.
struct RenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Render a map view of one or more tile layers to a PNG.",
        discussion: """
            Each input is one layer, drawn bottom to top in the order given: an archive (\(TileArchiveFormat.extensions()), \
            local or http(s)://, recognised from its bytes) or a URL template with \
            {x} {y} {z} {scale} placeholders (http://, https://, file:// or a local path). An archive \
            layer takes its bounds, zoom levels and transparency from the archive; the first URL \
            layer is opaque, later ones are drawn as transparent overlays.
            Example: tilepack render 'tiles/{z}/{x}/{y}.png' --center -0.01,51.54 --zoom 14 --size 800x600 -o map.png
            """)

    @Argument(help: "Layer inputs: archives (\(TileArchiveFormat.extensions())) or URL templates such as https://host/{z}/{x}/{y}.png or tiles/{z}/{x}/{y}.png.")
    var inputs: [String]

    @Option(help: ArgumentHelp("The view centre in degrees, longitude first (as --bbox, GeoJSON and GDAL).", valueName: "lon,lat"),
            transform: CoordinateArgument.parse)
    var center: CoordinateArgument

    @Option(help: "The view zoom level, fractional, 0...20.")
    var zoom: Double

    @Option(help: "The viewport in points, WxH.")
    var size: String

    @Option(help: "The screen scale: 1, 2 or 3 (the PNG is size x scale pixels).")
    var scale: Int = 1

    @Option(name: .customLong("tile-size"), help: "The tile size in pixels of every layer (a power of two).")
    var tileSize: Int = 256

    @Flag(help: "Rows of URL templates count from the south (TMS).")
    var tms = false

    @Option(name: .customLong("max-z"), help: "The deepest zoom with tiles; deeper views scale these tiles up.")
    var maxZ: Int = 21

    @Option(help: "Seconds to wait for tiles.")
    var timeout: Double = 60

    @Option(name: .shortAndLong, help: "The PNG to write.")
    var output: String

    @Flag(help: "Overwrite the output file.")
    var force = false

    func run() async throws {
        let centre = center.coordinate
        let viewport = try Self.parseSize(size)
        guard let screenScale = ScreenScale(rawValue: scale) else {
            throw ValidationError("--scale must be 1, 2 or 3, not \(scale)")
        }
        // The canvas is bounded: each side at most 8192 pixels (256 MiB of RGBA at most).
        let canvas = (width: viewport.width * scale, height: viewport.height * scale)
        guard canvas.width <= Self.maximumCanvasSide, canvas.height <= Self.maximumCanvasSide else {
            throw ValidationError("--size \(size) at --scale \(scale) makes a \(canvas.width)x\(canvas.height) pixel PNG; tilepack renders at most \(Self.maximumCanvasSide) pixels a side: lower --size or --scale")
        }
        guard zoom.isFinite, (0...20).contains(zoom) else { throw ValidationError("--zoom must be in 0...20, not \(zoom)") }
        guard !inputs.isEmpty else { throw ValidationError("give at least one layer input") }
        try OutputIsInput.refuse(output: output, inputs: inputs)

        let view = HeadlessMapView(viewport: viewport, scale: screenScale, center: centre, zoomLevel: zoom)
        let options = RenderLayerOptions(tileSize: tileSize, flipped: tms, maximumZ: maxZ)
        var layers: [MapTileLayer] = []
        for (index, input) in inputs.enumerated() {
            let layer = try RenderLayerFactories.makeLayer(for: input, options: options)
            if index > 0 {
                layer.setTransparent(true)
                layer.setZIndex(index)
            }
            guard layer.setTileSize(tileSize).wasApplied else {
                throw ValidationError("--tile-size must be a power of two in \(MapTileLayer.allowedTileSizes)")
            }
            view.addMapTileLayer(layer)
            layers.append(layer)
        }

        let frame = await view.render(timeout: timeout)
        var notes: [String] = []
        for layer in layers {
            notes += Self.failureSummary(layer: layer.name, diagnostics: layer.diagnostics)
            notes += ArchiveLayerFactory.notes(for: layer, viewZoom: zoom)
        }
        for note in notes { printError(note) }
        if frame.drawn.isEmpty {
            let extents = layers.compactMap(ArchiveLayerFactory.extent(of:))
            throw CommandFailure("the view (centre \(centre), zoom \(zoom), \(viewport.width)x\(viewport.height)) shows no tile of any input\(extents.isEmpty ? "" : " (\(extents.joined(separator: "; ")))"); nothing was written")
        }
        let png = try PNGEncoder.encode(frame.bitmap)
        let file = try AtomicFile(destination: output, overwrite: force)
        guard FileSystem.createFile(file.temporaryPath, contents: Data(png)) == nil else {
            throw ValidationError("cannot write \(output)")
        }
        try file.commit()
        let real = frame.drawn.filter { !$0.isApproximate }.count
        let approximate = frame.drawn.count - real
        print("wrote \(output): \(frame.bitmap.width)x\(frame.bitmap.height) px, \(real) tiles, \(approximate) scaled up from lower zooms")
    }

    /// The largest side of the rendered canvas, in pixels (size x scale).
    static let maximumCanvasSide = 8192

    /// One line per layer and kind of failure, instead of the layer's diagnostics (two for each
    /// failed tile): tiles that are absent (no file, HTTP 404) are a note, as a sparse tree has
    /// them; other failures a warning with the first reason.
    static func failureSummary(layer: String, diagnostics: [TileLayerDiagnostic]) -> [String] {
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
            lines.append("warning: \(layer): \(order.count) tile\(order.count == 1 ? "" : "s") failed (\(examples(order))); \(first): \(reason)")
        }
        return lines
    }

    static func parseSize(_ text: String) throws -> ViewportSize {
        let parts = text.lowercased().split(separator: "x").map { Int($0) }
        guard parts.count == 2, let w = parts[0], let h = parts[1], (1...8192).contains(w), (1...8192).contains(h) else {
            throw ValidationError("--size must be WxH with each side in 1...8192, not '\(text)'")
        }
        return ViewportSize(width: w, height: h)
    }
}

/// Options every layer of a render shares.
struct RenderLayerOptions {
    var tileSize: Int
    var flipped: Bool
    var maximumZ: Int
}

/// Turns one render input into a tile layer. Each kind of input is one factory; the first that
/// recognises an input makes its layer. Archive inputs (MBTiles, bundles) come with the adapter:
/// add its factory to ``RenderLayerFactories/all``.
protocol RenderLayerFactory: Sendable {
    /// Whether this factory handles `input`.
    func recognises(_ input: String) -> Bool
    func makeLayer(for input: String, options: RenderLayerOptions) throws -> MapTileLayer
}

enum RenderLayerFactories {
    static let all: [any RenderLayerFactory] = [ArchiveLayerFactory(), URLTemplateLayerFactory()]

    static func makeLayer(for input: String, options: RenderLayerOptions) throws -> MapTileLayer {
        guard let factory = all.first(where: { $0.recognises(input) }) else {
            throw ValidationError("'\(input)' is not a layer input tilepack renders (expected an MBTiles file, a .tilepack bundle or a URL template with {z}, {x} and {y})")
        }
        return try factory.makeLayer(for: input, options: options)
    }
}

/// `https://host/{z}/{x}/{y}.png`, `file:///tiles/{z}/{x}/{y}.png` or a local path template.
struct URLTemplateLayerFactory: RenderLayerFactory {
    func recognises(_ input: String) -> Bool {
        input.contains("{z}") && input.contains("{x}") && input.contains("{y}")
    }

    func makeLayer(for input: String, options: RenderLayerOptions) throws -> MapTileLayer {
        var template = input
        if !input.contains("://") {
            let absolute = input.hasPrefix("/") ? input : FileManager.default.currentDirectoryPath + "/" + input
            template = "file://" + absolute
        } else if let scheme = input.split(separator: ":").first?.lowercased(), !["http", "https", "file"].contains(scheme) {
            throw ValidationError("'\(input)': only http, https and file URL templates are loaded")
        }
        let source = URLTemplateTileSource(urlTemplate: template, isGeometryFlipped: options.flipped,
                                           maximumZ: options.maximumZ, canReplaceMapContent: true)
        let layer = MapTileLayer(overlay: source, name: input)
        // Nothing says whether a template's tiles are opaque: drawn with their alpha, a
        // transparent tile shows what is below instead of black.
        layer.setTransparent(true)
        return layer
    }
}
