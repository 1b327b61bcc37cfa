import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

@testable import TilepackServer

/// `serve --key` (Specs/signing.md; issue 45): each tile of a remote archive fetched by range, and
/// of a file, is checked against the publisher's signed root before it is served. A tile changed
/// after signing (its archive rewritten around it, the sidecar kept) is a 5xx with a log line
/// naming it, never its bytes; the others are served as they are.
@Suite struct SignedServeTests {
    static let key = SigningKey(name: "example.org/maps", seed: Array(0..<32).map { UInt8($0) })!
    static let forger = SigningKey(name: "example.org/maps", seed: Array(32..<64).map { UInt8($0) })!

    /// The sample's tiles written as PMTiles at `path`.
    static func write(_ tiles: [(TileCoordinate, [UInt8])], to path: String, metadata: TileMetadata) throws {
        try? FileManager.default.removeItem(atPath: path)
        let writer = try PMTilesWriter(destination: path, metadata: metadata)
        for (tile, bytes) in tiles.sorted(by: { PMTilesFormat.tileID(of: $0.0) < PMTilesFormat.tileID(of: $1.0) }) {
            try writer.addTile(at: tile, bytes: bytes)
        }
        _ = try writer.finish()
    }

    @Test func aTamperedTileOfARemoteOrLocalArchiveIsA5xxNamingItAndNeverServed() async throws {
        let dir = try TemporaryDirectory("signed-serve")
        let source = try BundleArchive(path: ServerFixtures.sampleBundle)
        var tiles: [(TileCoordinate, [UInt8])] = []
        try source.forEachTile { tile, bytes in tiles.append((tile, Array(bytes))) }
        let metadata = try source.metadata()
        let remotePath = dir.file("city.pmtiles")
        try Self.write(tiles, to: remotePath, metadata: metadata)
        _ = try ArchiveSignature.sign(archivePath: remotePath, key: Self.key, release: 3, time: 0)
        // One tile of zoom 3 changed after signing; the archive rewritten around it.
        let victim = try #require(tiles.firstIndex { $0.0.zoom == 3 })
        let good = try #require(tiles.firstIndex { $0.0.zoom == 3 && $0.0 != tiles[victim].0 })
        var tampered = tiles
        tampered[victim].1[tampered[victim].1.count / 2] ^= 0x01
        try Self.write(tampered, to: remotePath, metadata: metadata)
        // The same, as a file served beside it.
        let localPath = dir.file("town.pmtiles")
        try FileManager.default.copyItem(atPath: remotePath, toPath: localPath)
        try FileManager.default.copyItem(atPath: remotePath + ".tpsig", toPath: localPath + ".tpsig")
        let keyPath = dir.file("maps.pub")
        try Data(Self.key.verifier.line.utf8).write(to: URL(fileURLWithPath: keyPath))
        let http = try LoopbackHTTPServer(files: dir.url)
        defer { http.stop() }
        let logged = Locked<[String]>([])
        var options = TileServerOptions(archivePaths: ["\(http.baseURL)/city.pmtiles", localPath])
        options.keyPath = keyPath
        let server = try await RunningServer.start(options) { line in logged.withLock { $0.append(line) } }
        let (bad, fine) = (tiles[victim].0, tiles[good].0)
        for name in ["city", "town"] {
            for _ in 0..<2 {
                let answer = try await server.get("/\(name)/\(bad.zoom)/\(bad.x)/\(bad.y).png")
                #expect(answer.status >= 500 && answer.body != tampered[victim].1, "\(name) \(bad): \(answer.status)")
                #expect(!answer.text.isEmpty && answer.text.contains("tile \(bad)"), "\(answer.text)")
            }
            #expect(
                logged.withLock { $0 }.contains { $0.contains("tile \(bad) of '\(name)'") && $0.contains("release 3") },
                "\(logged.withLock { $0 })")
            let answer = try await server.get("/\(name)/\(fine.zoom)/\(fine.x)/\(fine.y).png")
            #expect(answer.status == 200 && answer.body == tiles[good].1, "\(name) \(fine): \(answer.status)")
        }
        await server.stop()
        // Without --key the changed tile is served: what the check above stops.
        let plain = try await RunningServer.start(TileServerOptions(archivePaths: ["\(http.baseURL)/city.pmtiles"]))
        let served = try await plain.get("/city/\(bad.zoom)/\(bad.x)/\(bad.y).png")
        #expect(served.status == 200 && served.body == tampered[victim].1)
        await plain.stop()
        // A root the key did not sign: the server does not start, naming the sidecar and the key.
        _ = try ArchiveSignature.sign(archivePath: localPath, key: Self.forger, release: 3, time: 0)
        options.archivePaths = [localPath]
        do {
            let started = try await RunningServer.start(options)
            await started.stop()
            Issue.record("served an archive its key did not sign")
        } catch {
            #expect("\(error)".contains(localPath + ".tpsig") && "\(error)".contains("the key example.org/maps"), "\(error)")
        }
    }
}
