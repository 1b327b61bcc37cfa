import Foundation

/// Paths of the shared fixtures and the package, and temporary directories for tests.
public enum TestSupport {
    /// How long a test waits for a map view's tile loads to settle before it gives up. Generous on
    /// purpose: the loads run on the cooperative pool (two threads on a 2-core machine), which this
    /// process shares with every test running beside it, and tests that wait for a subprocess block
    /// a pool thread while it runs, so loads can wait many seconds on a loaded CI machine. A test
    /// checks that the view did settle; the bound only ends a hang.
    public static let settleSeconds: Double = 180

    /// The package root (the folder holding Package.swift).
    public static let packageRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    /// `Tests/Fixtures/` in the package: real archives written by other tools, copied byte for
    /// byte (their sources and licences are in `Tests/Fixtures/SOURCES.md`). `TILEPACK_FIXTURES`
    /// names another folder of the same layout.
    public static let fixturesRoot: URL = {
        if let env = ProcessInfo.processInfo.environment["TILEPACK_FIXTURES"] { return URL(fileURLWithPath: env) }
        return packageRoot.appendingPathComponent("Tests/Fixtures")
    }()

    /// The path of a fixture, e.g. `fixture("martin/world_cities.mbtiles")`.
    public static func fixture(_ relativePath: String) -> String {
        fixturesRoot.appendingPathComponent(relativePath).path
    }
}

/// A fresh temporary directory, removed when the value is deinitialised.
public final class TemporaryDirectory: @unchecked Sendable {
    public let url: URL
    public var path: String { url.path }

    public init(_ label: String = "tilepack") throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(label)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The path of `name` inside the directory.
    public func file(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A small, fast, deterministic random number generator (Vigna's SplitMix64), so that property
/// and mutation tests repeat exactly.
extension TestSupport {
    /// Damages `bytes` `times` times at random places: a flipped bit, a dropped byte, an inserted
    /// byte that matters to HTTP's grammar (CR, LF, space, tab, colon, NUL, DEL, 0xFF, %, /, ?,
    /// comma), eight bytes repeated, or (when `cutting`) everything from there on cut off. The
    /// fuzz tests of the server's request heads and of the client's responses share it.
    public static func damage(_ bytes: inout [UInt8], random: inout SplitMix64, times: Int, cutting: Bool) {
        let interesting: [UInt8] = [0x0D, 0x0A, 0x20, 0x09, 0x3A, 0x00, 0x7F, 0xFF, 0x25, 0x2F, 0x3F, 0x2C]
        for _ in 0..<times {
            let at = Int(random.next() % UInt64(bytes.count + 1))
            switch random.next() % (cutting ? 5 : 4) {
            case 0 where at < bytes.count: bytes[at] ^= UInt8(1 << (random.next() % 8))
            case 1 where at < bytes.count: bytes.remove(at: at)
            case 2: bytes.insert(interesting[Int(random.next() % UInt64(interesting.count))], at: at)
            case 4: bytes = Array(bytes[..<at])
            default: bytes.insert(contentsOf: bytes[at..<min(bytes.count, at + 8)], at: at)
            }
        }
    }
}

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
}

/// Waits (polling every 2 ms) until `condition` holds or `seconds` pass; false on the timeout.
/// The default bound is ``TestSupport/settleSeconds``: what a test waits for often runs on the
/// cooperative pool too, which a full run keeps busy for minutes; the bound only ends a hang.
public func eventually(_ seconds: Double = TestSupport.settleSeconds, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline { return false }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return true
}

/// Runs `body` on a new thread and waits for it without holding a thread of the cooperative pool
/// (two on a 2-core machine, shared by every test running beside this one): for blocking work
/// such as socket reads, sleeps while polling, or waiting for a process.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

extension TestSupport {
    /// Whether `python3 -c "import MODULES"` succeeds here: a Python witness (pmtiles, mercantile,
    /// shapely) is installed.
    public static func pythonImports(_ modules: String) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", "import \(modules)"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    /// Runs `python3 SCRIPT ARGUMENTS`, the script given by its path in the package
    /// (`tools/region/cover.py`), and returns its exit status, standard output and standard error.
    public static func runPython(script: String, _ arguments: [String]) throws -> (status: Int32, output: Data, errors: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", packageRoot.appendingPathComponent(script).path] + arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, data, String(decoding: errors, as: UTF8.self))
    }
}
