import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

@testable import TilepackRemote

/// A transport that fails every exchange whose URL contains `failing` (a part of an upload),
/// passing the rest to `inner`.
struct PartFailingTransport: HTTPTransport {
    let inner: any HTTPTransport
    let failing: String

    nonisolated(nonsending) func exchange(_ request: HTTPRequest, _ response: HTTPIncomingResponse) async -> HTTPIncomingResponse {
        guard request.url.absoluteString.contains(failing) else { return await inner.exchange(request, response) }
        var response = response
        response.end(.connectionLost("dropped by the test"))
        return response
    }
}

/// Outputs in moto's S3 (authentication enforced): multipart uploads in parallel parts over both
/// transports, stale uploads aborted first, a failed upload aborted, `--force`, and a sharded
/// build merged from a prefix and from a glob.
@Suite(.serialized, .needs(.motoServer))
struct S3WriteTests {
    let moto: MotoS3
    init() async throws { moto = try await MotoS3.shared() }

    var environment: [String: String] {
        [
            "AWS_ACCESS_KEY_ID": moto.keys.accessKeyId, "AWS_SECRET_ACCESS_KEY": moto.keys.secretAccessKey,
            "AWS_ENDPOINT_URL": moto.endpoint, "AWS_REGION": "us-east-1",
        ]
    }

    func client(http: HTTPClient = .shared) -> S3Client {
        let keys = S3Credentials(accessKeyId: moto.keys.accessKeyId, secretAccessKey: moto.keys.secretAccessKey)
        return S3Client(
            configuration: S3Configuration(endpoint: URL(string: moto.endpoint), credentials: StaticS3Credentials(keys)), http: http,
            retry: RetryPolicy(maximumAttempts: 1))
    }

    /// The keys of the multipart uploads in progress under `prefix`.
    func uploadsInProgress(_ client: S3Client, prefix: String) async throws -> [String] {
        let response = try await client.send(
            "GET", S3Location(bucket: "tiles", key: ""), query: S3Client.query([("prefix", prefix), ("uploads", "")]))
        try client.check(response, location: S3Location(bucket: "tiles", key: prefix))
        return S3XML(response.body).blocks("Upload").compactMap { $0.first("Key") }
    }

    /// `bytes` (a multiple of 8) of seeded noise written to `path`.
    static func randomFile(_ path: String, bytes: Int) throws -> Data {
        var random = SplitMix64(seed: 33)
        var data = Data(count: bytes)
        data.withUnsafeMutableBytes { buffer in
            for index in 0..<(bytes / 8) { buffer.storeBytes(of: random.next(), toByteOffset: index * 8, as: UInt64.self) }
        }
        try data.write(to: URL(fileURLWithPath: path))
        return data
    }

    @Test(arguments: TestTransport.available)
    func aFileGoesUpInParallelPartsAndReadsBackEqual(_ transport: TestTransport) async throws {
        let client = client(http: transport.client())
        let dir = try TemporaryDirectory("s3-upload")
        let data = try Self.randomFile(dir.file("big.bin"), bytes: 12 << 20)
        let location = S3Location(bucket: "tiles", key: "write/\(UUID().uuidString)/big.bin")
        var options = S3Client.UploadOptions()
        options.partSize = 5 << 20
        options.concurrency = 2
        let etag = try await client.upload(file: dir.file("big.bin"), to: location, options: options)
        #expect(etag?.hasSuffix("-3\"") == true, "a multipart ETag of 3 parts: \(etag ?? "none")")
        let offsets = [0, (5 << 20) - 10, 10 << 20, data.count - 100]
        let (count, read) = try await onThread {
            let source = try HTTPByteSource(s3: location, client: client)
            return (source.count, try offsets.map { try source.withBytes(offset: $0, length: 100) { Data($0) } })
        }
        #expect(count == data.count)
        for (offset, bytes) in zip(offsets, read) { #expect(bytes == data[offset..<(offset + 100)], "bytes at \(offset)") }
        #expect(try await uploadsInProgress(client, prefix: location.key).isEmpty)
        // Each part went with its CRC-32, which the store checked and composed: the CRC-32 of the
        // parts' CRC-32s (S3 adds their count, `-3`; moto does not).
        let parts = [0..<(5 << 20), (5 << 20)..<(10 << 20), (10 << 20)..<data.count]
        let partCRCs = Data(parts.flatMap { Data(base64Encoded: S3Client.base64CRC32(data[$0]))! })
        let head = try await client.send("HEAD", location, headers: ["x-amz-checksum-mode": "ENABLED"])
        let composite = S3Client.base64CRC32(partCRCs)
        let stored = head.header("x-amz-checksum-crc32")
        #expect(stored == composite || stored == composite + "-3", "\(head.fields)")
    }

    @Test func staleUploadsOfTheSameKeyAreAbortedFirstAndNoOthers() async throws {
        let client = client()
        let folder = "write/\(UUID().uuidString)"
        let target = S3Location(bucket: "tiles", key: "\(folder)/world.tilepack")
        let other = S3Location(bucket: "tiles", key: "\(folder)/world.tilepack.old")
        for location in [target, target, other] {
            let created = try await client.send("POST", location, query: "uploads=", body: Data())
            try client.check(created, location: location)
        }
        #expect(try await uploadsInProgress(client, prefix: folder).count == 3)
        let dir = try TemporaryDirectory("s3-stale")
        _ = try Self.randomFile(dir.file("small.bin"), bytes: 4096)
        try await client.upload(file: dir.file("small.bin"), to: target)
        #expect(try await uploadsInProgress(client, prefix: folder) == [other.key])
        #expect(try await client.head(target)?.size == 4096)
    }

    @Test func aFailedUploadIsAbortedAndLeavesNoObject() async throws {
        let client = client(http: HTTPClient(transport: PartFailingTransport(inner: TestTransport.curl.make(), failing: "partNumber=2")))
        let dir = try TemporaryDirectory("s3-failed")
        _ = try Self.randomFile(dir.file("big.bin"), bytes: 11 << 20)
        let location = S3Location(bucket: "tiles", key: "write/\(UUID().uuidString)/big.bin")
        var options = S3Client.UploadOptions()
        options.partSize = 5 << 20
        do {
            try await client.upload(file: dir.file("big.bin"), to: location, options: options)
            Issue.record("the upload succeeded")
        } catch {
            #expect(error.description.contains("dropped by the test") && error.key == location.key, "\(error)")
        }
        #expect(try await client.head(location) == nil)
        #expect(try await uploadsInProgress(client, prefix: location.key).isEmpty)
    }

    /// `tilepack upload` puts a local archive in S3 byte for byte; an existing object needs
    /// --force; a file that is no archive (exit 2) and a key naming another format are refused
    /// before anything is sent.
    @Test func tilepackUploadPutsAnArchiveAsItIs() async throws {
        guard let binary = TestSupport.tilepackBinary else {
            Issue.record("tilepack is not built")
            return
        }
        let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
        let location = S3Location(bucket: "tiles", key: "upload/\(UUID().uuidString)/world.tilepack")
        let environment = self.environment
        let run = try await TestSupport.run(binary, ["upload", sample, location.description], environment: environment)
        #expect(run.status == 0 && run.stdout.contains("uploaded") && run.stdout.contains("ETag"), "\(run.stderr)")
        let reader = client()
        let stored = try await onThread {
            let source = try HTTPByteSource(s3: location, client: reader)
            return try source.withBytes(offset: 0, length: source.count) { Data($0) }
        }
        #expect(stored == (try Data(contentsOf: URL(fileURLWithPath: sample))))
        let again = try await TestSupport.run(binary, ["upload", sample, location.description], environment: environment)
        #expect(again.status == 1 && again.stderr.contains("--force"), "\(again.stderr)")
        let forced = try await TestSupport.run(
            binary, ["upload", sample, location.description, "--force", "--quiet"], environment: environment)
        // -q means what it means on every command: no progress bar; the summary still prints.
        #expect(forced.status == 0 && forced.stdout.hasPrefix("uploaded "), "\(forced.stderr)")
        let dir = try TemporaryDirectory("s3-upload-command")
        try Data("not tiles\n".utf8).write(to: URL(fileURLWithPath: dir.file("notes.tilepack")))
        let other = S3Location(bucket: "tiles", key: "upload/\(UUID().uuidString)/notes.tilepack")
        let text = try await TestSupport.run(binary, ["upload", dir.file("notes.tilepack"), other.description], environment: environment)
        #expect(text.status == 2 && text.stderr.contains("a text file"), "\(text.stderr)")
        let misnamed = try await TestSupport.run(
            binary, ["upload", sample, "s3://tiles/\(other.key).pmtiles"], environment: environment)
        #expect(misnamed.status != 0 && misnamed.stderr.contains("names a PMTiles"), "\(misnamed.stderr)")
        #expect(try await reader.head(other) == nil)
        #expect(try await reader.head(S3Location(bucket: "tiles", key: other.key + ".pmtiles")) == nil)
    }

    /// A bundle or PMTiles built into s3:// with --index gets its tile hash index beside it, the
    /// object KEY.tpindex that sync reads, byte for byte what the same build writes beside a file;
    /// built again over it (--force) without --index, the index of the archive replaced is deleted.
    @Test func anOutputBuiltWithIndexGetsItsIndexUploadedBesideIt() async throws {
        guard let binary = TestSupport.tilepackBinary else {
            Issue.record("tilepack is not built")
            return
        }
        let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
        let dir = try TemporaryDirectory("s3-index")
        let environment = self.environment
        let reader = client()
        func object(_ location: S3Location) async throws -> Data {
            try await onThread {
                let source = try HTTPByteSource(s3: location, client: reader)
                return try source.withBytes(offset: 0, length: source.count) { Data($0) }
            }
        }
        for ext in ["pmtiles", "tilepack"] {
            let output = S3Location(bucket: "tiles", key: "index/\(UUID().uuidString)/world.\(ext)")
            let index = S3Location(bucket: "tiles", key: output.key + ".tpindex")
            let local = try await TestSupport.run(binary, ["convert", sample, dir.file("world.\(ext)"), "--index", "--quiet"])
            #expect(local.status == 0, "\(local.stderr)")
            let built = try await TestSupport.run(
                binary, ["convert", sample, output.description, "--index", "--quiet", "--tmpdir", dir.path], environment: environment)
            #expect(built.status == 0, "\(built.stderr)")
            #expect(try await object(output) == (try Data(contentsOf: URL(fileURLWithPath: dir.file("world.\(ext)")))), "\(ext)")
            #expect(try await object(index) == (try Data(contentsOf: URL(fileURLWithPath: dir.file("world.\(ext).tpindex")))), "\(ext)")
            let rebuilt = try await TestSupport.run(
                binary, ["convert", sample, output.description, "--force", "--quiet", "--tmpdir", dir.path], environment: environment)
            #expect(rebuilt.status == 0, "\(rebuilt.stderr)")
            #expect(try await reader.head(output) != nil)
            #expect(try await reader.head(index) == nil, "\(ext): the index of the archive replaced is left")
        }
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
                == ["world.pmtiles", "world.pmtiles.tpindex", "world.tilepack", "world.tilepack.tpindex"])
    }

    /// README's sharded build with its parts in S3: shards imported to s3://, merged from a prefix
    /// and from a glob into s3://, byte-identical to one import; an existing output needs --force.
    @Test func aShardedBuildWritesItsPartsToS3AndMergesFromAPrefixAndAGlob() async throws {
        guard let binary = TestSupport.tilepackBinary else {
            Issue.record("tilepack is not built")
            return
        }
        let tree = TestSupport.packageRoot.appendingPathComponent("samples/tiles").path
        let folder = "build/\(UUID().uuidString)"
        let dir = try TemporaryDirectory("s3-build")
        // The shard jobs run in parallel, as README's xargs -P runs them.
        let environment = self.environment
        let runs = try await withThrowingTaskGroup(of: CommandOutput.self) { group in
            for shard in 0..<3 {
                group.addTask {
                    try await TestSupport.run(
                        binary,
                        [
                            "import", tree, "s3://tiles/\(folder)/parts/part-\(shard).tilepack", "--shard", "\(shard)/3", "--quiet",
                            "--tmpdir",
                            dir.path,
                        ], environment: environment)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for run in runs { #expect(run.status == 0, "\(run.stderr)") }
        let whole = try await TestSupport.run(binary, ["import", tree, dir.file("whole.tilepack"), "--quiet"])
        #expect(whole.status == 0, "\(whole.stderr)")
        let expected = try Data(contentsOf: URL(fileURLWithPath: dir.file("whole.tilepack")))
        for (input, name) in [("s3://tiles/\(folder)/parts/", "prefix"), ("s3://tiles/\(folder)/parts/part-*.tilepack", "glob")] {
            let output = S3Location(bucket: "tiles", key: "\(folder)/\(name)/world.tilepack")
            let merge = try await TestSupport.run(
                binary, ["merge", input, output.description, "--quiet", "--json"], environment: environment)
            #expect(merge.status == 0, "\(merge.stderr)")
            #expect(merge.stdout.contains("part-2.tilepack"), "\(merge.stdout)")
            let reader = client()
            let stored = try await onThread {
                let source = try HTTPByteSource(s3: output, client: reader)
                return try source.withBytes(offset: 0, length: source.count) { Data($0) }
            }
            #expect(stored == expected, "\(name)")
        }
        let again = try await TestSupport.run(
            binary, ["merge", "s3://tiles/\(folder)/parts/", "s3://tiles/\(folder)/prefix/world.tilepack", "--quiet"],
            environment: environment)
        #expect(again.status != 0 && again.stderr.contains("--force"), "\(again.stderr)")
        let forced = try await TestSupport.run(
            binary, ["merge", "s3://tiles/\(folder)/parts/", "s3://tiles/\(folder)/prefix/world.tilepack", "--quiet", "--force"],
            environment: environment)
        #expect(forced.status == 0, "\(forced.stderr)")
        let none = try await TestSupport.run(
            binary, ["merge", "s3://tiles/\(folder)/parts/nothing-*.tilepack", dir.file("x.tilepack")], environment: environment)
        #expect(none.status != 0 && none.stderr.contains("no object matches"), "\(none.stderr)")
        // Nothing left behind in the temporary folder.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["whole.tilepack"])
    }
}
