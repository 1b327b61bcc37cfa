import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

@testable import TilepackRemote

/// SigV4 signatures equal to botocore's for the same requests (canonical request, string to sign,
/// signature: string for string), and addressing.
@Suite(.needs(.botocore))
struct SigV4Tests {
    static let date = Date(timeIntervalSince1970: 1_764_158_400)  // 2025-11-26T12:00:00Z

    func compare(_ request: HTTPRequest, _ credentials: S3Credentials, region: String = "us-east-1") async throws {
        let signer = SigV4Signer(credentials: credentials, region: region)
        let signed = signer.sign(request, date: Self.date)
        var headers = signed.headers
        headers["Authorization"] = nil
        let ours = signer.signature(method: signed.method, url: signed.url, headers: headers)
        let theirs = try await MotoS3.botocoreSignature(
            method: signed.method, url: signed.url.absoluteString, headers: headers, accessKeyId: credentials.accessKeyId,
            secretAccessKey: credentials.secretAccessKey, sessionToken: credentials.sessionToken, region: region)
        #expect(ours.canonicalRequest == theirs.canonical)
        #expect(ours.stringToSign == theirs.stringToSign)
        #expect(ours.signature == theirs.signature)
        #expect(signed.headers["Authorization"]?.hasSuffix("Signature=\(theirs.signature)") == true)
    }

    @Test func signaturesEqualBotocoresForTheRequestsTilepackMakes() async throws {
        let user = S3Credentials(accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
        let session = S3Credentials(accessKeyId: "ASIAEXAMPLE", secretAccessKey: "secret/with+chars", sessionToken: "FQoG//token+=")
        let path = S3Configuration(
            region: "eu-west-3", endpoint: URL(string: "http://127.0.0.1:9000"), credentials: StaticS3Credentials(user))
        let aws = S3Configuration(region: "eu-west-3", credentials: StaticS3Credentials(user))
        let odd = S3Location(bucket: "tiles", key: "maps/a b/ü+x=(1).pmtiles")
        // A range read pinned by its ETag, path-style, a key that needs encoding.
        var get = HTTPRequest(url: path.url(for: odd), headers: ["If-Match": "\"abc\""])
        get.setRange(16384..<20000)
        try await compare(get, user, region: "eu-west-3")
        // The same virtual-hosted on AWS, with a session token.
        var hosted = HTTPRequest(url: aws.url(for: odd))
        hosted.setRange(0..<16384)
        try await compare(hosted, session, region: "eu-west-3")
        // Multipart upload: create (empty body), a part (a body), ListObjectsV2 with a query to sort.
        let object = S3Location(bucket: "tiles", key: "world.tilepack")
        try await compare(HTTPRequest(url: path.url(for: object, query: "uploads="), method: "POST", body: Data()), user)
        let part = HTTPRequest(
            url: path.url(for: object, query: S3Client.query([("uploadId", "2~x/y+z"), ("partNumber", "3")])), method: "PUT",
            headers: ["Content-Type": "application/octet-stream", "Expect": ""], body: Data((0..<5000).map { UInt8($0 & 255) }))
        try await compare(part, session)
        try await compare(
            HTTPRequest(
                url: path.url(
                    for: S3Location(bucket: "tiles", key: ""), query: S3Client.query([("prefix", "parts/p *"), ("list-type", "2")]))),
            user)
    }

    @Test func addressingFollowsTheEndpointAndTheBucketName() {
        let credentials = StaticS3Credentials(S3Credentials(accessKeyId: "a", secretAccessKey: "b"))
        let object = S3Location(bucket: "tiles", key: "z/world.pmtiles")
        #expect(
            S3Configuration(region: "us-west-2", credentials: credentials).url(for: object).absoluteString
                == "https://tiles.s3.us-west-2.amazonaws.com/z/world.pmtiles")
        #expect(
            S3Configuration(region: "us-west-2", addressing: .path, credentials: credentials).url(for: object).absoluteString
                == "https://s3.us-west-2.amazonaws.com/tiles/z/world.pmtiles")
        // A dotted bucket on https would not match the certificate: path-style.
        #expect(
            S3Configuration(credentials: credentials).url(for: S3Location(bucket: "my.tiles", key: "a")).absoluteString
                == "https://s3.us-east-1.amazonaws.com/my.tiles/a")
        // An endpoint at an IP address (MinIO, moto): path-style; by name: virtual-hosted unless told.
        #expect(
            S3Configuration(endpoint: URL(string: "http://127.0.0.1:9000"), credentials: credentials).url(for: object).absoluteString
                == "http://127.0.0.1:9000/tiles/z/world.pmtiles")
        #expect(
            S3Configuration(endpoint: URL(string: "https://r2.example.com"), credentials: credentials).url(for: object).absoluteString
                == "https://tiles.r2.example.com/z/world.pmtiles")
        let environment = S3Configuration.environment(
            [
                "AWS_REGION": "auto", "AWS_ENDPOINT_URL_S3": "https://minio.local:9000", "AWS_ENDPOINT_URL": "https://other",
                "AWS_S3_ADDRESSING_STYLE": "path",
            ])
        #expect(environment.region == "auto")
        #expect(environment.url(for: object).absoluteString == "https://minio.local:9000/tiles/z/world.pmtiles")
        #expect(S3Location("s3://b/k/x.pmtiles") == S3Location(bucket: "b", key: "k/x.pmtiles"))
        #expect(S3Location("s3:///k") == nil)
        #expect(S3Location("s3://b/parts/")?.isPrefix == true)
        #expect(S3Location("s3://b/parts/part-*.tilepack")?.isGlob == true)
    }
}

/// Archives read from moto's S3 with authentication enforced: the same tiles as the local files,
/// errors that name the bucket, the key and S3's code, and every source of the credential chain.
@Suite(.needs(.motoServer))
struct S3ReadTests {
    static let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
    static let pmtiles = TestSupport.fixture("pmtiles/test_fixture_1.pmtiles")

    let moto: MotoS3
    init() async throws { moto = try await MotoS3.shared() }

    func client(_ credentials: S3Credentials? = nil, retry: RetryPolicy = RetryPolicy(maximumAttempts: 2)) -> S3Client {
        let keys = credentials ?? S3Credentials(accessKeyId: moto.keys.accessKeyId, secretAccessKey: moto.keys.secretAccessKey)
        return S3Client(
            configuration: S3Configuration(endpoint: URL(string: moto.endpoint), credentials: StaticS3Credentials(keys)), retry: retry)
    }

    /// Puts the local file at a fresh key; returns its location.
    func upload(_ path: String, as name: String) async throws -> S3Location {
        let location = S3Location(bucket: "tiles", key: "read/\(UUID().uuidString)/\(name)")
        try await client().put(try Data(contentsOf: URL(fileURLWithPath: path)), at: location)
        return location
    }

    static func sameTiles(_ remote: any TileArchive, _ local: any TileArchive) throws -> Int {
        var count = 0
        try local.forEachTile { tile, bytes in
            let remoteBytes = try remote.tileData(at: tile)
            #expect(remoteBytes == Data(bytes), "\(tile)")
            count += 1
        }
        return count
    }

    @Test func aBundleAndAPMTilesReadFromS3MatchTheLocalFiles() async throws {
        let bundle = try await upload(Self.sample, as: "sample.tilepack")
        // Blocking reads (a request per tile) on a thread of their own, not the cooperative pool's.
        let client = client()
        let bundleTiles = try await onThread {
            let remote = try RemoteArchive.open(s3: bundle, client: client)
            #expect(remote is BundleArchive)
            return try Self.sameTiles(remote, try openTileArchive(path: Self.sample))
        }
        #expect(bundleTiles == 341)
        let pmtiles = try await upload(Self.pmtiles, as: "fixture.pmtiles")
        let tiles = try await onThread {
            let remote = try RemoteArchive.open(s3: pmtiles, client: client)
            #expect(remote is PMTilesArchive)
            #expect(try remote.metadata() == openTileArchive(path: Self.pmtiles).metadata())
            return try Self.sameTiles(remote, try openTileArchive(path: Self.pmtiles))
        }
        #expect(tiles > 0)
    }

    @Test func authenticationIsEnforcedSoUnsignedReadsAreRefused() async throws {
        let bundle = try await upload(Self.sample, as: "sample.tilepack")
        let url = URL(string: "\(moto.endpoint)/\(bundle.bucket)/\(bundle.key)")!
        let refused = try await onThread { () -> Bool in
            do { _ = try RemoteArchive.open(url: url) } catch { return error is TileArchiveError }
            return false
        }
        #expect(refused)
    }

    @Test func errorsNameTheBucketTheKeyAndWhatS3Said() async throws {
        let bundle = try await upload(Self.sample, as: "sample.tilepack")
        func message(_ client: S3Client, _ location: S3Location) async throws -> String {
            try await onThread {
                do {
                    _ = try RemoteArchive.open(s3: location, client: client)
                    return "opened"
                } catch { return "\(error)" }
            }
        }
        let missing = S3Location(bucket: "tiles", key: "read/none.pmtiles")
        let noKey = try await message(client(), missing)
        #expect(noKey.contains("NoSuchKey") && noKey.contains("bucket tiles, key read/none.pmtiles"), "\(noKey)")
        let denied = try await message(
            client(S3Credentials(accessKeyId: moto.keys.deniedAccessKeyId, secretAccessKey: moto.keys.deniedSecretAccessKey)), bundle)
        #expect(denied.contains("AccessDenied") && denied.contains("key \(bundle.key)"), "\(denied)")
        let wrongSecret = try await message(client(S3Credentials(accessKeyId: moto.keys.accessKeyId, secretAccessKey: "wrong")), bundle)
        #expect(wrongSecret.contains("SignatureDoesNotMatch") && wrongSecret.contains("region"), "\(wrongSecret)")
        let unknown = try await message(client(S3Credentials(accessKeyId: "AKIAUNKNOWN", secretAccessKey: "x")), bundle)
        #expect(unknown.contains("InvalidAccessKeyId"), "\(unknown)")
    }

    /// An S3 error says what S3 said once: no `errno 0`, the URL once, and for a HEAD (which
    /// carries no body) the likely causes of a 403, as the answer to a GET gives them (issue 42,
    /// part 5, item 3). Seen through the library and as `tilepack info` prints it.
    @Test func aRefusedS3ReadNamesTheURLOnceAndTheLikelyCauses() async throws {
        let bundle = try await upload(Self.sample, as: "denied.tilepack")
        let denied = client(S3Credentials(accessKeyId: moto.keys.deniedAccessKeyId, secretAccessKey: moto.keys.deniedSecretAccessKey))
        let headMessage = try await onThread { () -> String in
            do {
                _ = try HTTPByteSource.currentVersion(s3: bundle, client: denied)
                return "read"
            } catch { return "\(error)" }
        }
        let openMessage = try await onThread { () -> String in
            do {
                _ = try RemoteArchive.open(s3: bundle, client: denied)
                return "opened"
            } catch { return "\(error)" }
        }
        var messages = [headMessage, openMessage]
        let binary = try #require(TestSupport.tilepackBinary, "the tilepack binary is built beside the tests")
        let info = try await TestSupport.run(
            binary, ["info", bundle.description],
            environment: [
                "AWS_ACCESS_KEY_ID": moto.keys.deniedAccessKeyId, "AWS_SECRET_ACCESS_KEY": moto.keys.deniedSecretAccessKey,
                "AWS_ENDPOINT_URL": moto.endpoint, "AWS_REGION": "us-east-1",
            ])
        #expect(info.status == 1, "\(info)")
        messages.append(info.stderr)
        for message in messages {
            #expect(!message.contains("errno 0"), "\(message)")
            #expect(message.components(separatedBy: bundle.description).count == 2, "the URL once: \(message)")
            #expect(message.contains("AccessDenied (HTTP 403)"), "\(message)")
            #expect(!message.contains("no error body"), "\(message)")
            #expect(message.contains("likely causes") && message.contains("secret") && message.contains("permission"), "\(message)")
        }
    }

    /// Each source of the chain alone, its credentials then used to read from moto.
    @Test func everySourceOfTheCredentialChainGivesCredentialsThatWork() async throws {
        let bundle = try await upload(Self.sample, as: "sample.tilepack")
        let dir = try TemporaryDirectory("s3-credentials")
        try "web-identity-token\n".write(toFile: dir.file("token"), atomically: true, encoding: .utf8)
        try """
        [default]
        aws_access_key_id = wrong
        aws_secret_access_key = wrong

        [maps]
        aws_access_key_id = \(moto.keys.accessKeyId)
        aws_secret_access_key = \(moto.keys.secretAccessKey)
        """.write(toFile: dir.file("credentials"), atomically: true, encoding: .utf8)
        try "[profile maps]\nregion = us-east-1\n".write(toFile: dir.file("config"), atomically: true, encoding: .utf8)
        let base = [
            "HOME": dir.path, "AWS_SHARED_CREDENTIALS_FILE": dir.file("none"), "AWS_CONFIG_FILE": dir.file("none"),
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": moto.endpoint,
        ]
        let cases: [(String, [String: String])] = [
            (
                "environment",
                [
                    "AWS_ACCESS_KEY_ID": moto.keys.accessKeyId, "AWS_SECRET_ACCESS_KEY": moto.keys.secretAccessKey,
                    "AWS_PROFILE": "maps", "AWS_SHARED_CREDENTIALS_FILE": dir.file("credentials"),
                ]
            ),
            (
                "web identity",
                [
                    "AWS_WEB_IDENTITY_TOKEN_FILE": dir.file("token"), "AWS_ROLE_ARN": moto.keys.roleArn,
                    "AWS_ENDPOINT_URL_STS": moto.metaEndpoint,
                ]
            ),
            (
                "profile maps",
                ["AWS_PROFILE": "maps", "AWS_SHARED_CREDENTIALS_FILE": dir.file("credentials"), "AWS_CONFIG_FILE": dir.file("config")]
            ),
            (
                "container",
                [
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI": "\(moto.metaEndpoint)/container",
                    "AWS_CONTAINER_AUTHORIZATION_TOKEN": "container-token",
                ]
            ),
            ("instance metadata", ["AWS_EC2_METADATA_DISABLED": "false", "AWS_EC2_METADATA_SERVICE_ENDPOINT": moto.metaEndpoint]),
        ]
        for (source, variables) in cases {
            let environment = base.merging(variables) { $1 }
            let configuration = S3Configuration.environment(environment)
            let count = try await onThread {
                try RemoteArchive.open(s3: bundle, client: S3Client(configuration: configuration)).tileCount()
            }
            #expect(count == 341, "\(source)")
            #expect((configuration.credentials as? S3CredentialChain)?.source == source)
        }
        // Nothing anywhere: an error that lists where it looked.
        let none = S3Configuration.environment(base)
        let refusal = try await onThread { () -> String in
            do { _ = try RemoteArchive.open(s3: bundle, client: S3Client(configuration: none)) } catch { return "\(error)" }
            return "opened without credentials"
        }
        #expect(refusal.contains("no credentials found") && refusal.contains("AWS_ACCESS_KEY_ID"), "\(refusal)")
    }

    /// The command reads s3:// wherever it reads a URL, configured by the environment.
    @Test func theCommandReadsS3URLsConfiguredByTheEnvironment() async throws {
        guard let binary = TestSupport.tilepackBinary else {
            Issue.record("tilepack is not built")
            return
        }
        let bundle = try await upload(Self.sample, as: "sample.tilepack")
        let environment = [
            "AWS_ACCESS_KEY_ID": moto.keys.accessKeyId, "AWS_SECRET_ACCESS_KEY": moto.keys.secretAccessKey,
            "AWS_ENDPOINT_URL": moto.endpoint,
            "AWS_REGION": "us-east-1",
        ]
        let verify = try await TestSupport.run(binary, ["verify", bundle.description], environment: environment)
        #expect(verify.status == 0, "\(verify.stderr)")
        let dir = try TemporaryDirectory("s3-extract")
        let extract = try await TestSupport.run(
            binary, ["extract", bundle.description, dir.file("part.mbtiles"), "--max-zoom", "2"], environment: environment)
        #expect(extract.status == 0, "\(extract.stderr)")
        #expect(try openTileArchive(path: dir.file("part.mbtiles")).tileCount() == 21)
        let missing = try await TestSupport.run(binary, ["info", "s3://tiles/read/missing.tilepack"], environment: environment)
        #expect(missing.status != 0 && missing.stderr.contains("NoSuchKey"), "\(missing.stderr)")
    }
}
