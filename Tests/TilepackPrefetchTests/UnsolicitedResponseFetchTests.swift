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

    #if canImport(Glibc)
    @Test("the check catches a transport that takes the extra response for the next tile")
    func theCheckCatchesAShiftingTransport() async throws {
        let (misplaced, _) = try await Self.fetch(over: ResponseShiftingTransport())
        #expect(!misplaced.isEmpty)
    }
    #endif
}
