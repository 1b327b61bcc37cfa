import Foundation

/// Monotonic wall-clock seconds.
public func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Runs `body` `runs` times and returns the median of the elapsed seconds.
public func medianSeconds(runs: Int = 5, _ body: () throws -> Void) rethrows -> Double {
    var times: [Double] = []
    for _ in 0..<max(1, runs) {
        let start = now()
        try body()
        times.append(now() - start)
    }
    times.sort()
    return times[times.count / 2]
}

/// The process's peak resident set size in bytes (ru_maxrss).
public func peakResidentBytes() -> Int {
    var usage = rusage()
    #if os(Linux)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    #if canImport(Darwin)
    return Int(usage.ru_maxrss)
    #else
    return Int(usage.ru_maxrss) * 1024
    #endif
}

/// The process's current resident set size in bytes (Linux: /proc/self/statm), or nil.
public func currentResidentBytes() -> Int? {
    #if os(Linux)
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    #else
    return nil
    #endif
}

/// One line of a benchmark report: a figure and the floor or peer it is compared with.
public struct Comparison {
    public var name: String
    public var value: Double
    public var unit: String
    public var reference: String
    public var referenceValue: Double
    /// The goal for `ratio` and whether higher is better, e.g. (0.9, true) for "at least 0.9x".
    public var goal: (ratio: Double, higherIsBetter: Bool)?
    /// The ratio measured pair by pair (``AlternatingRounds/ratio(_:vs:)``), when there is one.
    public var pairedRatio: Double?

    public init(
        _ name: String, value: Double, unit: String, vs reference: String, referenceValue: Double,
        goal: (ratio: Double, higherIsBetter: Bool)? = nil, pairedRatio: Double? = nil
    ) {
        self.name = name
        self.value = value
        self.unit = unit
        self.reference = reference
        self.referenceValue = referenceValue
        self.goal = goal
        self.pairedRatio = pairedRatio
    }

    /// `pairedRatio`, else the ratio of the two figures.
    public var ratio: Double { pairedRatio ?? value / referenceValue }

    public var line: String {
        var text =
            "\(name): \(format(value)) \(unit) vs \(reference): \(format(referenceValue)) \(unit) -> ratio \(String(format: "%.2f", ratio))x"
        if let goal {
            let met = goal.higherIsBetter ? ratio >= goal.ratio : ratio <= goal.ratio
            text += " (goal \(goal.higherIsBetter ? ">=" : "<=") \(String(format: "%.2f", goal.ratio))x: \(met ? "met" : "NOT met"))"
        }
        return text
    }
}

/// Contenders timed in turn, round by round (A B C, A B C, ...), so that a machine whose speed
/// drifts (a shared one) slows each of them alike: a figure is the median of its rounds, a ratio
/// the median of the rounds' ratios, each taken within one round.
public struct AlternatingRounds {
    /// Each contender's seconds, round by round.
    public private(set) var seconds: [String: [Double]] = [:]

    public init() {}

    /// Times each of `contenders` once a round, in the order given, for `rounds` rounds.
    public mutating func run(rounds: Int, _ contenders: [(name: String, body: () throws -> Void)]) throws {
        for _ in 0..<max(1, rounds) {
            for (name, body) in contenders {
                let start = now()
                try body()
                seconds[name, default: []].append(now() - start)
            }
        }
    }

    /// `work` (items done in one run) per second: the median over the rounds.
    public func rate(_ name: String, work: Int) -> Double { Double(work) / Self.median(seconds[name] ?? []) }

    /// How much faster `name` ran than `reference`: the median over the rounds of the reference's
    /// seconds over `name`'s in the same round (above 1: `name` is faster).
    public func ratio(_ name: String, vs reference: String) -> Double {
        let mine = seconds[name] ?? [], theirs = seconds[reference] ?? []
        return Self.median(zip(mine, theirs).map { $1 / $0 })
    }

    public static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return .nan }
        return values.sorted()[values.count / 2]
    }
}

/// Prints comparisons as lines under a heading.
public func report(_ heading: String, _ comparisons: [Comparison]) {
    print("== \(heading) ==")
    for c in comparisons { print(c.line) }
}

/// A number with a sensible number of digits.
public func format(_ value: Double) -> String {
    if value >= 1000 { return String(format: "%.0f", value) }
    if value >= 10 { return String(format: "%.1f", value) }
    return String(format: "%.3g", value)
}

/// A small, fast, deterministic random number generator (Vigna's SplitMix64) for benchmark data,
/// synthetic tiles and fuzz mutations.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<n` (0 when `n` is not positive).
    public mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }
}
