import Foundation
import Testing
import TilepackTestSupport

/// `tilepack sync LOCAL URL --key NAME.pub [--min-release N]` as a receiver runs it, from nginx:
/// a newer signed release syncs and its root becomes LOCAL.tpsig; the older one replayed is
/// refused with both releases named and LOCAL as it was.
@Suite struct SyncKeyCommandTests {
    static func tilepack(_ arguments: [String], environment: [String: String] = ["SOURCE_DATE_EPOCH": "1767323045"]) async throws
        -> CommandOutput
    {
        try await TestSupport.run(
            try #require(TestSupport.tilepackBinary, "the tilepack binary is built beside the tests"), arguments, environment: environment)
    }

    @Test(.needs(.nginx)) func aNewerSignedReleaseSyncsAndAnOlderOneReplayedIsRefused() async throws {
        let dir = try TemporaryDirectory("sync-key-command")
        let www = try TemporaryDirectory("sync-key-www")
        let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
        let published = www.file("world.tilepack"), local = dir.file("world.tilepack")
        try FileManager.default.copyItem(atPath: sample, toPath: published)
        try FileManager.default.copyItem(atPath: sample, toPath: local)
        #expect(try await Self.tilepack(["keygen", "maps.example.org/world", "-o", dir.file("publisher")]).status == 0)
        let key = dir.file("publisher.key"), pub = dir.file("publisher.pub")
        #expect(try await Self.tilepack(["index", published]).status == 0)
        #expect(try await Self.tilepack(["sign", local, "--private-key", key, "--release", "1"]).status == 0)
        #expect(try await Self.tilepack(["sign", published, "--private-key", key, "--release", "2"]).status == 0)
        let server = try NginxServer(root: www.url)
        defer { server.stop() }
        let url = "\(server.baseURL)/world.tilepack"

        let sync = try await Self.tilepack(["sync", local, url, "--key", pub, "--min-release", "2"])
        #expect(sync.status == 0, "\(sync)")
        #expect(sync.stdout.contains("signed: maps.example.org/world/world release 2"), "\(sync.stdout)")
        #expect(FileManager.default.contents(atPath: local + ".tpsig") == FileManager.default.contents(atPath: published + ".tpsig"))

        // The publisher's URL now serves release 1 again: refused, naming both releases.
        #expect(try await Self.tilepack(["sign", published, "--private-key", key, "--release", "1"]).status == 0)
        let before = [FileManager.default.contents(atPath: local), FileManager.default.contents(atPath: local + ".tpsig")]
        let replay = try await Self.tilepack(["sync", local, url, "--key", pub])
        let said = replay.stdout + replay.stderr
        #expect(replay.status != 0 && said.contains("release 1 is older than release 2") && said.contains(url + ".tpsig"), "\(replay)")
        #expect([FileManager.default.contents(atPath: local), FileManager.default.contents(atPath: local + ".tpsig")] == before)

        let noKey = try await Self.tilepack(["sync", local, url, "--min-release", "3"])
        #expect(noKey.status == 64 && noKey.stderr.contains("--min-release"), "\(noKey)")
    }
}
