import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

@testable import TilepackServer

/// Hostile files of every format renamed over a served archive while clients hammer it (issue 29
/// item 12): the last good version stays served, whole (every answer is its bytes, no 5xx, no
/// crash), and `/_/health` names the failed reload; a bundle cut in place is read with `pread`,
/// so the server answers errors for the tiles past the cut and lives (no SIGBUS).
@Suite struct HostileReplacementTests {
    /// The hostile replacements, by name: the bytes renamed over the served file, and whether the
    /// file is sound (then it is served, and must hold the same tiles: an MBTiles beside a
    /// journal that is not SQLite's, which the server reads `immutable`).
    static func hostileFiles(in directory: TemporaryDirectory, good: [UInt8]) throws -> [(String, [UInt8], sound: Bool)] {
        var flipped = good
        flipped[72] ^= 0x01  // the header's tile count, under the header's CRC
        let pmtilesEntry = HostilePMTiles.Entry(
            tileID: 0, runLength: 1, length: UInt64(HostilePMTiles.pngBytes.count), offset: UInt64.max - 4)
        let overflowing = HostilePMTiles.file(root: HostilePMTiles.directory([pmtilesEntry]), tileData: HostilePMTiles.pngBytes, maxZoom: 0)
        var generator = SplitMix64(seed: 29)
        let random = (0..<4096).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        let mbtiles = directory.file("sound.mbtiles")
        try HotSwapTests.write(mbtiles, version: 1, mbtiles: true)
        return [
            ("a truncated bundle", Array(good.prefix(good.count / 2)), false),
            ("a bundle with a flipped header bit", flipped, false),
            ("a PMTiles with overflowing directory offsets", overflowing, false),
            ("a zero-byte file", [], false),
            ("random bytes", random, false),
            ("an MBTiles beside a garbage journal", Array(try Data(contentsOf: URL(fileURLWithPath: mbtiles))), true),
        ]
    }

    @Test func hostileFilesRenamedOverAServedArchiveLeaveTheLastGoodVersionServed() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("live.tilepack")
        try HotSwapTests.write(path, version: 1, mbtiles: false)
        let good = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        // A second archive of tiles far larger than a page, to be cut in place at the end.
        let big = directory.file("big.tilepack")
        var metadata = TileMetadata()
        metadata.setFormat(.json)
        var noise = SplitMix64(seed: 12)
        // Letters at random: LZ4 cannot shrink them below a page.
        let bigTiles = HotSwapTests.tiles.map { tile in
            (
                tile,
                Array("{\"t\":\"\(tile)\",\"pad\":\"".utf8) + (0..<20_000).map { _ in UInt8(0x61 + noise.next() % 16) } + Array("\"}".utf8)
            )
        }
        try ServerFixtures.writeBundle(big, content: .encoded(.json), metadata: metadata, tiles: bigTiles)
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [path, big], reloadInterval: 0.01))
        let port = server.port
        let stop = Locked(false)
        let clients = (0..<3).map { client in
            Task {
                try await onThread { () -> (requests: Int, failures: [String]) in
                    var failures: [String] = []
                    var requests = 0
                    var generator = SplitMix64(seed: UInt64(client + 7))
                    let started = Date()
                    while !stop.withLock({ $0 }), Date().timeIntervalSince(started) < 60 {
                        let tile = HotSwapTests.tiles[Int(generator.next() % UInt64(HotSwapTests.tiles.count))]
                        requests += 1
                        do {
                            let answer = try RawHTTP.send(port: port, target: "/live/\(tile.zoom)/\(tile.x)/\(tile.y).json")
                            if answer.status != 200 || answer.body != HotSwapTests.bytes(tile, version: 1) {
                                failures.append("\(tile): \(answer.status) \(answer.text.prefix(200))")
                            }
                        } catch {
                            failures.append("\(tile): \(error)")
                        }
                    }
                    return (requests, failures)
                }
            }
        }

        func health() async throws -> [String: Any] {
            try JSONSerialization.jsonObject(with: Data(try await server.get("/_/health").body)) as? [String: Any] ?? [:]
        }
        func reloads() async throws -> Int {
            ((try await health()["archives"] as? [[String: Any]])?.first { $0["path"] as? String == path }?["reloads"] as? Int) ?? -1
        }
        /// Renames `bytes` over the served file (a new inode, as a deployment does).
        func replace(_ bytes: [UInt8], _ name: String) throws {
            let temporary = directory.file("next.tmp")
            try Data(bytes).write(to: URL(fileURLWithPath: temporary))
            #expect(rename(temporary, path) == 0, "\(name)")
        }

        for (name, bytes, sound) in try Self.hostileFiles(in: directory, good: good) {
            let before = try await reloads()
            if sound { try Data("this is not a rollback journal\n".utf8).write(to: URL(fileURLWithPath: path + "-journal")) }
            try replace(bytes, name)
            var seen = false
            for _ in 0..<500 {
                if sound {
                    seen = try await reloads() > before
                } else {
                    let document = try await health()
                    let problem =
                        ((document["archives"] as? [[String: Any]])?.first { $0["path"] as? String == path }?["problem"] as? String) ?? ""
                    seen = document["status"] as? String == "degraded" && problem.contains(path)
                }
                if seen { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(seen, "\(name): \(sound ? "not reloaded" : "/_/health did not report the failed reload") within 5 s")
            if sound { try? FileManager.default.removeItem(atPath: path + "-journal") }
            // Good again, for the next one (a new inode: the watcher opens it).
            let reloaded = try await reloads()
            try replace(good, "the good bundle")
            for _ in 0..<500 {
                if try await reloads() > reloaded { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(try await health()["status"] as? String == "ok", "\(name): not ok again after the good file came back")
        }

        // A bundle cut in place (against the rules, but it must not kill the server): read by
        // `pread`, the tiles past the cut are errors; the server lives and answers.
        stop.withLock { $0 = true }
        var requests = 0
        var failures: [String] = []
        for client in clients {
            let seen = try await client.value
            requests += seen.requests
            failures += seen.failures
        }
        #expect(
            requests > 0 && failures.isEmpty, "\(failures.count) of \(requests) answers were not the last good tile: \(failures.prefix(5))")
        #expect(truncate(big, 4096) == 0)
        var cut = 0
        for (tile, bytes) in bigTiles {
            let answer = try await server.get("/big/\(tile.zoom)/\(tile.x)/\(tile.y).json")
            #expect((answer.status == 200 && answer.body == bytes) || answer.status >= 500, "\(tile): \(answer.status)")
            if answer.status >= 500 { cut += 1 }
        }
        #expect(cut > 0, "no tile of the cut bundle was an error")
        #expect(try await server.get("/_/health").status == 200)
        await server.stop()
    }
}
