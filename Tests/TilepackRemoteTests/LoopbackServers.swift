import Foundation
import Testing
import TilepackTestSupport

/// A free TCP port on 127.0.0.1 (bound, read, released).
func freePort() throws -> Int { try TestSupport.freeLoopbackPort() }

/// moto's S3-compatible server on a free loopback port.
final class MotoServer: @unchecked Sendable {
    let port: Int
    private let process: Process
    var baseURL: String { "http://127.0.0.1:\(port)" }

    init() throws {
        port = try freePort()
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["moto_server", "-H", "127.0.0.1", "-p", String(port)]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        guard waitForPort(port, seconds: 30) else {
            stop()
            throw POSIXError(.ETIMEDOUT)
        }
    }

    /// Creates `bucket` and puts `file` at `key`, readable by anyone (plain unsigned requests;
    /// moto accepts them).
    func put(file: String, bucket: String, key: String) throws {
        // -T: a plain PUT of the file (a form content type would have the server parse the body away).
        for arguments in [
            ["-X", "PUT", "\(baseURL)/\(bucket)"], ["-H", "x-amz-acl: public-read", "-T", file, "\(baseURL)/\(bucket)/\(key)"],
        ] {
            let curl = Process()
            curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
            curl.arguments = ["-sf", "-o", "/dev/null", "--max-time", "20"] + arguments
            try curl.run()
            curl.waitUntilExit()
            guard curl.terminationStatus == 0 else { throw POSIXError(.EIO) }
        }
    }

    /// SIGKILL to the process this value started (nginx in the foreground may inherit a blocked
    /// SIGTERM from the test runner's thread).
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}
