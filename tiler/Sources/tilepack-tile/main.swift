import ArgumentParser
import Foundation
import TilepackCore
import TilepackImaging
import TilepackTiler

/// `tilepack-tile INPUT OUTPUT`: a georeferenced raster cut into an archive (`tilepack tile` runs it).
struct TileCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tilepack-tile",
        abstract: "Cut a georeferenced raster (GeoTIFF, COG, JPEG 2000, VRT: what GDAL reads) into an archive.",
        discussion: """
            Reprojects to Web Mercator with GDAL's warper, cuts the deepest zoom from the raster and makes every \
            shallower tile from its four children. OUTPUT is a .tilepack bundle, .mbtiles, .pmtiles, or a folder (a z/x/y tree).

            Examples:
              tilepack tile samples/sample-utm.tif city.tilepack
              tilepack tile ortho.tif ortho.pmtiles --min-zoom 12 --max-zoom 18 --format webp --quality 0-14:85,15-:70
              tilepack tile scan16.tif scan.mbtiles --range 0,4000 --resampling bilinear
              tilepack tile dem.tif terrain.pmtiles --encoding terrarium --tile-size 512
            """
    )

    @Argument(help: "The raster: any file or VRT the system GDAL opens.") var input: String
    @Argument(help: "The archive to write: .tilepack, .mbtiles, .pmtiles, or a folder.") var output: String
    // The shared options' words are tilepack's (Sources/tilepack/Arguments.swift, SharedHelp): one
    // spelling and meaning on every command; TilepackTestSupport's SharedOptionRules checks both.
    @Option(
        name: .customLong("min-zoom"),
        help: "The lowest zoom to cut (default: where the raster fits one tile).")
    var minZoom: Int?
    @Option(
        name: .customLong("max-zoom"),
        help: "The highest zoom to cut (default: the deepest from the raster's resolution).")
    var maxZoom: Int?
    /// The older spelling, kept: `--zoom 12-18` is `--min-zoom 12 --max-zoom 18`.
    @Option(help: ArgumentHelp("MIN-MAX or Z, the same as --min-zoom MIN --max-zoom MAX.", valueName: "zooms"))
    var zoom: String?
    @Option(
        help: ArgumentHelp(
            "Only tiles touching this box: west,south,east,north in degrees.", valueName: "west,south,east,north"))
    var bbox: String?
    @Option(help: "near, bilinear, cubic, lanczos or average (GDAL's names; the default is gdal2tiles').")
    var resampling: String = Resampling.default.rawValue
    @Option(name: .customLong("tile-size"), help: "256 or 512.") var tileSize = 256
    @Option(help: "png, jpeg or webp.") var format = "png"
    @Option(help: "Lossy quality 1-100, or per zoom range: 0-12:85,13-16:70,17-:55.") var quality: String?
    @Flag(help: "WebP lossless.") var lossless = false
    @Flag(name: .customLong("keep-blank"), help: "Write fully transparent tiles too.") var keepBlank = false
    @Option(help: "For 16-bit or float samples: the values drawn from black to white, MIN,MAX.") var range: String?
    @Option(
        name: .customLong("encoding"),
        help: "A DEM's band 1 as elevations in colours: terrarium or mapbox (terrain-RGB); png or webp --lossless only.")
    var elevationEncoding: String?
    @Option(help: "Worker threads (default: every core).") var threads = ProcessInfo.processInfo.activeProcessorCount
    @Flag(help: "Overwrite an existing output (OUTPUT).") var force = false
    @Flag(
        name: .shortAndLong,
        help: "No progress bar or per-item lines; errors, warnings and the final summary still print.")
    var quiet = false
    @Flag(
        name: .customLong("index"),
        help:
            "A .tilepack or .pmtiles output: also write its tile hash index beside it (OUTPUT.tpindex, as `tilepack index` does), to publish with it for `tilepack sync`; an .mbtiles output stores its content identity instead, for `tilepack patch`."
    )
    var tileIndex = false

    /// The zooms asked for by --min-zoom and --max-zoom, or by --zoom; `nil`: from the raster.
    /// Given only one of --min-zoom and --max-zoom, the other end is the raster's, as without
    /// either: `Tiler` takes a range, so the missing end is left to it through `TileOptions`.
    func zooms() throws -> ClosedRange<Int>? {
        let valid = 0...TileCoordinate.maximumZoom
        if let zoom {
            guard minZoom == nil && maxZoom == nil else { throw ValidationError("give --zoom MIN-MAX or --min-zoom/--max-zoom, not both") }
            let parts = zoom.split(separator: "-", omittingEmptySubsequences: false).compactMap { Int($0) }
            guard parts.count == 1 || parts.count == 2, parts.allSatisfy({ valid.contains($0) }), parts[0] <= parts[parts.count - 1] else {
                throw ValidationError("--zoom is MIN-MAX (e.g. 10-16) or one zoom within 0...\(TileCoordinate.maximumZoom), not '\(zoom)'")
            }
            return parts[0]...parts[parts.count - 1]
        }
        for value in [minZoom, maxZoom].compactMap({ $0 }) where !valid.contains(value) {
            throw ValidationError("zoom \(value) is outside 0...\(TileCoordinate.maximumZoom)")
        }
        if let minZoom, let maxZoom, minZoom > maxZoom { throw ValidationError("--min-zoom \(minZoom) is above --max-zoom \(maxZoom)") }
        if let minZoom, let maxZoom { return minZoom...maxZoom }
        return nil
    }

    func run() throws {
        guard let tileFormat = TileFormat(rawValue: format == "jpg" ? "jpeg" : format) else {
            throw ValidationError("--format is png, jpeg or webp, not '\(format)'")
        }
        let encoding: TileEncoding
        do { encoding = try TileEncoding(format: tileFormat, quality: quality, lossless: lossless) } catch {
            throw ValidationError("\(error)")
        }
        var options = TileOptions(input: input, output: output, encoding: encoding)
        guard let method = Resampling(rawValue: resampling) else {
            throw ValidationError(
                "--resampling is one of \(Resampling.allCases.map(\.rawValue).joined(separator: ", ")), not '\(resampling)'")
        }
        options.resampling = method
        options.tileSize = tileSize
        options.keepBlank = keepBlank
        options.overwrite = force
        options.tileIndex = tileIndex
        options.threads = max(1, threads)
        options.zooms = try zooms()
        options.minZoom = minZoom
        options.maxZoom = maxZoom
        if let bbox {
            let v = bbox.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard v.count == 4, v[0] < v[2], v[1] < v[3], (-180...180).contains(v[0]), (-180...180).contains(v[2]),
                (-90...90).contains(v[1]),
                (-90...90).contains(v[3])
            else {
                throw ValidationError("--bbox is W,S,E,N in degrees with W < E and S < N (longitude first), not '\(bbox)'")
            }
            options.bounds = GeoBoundingBox(west: v[0], south: v[1], east: v[2], north: v[3])
        }
        if let elevationEncoding {
            guard let elevation = ElevationEncoding(rawValue: elevationEncoding) else {
                throw ValidationError("--encoding is terrarium or mapbox, not '\(elevationEncoding)'")
            }
            options.elevation = elevation
        }
        if let range {
            let v = range.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard v.count == 2, v[0] < v[1] else { throw ValidationError("--range is MIN,MAX with MIN < MAX, not '\(range)'") }
            options.range = v[0]...v[1]
        }

        // Ctrl-C: the workers stop, the archive is not written, nothing is left behind.
        let interrupted = TileInterrupt()
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler { interrupted.set() }
        source.resume()
        defer { source.cancel() }

        let terminal = isatty(STDERR_FILENO) != 0
        let quiet = self.quiet
        let progress: TileProgress = { done, total, elapsed in
            guard !quiet else { return }
            let rate = elapsed > 0 ? Double(done) / elapsed : 0
            let eta = rate > 0 ? Double(total - done) / rate : 0
            let line = String(
                format: "%@ tiles %d/%d (%.0f%%) %.0f tiles/s ETA %.0f s", URL(fileURLWithPath: self.output).lastPathComponent, done, total,
                total > 0 ? 100 * Double(done) / Double(total) : 100, rate, eta)
            FileHandle.standardError.write(Data(((terminal ? "\r\u{1B}[K" : "") + line + (terminal ? "" : "\n")).utf8))
        }
        let report: TileReport
        do {
            report = try Tiler.run(options, progress: progress, cancelled: { interrupted.isSet })
        } catch {
            if terminal && !quiet { FileHandle.standardError.write(Data("\n".utf8)) }
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            throw ExitCode(interrupted.isSet ? 130 : 1)
        }
        if terminal && !quiet { FileHandle.standardError.write(Data("\n".utf8)) }
        print(
            "tiled \(input) into \(output): \(report.tiles) tiles (\(report.blank) blank skipped), zooms \(report.zooms.lowerBound)-\(report.zooms.upperBound), \(report.bytes) bytes, \(String(format: "%.1f", report.seconds)) s"
        )
    }
}

final class TileInterrupt: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

TileCommand.main()
