import Foundation
import TilepackCore
import TilepackOperations

/// A one-line progress bar with a total, rate and ETA on standard error, shown only on a terminal.
///
/// The command ends the line with ``finish()`` before it prints its result, so the result starts
/// on a line of its own and the last progress line is printed once, whether or not the count
/// reached the total (an import whose filters leave files out never does).
final class ProgressBar: Sendable {
    let label: String
    let unit: String
    private let write: @Sendable (String) -> Void
    private let state = Locked((drawn: false, finished: false))

    init(label: String, unit: String = "tiles", write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.unit = unit
        self.write = write
    }

    /// A bar on standard error, or `nil` when it is not a terminal or `quiet` is set.
    static func start(label: String, unit: String = "tiles", quiet: Bool) -> ProgressBar? {
        guard !quiet, isatty(STDERR_FILENO) != 0 else { return nil }
        return ProgressBar(label: label, unit: unit) { FileHandle.standardError.write(Data($0.utf8)) }
    }

    /// The handler to give an operation.
    var handler: ProgressHandler { { [self] in draw($0) } }

    /// Draws the bar; `detail` (e.g. bytes and failures) follows the count.
    func draw(_ progress: OperationProgress, detail: String? = nil) {
        state.withLock { state in
            guard !state.finished else { return }
            write(Self.line(label: label, unit: unit, progress, detail: detail))
            state.drawn = true
        }
    }

    /// Ends the progress line (if one was drawn); later progress is ignored.
    func finish() {
        state.withLock { state in
            if state.drawn && !state.finished { write("\n") }
            state.finished = true
        }
    }

    /// `\r<label> [####----]  40% 400/1000 tiles, 812 tiles/s, ETA 1s` and an erase to the line's end.
    static func line(label: String, unit: String, _ p: OperationProgress, detail: String? = nil) -> String {
        var line = "\r\(label) "
        if let total = p.total, total > 0 {
            let fraction = min(1, Double(p.done) / Double(total))
            let width = 28
            let filled = Int(fraction * Double(width))
            line += "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "] "
            line += String(format: "%3.0f%% ", fraction * 100)
            line += "\(p.done)/\(total) \(unit)"
        } else {
            line += "\(p.done) \(unit)"
        }
        if let detail { line += ", \(detail)" }
        line += ", \(rate(p.rate)) \(unit)/s"
        if let eta = p.estimatedRemaining { line += ", ETA \(duration(eta))" }
        return line + "\u{1B}[K"
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
