import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackImaging
import TilepackTestSupport

@testable import TilepackPrefetch

/// Issue 29, item 18: a tile server that sends one response more than it was asked for, right
/// behind a tile, must never get later tiles stored under the wrong coordinates.
@Suite("Prefetch: an unsolicited response from the tile server")
struct UnsolicitedResponseFetchTests {
    /// A sound tile no request asked for: a 256-px PNG of a colour no test tile has.
    static let extraTile = TestTiles.png(size: 256, colour: RGBA8(r: 1, g: 2, b: 3, a: 255))
    static let extra = Data("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: \(extraTile.count)\r\n\r\n".utf8) + extraTile

    /// Fetches Berlin at zooms 0-8 from a server that sends the extra response behind the answer
    /// to every fifth tile, and returns the tiles stored with another tile's bytes.
    static func fetch(over transport: (any HTTPTransport)?) async throws -> (misplaced: [TileCoordinate], report: PrefetchReport?) {
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let request = PrefetchRequest.boundingBox(berlin, zooms: 0...8)
        let cover = Array(try request.cover())
        for (index, tile) in cover.enumerated() where index % 5 == 2 {
            server.inject(tile, .unsolicited(status: 200, headers: ["Content-Type": "image/png"], body: TestTiles.tile(tile), extra: extra))
        }
        let prefetcher = try MapDataPrefetcher(
            storePath: directory.file("berlin.mbtiles"), source: PrefetchSource(urlTemplate: server.template),
            configuration: testConfiguration(), transport: transport)
        let (_, report) = await prefetcher.fetch(request)
        let misplaced = try cover.filter { tile in
            guard let stored = try prefetcher.store?.tileData(tile) else { return false }
            return stored != TestTiles.tile(tile)
        }
        await prefetcher.close()
        return (misplaced, report)
    }

    @Test("every stored tile is the answer to its own request", arguments: TestTransport.available)
    func everyStoredTileIsItsOwn(_ transport: TestTransport) async throws {
        let (misplaced, report) = try await Self.fetch(over: transport.forPrefetch)
        #expect(misplaced.isEmpty, "stored under the wrong coordinates: \(misplaced)")
        let result = try #require(report)
        #expect(result.status == .success && result.failed == 0 && result.downloaded == result.tiles, "\(result)")
    }

    /// A 256-px PNG of `rows` rows of noise (its bytes depend on `seed`) over a flat colour:
    /// 20-40 KB, more than libcurl reads with a response head (16 KiB).
    static func noisyTile(seed: UInt64, rows: Int = 24) -> Data {
        var bitmap = Bitmap(width: 256, height: 256, pixelFormat: .rgba8888)
        var random = SplitMix64(seed: seed)
        for index in 0..<(256 * 256) {
            let noisy = index < rows * 256
            bitmap.pixels[index * 4] = noisy ? UInt8(truncatingIfNeeded: random.next()) : 90
            bitmap.pixels[index * 4 + 1] = noisy ? UInt8(truncatingIfNeeded: random.next()) : 120
            bitmap.pixels[index * 4 + 2] = noisy ? UInt8(truncatingIfNeeded: random.next()) : 150
            bitmap.pixels[index * 4 + 3] = 255
        }
        return (try? PNGEncoder.encode(bitmap)) ?? Data()
    }

    static func noisyTile(_ tile: TileCoordinate) -> Data { noisyTile(seed: UInt64(tile.zoom << 40 | tile.x << 20 | tile.y)) }

    #if os(Linux)
    @Test("tilepack fetch (libcurl) from a server that sends another tile behind every answer stores every tile as its own")
    func fetchCommandStoresEveryTileAsItsOwn() async throws {
        // Issue 47, item 1, as reported: tiles of 20-40 KB, each answer followed by a whole 200
        // response for another tile (in the answer's write, or in a write of its own right after
        // it, tile by tile); main stored 21-25 of the 37 under the wrong coordinates.
        let binary = try tilepackBinary()
        let cover = try PrefetchRequest.boundingBox(GeoBoundingBox(west: -10, south: -10, east: 10, north: 10), zooms: 0...6).cover()
        #expect(cover.count == 37)
        let tiles = Dictionary(uniqueKeysWithValues: cover.map { ($0, Self.noisyTile($0)) })
        let foreign = Self.noisyTile(seed: 999)
        let extra = Data("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: \(foreign.count)\r\n\r\n".utf8) + foreign
        let server = try LoopbackHTTPServer { request in
            guard let tile = TileServer.tile(path: request.path), let body = tiles[tile] else { return .status(404, "no such tile") }
            let headers = ["Content-Type": "image/png"]
            return (tile.x + tile.y) % 2 == 0
                ? .unsolicited(status: 200, headers: headers, body: body, extra: extra)
                : .unsolicitedAfter(status: 200, headers: headers, body: body, extra: extra)
        }
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let path = directory.file("out.mbtiles")
        let result = try await runTilepack(
            binary,
            ["fetch", server.baseURL + "/{z}/{x}/{y}.png", path, "--bbox", "-10,-10,10,10", "--zoom", "0-6", "--concurrency", "2", "--quiet"])
        #expect(result.status == 0, "\(result.stderr)")
        let store = try MBTilesTileStore(path: path, create: false, readOnly: true)
        defer { try? store.close() }
        let misplaced = try cover.filter { try store.tileData($0) != tiles[$0] }
        #expect(misplaced.isEmpty, "\(misplaced.count) of \(cover.count) tiles hold other bytes: \(misplaced.prefix(8))")
    }
    #endif

    #if canImport(Glibc)
    @Test("the check catches a transport that takes the extra response for the next tile")
    func theCheckCatchesAShiftingTransport() async throws {
        let (misplaced, _) = try await Self.fetch(over: ResponseShiftingTransport())
        #expect(!misplaced.isEmpty)
    }
    #endif
}
