import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackTestSupport

@testable import TilepackRemote

/// An upload through the process's shared client (the command's) has as many connections as
/// parts in flight. The shared client keeps 6 connections to a host; parts beyond them waited in
/// the transport, where libcurl let them starve while later parts took each connection freed
/// (parts answered after 10-20 s among parts of 0.7 s, `tilepack upload` to moto at 8 in flight).
@Suite struct S3UploadConnectionTests {
    @Test func everyPartInFlightHasAConnectionOfItsOwn() async throws {
        let parts = 8
        let inFlight = Locked((now: 0, peak: 0, released: false))
        // The store holds each part until all are in (or a bound passes, in which case fewer
        // came at once): with as many connections as parts, all arrive together.
        let server = try LoopbackHTTPServer { request in
            let query = request.query ?? ""
            switch request.method {
            case "GET": return .status(200, "<ListMultipartUploadsResult></ListMultipartUploadsResult>")
            case "POST" where query.hasPrefix("uploads"):
                return .status(200, "<InitiateMultipartUploadResult><UploadId>u1</UploadId></InitiateMultipartUploadResult>")
            case "POST": return .status(200, "<CompleteMultipartUploadResult><ETag>\"all\"</ETag></CompleteMultipartUploadResult>")
            case "PUT":
                inFlight.withLock {
                    $0.now += 1
                    $0.peak = max($0.peak, $0.now)
                    if $0.now == parts { $0.released = true }
                }
                let bound = Date().addingTimeInterval(30)
                while !inFlight.withLock({ $0.released }) && Date() < bound { Thread.sleep(forTimeInterval: 0.01) }
                inFlight.withLock {
                    $0.released = true
                    $0.now -= 1
                }
                let number = query.split(separator: "&").first { $0.hasPrefix("partNumber=") }?.dropFirst(11) ?? "0"
                return .respond(status: 200, headers: ["ETag": "\"p\(number)\""], body: Data())
            default: return .status(400)
            }
        }
        defer { server.stop() }
        let dir = try TemporaryDirectory("s3-upload-connections")
        try Data(repeating: 5, count: parts * (5 << 20)).write(to: URL(fileURLWithPath: dir.file("big.bin")))
        let client = S3Client(
            configuration: S3Configuration(
                endpoint: URL(string: server.baseURL), addressing: .path,
                credentials: StaticS3Credentials(S3Credentials(accessKeyId: "a", secretAccessKey: "b"))),
            http: .shared, retry: RetryPolicy(maximumAttempts: 1))
        var options = S3Client.UploadOptions()
        options.partSize = 5 << 20
        options.concurrency = parts
        let etag = try await client.upload(file: dir.file("big.bin"), to: S3Location(bucket: "tiles", key: "big.bin"), options: options)
        #expect(etag == "\"all\"")
        let uploaded = server.requests.filter { $0.method == "PUT" }
        #expect(uploaded.count == parts && uploaded.allSatisfy { $0.body.count == 5 << 20 })
        #expect(inFlight.withLock { $0.peak } == parts)
    }
}
