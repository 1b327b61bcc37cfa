import ArgumentParser
import Foundation
import TileLayer
import TilepackCore
import TilepackImaging
import TilepackStorage

/// `tilepack render`: draw a view of one or more tile layers into a PNG.
struct RenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Render a map view of one or more tile layers to a PNG.",
        discussion: """
            Each input is one layer, drawn bottom to top in the order given: an archive (an MBTiles \
            file or a .tilepack bundle, recognised from its bytes) or a URL template with \
            {x} {y} {z} {scale} placeholders (http://, https://, file:// or a local path). An archive \
            layer takes its bounds, zoom levels and transparency from the archive; the first URL \
            layer is opaque, later ones are drawn as transparent overlays.
            Example: tilepack render 'tiles/{z}/{x}/{y}.png' --center 51.54,-0.01 --zoom 14 --size 800x600 -o map.png
            """)

    @Argument(help: "Layer inputs: archives (.mbtiles, .tilepack) or URL templates such as https://host/{z}/{x}/{y}.png or tiles/{z}/{x}/{y}.png.")
    var inputs: [String]

    @Option(help: "The view centre as LAT,LON in degrees.")
    var center: String

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
        let centre = try Self.parseCenter(center)
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
        let png = try PNGEncoder.encode(frame.bitmap)
        let file = try AtomicFile(destination: output, overwrite: force)
        guard FileManager.default.createFile(atPath: file.temporaryPath, contents: png) else {
            throw ValidationError("cannot write \(output)")
        }
        try file.commit()

        for layer in layers {
            for diagnostic in layer.diagnostics where diagnostic.kind == .tileFailed {
                FileHandle.standardError.write(Data("warning: \(layer.name): \(diagnostic)\n".utf8))
            }
            for note in ArchiveLayerFactory.notes(for: layer, viewZoom: zoom) {
                FileHandle.standardError.write(Data("\(note)\n".utf8))
            }
        }
        let real = frame.drawn.filter { !$0.isApproximate }.count
        let approximate = frame.drawn.count - real
        print("wrote \(output): \(frame.bitmap.width)x\(frame.bitmap.height) px, \(real) tiles, \(approximate) scaled up from lower zooms")
    }

    /// The largest side of the rendered canvas, in pixels (size x scale).
    static let maximumCanvasSide = 8192

    static func parseCenter(_ text: String) throws -> GeoCoordinate {
        let parts = text.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 2, let lat = parts[0], let lon = parts[1], (-90...90).contains(lat), (-180...180).contains(lon) else {
            throw ValidationError("--center must be LAT,LON in degrees (latitude -90...90, longitude -180...180), not '\(text)'")
        }
        return GeoCoordinate(latitude: lat, longitude: lon)
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
        return MapTileLayer(overlay: source, name: input)
    }
}
