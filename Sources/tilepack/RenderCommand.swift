import ArgumentParser
import Foundation
import TileLayer
import TilepackCore
import TilepackImaging
import TilepackOperations
import TilepackRender
import TilepackStorage

/// `tilepack render`: draw a view of one or more tile layers into a PNG.
struct RenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Render a map view of one or more tile layers to a PNG.",
        discussion: """
            Each input is one layer, drawn bottom to top in the order given: an archive (\(TileArchiveFormat.extensions()), \
            local or http(s)://, recognised from its bytes) or a URL template with \
            {x} {y} {z} {scale} placeholders, {-y} for TMS rows (http://, https://, file:// or a \
            local path). An archive \
            layer takes its bounds, zoom levels and transparency from the archive; the first URL \
            layer is opaque, later ones are drawn as transparent overlays. With --key, only the \
            publisher's tiles are drawn: each archive layer is checked against its signed root, each \
            tile on its first read (a tile that is not the signed one is not drawn).
            Example: tilepack render 'tiles/{z}/{x}/{y}.png' --center -0.01,51.54 --zoom 14 --size 800x600 -o map.png
            """)

    @Argument(
        help:
            "Layer inputs: archives (\(TileArchiveFormat.extensions())) or URL templates such as https://host/{z}/{x}/{y}.png or tiles/{z}/{x}/{y}.png."
    )
    var inputs: [String]

    @Option(
        help: ArgumentHelp("The view centre in degrees, longitude first (as --bbox, GeoJSON and GDAL).", valueName: "lon,lat"),
        transform: CoordinateArgument.parse)
    var center: CoordinateArgument

    @Option(help: "The view zoom level, fractional, 0...20.")
    var zoom: Double

    @Option(help: "The viewport in points, WxH.")
    var size: String

    @Option(help: "The screen scale: 1, 2 or 3 (the PNG is size x scale pixels).")
    var scale: Int = 1

    @Option(name: .customLong("tile-size"), help: "The tile size in pixels of every layer (a power of two in 16...4096).")
    var tileSize: Int = TileSize.default

    @Flag(help: "Rows of URL templates count from the south (TMS).")
    var tms = false

    @Option(name: .customLong("max-z"), help: "The deepest zoom with tiles; deeper views scale these tiles up.")
    var maxZ: Int = 21

    @OptionGroup var publisher: PublisherKeyOptions

    @Option(help: "Seconds to wait for tiles.")
    var timeout: Double = 60

    @Option(name: .shortAndLong, help: "The PNG to write.")
    var output: String

    @Flag(help: "\(SharedHelp.force) (the PNG).")
    var force = false

    /// The usage errors: the options' values and how they combine.
    func validate() throws {
        let viewport = try Self.parseSize(size)
        guard ScreenScale(rawValue: scale) != nil else { throw ValidationError("--scale must be 1, 2 or 3, not \(scale)") }
        // The canvas is bounded: each side at most 8192 pixels (256 MiB of RGBA at most).
        let canvas = (width: viewport.width * scale, height: viewport.height * scale)
        guard canvas.width <= Self.maximumCanvasSide, canvas.height <= Self.maximumCanvasSide else {
            throw ValidationError(
                "--size \(size) at --scale \(scale) makes a \(canvas.width)x\(canvas.height) pixel PNG; tilepack renders at most \(Self.maximumCanvasSide) pixels a side: lower --size or --scale"
            )
        }
        guard zoom.isFinite, (0...20).contains(zoom) else { throw ValidationError("--zoom must be in 0...20, not \(zoom)") }
        guard TileSize.isValid(tileSize) else { throw ValidationError("--tile-size must be \(TileSize.rule)") }
        guard !inputs.isEmpty else { throw ValidationError("give at least one layer input") }
    }

    func run() async throws {
        let centre = center.coordinate
        let viewport = try Self.parseSize(size)
        let screenScale = ScreenScale(rawValue: scale) ?? .x1
        try OutputIsInput.refuse(output: output, inputs: inputs)

        let result: MapRender.Result
        do {
            result = try await MapRender.render(
                inputs: inputs, center: centre, zoom: zoom, viewport: viewport, scale: screenScale,
                options: RenderLayerOptions(
                    tileSize: tileSize, flipped: tms, maximumZ: maxZ, key: try publisher.verifier(),
                    minimumRelease: publisher.lowestRelease),
                timeout: timeout)
        } catch let error as RenderError {
            for note in error.notes { printError(note) }
            switch error.kind {
            case .invalidInput: throw CommandFailure(error.place ?? "render", error.reason)
            case .nothingDrawn: throw CommandFailure(error.place ?? "render", "\(error.reason); nothing was written")
            }
        }
        for note in result.notes { printError(note) }
        let frame = result.frame
        try Self.writePNG(frame.bitmap, to: output, force: force)
        let real = frame.drawn.filter { !$0.isApproximate }.count
        let approximate = frame.drawn.count - real
        print("wrote \(output): \(frame.bitmap.width)x\(frame.bitmap.height) px, \(real) tiles, \(approximate) scaled up from lower zooms")
    }

    /// Writes `bitmap` as a PNG at `output` (beside it first, then renamed into place).
    static func writePNG(_ bitmap: Bitmap, to output: String, force: Bool) throws {
        let png = try PNGEncoder.encode(bitmap)
        let file = try AtomicFile(destination: output, overwrite: force)
        guard FileSystem.createFile(file.temporaryPath, contents: Data(png)) == nil else {
            throw CommandFailure(output, "cannot write it")
        }
        try file.commit()
    }

    /// The largest side of the rendered canvas, in pixels (size x scale).
    static let maximumCanvasSide = 8192

    static func parseSize(_ text: String) throws -> ViewportSize {
        let parts = text.lowercased().split(separator: "x").map { Int($0) }
        guard parts.count == 2, let w = parts[0], let h = parts[1], (1...8192).contains(w), (1...8192).contains(h) else {
            throw ValidationError("--size must be WxH with each side in 1...8192, not '\(text)'")
        }
        return ViewportSize(width: w, height: h)
    }
}
