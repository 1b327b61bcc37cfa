import ArgumentParser
import Foundation
import TilepackCore
import TilepackOperations
import TilepackStorage

extension TileScheme: ExpressibleByArgument {}
extension TileTreeLayout: ExpressibleByArgument {}

/// `--encode raw-rgba` and friends: decode at import and store raw pixels in a bundle.
struct RawEncoding: ExpressibleByArgument {
    var pixelFormat: PixelFormat

    static let names: [String: PixelFormat] = [
        "raw-rgba": .rgba8888, "raw-bgra": .bgra8888,
        "raw-rgba-premultiplied": .rgba8888Premultiplied, "raw-bgra-premultiplied": .bgra8888Premultiplied,
        "raw-rgb": .rgb888, "raw-rgb565": .rgb565,
    ]

    init?(argument: String) {
        guard let format = Self.names[argument.lowercased()] else { return nil }
        pixelFormat = format
    }

    static var allValueStrings: [String] { names.keys.sorted() }
}

/// `--bbox west,south,east,north` in degrees (lon,lat order, as GeoJSON and GDAL).
///
/// Negative values need nothing here: ``CommandLineArguments/joiningNegativeValues(_:)`` joins
/// `--bbox -10,40,8,47` to its option before parsing, for every option of every command. Declare
/// the option with `transform: BoundingBoxArgument.parse` to tell the user which value is wrong
/// (the plain type works too, with ArgumentParser's generic "invalid value" message).
struct BoundingBoxArgument: CheckedArgument {
    var box: GeoBoundingBox

    init(box: GeoBoundingBox) { self.box = box }

    /// Parses `west,south,east,north`, saying what is wrong with it.
    static func parse(_ text: String) throws(ArgumentValueError) -> BoundingBoxArgument {
        let numbers = try ArgumentValueError.numbers(text, count: 4, form: "west,south,east,north")
        try ArgumentValueError.check(longitude: numbers[0], "west")
        try ArgumentValueError.check(latitude: numbers[1], "south")
        try ArgumentValueError.check(longitude: numbers[2], "east")
        try ArgumentValueError.check(latitude: numbers[3], "north")
        guard numbers[1] <= numbers[3] else {
            throw ArgumentValueError("south \(numbers[1]) is north of north \(numbers[3]) (the order is west,south,east,north)")
        }
        return BoundingBoxArgument(box: GeoBoundingBox(west: numbers[0], south: numbers[1], east: numbers[2], north: numbers[3]))
    }
}

/// A point as `lon,lat` in degrees: the order of `--bbox`, GeoJSON and GDAL. Latitude is limited
/// to Web Mercator's ±85.0511°. Negative values: see ``BoundingBoxArgument``.
struct CoordinateArgument: CheckedArgument {
    var coordinate: GeoCoordinate

    init(coordinate: GeoCoordinate) { self.coordinate = coordinate }

    static func parse(_ text: String) throws(ArgumentValueError) -> CoordinateArgument {
        let numbers = try ArgumentValueError.numbers(text, count: 2, form: "lon,lat")
        try ArgumentValueError.check(longitude: numbers[0], "longitude")
        guard abs(numbers[1]) <= WebMercator.maximumLatitude else {
            let swapped = abs(numbers[0]) <= WebMercator.maximumLatitude && abs(numbers[1]) <= 180
            throw ArgumentValueError(
                "latitude \(numbers[1]) is outside the map's -\(Self.latitudeText)...\(Self.latitudeText)"
                    + (swapped ? " (the order is lon,lat: did you mean \(numbers[1]),\(numbers[0])?)" : ""))
        }
        return CoordinateArgument(coordinate: GeoCoordinate(latitude: numbers[1], longitude: numbers[0]))
    }

    static let latitudeText = String(format: "%.4f", WebMercator.maximumLatitude)
}

/// A value parsed by a `parse` that says what is wrong; as a plain `ExpressibleByArgument` it
/// gets ArgumentParser's generic message, through `@Option(transform: T.parse)` the reason.
protocol CheckedArgument: ExpressibleByArgument {
    static func parse(_ text: String) throws(ArgumentValueError) -> Self
}

extension CheckedArgument {
    init?(argument: String) {
        guard let parsed = try? Self.parse(argument) else { return nil }
        self = parsed
    }

    static var defaultCompletionKind: CompletionKind { .default }
}

/// A command's refusal at run time, for a reason that is not an operation's own error (those
/// name their file already): the file, URL, program or option at fault and why. The launcher
/// prints it as "Error: PLACE: reason" and exits 1, with no usage line: the command line was well
/// formed (``Tilepack/launch(_:)`` treats a `ValidationError` thrown from `run()` the same way,
/// so a usage error belongs in `validate()`).
struct CommandFailure: Error, CustomStringConvertible {
    /// What is at fault (a path, URL, program or `--option`), or `nil` when nothing single is.
    var place: String?
    var reason: String

    init(_ place: String, _ reason: String) {
        self.place = place
        self.reason = reason
    }

    init(_ reason: String) {
        place = nil
        self.reason = reason
    }

    var description: String { place.map { "\($0): \(reason)" } ?? reason }
}

/// Why an option's value is not what it should be; ArgumentParser prints it after "The value
/// '...' is invalid for '--option <value>': ".
struct ArgumentValueError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) { self.description = description }

    /// Exactly `count` finite numbers separated by commas.
    static func numbers(_ text: String, count: Int, form: String) throws(ArgumentValueError) -> [Double] {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == count else {
            throw ArgumentValueError("expected \(count) numbers, \(form), not \(parts.count)")
        }
        return try parts.map { (part: Substring) throws(ArgumentValueError) -> Double in
            let trimmed = part.trimmingCharacters(in: .whitespaces)
            guard let number = Double(trimmed), number.isFinite else {
                throw ArgumentValueError("'\(trimmed)' is not a number (expected \(form) in degrees)")
            }
            return number
        }
    }

    static func check(longitude: Double, _ name: String) throws(ArgumentValueError) {
        guard (-180...180).contains(longitude) else { throw ArgumentValueError("\(name) \(longitude) is outside -180...180") }
    }

    static func check(latitude: Double, _ name: String) throws(ArgumentValueError) {
        guard (-90...90).contains(latitude) else { throw ArgumentValueError("\(name) \(latitude) is outside -90...90") }
    }
}

/// Flags every command that runs long shares.
/// How many worker threads an operation uses.
struct ThreadOptions: ParsableArguments {
    @Option(help: "Worker threads (default: one per core).")
    var threads: Int?

    func validate() throws {
        if let threads, !(1...256).contains(threads) {
            throw ValidationError("--threads must be between 1 and 256, not \(threads)")
        }
    }
}

/// `-q/--quiet` and `--json`, for every command that reports progress or a result.
struct OutputOptions: ParsableArguments {
    @Flag(name: .shortAndLong, help: ArgumentHelp(SharedHelp.quiet))
    var quiet = false

    @Flag(help: ArgumentHelp(SharedHelp.json + "."))
    var json = false
}

/// The help of the options several commands share, so that each is spelled one way and means
/// one thing on every command that has it (`tilepack-tile`, in its own package, says the same;
/// TilepackTestSupport's `SharedOptionRules` checks both). A command may add what is its own
/// after the shared words (a default, what the output is).
enum SharedHelp {
    /// `-q/--quiet`: as gdal's `-q` and curl's `-sS`, no progress and no chatter, but a failure is
    /// still said; and the result (the summary line, or `--json`'s report) is still printed,
    /// which a script reads.
    static let quiet = "No progress bar or per-item lines; errors, warnings and the final summary still print."
    /// `--json` (followed by "." or by what the JSON holds).
    static let json = "Print the result as JSON on standard output"
    /// `--force` (followed by "." or by what the output is).
    static let force = "Overwrite an existing output"
    /// `--min-zoom` (followed by what the zoom bounds).
    static let minZoom = "The lowest zoom"
    /// `--max-zoom` (followed by what the zoom bounds).
    static let maxZoom = "The highest zoom"
    /// `--bbox`, with the value name ``bboxValue``.
    static let bbox = "Only tiles touching this box: west,south,east,north in degrees."
    static let bboxValue = "west,south,east,north"
    /// `--region`, with the value name ``regionValue``.
    static let region =
        "Only tiles sharing area with this GeoJSON Polygon or MultiPolygon (or a FeatureCollection of them); holes and the antimeridian are handled."
    static let regionValue = "area.geojson"
    /// `--route`, with `--radius` (``radius``, followed by "." or by a bound).
    static let route = "A route: GeoJSON (LineString, Feature, FeatureCollection) or GPX (track or route)."
    static let radius = "With --route: the corridor's radius in metres"
}

/// `--min-zoom` and `--max-zoom` within 0...maximumZoom and in order (a usage error otherwise).
func checkZooms(minZoom: Int?, maxZoom: Int?) throws {
    for zoom in [minZoom, maxZoom].compactMap({ $0 }) where !(0...TileCoordinate.maximumZoom).contains(zoom) {
        throw ValidationError("zoom \(zoom) is outside 0...\(TileCoordinate.maximumZoom)")
    }
    if let minZoom, let maxZoom, minZoom > maxZoom {
        throw ValidationError("--min-zoom \(minZoom) is above --max-zoom \(maxZoom)")
    }
}

/// `--region AREA.geojson`: a GeoJSON Polygon or MultiPolygon, or a FeatureCollection of them.
struct RegionArgument {
    let path: String
    let region: GeoRegion

    static func parse(_ path: String) throws -> RegionArgument {
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read the region file \(path)") }
        do {
            return RegionArgument(path: path, region: try GeoRegion(geoJSON: data))
        } catch {
            throw ValidationError("\(path): \(error)")
        }
    }
}

/// `--bbox` or `--region`: the area `extract` and `export --maplibre-offline` take (`fetch`
/// declares the same two beside `--route`).
struct AreaOptions: ParsableArguments {
    @Option(help: ArgumentHelp(SharedHelp.bbox, valueName: SharedHelp.bboxValue), transform: BoundingBoxArgument.parse)
    var bbox: BoundingBoxArgument?

    @Option(help: ArgumentHelp(SharedHelp.region, valueName: SharedHelp.regionValue), transform: RegionArgument.parse)
    var region: RegionArgument?

    func validate() throws {
        if bbox != nil && region != nil { throw ValidationError("give --bbox or --region, not both") }
    }
}
