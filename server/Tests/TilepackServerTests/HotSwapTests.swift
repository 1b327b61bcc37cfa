import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

@testable import TilepackServer

/// Replacing an archive file by rename while clients hammer it: every response is whole and
/// from one version (its bytes and its ETag agree), none fails, and the new version is served
/// without a restart.
@Suite struct HotSwapTests {
    static let tiles: [TileCoordinate] = (0...2).flatMap { zoom in
        (0..<(1 << zoom)).flatMap { x in (0..<(1 << zoom)).compactMap { y in TileCoordinate(validatingZoom: zoom, x: x, y: y) } }
    }

    /// Version `version` of every tile: JSON naming the version, of a length that differs per version.
    static func bytes(_ tile: TileCoordinate, version: Int) -> [UInt8] {
        Array("{\"v\":\(version),\"t\":\"\(tile)\",\"pad\":\"\(String(repeating: "x", count: version % 7))\"}".utf8)
    }

    static func write(_ path: String, version: Int, mbtiles: Bool) throws {
        var metadata = TileMetadata()
        metadata.setFormat(.json)
        metadata.setMinZoom(0)
        metadata.setMaxZoom(2)
        metadata.name = "v\(version)"
        if mbtiles {
            let writer = try MBTilesWriter(creating: path, metadata: metadata)
            for tile in tiles { try writer.write(bytes(tile, version: version), at: tile) }
            _ = try writer.finish()
        } else {
            try ServerFixtures.writeBundle(
                path, content: .encoded(.json), metadata: metadata, tiles: tiles.map { ($0, bytes($0, version: version)) })
        }
    }

    @Test(arguments: [false, true]) func replacedFileIsServedWithoutMixing(mbtiles: Bool) async throws {
        let directory = try TemporaryDirectory()
        let ext = mbtiles ? "mbtiles" : "tilepack"
        let path = directory.file("live.\(ext)")
        try Self.write(path, version: 1, mbtiles: mbtiles)
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [path], reloadInterval: 0.01))
        let port = server.port

        /// What each client saw: failures, the versions seen, and for each ETag the body it came with.
        struct Seen: Sendable {
            var failures: [String] = []
            var versions: Set<Int> = []
            var bodies: [String: [UInt8]] = [:]
            var requests = 0
        }
        let stop = Locked(false)
        // The versions any client has seen so far: the first replacements wait for a client to
        // see them (an event, not a clock), so that a loaded machine still shows several versions.
        let versionsSeen = Locked<Set<Int>>([])
        let clients = (0..<4).map { client in
            Task {
                try await onThread { () -> Seen in
                    var seen = Seen()
                    var generator = SplitMix64(seed: UInt64(client + 1))
                    let started = Date()
                    while !stop.withLock({ $0 }), seen.requests < 20000, Date().timeIntervalSince(started) < 120 {
                        let tile = Self.tiles[Int(generator.next() % UInt64(Self.tiles.count))]
                        seen.requests += 1
                        do {
                            let answer = try RawHTTP.send(port: port, target: "/live/\(tile.zoom)/\(tile.x)/\(tile.y).json")
                            guard answer.status == 200, let etag = answer.header("ETag") else {
                                seen.failures.append("\(tile): \(answer.status) \(answer.text)")
                                continue
                            }
                            guard let version = (1...12).first(where: { Self.bytes(tile, version: $0) == answer.body }) else {
                                seen.failures.append("\(tile): a body of no version: \(answer.text)")
                                continue
                            }
                            seen.versions.insert(version)
                            versionsSeen.withLock { _ = $0.insert(version) }
                            if let earlier = seen.bodies[etag], earlier != answer.body {
                                seen.failures.append("\(tile): ETag \(etag) came with two different bodies")
                            }
                            seen.bodies[etag] = answer.body
                        } catch {
                            seen.failures.append("\(tile): \(error)")
                        }
                    }
                    return seen
                }
            }
        }
        // Ten replacements, each a complete file renamed over the served one.
        for version in 2...11 {
            try await Task.sleep(for: .milliseconds(120))
            let temporary = directory.file("next-\(version).\(ext)")
            try Self.write(temporary, version: version, mbtiles: mbtiles)
            #expect(rename(temporary, path) == 0)
            if version <= 3 {
                let seenBy = Date().addingTimeInterval(60)
                while !versionsSeen.withLock({ $0.contains(version) }), Date() < seenBy { try await Task.sleep(for: .milliseconds(10)) }
            }
        }
        // The last version is served, without a restart.
        let deadline = Date().addingTimeInterval(60)
        var latest = 0
        while Date() < deadline {
            let answer = try await server.get("/live/1/1/1.json")
            if answer.body == Self.bytes(try TileCoordinate(zoom: 1, x: 1, y: 1), version: 11) {
                latest = 11
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        stop.withLock { $0 = true }
        var all = Seen()
        for client in clients {
            let seen = try await client.value
            all.failures += seen.failures
            all.versions.formUnion(seen.versions)
            all.requests += seen.requests
            // The same ETag never names two bodies, across clients either.
            for (etag, body) in seen.bodies {
                if let other = all.bodies[etag], other != body { all.failures.append("ETag \(etag) named two bodies") }
                all.bodies[etag] = body
            }
        }
        #expect(latest == 11, "the last version was not served within 60 s")
        #expect(all.failures.isEmpty, "\(all.failures.count) of \(all.requests) requests failed or mixed: \(all.failures.prefix(5))")
        #expect(all.versions.count >= 3, "the clients saw versions \(all.versions.sorted()) over \(all.requests) requests")
        let health = try JSONSerialization.jsonObject(with: Data(try await server.get("/_/health").body)) as? [String: Any]
        let reloads = ((health?["archives"] as? [[String: Any]])?.first?["reloads"] as? Int) ?? 0
        #expect(reloads >= 1)
        await server.stop()
    }

    /// A replacement that is not an archive is refused; the last good version stays served.
    @Test func brokenReplacementKeepsTheOldVersion() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("live.tilepack")
        try Self.write(path, version: 1, mbtiles: false)
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [path], reloadInterval: 0.01))
        defer { Task { await server.stop() } }
        let temporary = directory.file("broken.tmp")
        try Data("not an archive".utf8).write(to: URL(fileURLWithPath: temporary))
        #expect(rename(temporary, path) == 0)
        var degraded = false
        for _ in 0..<200 {
            let health = try await server.get("/_/health")
            if health.text.contains("degraded") {
                degraded = true
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(degraded)
        let tile = try TileCoordinate(zoom: 2, x: 3, y: 1)
        let answer = try await server.get("/live/2/3/1.json")
        #expect(answer.status == 200)
        #expect(answer.body == Self.bytes(tile, version: 1))
    }
}
