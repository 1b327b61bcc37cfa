import Foundation
import TilepackCore
import TilepackImaging
import TilepackPlan

/// One re-encoding candidate of `plan --format ... --quality A,B,C`: how deep it gets within the
/// budget and at what PSNR (`Specs/plan.md` §7).
package struct PlanCandidate: Sendable, Encodable {
    /// `webp, quality 75` as ``TileEncoding`` describes itself.
    package var encoding: String
    /// The plan of the re-encoded sizes: an estimate, its margin kept within the budget.
    package var plan: TilePlan
    /// The sample tiles re-encoded, and their bytes after over before, per zoom and overall.
    package var sampledTiles: Int
    package var ratio: Double
    package var ratios: [String: Double]
    /// The median and the lowest PSNR (dB) of the sample tiles against the originals.
    package var medianPSNR: Double?
    package var lowestPSNR: Double?
}

extension ArchivePlanning {
    /// Each candidate's plan: the archive's exact sizes scaled zoom by zoom by the ratio of bytes
    /// after to bytes before over a stratified sample (``SampledSizes``: 2% of the area's tiles, at
    /// least 8 a zoom) re-encoded by `convert --format`'s re-encoder, with the ratio estimator's
    /// 95% margin (Cochran, *Sampling Techniques* §6.3).
    package static func candidates(
        source: String, request: PlanRequest, encodings: [TileEncoding], seed: UInt64 = 46
    ) throws(OperationError) -> [PlanCandidate] {
        let archive = try ArchiveLocation.open(source)
        let (sizes, metadataBytes) = try self.sizes(archive: archive, request: request)
        let sample: [(tile: TileCoordinate, bytes: [UInt8])]
        do {
            let drawn = try SampledSizes(area: request.area, zooms: sizes.zooms, minimumPerZoom: 8, seed: seed)
            sample = try drawn.picks.compactMap { tile in try archive.withTileBytes(at: tile) { (tile, Array($0)) } }
        } catch {
            throw OperationError.wrapping(error, path: source)
        }
        return try encodings.map { encoding throws(OperationError) in
            var before: [Int: [Double]] = [:], after: [Int: [Double]] = [:], psnrs: [Double] = []
            for item in sample {
                do {
                    let (bytes, psnr) = try TileReencoder.reencode(item.bytes, encoding: encoding, zoom: item.tile.zoom)
                    before[item.tile.zoom, default: []].append(Double(item.bytes.count))
                    after[item.tile.zoom, default: []].append(Double(bytes.count))
                    if let psnr { psnrs.append(psnr) }
                } catch {
                    throw OperationError(path: source, fault: .badInput("tile \(item.tile) cannot be re-encoded as \(encoding): \(error)"))
                }
            }
            let ratios = before.keys.reduce(into: [Int: Double]()) { $0[$1] = after[$1]!.reduce(0, +) / max(1, before[$1]!.reduce(0, +)) }
            // Paired tile by tile, in one order of zooms (two dictionaries need not iterate alike).
            let zooms = before.keys.sorted()
            let (ratio, _) = ratioEstimate(before: zooms.flatMap { before[$0]! }, after: zooms.flatMap { after[$0]! })
            let margin = zoomMargin(zooms: zooms, before: before, after: after, sizes: sizes)
            let scaled = sizes.scaled(by: ratios, relativeMargin: margin, confidence: 0.95)
            var plan = TilePlanner.plan(
                scaled, budget: request.budget, format: request.format, focus: request.focus, metadataBytes: metadataBytes)
            plan.sampledTiles = sample.count
            plan.areaTiles = sizes.levels.reduce(0) { $0 + $1.count }
            psnrs.sort()
            return PlanCandidate(
                encoding: "\(encoding)", plan: plan, sampledTiles: sample.count, ratio: ratio,
                ratios: Dictionary(uniqueKeysWithValues: ratios.map { ("\($0.key)", $0.value) }),
                medianPSNR: psnrs.isEmpty ? nil : psnrs[psnrs.count / 2], lowestPSNR: psnrs.first)
        }
    }

    /// The relative 95% margin of sizes scaled by each zoom's own ratio: the widest zoom's (each
    /// zoom's total is then within it, and so is their sum), each with the finite-population
    /// correction (a zoom sampled whole is exact). One pooled margin understated it: the pooled
    /// ratio's spread is not the error of ratios estimated zoom by zoom from 8 tiles each.
    static func zoomMargin(zooms: [Int], before: [Int: [Double]], after: [Int: [Double]], sizes: AreaTileSizes) -> Double {
        zooms.map { zoom in
            let sampled = before[zoom]!.count
            let population = sizes.levels.first { $0.zoom == zoom }?.count ?? sampled
            guard population > sampled else { return 0 }
            let margin = ratioEstimate(before: before[zoom]!, after: after[zoom]!).margin
            return margin * (Double(population - sampled) / Double(population)).squareRoot()
        }.max() ?? 0
    }

    /// The ratio Σ after / Σ before and its relative 95% margin: `1.96 · s_d / (√n · x̄) / R`, `d = y − R x`.
    static func ratioEstimate(before: [Double], after: [Double]) -> (ratio: Double, margin: Double) {
        let n = Double(before.count), x = before.reduce(0, +), y = after.reduce(0, +)
        guard n > 1, x > 0, y > 0 else { return (x > 0 ? y / x : 1, 1) }
        let r = y / x
        let variance = zip(before, after).reduce(0.0) { $0 + ($1.1 - r * $1.0) * ($1.1 - r * $1.0) } / (n - 1)
        return (r, 1.96 * variance.squareRoot() / (n.squareRoot() * (x / n)) / r)
    }
}
