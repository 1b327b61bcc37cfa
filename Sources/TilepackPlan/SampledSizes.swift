import Foundation
import TilepackCore

/// An estimate of an area's tile bytes from a stratified sample, for a source that tells no sizes
/// (a tile server): `Specs/plan.md` §4.
///
/// Strata: each zoom's tiles, in the order of Core's cover (a box column by column, a region or a
/// route row by row), cut into bands of about equal count, so that a sea band and a city band are
/// sampled apart. The sample is at most ``maximumFraction`` of the tiles (2%), about four tiles a
/// stratum (at least two, or all of a smaller one), drawn at random within each stratum from a
/// seed. The total is `Σ N_h · mean_h`, its variance `Σ N_h² (1 − n_h/N_h) s_h² / n_h` (the stratified estimator of
/// Cochran, *Sampling Techniques*, §5.3), and its margin Student's t at the stated confidence
/// (Satterthwaite's degrees of freedom) times the standard error.
public struct SampledSizes: Sendable {
    /// One stratum: a band of one zoom's tiles and the tiles drawn from it.
    public struct Stratum: Sendable {
        public let zoom: Int
        /// The band: positions in the zoom's cover order.
        public let positions: Range<Int>
        /// The drawn tiles.
        public let picks: [TileCoordinate]
        /// The measured sizes of the picks (0 for an absent tile; a failed pick has none).
        public var sizes: [Int] = []
    }

    public static let maximumFraction = 0.02
    public let area: PlanArea
    public let zooms: ClosedRange<Int>
    public var strata: [Stratum]
    /// The tiles of the area at all zooms.
    public let population: Int

    /// Draws the sample: `fraction` of the area's tiles (0.02 by default), and at least
    /// `minimumPerZoom` tiles of each zoom (at least 2; all of a zoom with fewer), from `seed`.
    /// - Throws: ``GeometryError`` for an invalid area.
    public init(
        area: PlanArea, zooms: ClosedRange<Int>, fraction: Double = maximumFraction, minimumPerZoom: Int = 2, seed: UInt64
    ) throws(GeometryError) {
        self.area = area
        self.zooms = zooms
        let covers = try zooms.map { zoom throws(GeometryError) in try area.cover(atZoom: zoom) }
        let counts = covers.map(\.count)
        let all = counts.reduce(0, +)
        population = all
        let least = max(2, minimumPerZoom)
        let budget = max(2, Int((Double(all) * min(max(fraction, 0), 1)).rounded(.down)))
        var random = PlanRandom(seed: seed)
        var strata: [Stratum] = []
        // Each zoom's share of the sample, by its tiles, at least `least` (or all of a smaller
        // zoom); the largest shares give back what the minimums took beyond the budget.
        var shares = counts.map { count in
            min(count, max(least, Int((Double(budget) * Double(count) / Double(max(1, all))).rounded(.down))))
        }
        while shares.reduce(0, +) > budget, let largest = shares.indices.max(by: { shares[$0] < shares[$1] }), shares[largest] > least {
            shares[largest] -= 1
        }
        for (index, (cover, count)) in zip(covers, counts).enumerated() where count > 0 {
            let share = shares[index]
            let bands = max(1, share / 4)
            let tiles = cover.indexed()
            for band in 0..<bands {
                let positions = (band * count / bands)..<((band + 1) * count / bands)
                let n = min(positions.count, (band + 1) * share / bands - band * share / bands)
                var chosen = Set<Int>()
                while chosen.count < n { chosen.insert(positions.lowerBound + random.below(positions.count)) }
                strata.append(Stratum(zoom: cover.zoom, positions: positions, picks: chosen.sorted().map { tiles.tile(at: $0) }))
            }
        }
        self.strata = strata
    }

    /// Every drawn tile, in stratum order.
    public var picks: [TileCoordinate] { strata.flatMap(\.picks) }

    /// The estimated bytes of all the area's tiles and the half-width of its interval at `confidence`.
    public func total(confidence: Double = 0.95) -> (bytes: Double, margin: Double) {
        // Satterthwaite's effective degrees of freedom: `(Σ v_h)² / Σ v_h² / (n_h − 1)`, few when
        // a few strata hold most of the variance (their variances are themselves uncertain).
        var total = 0.0, variance = 0.0, squares = 0.0
        for stratum in strata {
            let big = Double(stratum.positions.count)
            let stats = Self.meanAndVariance(stratum.sizes, fallback: nearestMean(stratum))
            total += big * stats.mean
            if stratum.sizes.count >= 2, stratum.sizes.count < stratum.positions.count {
                let n = Double(stratum.sizes.count)
                let part = big * big * (1 - n / big) * stats.variance / n
                variance += part
                squares += part * part / (n - 1)
            } else if stratum.sizes.count < 2, stratum.sizes.count < stratum.positions.count {
                // One measured tile or none: the whole stratum's bytes as its uncertainty.
                variance += (big * stats.mean) * (big * stats.mean)
            }
        }
        let freedom = squares > 0 ? max(1, Int(((variance * variance) / squares).rounded(.down))) : 1_000_000
        return (total, Self.quantile(confidence: confidence, freedom: freedom) * variance.squareRoot())
    }

    /// The sizes as a plan reads them: each tile the mean of its stratum; the margin relative.
    /// - Throws: ``GeometryError`` for an invalid area.
    public func areaTileSizes(confidence: Double = 0.95) throws(GeometryError) -> AreaTileSizes {
        let (bytes, margin) = total(confidence: confidence)
        var means: [Int: [(Range<Int>, Int)]] = [:]
        for stratum in strata {
            let mean = Self.meanAndVariance(stratum.sizes, fallback: nearestMean(stratum)).mean
            means[stratum.zoom, default: []].append((stratum.positions, Int(mean.rounded())))
        }
        var positions: [Int: Int] = [:]
        return try AreaTileSizes.estimated(
            area: area, zooms: zooms, relativeMargin: bytes > 0 ? margin / bytes : 1, confidence: confidence
        ) { tile in
            // Called in each zoom's cover order: the position counts up.
            let position = positions[tile.zoom, default: 0]
            positions[tile.zoom] = position + 1
            return means[tile.zoom]?.first { $0.0.contains(position) }?.1 ?? 0
        }
    }

    /// The mean of the nearest stratum of the same zoom (else any) with a measured tile.
    func nearestMean(_ stratum: Stratum) -> Double {
        let measured = strata.filter { !$0.sizes.isEmpty }
        let nearest = measured.min {
            (abs($0.zoom - stratum.zoom), abs($0.positions.lowerBound - stratum.positions.lowerBound))
                < (abs($1.zoom - stratum.zoom), abs($1.positions.lowerBound - stratum.positions.lowerBound))
        }
        return nearest.map { Double($0.sizes.reduce(0, +)) / Double($0.sizes.count) } ?? 0
    }

    static func meanAndVariance(_ sizes: [Int], fallback: Double) -> (mean: Double, variance: Double) {
        guard !sizes.isEmpty else { return (fallback, 0) }
        let n = Double(sizes.count)
        let mean = Double(sizes.reduce(0, +)) / n
        guard sizes.count > 1 else { return (mean, 0) }
        return (mean, sizes.reduce(0.0) { $0 + (Double($1) - mean) * (Double($1) - mean) } / (n - 1))
    }

    /// Student's t two-sided quantile: the normal quantile (Acklam's rational approximation)
    /// corrected for `freedom` degrees of freedom (Cornish-Fisher, three terms).
    static func quantile(confidence: Double, freedom: Int) -> Double {
        let z = normalQuantile(0.5 + confidence / 2)
        let v = Double(freedom)
        let z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z
        return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v)
            + (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v)
    }

    static func normalQuantile(_ p: Double) -> Double {
        let a = [-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.3577518672690, -30.66479806614716, 2.506628277459239]
        let b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572]
        let c = [-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783]
        let d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416]
        let low = 0.02425
        if p < low || p > 1 - low {
            let q = (-2 * log(p < low ? p : 1 - p)).squareRoot()
            let x =
                (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
                / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
            return p < low ? x : -x
        }
        let q = p - 0.5, r = q * q
        return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q
            / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    }
}

/// SplitMix64: the sample's draws from a seed (the same seed, the same tiles).
struct PlanRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }
}

extension AreaCover {
    /// The cover's tiles by position in ``forEach(_:)``'s order, without listing them.
    struct Indexed {
        let cover: AreaCover
        /// For each row (or rectangle), the position of its first tile.
        let starts: [Int]

        func tile(at position: Int) -> TileCoordinate {
            var low = 0, high = starts.count - 1
            while low < high {
                let middle = (low + high + 1) / 2
                if starts[middle] <= position { low = middle } else { high = middle - 1 }
            }
            var offset = position - starts[low]
            if let rows = cover.rows {
                for columns in rows[low].columns {
                    if offset < columns.count {
                        return TileCoordinate(uncheckedZoom: cover.zoom, x: columns.lowerBound + offset, y: rows[low].row)
                    }
                    offset -= columns.count
                }
                preconditionFailure("position \(position) past the row's tiles")
            }
            let range = cover.frame[low]
            return TileCoordinate(
                uncheckedZoom: cover.zoom, x: range.columns.lowerBound + offset / range.rows.count,
                y: range.rows.lowerBound + offset % range.rows.count)
        }
    }

    func indexed() -> Indexed {
        var starts: [Int] = []
        var total = 0
        if let rows {
            for row in rows {
                starts.append(total)
                total += row.columns.reduce(0) { $0 + $1.count }
            }
        } else {
            for range in frame {
                starts.append(total)
                total += range.count
            }
        }
        return Indexed(cover: self, starts: starts)
    }
}
