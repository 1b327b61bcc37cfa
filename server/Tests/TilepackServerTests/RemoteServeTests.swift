import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackRemote
import TilepackStorage
import TilepackTestSupport

@testable import TilepackServer

/// `tilepack serve` of remote archives: a bundle in moto's S3 (authentication enforced) and a
/// PMTiles on nginx, both on loopback; tiles by range, a repeated tile from the cache, a
/// republished object served without a restart and never mixed, the store's faults as 502/504.
@Suite(.serialized) struct RemoteServeTests {
    static let tiles = HotSwapTests.tiles

    /// moto's server and a store whose S3 client signs with its keys (a test that calls it
    /// declares `.needs(.motoServer)`).
    static func moto() async throws -> (MotoS3, RemoteStore) {
        let moto = try await MotoS3.shared()
        let keys = S3Credentials(accessKeyId: moto.keys.accessKeyId, secretAccessKey: moto.keys.secretAccessKey)
        let s3 = S3Client(configuration: S3Configuration(endpoint: URL(string: moto.endpoint), credentials: StaticS3Credentials(keys)))
        return (moto, RemoteStore(s3: s3))
    }

    static func put(_ path: String, at location: S3Location, _ store: RemoteStore) async throws {
        try await store.s3.put(try Data(contentsOf: URL(fileURLWithPath: path)), at: location)
    }

    /// Requests the store answered so far for the archive served as `name`.
    static func storeRequests(_ server: RunningServer, _ name: String) -> Int {
        server.server.service.catalog.slot(named: Substring(name))?.current.remote?.requestCount ?? -1
    }

    @Test(.needs(.motoServer), .needs(.nginx)) func bundlesInS3AndPMTilesOnNginxAreServedLikeFiles() async throws {
        let (_, store) = try await Self.moto()
        let dir = try TemporaryDirectory("remote-serve")
        let folder = "serve/\(UUID().uuidString)"
        let bundle = S3Location(bucket: "tiles", key: "\(folder)/world.tilepack")
        try await Self.put(ServerFixtures.sampleBundle, at: bundle, store)
        var archives = [bundle.description]
        // The sample as PMTiles, served by nginx.
        let pmtiles = dir.file("city.pmtiles")
        let source = try BundleArchive(path: ServerFixtures.sampleBundle)
        let writer = try PMTilesWriter(destination: pmtiles, metadata: try source.metadata())
        try source.forEachTile { tile, bytes in try writer.addTile(at: tile, bytes: Array(bytes)) }
        _ = try writer.finish()
        let nginx = try NginxServer(root: dir.url)
        archives.append("\(nginx.baseURL)/city.pmtiles")
        defer { nginx.stop() }
        let server = try await RunningServer.start(TileServerOptions(archivePaths: archives), store: store)
        #expect(server.server.archiveNames == ["world", "city"])
        let local = try BundleArchive(path: ServerFixtures.sampleBundle)
        var compared = 0
        try local.forEachTile { tile, bytes in
            guard tile.zoom <= 3 else { return }
            for name in server.server.archiveNames {
                let answer = try RawHTTP.send(port: server.port, target: "/\(name)/\(tile.zoom)/\(tile.x)/\(tile.y).png")
                #expect(answer.status == 200 && answer.body == Array(bytes), "\(name) \(tile): \(answer.status)")
                compared += 1
            }
        }
        #expect(compared == 85 * server.server.archiveNames.count)
        // A tile asked again is answered from the cache: no request to the store.
        for name in server.server.archiveNames {
            let before = Self.storeRequests(server, name)
            let nginxBefore = name == "city" ? nginx.requestCount : nil
            for _ in 0..<3 {
                let again = try await server.get("/\(name)/3/4/3.png")
                #expect(again.status == 200)
            }
            #expect(Self.storeRequests(server, name) == before, "\(name): the store was asked again")
            if let nginxBefore { #expect(nginx.requestCount == nginxBefore) }
        }
        // A tile of the archive's coverage it does not hold: 204, no error.
        let tileJSON = try await server.get("/world.json")
        #expect(tileJSON.status == 200 && tileJSON.text.contains("/world/{z}/{x}/{y}.png"))
        let health = try await Self.health(server)
        #expect(health.status == "ok" && health.archives.first?["path"] as? String == bundle.description)
        #expect((health.archives.first?["version"] as? String)?.hasPrefix("ETag ") == true)
        await server.stop()
    }

    /// `/_/health`: its status and archives.
    static func health(_ server: RunningServer) async throws -> (status: String?, archives: [[String: Any]]) {
        let document = try JSONSerialization.jsonObject(with: Data(try await server.get("/_/health").body)) as? [String: Any]
        return (document?["status"] as? String, document?["archives"] as? [[String: Any]] ?? [])
    }

    /// Version `version` of a tile: JSON naming the version, padded with 4 KB of noise (LZ4 cannot
    /// shrink it) so that an archive of them (85 KB) holds most tiles past the 16 KB its first
    /// request brings.
    static func bytes(_ tile: TileCoordinate, version: Int) -> [UInt8] {
        var random = SplitMix64(seed: UInt64(tile.zoom * 10_000 + tile.x * 100 + tile.y))
        let pad = String((0..<(4000 + version)).map { _ in Character(UnicodeScalar(UInt8(97 + random.next() % 26))) })
        return Array("{\"v\":\(version),\"t\":\"\(tile)\",\"pad\":\"\(pad)\"}".utf8)
    }

    /// Version `version` of every tile, in a bundle at `path`.
    static func write(_ path: String, version: Int) throws {
        var metadata = TileMetadata()
        metadata.setFormat(.json)
        metadata.setMinZoom(0)
        metadata.setMaxZoom(2)
        metadata.name = "v\(version)"
        try ServerFixtures.writeBundle(
            path, content: .encoded(.json), metadata: metadata, tiles: tiles.map { ($0, bytes($0, version: version)) })
    }

    /// Version `version` of every tile, in a bundle at `location`.
    static func publish(version: Int, at location: S3Location, _ store: RemoteStore, in dir: TemporaryDirectory) async throws {
        let path = dir.file("v\(version).tilepack")
        try write(path, version: version)
        try await put(path, at: location, store)
    }

    @Test(.needs(.motoServer)) func aRepublishedObjectIsServedWithoutARestartAndNeverMixed() async throws {
        let (_, store) = try await Self.moto()
        let dir = try TemporaryDirectory("remote-republish")
        let location = S3Location(bucket: "tiles", key: "serve/\(UUID().uuidString)/live.tilepack")
        try await Self.publish(version: 1, at: location, store, in: dir)
        let server = try await RunningServer.start(
            TileServerOptions(archivePaths: [location.description], recheckInterval: 0.3), store: store)
        let port = server.port
        struct Seen: Sendable {
            var failures: [String] = []
            var versions: [Int] = []
        }
        let stop = Locked(false)
        // The versions any client has seen: the clients stop once one has seen the last (an
        // event, not a clock), however slowly a loaded machine runs them.
        let versionsSeen = Locked<Set<Int>>([])
        let clients = (0..<3).map { client in
            Task {
                try await onThread { () -> Seen in
                    var seen = Seen()
                    var generator = SplitMix64(seed: UInt64(client + 7))
                    let started = Date()
                    while !stop.withLock({ $0 }), Date().timeIntervalSince(started) < 120 {
                        let tile = Self.tiles[Int(generator.next() % UInt64(Self.tiles.count))]
                        let answer = try RawHTTP.send(port: port, target: "/live/\(tile.zoom)/\(tile.x)/\(tile.y).json")
                        guard answer.status == 200 else {
                            seen.failures.append("\(tile): \(answer.status) \(answer.text)")
                            continue
                        }
                        guard let version = (1...3).first(where: { Self.bytes(tile, version: $0) == answer.body }) else {
                            seen.failures.append("\(tile): a body of no version: \(answer.text)")
                            continue
                        }
                        seen.versions.append(version)
                        versionsSeen.withLock { _ = $0.insert(version) }
                    }
                    return seen
                }
            }
        }
        // Republished twice while the clients read; each version is served without a restart.
        for version in 2...3 {
            try await Task.sleep(for: .milliseconds(800))
            let previousSeenBy = Date().addingTimeInterval(60)
            while !versionsSeen.withLock({ $0.contains(version - 1) }), Date() < previousSeenBy {
                try await Task.sleep(for: .milliseconds(10))
            }
            try await Self.publish(version: version, at: location, store, in: dir)
            let deadline = Date().addingTimeInterval(15)
            var served = false
            while Date() < deadline, !served {
                let answer = try await server.get("/live/0/0/0.json")
                served = answer.body == Self.bytes(try TileCoordinate(zoom: 0, x: 0, y: 0), version: version)
                if !served { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(served, "version \(version) was not served within 15 s")
        }
        let seenBy = Date().addingTimeInterval(60)
        while !versionsSeen.withLock({ $0.contains(3) }), Date() < seenBy { try await Task.sleep(for: .milliseconds(10)) }
        stop.withLock { $0 = true }
        var all = Seen()
        for client in clients {
            let seen = try await client.value
            all.failures += seen.failures
            all.versions += seen.versions
        }
        #expect(all.failures.isEmpty, "\(all.failures.count) of \(all.versions.count) failed or mixed: \(all.failures.prefix(3))")
        #expect(Set(all.versions) == [1, 2, 3], "versions seen: \(Set(all.versions).sorted())")
        let tileJSON = try await server.get("/live.json")
        #expect(tileJSON.text.contains("\"name\":\"v3\""), "\(tileJSON.text)")
        #expect(try await Self.health(server).archives.first?["reloads"] as? Int == 2)
        await server.stop()
    }

    /// A tile not yet cached, asked after the object was republished and before the next
    /// recheck: the read finds the ETag changed, and the request is answered from the new version.
    @Test(.needs(.motoServer)) func aReadThatFindsTheObjectReplacedIsAnsweredFromTheNewVersion() async throws {
        let (_, store) = try await Self.moto()
        let dir = try TemporaryDirectory("remote-replaced")
        let location = S3Location(bucket: "tiles", key: "serve/\(UUID().uuidString)/live.tilepack")
        try await Self.publish(version: 1, at: location, store, in: dir)
        let server = try await RunningServer.start(
            TileServerOptions(archivePaths: [location.description], recheckInterval: 600), store: store)
        let first = try TileCoordinate(zoom: 1, x: 0, y: 0)
        #expect(try await server.get("/live/1/0/0.json").body == Self.bytes(first, version: 1))
        try await Self.publish(version: 2, at: location, store, in: dir)
        let other = try TileCoordinate(zoom: 2, x: 3, y: 1)
        let answer = try await server.get("/live/2/3/1.json")
        #expect(answer.status == 200 && answer.body == Self.bytes(other, version: 2), "\(answer.text)")
        // The cached tile of version 1 went with its generation.
        #expect(try await server.get("/live/1/0/0.json").body == Self.bytes(first, version: 2))
        await server.stop()
    }

    /// A store that refuses or does not answer: 502 or 504 naming the URL, a log line, and the
    /// server goes on answering; over both transports, with a deadline under a second (which
    /// FoundationNetworking's URLSession on Linux once turned into an immediate time-out: its
    /// timer is armed with whole seconds, see Specs/serve.md).
    @Test(arguments: TestTransport.available)
    func storeFaultsAre502And504WithALogLineNamingTheURL(_ transport: TestTransport) async throws {
        let dir = try TemporaryDirectory("remote-faults")
        let path = dir.file("live.tilepack")
        try Self.write(path, version: 1)
        let mode = Locked("ok")
        let files = LoopbackHTTPServer.fileHandler(root: dir.url)
        let origin = try LoopbackHTTPServer { request in
            switch mode.withLock({ $0 }) {
            case "refuse": return .status(403, "no")
            case "stall": return .delayed(.seconds(5), files(request))
            default: return files(request)
            }
        }
        defer { origin.stop() }
        let logged = Locked<[String]>([])
        let url = origin.baseURL + "/live.tilepack"
        let server = try await RunningServer.start(
            TileServerOptions(archivePaths: [url], remoteTimeout: 0.5), store: RemoteStore(http: transport.client()),
            log: { line in logged.withLock { $0.append(line) } })
        #expect(try await server.get("/live/0/0/0.json").status == 200)
        mode.withLock { $0 = "refuse" }
        let refused = try await server.get("/live/2/3/2.json")
        #expect(refused.status == 502 && refused.text.contains(url) && refused.text.contains("403"), "\(refused.text)")
        mode.withLock { $0 = "stall" }
        let started = Date()
        let stalled = try await server.get("/live/2/2/1.json")
        // Two tries of half a second each: the deadline, not an immediate time-out.
        #expect(Date().timeIntervalSince(started) >= 1)
        #expect(stalled.status == 504 && stalled.text.contains(url), "\(stalled.text)")
        #expect(logged.withLock { $0 }.filter { $0.contains(url) }.count >= 2, "\(logged.withLock { $0 })")
        mode.withLock { $0 = "ok" }
        #expect(try await server.get("/live/2/2/1.json").status == 200)
        #expect(try await server.get("/_/health").status == 200)
        await server.stop()
    }

    /// A tile whose bytes are in the store is answered off the event loop: with one loop, a read
    /// the store takes 4 s to answer does not hold up a local tile or a cached remote tile asked
    /// meanwhile on other connections (before, both waited for it on the loop).
    @Test func aSlowStoreReadDoesNotHoldUpOtherRequestsOnItsEventLoop() async throws {
        let dir = try TemporaryDirectory("remote-slow")
        try Self.write(dir.file("live.tilepack"), version: 1)
        let slow = Locked(false)
        let files = LoopbackHTTPServer.fileHandler(root: dir.url)
        let origin = try LoopbackHTTPServer { request in
            slow.withLock { $0 } ? .delayed(.seconds(4), files(request)) : files(request)
        }
        defer { origin.stop() }
        let server = try await RunningServer.start(
            TileServerOptions(
                archivePaths: [origin.baseURL + "/live.tilepack", ServerFixtures.sampleBundle], eventLoops: 1, remoteTimeout: 30),
            store: RemoteStore(http: TestTransport.curl.client()))
        #expect(server.server.archiveNames == ["live", "sample"])
        let cachedTile = try TileCoordinate(zoom: 2, x: 3, y: 1)
        #expect(try await server.get("/live/2/3/1.json").body == Self.bytes(cachedTile, version: 1))
        slow.withLock { $0 = true }
        let before = origin.requests(to: "/live.tilepack")
        // Each request on a thread of its own, the time its answer came taken there (not in a
        // task, which may wait for the cooperative pool).
        let port = server.port
        func timed(_ target: String) async throws -> (answer: RawHTTP.Answer, at: UInt64) {
            try await onThread { (try RawHTTP.send(port: port, target: target), DispatchTime.now().uptimeNanoseconds) }
        }
        let slowAnswer = Task { try await timed("/live/2/2/1.json") }
        // The slow read is at the store.
        for _ in 0..<500 where origin.requests(to: "/live.tilepack") == before { try await Task.sleep(for: .milliseconds(10)) }
        #expect(origin.requests(to: "/live.tilepack") > before)
        let local = try await timed("/sample/0/0/0.png")
        let cached = try await timed("/live/2/3/1.json")
        let slowest = try await slowAnswer.value
        #expect(local.at < slowest.at && cached.at < slowest.at, "the local and cached tiles were answered only after the slow read")
        #expect(local.answer.status == 200 && cached.answer.body == Self.bytes(cachedTile, version: 1))
        let slowTile = try TileCoordinate(zoom: 2, x: 2, y: 1)
        #expect(slowest.answer.status == 200 && slowest.answer.body == Self.bytes(slowTile, version: 1), "\(slowest.answer.text)")
        await server.stop()
    }

    /// A presigned `GET` URL (SigV4 query authentication, botocore's) of `key` in the bucket
    /// `tiles` at `endpoint`, valid for an hour.
    static func presignedURL(endpoint: String, key: String) async throws -> String {
        try await onThread {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "python3", "-c",
                "import boto3, sys; from botocore.config import Config; print(boto3.client('s3', endpoint_url=sys.argv[1], "
                    + "region_name='us-east-1', config=Config(signature_version='s3v4'), aws_access_key_id='AKIDEXAMPLE', "
                    + "aws_secret_access_key='secret').generate_presigned_url('get_object', Params={'Bucket': 'tiles', "
                    + "'Key': sys.argv[2]}, ExpiresIn=3600))",
                endpoint, key,
            ]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// A presigned URL is sent as it is: a store that, as S3, accepts only the signed method and
    /// the query byte for byte (no `Authorization`, nothing re-encoded) serves it to the library
    /// and to `tilepack serve`, which names it after its path's file name and rechecks its
    /// version with a one-byte `GET` (a `HEAD` is not what the URL signs).
    @Test(.needs(.botocore)) func aPresignedURLIsSentUntouched() async throws {
        let dir = try TemporaryDirectory("presigned")
        try FileManager.default.createDirectory(atPath: dir.file("tiles/maps"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: ServerFixtures.sampleBundle, toPath: dir.file("tiles/maps/signed.tilepack"))
        let expected = Locked<String?>(nil)
        let refusals = Locked<[String]>([])
        let files = LoopbackHTTPServer.fileHandler(root: dir.url)
        let origin = try LoopbackHTTPServer { request in
            guard request.method == "GET", request.target == expected.withLock({ $0 }), request.header("authorization") == nil else {
                refusals.withLock { $0.append("\(request.method) \(request.target)") }
                return .status(403, "<Error><Code>SignatureDoesNotMatch</Code></Error>")
            }
            return files(request)
        }
        defer { origin.stop() }
        let signed = try await Self.presignedURL(endpoint: origin.baseURL, key: "maps/signed.tilepack")
        #expect(signed.contains("X-Amz-Signature=") && signed.contains("%2F"), "\(signed)")
        expected.withLock { $0 = String(signed.dropFirst(origin.baseURL.count)) }
        let url = try #require(URL(string: signed))
        let local = try BundleArchive(path: ServerFixtures.sampleBundle)
        let tile = try TileCoordinate(zoom: 4, x: 9, y: 5)
        let (remoteBytes, version) = try await onThread {
            (try RemoteArchive.open(url: url).tileData(at: tile), try HTTPByteSource.currentVersion(url: url))
        }
        let localBytes = try local.tileData(at: tile)
        let size = try FileManager.default.attributesOfItem(atPath: ServerFixtures.sampleBundle)[.size] as? Int
        #expect(remoteBytes == localBytes)
        #expect(version.size == size)
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [signed], recheckInterval: 0.2))
        #expect(server.server.archiveNames == ["signed"])
        let answer = try await server.get("/signed/4/9/5.png")
        #expect(answer.status == 200 && Data(answer.body) == localBytes)
        // Rechecks (a one-byte GET each) find the object unchanged: no problem in health.
        try await Task.sleep(for: .milliseconds(700))
        let health = try await Self.health(server)
        #expect(health.status == "ok" && health.archives.first?["problem"] == nil)
        #expect(refusals.withLock { $0 }.isEmpty, "\(refusals.withLock { $0 })")
        #expect(origin.requests.count >= 5)
        await server.stop()
    }
}
