import ArgumentParser
import Foundation
import TilepackCore
import TilepackOperations
import TilepackPlan
import TilepackPrefetch

/// `--budget 500MB`: bytes, with kB/MB/GB (powers of 1000) or KiB/MiB/GiB (powers of 1024).
struct ByteCountArgument: CheckedArgument {
    var bytes: Int

    static let units: [(String, Double)] = [
        ("KiB", 1024), ("MiB", 1_048_576), ("GiB", 1_073_741_824), ("TiB", 1_099_511_627_776),
        ("kB", 1e3), ("KB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12), ("B", 1),
    ]

    static func parse(_ text: String) throws(ArgumentValueError) -> ByteCountArgument {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        var number = Substring(trimmed), scale = 1.0
        for (unit, factor) in units where trimmed.hasSuffix(unit) {
            number = trimmed.dropLast(unit.count)
            scale = factor
            break
        }
        guard let value = Double(number.trimmingCharacters(in: .whitespaces)), value.isFinite, value > 0, value * scale < 9e18 else {
            throw ArgumentValueError("'\(text)' is not a size: a number of bytes, or with kB, MB, GB (10^3, 10^6, 10^9) or KiB, MiB, GiB (2^10, 2^20, 2^30)")
        }
        return ByteCountArgument(bytes: Int((value * scale).rounded(.down)))
    }
}

/// `--budget` and the focus: what `plan` and `extract --budget` share.
struct BudgetOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The most bytes the output file may have: 500MB (10^6), 2GiB (2^30), or bytes; the deepest zooms that fit are chosen.",
            valueName: "size"),
        transform: ByteCountArgument.parse)
    var budget: ByteCountArgument?

    @Option(help: ArgumentHelp("With --budget: prefer detail near this point (lon,lat).", valueName: "lon,lat"), transform: CoordinateArgument.parse)
    var focus: CoordinateArgument?

    @Option(name: .customLong("focus-route"), help: "With --budget: prefer detail along this route (GeoJSON LineString or GPX).")
    var focusRoute: String?

    @Option(name: .customLong("focus-radius"), help: "With --focus or --focus-route: metres within which detail counts in full (default 2000).")
    var focusRadius: Double = 2000

    func validate() throws {
        if focus != nil && focusRoute != nil { throw ValidationError("give --focus or --focus-route, not both") }
        if budget == nil && (focus != nil || focusRoute != nil) { throw ValidationError("--focus and --focus-route go with --budget") }
        if !(focusRadius > 0 && focusRadius.isFinite) { throw ValidationError("--focus-radius must be above 0 metres") }
    }

    func planFocus() throws -> PlanFocus? {
        if let focus { return try PlanFocus(points: [focus.coordinate], radius: focusRadius) }
        if let focusRoute { return try PlanFocus(points: try RouteFile.read(path: focusRoute), radius: focusRadius) }
        return nil
    }
}

/// `--route FILE --radius M`: a route's corridor as `plan` and `extract --budget` take it (`fetch`
/// spells it the same: SharedHelp).
struct RouteOptions: ParsableArguments {
    @Option(help: "\(SharedHelp.route)")
    var route: String?

    @Option(help: "\(SharedHelp.radius).")
    var radius: Double?

    func validate() throws {
        if route != nil && radius == nil { throw ValidationError("--route needs --radius METRES") }
        if route == nil && radius != nil { throw ValidationError("--radius goes with --route") }
        if let radius, !(radius > 0 && radius.isFinite) { throw ValidationError("--radius must be above 0 metres") }
    }

    /// The area of `area`'s box or region, or of the route's corridor.
    func planArea(_ area: AreaOptions) throws -> PlanArea {
        if let box = area.bbox?.box { return .boundingBox(box) }
        if let region = area.region?.region { return .region(region) }
        if let route, let radius { return .route(try RouteFile.read(path: route), radius: radius) }
        throw CommandFailure("give exactly one of --bbox, --region and --route")
    }
}

struct PlanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plan",
        abstract: "Choose the deepest zooms of an area that fit a byte budget, from an archive's index or a tile server's sample.",
        discussion: """
            Every tile of the area at the lowest zoom is taken, then whole deeper zooms while they fit, then \
            the tiles that add the most detail per byte, never a tile without its parent; with --focus or \
            --focus-route detail falls off with distance (Specs/plan.md). The sizes are the archive's own \
            (MBTiles length(tile_data), PMTiles directories, a bundle's index), so the plan's tile bytes are \
            what `extract --budget` writes, and the output's size is predicted for its format.

            From a tile server (SOURCE a URL template with {z} {x} {y}, as `fetch` takes it; --max-zoom \
            needed) the sizes are estimated from a sample of 2% of the area's tiles (at least 8 a zoom), \
            stratified by zoom and area and downloaded as `fetch` downloads (--rate, --concurrency, \
            retries, Retry-After), never stored: the plan keeps its expected size plus its 95% margin \
            within the budget, and `fetch --budget` downloads it.
            """)

    @Argument(help: "The archive to plan from (local, http(s):// or s3://), or a tile server's URL template.")
    var source: String

    @OptionGroup var area: AreaOptions

    @OptionGroup var corridor: RouteOptions

    @Option(name: .customLong("min-zoom"), help: "\(SharedHelp.minZoom) to plan (default: the archive's lowest).")
    var minZoom: Int?

    @Option(name: .customLong("max-zoom"), help: "\(SharedHelp.maxZoom) to plan (default: the archive's deepest).")
    var maxZoom: Int?

    @OptionGroup var budgetOptions: BudgetOptions

    @Option(name: .customLong("output-format"), help: "The format the budget is for: mbtiles, pmtiles or tilepack (default mbtiles).")
    var outputFormat: String = "mbtiles"

    @OptionGroup(title: "Re-encoding candidates (an archive of raster tiles)") var candidates: PlanCandidateOptions

    @Option(help: "Also draw the plan into this PNG: the area over the archive's tiles that the plan takes, tinted by the zoom each place gets.")
    var png: String?

    @Flag(help: "\(SharedHelp.force) (the PNG).")
    var force = false

    @OptionGroup(title: "From a tile server (SOURCE a URL template)") var server: TileServerOptions

    @OptionGroup var outputOptions: OutputOptions

    var isTemplate: Bool { source.contains("{z}") }

    func validate() throws {
        try checkZooms(minZoom: minZoom, maxZoom: maxZoom)
        if isTemplate && maxZoom == nil { throw ValidationError("a tile server's plan needs --max-zoom Z (from --min-zoom, default 0)") }
        if budgetOptions.budget == nil { throw ValidationError("give the budget: --budget 500MB") }
        if [area.bbox != nil, area.region != nil, corridor.route != nil].filter({ $0 }).count != 1 {
            throw ValidationError("give exactly one of --bbox, --region and --route")
        }
        if PlanOutputFormat(path: "." + outputFormat) == nil { throw ValidationError("--output-format is mbtiles, pmtiles or tilepack") }
        if isTemplate && candidates.format != nil { throw ValidationError("--format plans re-encodings of an archive's tiles, not a tile server's") }
    }

    func run() async throws {
        let request = PlanRequest(
            area: try corridor.planArea(area), minZoom: minZoom, maxZoom: maxZoom, budget: budgetOptions.budget!.bytes,
            format: PlanOutputFormat(path: "." + outputFormat)!, focus: try budgetOptions.planFocus())
        let plan =
            isTemplate
            ? try await ServerPlanning.plan(template: source, request: request, server: server)
            : try ArchivePlanning.plan(source: source, request: request)
        let encodings = try candidates.encodings()
        let reencoded = encodings.isEmpty ? [] : try ArchivePlanning.candidates(source: source, request: request, encodings: encodings)
        if outputOptions.json {
            if reencoded.isEmpty { try printJSON(plan) } else { try printJSON(PlanWithCandidates(plan: plan, candidates: reencoded)) }
        } else {
            print(PlanTable.text(plan, source: source))
            if !reencoded.isEmpty { print(PlanCandidateOptions.table(reencoded, original: plan)) }
        }
        if let png {
            let line = try await PlanPNG.write(plan, over: isTemplate ? nil : source, to: png, force: force)
            if !outputOptions.json { print(line) }
        }
    }
}

/// The plan as the table `tilepack plan` prints.
enum PlanTable {
    static func text(_ plan: TilePlan, source: String) -> String {
        var lines = ["zoom  tiles taken/available    bytes taken/available  where (west,south,east,north)"]
        for level in plan.levels {
            let share = "\(level.taken)/\(level.available)".padding(toLength: 22, withPad: " ", startingAt: 0)
            let bytes = "\(FetchCommand.bytes(level.takenBytes))/\(FetchCommand.bytes(level.availableBytes))"
                .padding(toLength: 22, withPad: " ", startingAt: 0)
            let place = level.extent.map { $0.map { String(format: "%.4f", $0) }.joined(separator: ",") } ?? "-"
            lines.append("\(String(level.zoom).padding(toLength: 6, withPad: " ", startingAt: 0))\(share)  \(bytes) \(place)")
        }
        let margin = plan.exact ? "exact tile sizes" : "± \(FetchCommand.bytes(plan.margin))"
        lines.append(
            "\(plan.tiles) tiles, \(FetchCommand.bytes(plan.tileBytes)) of tiles; the \(plan.format.rawValue) file about \(FetchCommand.bytes(plan.predictedSize)) (\(margin)) against a budget of \(FetchCommand.bytes(plan.budget))"
        )
        if let sampled = plan.sampledTiles, let all = plan.areaTiles {
            let share = String(format: "%.1f%%", 100 * Double(sampled) / Double(max(1, all)))
            let confidence = Int(((plan.confidence ?? 0.95) * 100).rounded())
            lines.append("estimated from \(sampled) sample tiles of the area's \(all) (\(share)) at \(source); the margin is at \(confidence)% confidence")
        }
        let complete = plan.completeZoom.map { "every tile to zoom \($0)" } ?? "not every tile of the lowest zoom"
        lines.append("\(complete), the deepest tiles at zoom \(plan.deepestZoom.map(String.init) ?? "-")")
        let left = plan.levels.filter { $0.taken < $0.available }
        if !left.isEmpty {
            lines.append(
                "did not fit: "
                    + left.map { "zoom \($0.zoom): \($0.available - $0.taken) tiles (\(FetchCommand.bytes($0.availableBytes - $0.takenBytes)))" }
                    .joined(separator: ", "))
        }
        return lines.joined(separator: "\n")
    }
}
