import Foundation
import Testing
import TilepackTestSupport

/// The real programs: `tilepack-serve`, built beside the test bundle by `swift build --build-tests`
/// (and `swift test`) here, and `tilepack serve` that runs it, from the main package's `.build`
/// (`swift build` there), which finds this package's `tilepack-serve` in `server/.build`.
@Suite struct ServeProgramTests {
    static let binaries = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()

    static func program(_ name: String) throws -> String {
        if name == "tilepack" {
            let tilepack = try #require(TestSupport.tilepackBinary, "tilepack is not built: run swift build in the main package")
            return tilepack.path
        }
        let path = binaries.appendingPathComponent(name).path
        try #require(FileManager.default.isExecutableFile(atPath: path), "\(path) is not built: run swift build --build-tests")
        return path
    }

    /// Starts `executable arguments`, returns the process and the first line it prints (within 30 s).
    static func start(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) async throws -> (
        Process, String, Pipe
    ) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.currentDirectoryURL = TestSupport.packageRoot
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let handle = output.fileHandleForReading
        let line = try await onThread { () -> String in
            var bytes: [UInt8] = []
            let deadline = Date().addingTimeInterval(30)
            while !bytes.contains(10), Date() < deadline {
                let data = handle.availableData
                if data.isEmpty { break }
                bytes += data
            }
            return String(decoding: bytes.prefix { $0 != 10 }, as: UTF8.self)
        }
        return (process, line, errors)
    }

    static func terminate(_ process: Process) async throws -> Int32 {
        process.terminate()  // SIGTERM: a graceful shutdown
        return try await onThread {
            let deadline = Date().addingTimeInterval(20)
            while process.isRunning, Date() < deadline { usleep(10_000) }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                return -1
            }
            return process.terminationStatus
        }
    }

    @Test(arguments: [["tilepack-serve"], ["tilepack", "serve"]])
    func programServesAndStopsOnSIGTERM(_ command: [String]) async throws {
        let executable = try Self.program(command[0])
        _ = try Self.program("tilepack-serve")
        let (process, line, _) = try await Self.start(
            executable, Array(command.dropFirst()) + ["--port", "0", "--threads", "3", "samples/sample.tilepack"])
        #expect(line.hasPrefix("serving http://127.0.0.1:"), "first line: \(line)")
        let url = try #require(URL(string: String(line.dropFirst("serving ".count))))
        let port = try #require(url.port)
        let answer = try await onThread { try RawHTTP.send(port: port, target: "/sample/0/0/0.png") }
        #expect(answer.status == 200)
        #expect(answer.header("Content-Type") == "image/png")
        #expect(try await Self.terminate(process) == 0)
    }

    @Test func badArgumentsAreClearErrors() async throws {
        let serve = try Self.program("tilepack-serve")
        let (process, _, errors) = try await Self.start(serve, ["--port", "0", "samples/no-such-file.mbtiles"])
        process.waitUntilExit()
        #expect(process.terminationStatus != 0)
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(message.contains("samples/no-such-file.mbtiles"), "\(message)")
        let noThreads = try await TestSupport.run(URL(fileURLWithPath: serve), ["--threads", "0", "samples/sample.tilepack"], timeout: 30)
        #expect(noThreads.status == 64 && noThreads.stderr.contains("--threads must be 1-1024, not 0"), "\(noThreads)")
    }

    /// Issue 29 item 7: a busy port is named, with what to do.
    @Test func aBusyPortIsNamedWithWhatToDo() async throws {
        let serve = try Self.program("tilepack-serve")
        let (first, line, _) = try await Self.start(serve, ["--port", "0", "samples/sample.tilepack"])
        let port = try #require(URL(string: String(line.dropFirst("serving ".count)))?.port, "first line: \(line)")
        let second = try await TestSupport.run(
            URL(fileURLWithPath: serve), ["--port", "\(port)", ServerFixtures.sampleBundle], timeout: 30)
        _ = try await Self.terminate(first)
        #expect(second.status != 0 && !second.timedOut)
        #expect(second.stderr.contains("127.0.0.1:\(port)") && second.stderr.contains("--port"), "\(second.stderr)")
    }

    /// Issue 29 item 16: a FIFO given as an archive is refused at once (a blocking open() waited
    /// for a writer for ever).
    @Test func aFIFOAsAnArchiveIsRefusedAtStart() async throws {
        let directory = try TemporaryDirectory()
        let fifo = directory.file("pipe.mbtiles")
        #expect(mkfifo(fifo, 0o644) == 0)
        let run = try await TestSupport.run(URL(fileURLWithPath: try Self.program("tilepack-serve")), ["--port", "0", fifo], timeout: 20)
        if run.timedOut {
            // Let the blocked open() of the program (killed by now) and anything else go.
            let writer = open(fifo, O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
        }
        #expect(!run.timedOut, "tilepack-serve hung on a FIFO")
        #expect(run.status != 0 && run.stderr.contains(fifo) && run.stderr.contains("FIFO"), "\(run.stderr)")
    }

    /// Without tilepack-serve beside it, in server/.build or on PATH, `tilepack serve` says how to build it.
    @Test func serveWithoutTheServerSaysHowToBuildIt() async throws {
        let directory = try TemporaryDirectory()
        let copy = directory.file("tilepack")
        try FileManager.default.copyItem(atPath: try Self.program("tilepack"), toPath: copy)
        let (process, _, errors) = try await Self.start(
            copy, ["serve", "--port", "0", "samples/sample.tilepack"], environment: ["PATH": directory.path])
        process.waitUntilExit()
        #expect(process.terminationStatus != 0)
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(message.contains("swift build -c release --package-path server --product tilepack-serve"), "\(message)")
        #expect(message.hasPrefix("Error: tilepack-serve: not found") && !message.contains("Usage:"), "\(message)")
    }
}
