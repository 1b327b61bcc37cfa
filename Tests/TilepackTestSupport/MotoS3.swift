import Foundation
import TilepackCore

/// moto's S3 server on loopback with authentication enforced (`tools/moto-s3.py serve`): an IAM
/// user's key that may do anything in S3, one that may do nothing, session credentials of a role,
/// the bucket `tiles`, and beside it a server of credentials (STS web identity, container
/// credentials, IMDSv2) that answer the role's session credentials. One per test process, started
/// at its first use; it stops when the process ends (its standard input closes).
public final class MotoS3: @unchecked Sendable {
    public struct Keys: Decodable, Sendable {
        public var port: Int
        public var metaPort: Int
        public var proxyPort: Int
        public var accessKeyId: String
        public var secretAccessKey: String
        public var deniedAccessKeyId: String
        public var deniedSecretAccessKey: String
        public var roleArn: String
        public var session: Session
    }
    public struct Session: Decodable, Sendable {
        public var accessKeyId: String
        public var secretAccessKey: String
        public var token: String
        enum CodingKeys: String, CodingKey {
            case accessKeyId = "AccessKeyId"
            case secretAccessKey = "SecretAccessKey"
            case token = "Token"
        }
    }

    public let keys: Keys
    public var endpoint: String { "http://127.0.0.1:\(keys.port)" }
    public var metaEndpoint: String { "http://127.0.0.1:\(keys.metaPort)" }
    /// The fault-injecting proxy in front of moto (``injectFault(_:matching:times:)``).
    public var proxyEndpoint: String { "http://127.0.0.1:\(keys.proxyPort)" }
    private let process: Process
    private let input: Pipe

    static let script = TestSupport.packageRoot.appendingPathComponent("tools/moto-s3.py").path

    private static let starting = Locked<Task<MotoS3, any Error>?>(nil)

    /// The server of this test process, started by the first caller on a thread of its own (its
    /// start takes seconds: a test waiting for it holds no thread of the cooperative pool, which
    /// the other tests running beside it need).
    public static func shared() async throws -> MotoS3 {
        let task = starting.withLock { task in
            if let task { return task }
            let started = Task { try await onThread { try MotoS3() } }
            task = started
            return started
        }
        return try await task.value
    }

    init() throws {
        let ports = try (TestSupport.freeLoopbackPort(), TestSupport.freeLoopbackPort(), TestSupport.freeLoopbackPort())
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", Self.script, "serve", String(ports.0), String(ports.1), String(ports.2)]
        input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // The first line is the keys; setting up takes a few seconds (at most a minute on a busy machine).
        let line = Locked<Data?>(nil)
        let done = DispatchSemaphore(value: 0)
        let reader = output.fileHandleForReading
        // On a thread of its own, not the global queue, which its blocking reads would hold
        // from the other tests (see `CommandBinary.runWaiting`).
        Thread {
            var data = Data()
            while !data.contains(10) {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                data.append(chunk)
            }
            line.withLock { $0 = data }
            done.signal()
        }.start()
        guard done.wait(timeout: .now() + 90) == .success, let data = line.withLock({ $0 }),
            let keys = try? JSONDecoder().decode(Keys.self, from: data.prefix { $0 != 10 })
        else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw POSIXError(.ETIMEDOUT)
        }
        self.keys = keys
    }

    /// Has the proxy answer the next `times` requests whose request line (`METHOD TARGET`) contains
    /// `match` with `fault`: `slowdown` (503 SlowDown, Retry-After: 1), `drop` (the connection closed
    /// halfway through the request body), `signature` (403 SignatureDoesNotMatch), `skew` (403
    /// RequestTimeTooSkewed, the server's Date 20 minutes ahead).
    public func injectFault(_ fault: String, matching match: String, times: Int = 1) throws {
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        let body = String(
            decoding: try JSONSerialization.data(withJSONObject: ["fault": fault, "match": match, "times": times]), as: UTF8.self)
        curl.arguments = ["-sf", "-o", "/dev/null", "--max-time", "10", "-X", "POST", "--data-binary", body, "\(proxyEndpoint)/_fault"]
        try curl.run()
        curl.waitUntilExit()
        guard curl.terminationStatus == 0 else { throw POSIXError(.EIO) }
    }

    /// botocore's canonical request, string to sign and signature for a request (`tools/moto-s3.py sign`).
    public static func botocoreSignature(
        method: String, url: String, headers: [String: String], accessKeyId: String, secretAccessKey: String, sessionToken: String?,
        region: String
    ) async throws -> (canonical: String, stringToSign: String, signature: String) {
        try await onThread {
            try botocoreSignatureWaiting(
                method: method, url: url, headers: headers, accessKeyId: accessKeyId, secretAccessKey: secretAccessKey,
                sessionToken: sessionToken, region: region)
        }
    }

    static func botocoreSignatureWaiting(
        method: String, url: String, headers: [String: String], accessKeyId: String, secretAccessKey: String, sessionToken: String?,
        region: String
    ) throws -> (canonical: String, stringToSign: String, signature: String) {
        var spec: [String: Any] = [
            "method": method, "url": url, "headers": headers, "access": accessKeyId, "secret": secretAccessKey, "region": region,
        ]
        if let sessionToken { spec["token"] = sessionToken }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, "sign"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: spec))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        struct Answer: Decodable {
            var canonical: String
            var stringToSign: String
            var signature: String
        }
        let answer = try JSONDecoder().decode(Answer.self, from: data)
        return (answer.canonical, answer.stringToSign, answer.signature)
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

extension TestSupport {
    /// A free TCP port on 127.0.0.1 (bound, read, released).
    public static func freeLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw POSIXError(.EADDRNOTAVAIL) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
