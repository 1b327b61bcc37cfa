import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackTestSupport

@testable import TilepackRemote

/// A `HEAD` through every transport says the object's length and validators as the server sent
/// them (libcurl's transport once answered an S3 `HEAD` with a length of 0), against nginx and
/// moto's S3 on loopback.
@Suite(.serialized) struct HeadRequestTests {
    static let size = 70_001

    @Test(.needs(.nginx), arguments: TestTransport.available) func aHeadSaysTheLengthNginxSends(_ transport: TestTransport) async throws {
        let dir = try TemporaryDirectory("head")
        try Data(repeating: 7, count: Self.size).write(to: URL(fileURLWithPath: dir.file("blob.bin")))
        let nginx = try NginxServer(root: dir.url)
        defer { nginx.stop() }
        let client = transport.client()
        let url = URL(string: "\(nginx.baseURL)/blob.bin")!
        // Twice, and a GET between: a handle reused after a HEAD, and a HEAD after a GET.
        for _ in 0..<2 {
            let head = try await client.send(HTTPRequest(url: url, method: "HEAD"))
            #expect(head.status == 200 && head.body.isEmpty)
            #expect(head.contentLength == Self.size, "\(head.fields.map { "\($0.name): \($0.value)" })")
            #expect(head.etag != nil && head.lastModified != nil)
            let get = try await client.send(HTTPRequest(url: url))
            #expect(get.body.count == Self.size && get.contentLength == Self.size)
        }
        let version = try await onThread { try HTTPByteSource.currentVersion(url: url, client: client) }
        #expect(version.size == Self.size && version.etag != nil)
        #expect(nginx.requestCount == 5)
    }

    @Test(.needs(.motoServer), arguments: TestTransport.available) func anS3HeadSaysTheObjectsSizeAndETag(_ transport: TestTransport) async throws {
        let moto = try await MotoS3.shared()
        let keys = S3Credentials(accessKeyId: moto.keys.accessKeyId, secretAccessKey: moto.keys.secretAccessKey)
        let client = S3Client(
            configuration: S3Configuration(endpoint: URL(string: moto.endpoint), credentials: StaticS3Credentials(keys)),
            http: transport.client(), retry: RetryPolicy(maximumAttempts: 1))
        let location = S3Location(bucket: "tiles", key: "head/\(UUID().uuidString)/blob.bin")
        let etag = try await client.put(Data(repeating: 9, count: Self.size), at: location)
        let head = try await client.send("HEAD", location)
        #expect(head.status == 200 && head.contentLength == Self.size, "\(head.fields.map { "\($0.name): \($0.value)" })")
        let found = try await client.head(location)
        #expect(found?.size == Self.size && found?.etag == etag)
        #expect(try await client.head(S3Location(bucket: "tiles", key: "head/none/\(UUID().uuidString)")) == nil)
        let version = try await onThread { try HTTPByteSource.currentVersion(s3: location, client: client) }
        #expect(version.size == Self.size && version.etag == etag)
        // Through the fault proxy in front of moto (which sent a HEAD's Content-Length as 0, the
        // length of the body it had read, and so looked like a transport's fault).
        let proxied = S3Client(
            configuration: S3Configuration(endpoint: URL(string: moto.proxyEndpoint), credentials: StaticS3Credentials(keys)),
            http: transport.client(), retry: RetryPolicy(maximumAttempts: 1))
        #expect(try await proxied.head(location)?.size == Self.size)
    }
}
