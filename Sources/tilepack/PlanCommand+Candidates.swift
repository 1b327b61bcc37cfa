import ArgumentParser
import Foundation
import TilepackCore
import TilepackImaging
import TilepackOperations
import TilepackPlan

/// `plan --format webp --quality 60,75,90`: re-encodings as `convert --format` makes them, each
/// planned from a re-encoded sample.
struct PlanCandidateOptions: ParsableArguments {
    @Option(help: "Also plan the tiles re-encoded as convert --format would: png, jpeg or webp.")
    var format: String?

    @Option(
        help:
            "With --format jpeg or webp: the qualities to compare, comma-separated (60,75,90), or one per-zoom quality as convert takes it (0-12:85,13-:70).")
    var quality: String?

    @Flag(help: "With --format webp: lossless.")
    var lossless = false

    func validate() throws { _ = try encodings() }

    /// The candidates: one per quality of a comma list (a per-zoom quality, with ':', is one).
    func encodings() throws -> [TileEncoding] {
        guard let format else {
            if quality != nil || lossless { throw ValidationError("--quality and --lossless go with --format") }
            return []
        }
        guard let tileFormat = TileFormat(rawValue: format == "jpg" ? "jpeg" : format.lowercased()), tileFormat.isRaster else {
            throw ValidationError("--format is png, jpeg or webp, not '\(format)'")
        }
        let qualities: [String?] = quality.map { $0.contains(":") ? [$0] : $0.split(separator: ",").map(String.init) } ?? [nil]
        do {
            return try qualities.map { try TileEncoding(format: tileFormat, quality: $0, lossless: lossless) }
        } catch {
            throw ValidationError("\(error)")
        }
    }

    /// The candidates' table: how deep each gets within the budget, and at what PSNR.
    static func table(_ candidates: [PlanCandidate], original: TilePlan) -> String {
        var lines = [
            "re-encoded (\(candidates.first?.sampledTiles ?? 0) sample tiles re-encoded; sizes ± the 95% margin):",
            "candidate                      bytes after/before  tiles    complete  deepest  tiles' bytes             PSNR median/lowest",
        ]
        func row(_ name: String, _ ratio: String, _ plan: TilePlan, _ psnr: String) -> String {
            let bytes = "\(FetchCommand.bytes(plan.tileBytes))" + (plan.exact ? "" : " ± \(FetchCommand.bytes(plan.margin))")
            return name.padding(toLength: 31, withPad: " ", startingAt: 0) + ratio.padding(toLength: 20, withPad: " ", startingAt: 0)
                + "\(plan.tiles)".padding(toLength: 9, withPad: " ", startingAt: 0)
                + (plan.completeZoom.map(String.init) ?? "-").padding(toLength: 10, withPad: " ", startingAt: 0)
                + (plan.deepestZoom.map(String.init) ?? "-").padding(toLength: 9, withPad: " ", startingAt: 0)
                + bytes.padding(toLength: 25, withPad: " ", startingAt: 0) + psnr
        }
        lines.append(row("as it is", "1.00", original, "-"))
        for candidate in candidates {
            let psnr = candidate.medianPSNR.map { String(format: "%.1f/%.1f dB", $0, candidate.lowestPSNR ?? $0) } ?? "-"
            lines.append(row(candidate.encoding, String(format: "%.2f", candidate.ratio), candidate.plan, psnr))
        }
        return lines.joined(separator: "\n")
    }
}

/// `plan --json` with candidates: the plan and each candidate's.
struct PlanWithCandidates: Encodable {
    var plan: TilePlan
    var candidates: [PlanCandidate]
}
