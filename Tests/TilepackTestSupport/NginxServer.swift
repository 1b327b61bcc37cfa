import Foundation

/// Waits until something accepts connections on the port (at most `seconds`).
public func waitForPort(_ port: Int, seconds: Double = 10) -> Bool {
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

/// Debian's nginx (`/usr/sbin/nginx`) on a free loopback port, serving `root` (`/norange/` serves
/// it without range support, `/onerange/` with one range a request: `max_ranges 1`), counting
/// requests in its access log. Stopped (by its own pid) when released.
public final class NginxServer: @unchecked Sendable {
    public let port: Int
    public let root: URL
    private let directory: TemporaryDirectory
    private let process: Process

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    public init(root: URL) throws {
        self.root = root
        directory = try TemporaryDirectory("nginx")
        port = try TestSupport.freeLoopbackPort()
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
    public var requestCount: Int {
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
    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}
