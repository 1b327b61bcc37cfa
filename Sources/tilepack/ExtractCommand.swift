import ArgumentParser
import TilepackCore
import TilepackOperations
import TilepackPlan
import TilepackStorage

struct ExtractCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "extract",
        abstract: "Copy a region of an archive into a new archive of any format.",
        discussion:
            "The input is any archive tilepack reads; the output's extension (\(TileArchiveFormat.extensions())) chooses its format. Only the tiles of the region are read. With --key, every tile copied is checked against the source's signed root (SOURCE.tpsig, read by range for a URL) and OUTPUT.tpsig is written: the signed root and the proof of the output's tiles, for `verify OUTPUT --key`."
    )

    @Argument(help: "The archive to read.")
    var source: String

    @Argument(help: "The archive to write (\(TileArchiveFormat.extensions())).")
    var output: String

    @OptionGroup var area: AreaOptions

    @Option(name: .customLong("min-zoom"), help: "\(SharedHelp.minZoom) to extract.")
    var minZoom: Int?

    @Option(name: .customLong("max-zoom"), help: "\(SharedHelp.maxZoom) to extract.")
    var maxZoom: Int?

    @OptionGroup var budgetOptions: BudgetOptions

    @OptionGroup var publisher: PublisherKeyOptions

    @OptionGroup var corridor: RouteOptions

    @OptionGroup var writer: ArchiveWriterOptions

    @OptionGroup var limit: TileLimitOptions

    func validate() throws {
        try checkZooms(minZoom: minZoom, maxZoom: maxZoom)
        if budgetOptions.budget != nil, [area.bbox != nil, area.region != nil, corridor.route != nil].filter({ $0 }).count != 1 {
            throw ValidationError("--budget needs the area: exactly one of --bbox, --region and --route")
        }
        if corridor.route != nil, budgetOptions.budget == nil { throw ValidationError("--route goes with --budget here") }
        if publisher.key != nil, writer.archive.signing.privateKey != nil {
            throw ValidationError(
                "--key keeps the publisher's signature (the output's .tpsig is its proof) and --sign signs anew: give one")
        }
    }

    func run() throws {
        var options = ExtractOptions()
        options.bounds = area.bbox?.box
        options.region = area.region?.region
        options.minZoom = minZoom
        options.maxZoom = maxZoom
        options.writing = writer.writing
        options.maximumTiles = limit.maxTiles
        if let budget = budgetOptions.budget, let format = PlanOutputFormat(path: output) {
            options.plan = try ArchivePlanning.plan(
                source: source,
                request: PlanRequest(
                    area: try corridor.planArea(area), minZoom: minZoom, maxZoom: maxZoom, budget: budget.bytes, format: format,
                    focus: try budgetOptions.planFocus()))
            // A corridor is read as the box around the planned tiles; the plan chooses within it.
            if corridor.route != nil { options.bounds = options.plan?.extent }
        }
        if let note = area.bbox?.box.antimeridianNote { printError("note: \(note)") }
        options.verification = try publisher.verifier().map {
            try ExtractVerification(source: source, key: $0, minimumRelease: publisher.lowestRelease)
        }
        let report = try writer.write(to: output, label: "extract") { local, progress in
            try TileExtractor.run(source: source, destination: local, options: options, progress: progress)
        }
        if writer.output.json {
            try printJSON(report)
        } else {
            for warning in report.warnings { printError("warning: \(warning)") }
            print("extracted \(report.tiles) tiles (\(report.bytes) bytes) into \(output) in \(String(format: "%.2f", report.seconds)) s")
        }
    }
}

struct MergeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "merge",
        abstract: "Merge archives of one tile type (such as the shards of a build) into one.",
        discussion: """
            Tiles held by several inputs with the same bytes are stored once; with different bytes they \
            are an error naming the tile, unless --on-duplicate says which to keep. The metadata is the \
            first input's; bounds, center and zooms the inputs disagree on are derived from all the tiles.
            """)

    @Argument(help: "The archives to merge, then the archive to write (\(TileArchiveFormat.extensions())).")
    var paths: [String]

    @Option(name: .customLong("on-duplicate"), help: "A tile in several inputs with different bytes: error, first or last.")
    var onDuplicate: DuplicateRule = .error

    @OptionGroup var writer: ArchiveWriterOptions

    @OptionGroup var limit: TileLimitOptions

    func validate() throws {
        if paths.count < 2 { throw ValidationError("give at least one input and the output") }
    }

    func run() throws {
        var options = MergeOptions()
        options.onDuplicate = onDuplicate
        options.writing = writer.writing
        options.maximumTiles = limit.maxTiles
        let inputs = try RemoteInputs.expand(Array(paths.dropLast()))
        let report = try writer.write(to: paths.last!, label: "merge") { local, progress in
            try ArchiveMerger.run(inputs: inputs, destination: local, options: options, progress: progress)
        }
        if writer.output.json {
            try printJSON(report)
        } else {
            for warning in report.warnings { printError("warning: \(warning)") }
            print(
                "merged \(report.tiles) tiles from \(report.inputs.count) archives into \(report.destination) (\(report.duplicates) duplicates) in \(String(format: "%.2f", report.seconds)) s"
            )
        }
    }
}

extension DuplicateRule: ExpressibleByArgument {}

/// `--shard K/N`.
struct ShardArgument: ExpressibleByArgument {
    var spec: ShardSpec

    init?(argument: String) {
        guard let spec = ShardSpec(argument) else { return nil }
        self.spec = spec
    }

    static var defaultValueDescription: String { "K/N" }
}
