import Foundation
import TilepackCore
import TilepackOperations

/// A one-line progress bar with rate and ETA on standard error, shown only on a terminal.
final class ProgressBar: Sendable {
    let label: String
    let unit: String

    init(label: String, unit: String) {
        self.label = label
        self.unit = unit
    }

    /// A handler for an operation, or `nil` when standard error is not a terminal or `quiet` is set.
    static func handler(label: String, unit: String = "tiles", quiet: Bool) -> ProgressHandler? {
        guard !quiet, isatty(STDERR_FILENO) != 0 else { return nil }
        let bar = ProgressBar(label: label, unit: unit)
        return { bar.draw($0) }
    }

    /// A bar, or `nil` when standard error is not a terminal or `quiet` is set.
    static func make(label: String, unit: String = "tiles", quiet: Bool) -> ProgressBar? {
        guard !quiet, isatty(STDERR_FILENO) != 0 else { return nil }
        return ProgressBar(label: label, unit: unit)
    }

    /// Whether the line was ended (the total reached, or ``end()``).
    private let ended = Locked(false)

    /// Ends the line, unless the last draw reached the total and ended it.
    func end() {
        if !ended.withLock({ let was = $0; $0 = true; return was }) { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    /// Draws the bar; `detail` (bytes, failures) follows the count.
    func draw(_ p: OperationProgress, detail: String? = nil) {
        var line = "\r\(label) "
        if let total = p.total, total > 0 {
            let fraction = min(1, Double(p.done) / Double(total))
            let width = 28
            let filled = Int(fraction * Double(width))
            line += "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "] "
            line += String(format: "%3.0f%% ", fraction * 100)
        }
        line += "\(p.done) \(unit)"
        if let detail { line += ", \(detail)" }
        line += ", \(Self.rate(p.rate)) \(unit)/s"
        if let eta = p.estimatedRemaining { line += ", ETA \(Self.duration(eta))" }
        line += "\u{1B}[K"
        if let total = p.total, p.done >= total {
            line += "\n"
            ended.withLock { $0 = true }
        }
        FileHandle.standardError.write(Data(line.utf8))
    }

    static func rate(_ value: Double) -> String { value >= 100 ? String(Int(value)) : String(format: "%.1f", value) }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 3600 ? "\(s / 3600)h\(s % 3600 / 60)m" : s >= 60 ? "\(s / 60)m\(s % 60)s" : "\(s)s"
    }
}

/// Standard error output for messages.
func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
