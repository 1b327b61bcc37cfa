import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackRemote
import TilepackStorage
import TilepackTestSupport

/// tilepack bundles over HTTP range requests, against the loopback file server (which counts
/// every request): the request budget, tile-for-tile equality with the local file, coalesced reads.
@Suite struct RemoteBundleTests {
    static let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path

    /// A bundle whose index is larger than the first request (3,000 tiles: a 100 KB index).
    static func largeBundle(in dir: TemporaryDirectory) throws -> String {
        let path = dir.file("large.tilepack")
        let writer = try BundleWriter(
            destination: path, content: .encoded(.png), metadata: TileMetadata(["name": "large", "format": "png"]))
        var random = SplitMix64(seed: 5)
        var count = 0
        for z in 5...6 {
            for x in 0..<(1 << z) {
                for y in 0..<(1 << z) where count < 3000 {
                    let bytes: [UInt8] =
                        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + (0..<200).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                    try bytes.withUnsafeBytes { try writer.addTile(at: TileCoordinate(uncheckedZoom: z, x: x, y: y), bytes: $0) }
                    count += 1
                }
            }
        }
        _ = try writer.finish()
        return path
    }

    func serve(_ path: String) throws -> (LoopbackHTTPServer, URL) {
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
        let server = try LoopbackHTTPServer(files: folder)
        return (server, URL(string: "\(server.baseURL)/\(URL(fileURLWithPath: path).lastPathComponent)")!)
    }

    @Test func aSmallBundleCostsOneRequestToOpenAndOnePerTile() throws {
        let (server, url) = try serve(Self.sample)
        defer { server.stop() }
        let source = try HTTPByteSource(url: url)
        let remote = try #require(try openTileArchive(source: source) as? BundleArchive)
        #expect(server.requestCount == 1)  // header, metadata and index in the first request
        let local = try BundleArchive(path: Self.sample)
        #expect(try remote.metadata() == local.metadata())
        #expect(try remote.zoomLevels() == local.zoomLevels())
        let first = TileCoordinate(uncheckedZoom: 3, x: 4, y: 2)
        #expect(try remote.tileData(at: first) == local.tileData(at: first))
        #expect(server.requestCount == 2)  // the first tile: 2 in all
        #expect(
            try remote.tileData(at: TileCoordinate(uncheckedZoom: 4, x: 9, y: 5))
                == local.tileData(at: TileCoordinate(uncheckedZoom: 4, x: 9, y: 5)))
        #expect(server.requestCount == 3)  // then 1 per tile
        #expect(try remote.tileData(at: TileCoordinate(uncheckedZoom: 5, x: 9, y: 9)) == nil)  // the sample stops at zoom 4
        #expect(server.requestCount == 3)  // an absent tile costs none: the index is in memory
        // Every tile, byte for byte, each level's payloads fetched together.
        let before = server.requestCount
        var tiles = 0
        var mismatches: [TileCoordinate] = []
        try remote.forEachTile { tile, bytes in
            tiles += 1
            if try local.tileData(at: tile) != Data(bytes) { mismatches.append(tile) }
        }
        #expect(mismatches.isEmpty)
        #expect(tiles == 341)
        #expect(server.requestCount - before <= 5, "\(server.requestCount - before) requests for 5 zoom levels")
        // verify of the URL decodes every tile, as of the local file.
        let report = ArchiveVerifier.run(path: url.absoluteString)
        #expect(report.exitCode(strict: true) == 0 && report.tiles == 341, "\(report.findings)")
    }

    @Test func aLargeIndexCostsOneMoreRequest() throws {
        let dir = try TemporaryDirectory("remote-bundle")
        let path = try Self.largeBundle(in: dir)
        let (server, url) = try serve(path)
        defer { server.stop() }
        let remote = try RemoteArchive.open(url: url)
        #expect(remote is BundleArchive)
        #expect(server.requestCount == 2)  // the first 16 KiB, then the rest of the index
        let local = try BundleArchive(path: path)
        let tile = TileCoordinate(uncheckedZoom: 6, x: 20, y: 17)
        #expect(try remote.tileData(at: tile) == local.tileData(at: tile))
        #expect(server.requestCount == 3)
        #expect(remote.content == local.content)
        #expect(try remote.tileCount() == 3000)
    }

    @Test func extractAndVerifyReadCoalescedRangesAndMatchTheLocalFile() throws {
        let dir = try TemporaryDirectory("remote-bundle")
        let path = try Self.largeBundle(in: dir)
        let (server, url) = try serve(path)
        defer { server.stop() }
        var options = ExtractOptions()
        options.bounds = GeoBoundingBox(west: -90, south: -60, east: 0, north: 0)
        let remote = try TileExtractor.run(source: url.absoluteString, destination: dir.file("remote.mbtiles"), options: options)
        let local = try TileExtractor.run(source: path, destination: dir.file("local.mbtiles"), options: options)
        #expect(remote.tiles == local.tiles && remote.tiles > 150, "\(remote.tiles) tiles")
        #expect(
            try MBTilesArchive(path: dir.file("remote.mbtiles")).aggregateTilesHash()
                == MBTilesArchive(path: dir.file("local.mbtiles")).aggregateTilesHash())
        #expect(server.requestCount < remote.tiles / 20, "\(server.requestCount) requests for \(remote.tiles) tiles")

        // Container, index and every payload's CRC (the synthetic tiles are not images to decode).
        var quick = VerifyOptions()
        quick.quick = true
        let report = ArchiveVerifier.run(path: url.absoluteString, options: quick)
        #expect(report.exitCode(strict: false) == 0 && report.tiles == 3000, "\(report.findings)")
    }

    @Test func aDamagedRemotePayloadIsNamed() throws {
        let dir = try TemporaryDirectory("remote-bundle")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: Self.sample))
        bytes[bytes.count - 10] ^= 0xFF  // inside the last payload
        try bytes.write(to: URL(fileURLWithPath: dir.file("damaged.tilepack")))
        let (server, url) = try serve(dir.file("damaged.tilepack"))
        defer { server.stop() }
        let remote = try RemoteArchive.open(url: url)
        #expect(throws: TileArchiveError.self) {
            try remote.forEachTile { _, _ in }
        }
    }
}
