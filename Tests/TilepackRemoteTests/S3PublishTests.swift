import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackStorage
import TilepackTestSupport

@testable import TilepackRemote

/// Issue 44 item 1: `tilepack upload A s3://B/KEY` carries the files tilepack keeps beside A (its
/// tile hash index as KEY.tpindex, its signature as KEY.tpsig) after A, so the first sync from
/// the object fetches by the index; --force deletes stale sidecar objects; an index that does not
/// describe A refuses the upload before any byte is sent; an index alone goes up as KEY.tpindex.
@Suite(.serialized, .needs(.motoServer))
struct S3PublishTests {
    let moto: MotoS3
    init() async throws { moto = try await MotoS3.shared() }

    var environment: [String: String] {
        [
            "AWS_ACCESS_KEY_ID": moto.keys.accessKeyId, "AWS_SECRET_ACCESS_KEY": moto.keys.secretAccessKey,
            "AWS_ENDPOINT_URL": moto.endpoint, "AWS_REGION": "us-east-1",
        ]
    }

    func client() -> S3Client {
        let keys = S3Credentials(accessKeyId: moto.keys.accessKeyId, secretAccessKey: moto.keys.secretAccessKey)
        return S3Client(
            configuration: S3Configuration(endpoint: URL(string: moto.endpoint), credentials: StaticS3Credentials(keys)),
            retry: RetryPolicy(maximumAttempts: 1))
    }

    func object(_ location: S3Location) async throws -> Data? {
        let reader = client()
        guard try await reader.head(location) != nil else { return nil }
        return try await onThread {
            let source = try HTTPByteSource(s3: location, client: reader)
            return try source.withBytes(offset: 0, length: source.count) { Data($0) }
        }
    }

    @Test func uploadCarriesTheSidecarsAndTheFirstSyncUsesTheIndex() async throws {
        guard let binary = TestSupport.tilepackBinary else {
            Issue.record("tilepack is not built")
            return
        }
        let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
        let dir = try TemporaryDirectory("s3-publish")
        let archive = dir.file("world.pmtiles")
        let run = { (arguments: [String]) in try await TestSupport.run(binary, arguments, environment: self.environment) }
        #expect(try await run(["convert", sample, archive, "--index", "--quiet"]).status == 0)
        #expect(try await run(["keygen", "publisher", "-o", dir.file("publisher")]).status == 0)
        let signed = try await run(["sign", archive, "--private-key", dir.file("publisher.key"), "--release", "1"])
        #expect(signed.status == 0, "\(signed.stderr)")
        let key = "publish/\(UUID().uuidString)/world.pmtiles"
        let location = S3Location(bucket: "tiles", key: key)
        let index = S3Location(bucket: "tiles", key: key + ".tpindex"), signature = S3Location(bucket: "tiles", key: key + ".tpsig")
        let uploaded = try await run(["upload", archive, location.description])
        #expect(uploaded.status == 0 && uploaded.stdout.contains("to \(index)") && uploaded.stdout.contains("to \(signature)"), "\(uploaded)")
        #expect(try await object(location) == FileManager.default.contents(atPath: archive))
        #expect(try await object(index) == FileManager.default.contents(atPath: archive + ".tpindex"))
        #expect(try await object(signature) == FileManager.default.contents(atPath: archive + ".tpsig"))

        // The first sync from the object is by its index, not a full download.
        let s3 = client()
        let report = try await onThread { try ArchiveSync.run(local: dir.file("copy.pmtiles"), url: location.description, s3: s3) }
        #expect(report.mode != "full" && report.fullReason == nil, "\(report)")
        #expect(FileManager.default.contents(atPath: dir.file("copy.pmtiles")) == FileManager.default.contents(atPath: archive))

        // Without sidecars, --force deletes the objects of the archive replaced.
        try FileManager.default.removeItem(atPath: archive + ".tpindex")
        try FileManager.default.removeItem(atPath: archive + ".tpsig")
        let forced = try await run(["upload", archive, location.description, "--force"])
        #expect(forced.status == 0 && forced.stdout.contains("deleted \(index)"), "\(forced)")
        #expect(try await client().head(index) == nil)
        #expect(try await client().head(signature) == nil)

        // An index alone, as KEY.tpindex.
        #expect(try await run(["index", archive]).status == 0)
        let alone = try await run(["upload", archive + ".tpindex", index.description])
        #expect(alone.status == 0, "\(alone.stderr)")
        #expect(try await object(index) == FileManager.default.contents(atPath: archive + ".tpindex"))
    }

    @Test func anIndexThatDoesNotDescribeTheArchiveRefusesTheUploadBeforeAnyByte() async throws {
        guard let binary = TestSupport.tilepackBinary else {
            Issue.record("tilepack is not built")
            return
        }
        let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
        let dir = try TemporaryDirectory("s3-publish-stale")
        let run = { (arguments: [String]) in try await TestSupport.run(binary, arguments, environment: self.environment) }
        #expect(try await run(["extract", sample, dir.file("old.pmtiles"), "--max-zoom", "3", "--index", "--quiet"]).status == 0)
        #expect(try await run(["convert", sample, dir.file("world.pmtiles"), "--quiet"]).status == 0)
        // An older version's index lying beside the archive.
        try FileManager.default.copyItem(atPath: dir.file("old.pmtiles.tpindex"), toPath: dir.file("world.pmtiles.tpindex"))
        let location = S3Location(bucket: "tiles", key: "publish/\(UUID().uuidString)/world.pmtiles")
        let refused = try await run(["upload", dir.file("world.pmtiles"), location.description])
        #expect(refused.status == 1 && refused.stderr.contains("does not describe") && refused.stderr.contains("nothing was uploaded"))
        #expect(try await client().head(location) == nil)
        #expect(try await client().head(S3Location(bucket: "tiles", key: location.key + ".tpindex")) == nil)
    }
}
