/// The options several commands share, each with one spelling and one meaning on every command
/// that has it (issue 42, part 5): `tilepack`'s commands (TilepackCLITests walks them) and
/// `tilepack-tile` (the tiler's tests walk it) are checked against this one table.
public enum SharedOptionRules {
    /// One option as a command's `--help` shows it.
    public struct Option: Sendable {
        public var long: String
        public var short: String?
        public var help: String
        public var valueName: String?

        public init(long: String, short: String?, help: String, valueName: String?) {
            self.long = long
            self.short = short
            self.help = help
            self.valueName = valueName
        }
    }

    /// A shared option: its short name (or none), what its help must say, its value's name.
    public struct Rule: Sendable {
        public var long: String
        public var short: String?
        public var says: String
        public var valueName: String?
    }

    /// `-q` is what gdal's `-q` and curl's `-sS` users expect: no progress, and what failed still
    /// said; the result (the summary line, or the --json report) still printed.
    public static let rules: [Rule] = [
        Rule(long: "quiet", short: "q", says: "No progress bar or per-item lines; errors, warnings and the final summary still print."),
        Rule(long: "json", short: nil, says: "Print the result as JSON on standard output"),
        Rule(long: "force", short: nil, says: "Overwrite an existing output"),
        Rule(long: "min-zoom", short: nil, says: "The lowest zoom"),
        Rule(long: "max-zoom", short: nil, says: "The highest zoom"),
        Rule(long: "index", short: nil, says: "its tile hash index beside it"),
        Rule(
            long: "bbox", short: nil, says: "Only tiles touching this box: west,south,east,north in degrees",
            valueName: "west,south,east,north"),
        Rule(
            long: "region", short: nil, says: "Only tiles sharing area with this GeoJSON Polygon or MultiPolygon", valueName: "area.geojson"
        ),
        Rule(long: "route", short: nil, says: "A route: GeoJSON (LineString, Feature, FeatureCollection) or GPX (track or route)."),
        Rule(long: "radius", short: nil, says: "With --route: the corridor's radius in metres"),
    ]

    /// Other spellings of the same things, which no command takes.
    public static let otherSpellings = [
        "silent", "overwrite", "replace", "bounds", "box", "minzoom", "maxzoom", "min-z", "zooms", "from-zoom", "to-zoom", "tile-index",
    ]

    /// What is wrong with one command's options; empty when nothing is.
    public static func problems(command: String, options: [Option]) -> [String] {
        var problems: [String] = []
        let longs = Set(options.map(\.long))
        for option in options {
            if otherSpellings.contains(option.long) {
                problems.append("\(command): --\(option.long) is spelled otherwise on other commands")
            }
            if option.short == "q" && option.long != "quiet" {
                problems.append("\(command): -q is --quiet on every other command, here --\(option.long)")
            }
            guard let rule = rules.first(where: { $0.long == option.long }) else { continue }
            if option.short != rule.short {
                problems.append(
                    "\(command): --\(option.long) has the short name \(option.short.map { "-\($0)" } ?? "none"), elsewhere \(rule.short.map { "-\($0)" } ?? "none")"
                )
            }
            if !option.help.contains(rule.says) {
                problems.append("\(command): --\(option.long) says \"\(option.help)\", where every command says \"\(rule.says)\"")
            }
            if let valueName = rule.valueName, option.valueName != valueName {
                problems.append("\(command): --\(option.long) <\(option.valueName ?? "")>, elsewhere <\(valueName)>")
            }
        }
        if longs.contains("min-zoom") != longs.contains("max-zoom") {
            problems.append("\(command): --min-zoom and --max-zoom go together")
        }
        // --zoom beside --min-zoom is the alias of the two (render's --zoom is the view's zoom).
        if longs.contains("min-zoom"), let zoom = options.first(where: { $0.long == "zoom" }),
            !zoom.help.contains("the same as --min-zoom MIN --max-zoom MAX")
        {
            problems.append("\(command): --zoom beside --min-zoom says \"\(zoom.help)\", not that it is their alias")
        }
        return problems
    }
}
