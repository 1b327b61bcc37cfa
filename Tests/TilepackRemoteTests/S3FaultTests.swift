import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackStorage
import TilepackTestSupport

@testable import TilepackRemote

/// S3's faults, injected by the fixture's proxy in front of moto (moto itself accepts a wrong
/// clock and injects nothing): SlowDown and a dropped connection are retried, refused signatures
/// and a skewed clock are errors that say why, an object replaced mid-read is named, and an upload
/// that fails leaves nothing behind.
@Suite(.serialized, .needs(.motoServer))
struct S3FaultTests {
    static let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path

    let moto: MotoS3
    init() async throws { moto = try await MotoS3.shared() }

    func client(throughProxy: Bool = true, attempts: Int) -> S3Client {
        let keys = S3Credentials(accessKeyId: moto.keys.accessKeyId, secretAccessKey: moto.keys.secretAccessKey)
        let endpoint = throughProxy ? moto.proxyEndpoint : moto.endpoint
        return S3Client(
            configuration: S3Configuration(endpoint: URL(string: endpoint), credentials: StaticS3Credentials(keys)),
            http: TestTransport.curl.client(), retry: RetryPolicy(maximumAttempts: attempts))
    }

    func bigFile() throws -> (TemporaryDirectory, String) {
        let dir = try TemporaryDirectory("s3-faults")
        _ = try S3WriteTests.randomFile(dir.file("big.bin"), bytes: 11 << 20)
        return (dir, dir.file("big.bin"))
    }

    var fiveMiBParts: S3Client.UploadOptions {
        var options = S3Client.UploadOptions()
        options.partSize = 5 << 20
        return options
    }

    func uploadsInProgress(_ key: String) async throws -> [String] {
        let client = client(throughProxy: false, attempts: 1)
        let response = try await client.send(
            "GET", S3Location(bucket: "tiles", key: ""), query: S3Client.query([("prefix", key), ("uploads", "")]))
        try client.check(response, location: S3Location(bucket: "tiles", key: key))
        return S3XML(response.body).blocks("Upload").compactMap { $0.first("Key") }
    }

    @Test func slowDownIsRetriedAfterItsRetryAfterAndTheUploadCompletes() async throws {
        let (dir, file) = try bigFile()
        _ = dir
        let location = S3Location(bucket: "tiles", key: "faults/\(UUID().uuidString)/big.bin")
        try moto.injectFault("slowdown", matching: "\(location.key)?partNumber=2", times: 2)
        let start = Date()
        try await client(attempts: 4).upload(file: file, to: location, options: fiveMiBParts)
        #expect(Date().timeIntervalSince(start) >= 2, "two waits of Retry-After: 1")
        let size = try await client(attempts: 1).head(location)?.size
        #expect(size == 11 << 20, "\(size.map(String.init) ?? "no object")")
        // A read answered SlowDown once is retried too.
        let read = S3Location(bucket: "tiles", key: "faults/\(UUID().uuidString)/sample.tilepack")
        try await client(attempts: 1).put(try Data(contentsOf: URL(fileURLWithPath: Self.sample)), at: read)
        try moto.injectFault("slowdown", matching: "GET /tiles/\(read.key)")
        let reader = client(attempts: 1)
        #expect(try await onThread { try RemoteArchive.open(s3: read, client: reader).tileCount() } == 341)
    }

    @Test func aConnectionDroppedMidPartIsRetriedOrTheUploadIsAbortedWhole() async throws {
        let (dir, file) = try bigFile()
        _ = dir
        let retried = S3Location(bucket: "tiles", key: "faults/\(UUID().uuidString)/big.bin")
        try moto.injectFault("drop", matching: "\(retried.key)?partNumber=1")
        try await client(attempts: 3).upload(file: file, to: retried, options: fiveMiBParts)
        let size = try await client(attempts: 1).head(retried)?.size
        #expect(size == 11 << 20, "\(size.map(String.init) ?? "no object")")

        let failed = S3Location(bucket: "tiles", key: "faults/\(UUID().uuidString)/big.bin")
        try moto.injectFault("drop", matching: "\(failed.key)?partNumber=3")
        do {
            try await client(attempts: 1).upload(file: file, to: failed, options: fiveMiBParts)
            Issue.record("the upload succeeded")
        } catch {
            #expect(error.code == "Transport" && error.key == failed.key, "\(error)")
        }
        #expect(try await client(attempts: 1).head(failed) == nil, "nothing half-written")
        #expect(try await uploadsInProgress(failed.key).isEmpty, "the upload was aborted")
    }

    @Test func refusedSignaturesAndASkewedClockSayWhy() async throws {
        let location = S3Location(bucket: "tiles", key: "faults/\(UUID().uuidString)/sample.tilepack")
        try await client(attempts: 1).put(try Data(contentsOf: URL(fileURLWithPath: Self.sample)), at: location)
        let reader = client(attempts: 1)
        func message() async throws -> String {
            try await onThread {
                do {
                    _ = try RemoteArchive.open(s3: location, client: reader)
                    return "opened"
                } catch { return "\(error)" }
            }
        }
        try moto.injectFault("signature", matching: location.key)
        let signature = try await message()
        #expect(
            signature.contains("SignatureDoesNotMatch") && signature.contains("likely causes") && signature.contains("clock"),
            "\(signature)")
        #expect(signature.contains("bucket tiles, key \(location.key)"), "\(signature)")
        try moto.injectFault("skew", matching: location.key)
        let skew = try await message()
        #expect(skew.contains("RequestTimeTooSkewed") && skew.contains("clock is off by 1"), "\(skew)")
        #expect(try await message() == "opened")
    }

    @Test func anObjectReplacedWhileItIsReadIsAnErrorNotAMix() async throws {
        let location = S3Location(bucket: "tiles", key: "faults/\(UUID().uuidString)/sample.tilepack")
        let client = client(throughProxy: false, attempts: 1)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: Self.sample))
        try await client.put(bytes, at: location)
        let archive = try await onThread { try RemoteArchive.open(s3: location, client: client) }
        bytes[bytes.count - 1] ^= 0xFF
        try await client.put(bytes, at: location)
        let failure: String? = try await onThread {
            do { try archive.forEachTile { _, _ in } } catch { return "\(error)" }
            return nil
        }
        #expect(failure?.contains("the object changed while it was read") == true, "\(failure ?? "read without error")")
    }
}
