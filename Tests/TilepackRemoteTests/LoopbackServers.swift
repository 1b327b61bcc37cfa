import Foundation
import Testing
import TilepackTestSupport

/// Whether a missing tool skips a test (here) or fails it (in CI, where `.ci/run` installs it).
func toolMissing(_ tool: String) -> Bool {
    let found = ["/usr/sbin", "/usr/bin", "/usr/local/bin", (ProcessInfo.processInfo.environment["HOME"] ?? "") + "/.pyenv/shims"]
        .contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)") }
    if found { return false }
    if ProcessInfo.processInfo.environment["CI"] != nil { Issue.record("\(tool) is missing in CI (.ci/run installs it)") }
    print("skipped: \(tool) is not installed")
    return true
}

/// A free TCP port on 127.0.0.1 (bound, read, released).
func freePort() throws -> Int { try TestSupport.freeLoopbackPort() }

/// Waits until something accepts connections on the port (at most `seconds`).
func waitForPort(_ port: Int, seconds: Double = 10) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        close(fd)
        if connected { return true }
        usleep(50_000)
    }
    return false
}

/// Debian's nginx on a free loopback port, serving `root` (`/norange/` serves it without range
/// support, `/onerange/` with one range a request: `max_ranges 1`), counting requests in its
/// access log. Stopped (by its own pid) when released.
final class NginxServer: @unchecked Sendable {
    let port: Int
    let root: URL
    private let directory: TemporaryDirectory
    private let process: Process

    var baseURL: String { "http://127.0.0.1:\(port)" }

    init(root: URL) throws {
        self.root = root
        directory = try TemporaryDirectory("nginx")
        port = try freePort()
        let d = directory.path
        let config = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(d)/nginx.pid;
            error_log \(d)/error.log;
            events { worker_connections 64; }
            http {
                access_log \(d)/access.log;
                client_body_temp_path \(d)/body;
                proxy_temp_path \(d)/proxy;
                fastcgi_temp_path \(d)/fastcgi;
                uwsgi_temp_path \(d)/uwsgi;
                scgi_temp_path \(d)/scgi;
                types { application/octet-stream pmtiles; }
                server {
                    listen 127.0.0.1:\(port);
                    root \(root.path);
                    location /norange/ { alias \(root.path)/; max_ranges 0; }
                    location /onerange/ { alias \(root.path)/; max_ranges 1; }
                }
            }
            """
        try config.write(toFile: d + "/nginx.conf", atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
        process.arguments = ["-p", d, "-c", d + "/nginx.conf", "-e", d + "/error.log"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        guard waitForPort(port) else {
            stop()
            throw POSIXError(.ETIMEDOUT)
        }
    }

    /// Requests logged so far.
    /// The requests in the access log once it has settled: nginx logs a request after answering
    /// it, so a client can be done before its last request is counted (a read 50 ms after the
    /// previous one that finds no more is taken as settled).
    var requestCount: Int {
        func read() -> Int {
            ((try? String(contentsOfFile: directory.path + "/access.log", encoding: .utf8)) ?? "").split(separator: "\n").count
        }
        var count = read()
        while true {
            usleep(50_000)
            let now = read()
            if now == count { return count }
            count = now
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
