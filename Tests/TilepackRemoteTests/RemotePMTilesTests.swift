import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackOperations
import TilepackRemote
import TilepackStorage
import TilepackTestSupport

/// PMTiles over HTTP range requests: against Debian's nginx (requests counted in its access log),
/// moto's S3 endpoint, and a loopback server that misbehaves on purpose.
@Suite(.serialized) struct RemotePMTilesTests {
    /// An archive with leaf directories (40,000 tiles at zooms 8-9) and its tiles.
    static func bigArchive(in dir: TemporaryDirectory) throws -> (path: String, tiles: [TileCoordinate: [UInt8]]) {
        let path = dir.file("big.pmtiles")
        let writer = try PMTilesWriter(destination: path, metadata: TileMetadata(["name": "big", "format": "png"]))
        var random = SplitMix64(seed: 11)
        var tiles: [TileCoordinate: [UInt8]] = [:]
        var earlier: [[UInt8]] = []
        for z in 8...9 {
            for x in 0..<(1 << z) {
                for y in 0..<(1 << z) where tiles.count < 40_000 && random.next() % 2 == 0 {
                    // Half repeat an earlier tile: offsets jump back, so the directories need leaves.
                    let bytes: [UInt8] =
                        !earlier.isEmpty && random.next() % 2 == 0
                        ? earlier[Int(random.next() % UInt64(earlier.count))]
                        : [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + withUnsafeBytes(of: random.next()) { Array($0) }
                    earlier.append(bytes)
                    tiles[TileCoordinate(uncheckedZoom: z, x: x, y: y)] = bytes
                    try writer.addTile(at: TileCoordinate(uncheckedZoom: z, x: x, y: y), bytes: bytes)
                }
            }
        }
        #expect(try writer.finish().leafDirectories > 1)
        return (path, tiles)
    }

    @Test(.needs(.nginx)) func requestBudgetAgainstNginx() throws {
        let dir = try TemporaryDirectory("remote")
        let (path, tiles) = try Self.bigArchive(in: dir)
        let server = try NginxServer(root: dir.url)
        defer { server.stop() }
        let url = try #require(URL(string: "\(server.baseURL)/big.pmtiles"))
        let source = try HTTPByteSource(url: url)
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int
        #expect(source.etag != nil && source.count == size)
        let archive = try PMTilesArchive(source: source)
        #expect(source.requestCount == 1)  // header and root in one
        let sorted = tiles.keys.sorted()
        let first = sorted[sorted.count / 2]
        #expect(try archive.tileData(at: first) == Data(tiles[first]!))
        #expect(source.requestCount <= 3)  // + a leaf + the tile
        let afterFirst = source.requestCount
        // A neighbour in the same leaf: one request, the directories cached.
        let next = sorted[sorted.count / 2 + 1]
        #expect(try archive.tileData(at: next) == Data(tiles[next]!))
        #expect(source.requestCount == afterFirst + 1)
        #expect(server.requestCount == source.requestCount)
        // A tile that is not there costs no tile request.
        let before = source.requestCount
        #expect(try archive.tileData(at: TileCoordinate(uncheckedZoom: 9, x: 511, y: 511)) == nil)
        #expect(source.requestCount <= before + 1)
    }

    @Test(.needs(.nginx)) func extractFromNginxCoalescesAndMatchesALocalExtract() throws {
        let dir = try TemporaryDirectory("remote")
        let (path, _) = try Self.bigArchive(in: dir)
        let server = try NginxServer(root: dir.url)
        defer { server.stop() }
        var options = ExtractOptions()
        options.bounds = GeoBoundingBox(west: 0, south: 0, east: 45, north: 40)
        let remote = try TileExtractor.run(
            source: "\(server.baseURL)/big.pmtiles", destination: dir.file("remote.mbtiles"), options: options)
        let local = try TileExtractor.run(source: path, destination: dir.file("local.mbtiles"), options: options)
        #expect(remote.tiles == local.tiles && remote.tiles > 200, "\(remote.tiles) tiles")
        #expect(
            try MBTilesArchive(path: dir.file("remote.mbtiles")).aggregateTilesHash()
                == MBTilesArchive(path: dir.file("local.mbtiles")).aggregateTilesHash())
        // Every leaf at most once, and the tiles in a few coalesced ranges, not one per tile.
        let leaves = try PMTilesArchive(path: path).header.leafLength > 0
        #expect(leaves)
        #expect(server.requestCount < remote.tiles / 20, "\(server.requestCount) requests for \(remote.tiles) tiles")
    }

    @Test(.needs(.nginx)) func verifyInfoAndConvertTakeURLs() throws {
        let dir = try TemporaryDirectory("remote")
        _ = try ArchiveConverter.run(
            source: TestSupport.fixture("martin/world_cities.mbtiles"), destination: dir.file("w.pmtiles"), options: ConvertOptions())
        let server = try NginxServer(root: dir.url)
        defer { server.stop() }
        let url = "\(server.baseURL)/w.pmtiles"
        let report = ArchiveVerifier.run(path: url)
        #expect(report.exitCode(strict: false) == 0 && report.tiles == 196, "\(report.findings)")
        #expect(try ArchiveInspector.run(path: url).tiles == 196)
        let before = server.requestCount
        _ = try ArchiveConverter.run(source: url, destination: dir.file("back.mbtiles"), options: ConvertOptions())
        // Each zoom level's tiles in coalesced requests, not one request per tile.
        #expect(server.requestCount - before <= 1 + 7, "\(server.requestCount - before) requests for 196 tiles")
        #expect(
            try MBTilesArchive(path: dir.file("back.mbtiles")).aggregateTilesHash()
                == MBTilesArchive(path: TestSupport.fixture("martin/world_cities.mbtiles")).aggregateTilesHash())
        // An MBTiles file over HTTP is named, not misread.
        try FileManager.default.copyItem(atPath: TestSupport.fixture("martin/world_cities.mbtiles"), toPath: dir.file("w.mbtiles"))
        #expect { _ = try RemoteArchive.open("\(server.baseURL)/w.mbtiles") } throws: { "\($0)".contains("SQLite reads local files only") }
    }

    @Test(.needs(.nginx)) func aChangedObjectIsAnErrorNotMixedData() throws {
        let dir = try TemporaryDirectory("remote")
        let (path, tiles) = try Self.bigArchive(in: dir)
        let server = try NginxServer(root: dir.url)
        defer { server.stop() }
        let archive = try RemoteArchive.open("\(server.baseURL)/big.pmtiles")
        // Replaced underneath (a new file renamed over the old, with another size and time).
        let writer = try PMTilesWriter(destination: path, metadata: TileMetadata(["name": "v2"]), overwrite: true)
        try writer.addTile(at: TileCoordinate(uncheckedZoom: 0, x: 0, y: 0), bytes: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 9])
        try writer.finish()
        let tile = tiles.keys.sorted()[100]
        #expect { _ = try archive.tileData(at: tile) } throws: { error in
            guard let error = error as? TileArchiveError, case .corrupt(let why) = error.fault else { return false }
            return why.contains("changed")
        }
    }

    @Test(.needs(.nginx)) func aServerThatIgnoresRangeOrIsMissingTheFileIsNamed() throws {
        let dir = try TemporaryDirectory("remote")
        _ = try Self.bigArchive(in: dir)
        let server = try NginxServer(root: dir.url)
        defer { server.stop() }
        #expect { _ = try RemoteArchive.open("\(server.baseURL)/norange/big.pmtiles") } throws: {
            "\($0)".contains("ignored the Range header")
        }
        #expect { _ = try RemoteArchive.open("\(server.baseURL)/absent.pmtiles") } throws: { error in
            guard let error = error as? TileArchiveError else { return false }
            return error.path.hasSuffix("/absent.pmtiles") && "\(error)".contains("HTTP status 404")
        }
    }

    @Test(.needs(.motoServer), .needs(.curl)) func s3CompatibleEndpoint() throws {
        let dir = try TemporaryDirectory("remote")
        let local = dir.file("s.pmtiles")
        _ = try ArchiveConverter.run(
            source: TestSupport.fixture("node-mbtiles/plain_1.mbtiles"), destination: local, options: ConvertOptions())
        let moto = try MotoServer()
        defer { moto.stop() }
        try moto.put(file: local, bucket: "tiles", key: "maps/s.pmtiles")
        let remote = try RemoteArchive.open("\(moto.baseURL)/tiles/maps/s.pmtiles")
        let here = try PMTilesArchive(path: local)
        var count = 0
        try here.forEachTile { t, bytes in
            count += 1
            let fetched = try remote.tileData(at: t)
            #expect(fetched == Data(bytes))
        }
        #expect(count == 285)
        #expect(try remote.metadata().name == "plain_1")
    }

    // MARK: A misbehaving server

    @Test func retriesTransientFaultsAndRefusesErrorPages() throws {
        let dir = try TemporaryDirectory("remote")
        _ = try ArchiveConverter.run(
            source: TestSupport.fixture("martin/world_cities.mbtiles"), destination: dir.file("w.pmtiles"), options: ConvertOptions())
        let bytes = try Data(contentsOf: URL(fileURLWithPath: dir.file("w.pmtiles")))
        let calls = Locked(0)
        let server = try LoopbackHTTPServer { request in
            let n = calls.withLock {
                $0 += 1
                return $0
            }
            if request.path == "/error-page.pmtiles" {
                return .respond(
                    status: 200, headers: ["Content-Type": "text/html"],
                    body: Data(String(repeating: "<html>busy</html>", count: 2000).utf8))
            }
            // The first answer is a 429 with Retry-After, the second a body cut short; then good answers.
            if n == 1 { return .respond(status: 429, headers: ["Retry-After": "0"], body: Data()) }
            guard let range = request.header("range"), range.hasPrefix("bytes=") else {
                return .respond(status: 200, headers: [:], body: bytes)
            }
            let parts = range.dropFirst(6).split(separator: "-").compactMap { Int($0) }
            let last = min(parts[1], bytes.count - 1)
            let body = bytes[parts[0]...last]
            let headers = ["Content-Range": "bytes \(parts[0])-\(last)/\(bytes.count)", "ETag": "\"v1\""]
            if n == 2 { return .truncated(status: 206, headers: headers, body: Data(body), sent: 10) }
            return .respond(status: 206, headers: headers, body: Data(body))
        }
        defer { server.stop() }
        var options = HTTPByteSource.Options()
        options.retry = RetryPolicy(maximumAttempts: 4, baseDelay: .milliseconds(10))
        let source = try HTTPByteSource(url: try #require(URL(string: "\(server.baseURL)/w.pmtiles")), options: options)
        #expect(source.requestCount == 3)
        let archive = try PMTilesArchive(source: source)
        #expect(try archive.tileCount() == 196)
        #expect {
            _ = try HTTPByteSource(url: try #require(URL(string: "\(server.baseURL)/error-page.pmtiles")), options: options)
        } throws: { "\($0)".contains("ignored the Range header") }
    }
}
