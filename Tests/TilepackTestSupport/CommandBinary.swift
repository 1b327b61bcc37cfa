import Foundation
import TilepackCore

extension TestSupport {
    /// The built `tilepack` command (beside the test bundle, or in `.build/debug`), or `nil`
    /// when it was not built (`swift build --build-tests` and `swift test` build it).
    public static let tilepackBinary: URL? = {
        let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [
            Bundle.main.bundleURL.appendingPathComponent("tilepack"),
            here.appendingPathComponent("tilepack"),
            here.deletingLastPathComponent().appendingPathComponent("tilepack"),
            packageRoot.appendingPathComponent(".build/debug/tilepack"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }()
}

/// What a command printed and how it ended.
public struct CommandOutput: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
    /// The command's own peak resident memory (`VmHWM`, Linux), as last sampled while it ran
    /// (every 10 ms); `nil` where there is no `/proc`. Its own: tests running beside it in this
    /// process do not count, as they do in this process's resident size.
    public var peakResidentBytes: Int? = nil
    /// Whether the command was still running at the timeout, and was terminated.
    public var timedOut = false
}

extension TestSupport {
    /// Runs `executable` with `arguments`, reading both outputs as they come; a run longer than
    /// `timeout` seconds is terminated (its status then shows it). The waiting is done on a thread
    /// of its own: a test's task waiting here holds no thread of the cooperative pool (two on a
    /// 2-core machine), which the other tests running beside it need (map-view loads, HTTP
    /// clients); blocked by commands, they were seen waiting 40 s for a thread.
    /// `environment` is added to this process's.
    public static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String] = [:],
        timeout: Double = 120
    ) async throws -> CommandOutput {
        try await onThread { try runWaiting(executable, arguments, environment: environment, timeout: timeout) }
    }

    /// ``run(_:_:environment:timeout:)`` on the calling thread, which waits for the command.
    static func runWaiting(
        _ executable: URL, _ arguments: [String], environment: [String: String] = [:],
        timeout: Double
    ) throws -> CommandOutput {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let outData = Locked(Data()), errData = Locked(Data())
        let group = DispatchGroup()
        // Each pipe is read to its end on a thread of its own, not on Dispatch's global queue:
        // a read blocks for the whole command, and the global queue runs as many threads as
        // the machine has cores, adding one a second when they block, so commands running
        // beside each other held every other test's global work (seen as 30 s stalls at a load of 7).
        for (pipe, sink) in [(output, outData), (errors, errData)] {
            group.enter()
            Thread {
                let data = pipe.fileHandleForReading.readDataToEndOfFile()
                sink.withLock { $0 = data }
                group.leave()
            }.start()
        }
        let deadline = Date().addingTimeInterval(timeout)
        var peak: Int?
        while process.isRunning && Date() < deadline {
            peak = peakResident(of: process.processIdentifier) ?? peak
            Thread.sleep(forTimeInterval: 0.01)
        }
        let timedOut = process.isRunning
        if timedOut { process.terminate() }
        process.waitUntilExit()
        group.wait()
        return CommandOutput(
            status: process.terminationStatus, stdout: String(decoding: outData.withLock { $0 }, as: UTF8.self),
            stderr: String(decoding: errData.withLock { $0 }, as: UTF8.self), peakResidentBytes: peak, timedOut: timedOut)
    }

    /// `VmHWM` of process `pid` in bytes, or `nil` (no `/proc`, or the process is gone).
    static func peakResident(of pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kib = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { return nil }
        return kib * 1024
    }
}
