import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackRemote
import TilepackStorage
import TilepackTestSupport
import TilepackUpdate

/// `sync --key` (Specs/signing.md §7): the publisher's `URL.tpsig` is checked with the key, its
/// release against the local archive's own `LOCAL.tpsig` and `--min-release`, every tile of the
/// result against its signed tree before the rename; `LOCAL.tpsig` then becomes the remote one.
/// Each refusal leaves LOCAL, its `.tpsig` and its folder as they were.
@Suite struct SyncSignatureTests {
    static let key = SigningKey(name: "example.org/maps", seed: Array(0..<32).map { UInt8($0) })!
    static let otherKey = SigningKey(name: "example.org/maps", seed: Array(32..<64).map { UInt8($0) })!
    static let origin = "example.org/maps/world"

    static func sign(_ path: String, release: UInt64, key: SigningKey = key) throws {
        _ = try ArchiveSignature.sign(archivePath: path, key: key, release: release, origin: origin, time: 1_767_323_045)
    }

    /// The publisher's files of `path` (the archive, its index, its signature when signed) as `name`.
    static func served(_ path: String, as name: String, signature: String? = nil) -> [String: Data] {
        var files = [name: SyncTests.fileBytes(path)!, name + ".tpindex": SyncTests.fileBytes(path + ".tpindex")!]
        if let sidecar = SyncTests.fileBytes(signature ?? path + ".tpsig") { files[name + ".tpsig"] = sidecar }
        return files
    }

    /// LOCAL, its `.tpsig` and its folder's listing, to compare before and after a refusal.
    static func state(_ local: String) throws -> [Data?] {
        let folder = URL(fileURLWithPath: local).deletingLastPathComponent().path
        let listing = try FileManager.default.contentsOfDirectory(atPath: folder).sorted().joined(separator: "\n")
        return [SyncTests.fileBytes(local), SyncTests.fileBytes(local + ".tpsig"), Data(listing.utf8)]
    }

    /// Runs a sync that must be refused; its error's text.
    static func refused(_ local: String, _ url: String, key: SyncKey) throws -> String {
        let before = try state(local)
        do {
            let report = try ArchiveSync.run(local: local, url: url, options: SyncTests.noRetry(), key: key)
            Issue.record("synced: \(report)")
            return ""
        } catch {
            #expect(try state(local) == before, "a refused sync changed \(local), its .tpsig or its folder")
            return error.description
        }
    }

    @Test func aSignedNewerReleaseSyncsAndItsRootBecomesTheLocalOne() throws {
        let setup = try SyncTests.Setup()
        try Self.sign(setup.v1.pmtiles, release: 1)
        try Self.sign(setup.v2.pmtiles, release: 2)
        let publisher = try SyncTests.Publisher(files: Self.served(setup.v2.pmtiles, as: "v2.pmtiles"))
        defer { publisher.server.stop() }
        let report = try ArchiveSync.run(
            local: setup.v1.pmtiles, url: publisher.url("v2.pmtiles"), options: SyncTests.noRetry(),
            key: SyncKey(key: Self.key.verifier, minimumRelease: 2))
        #expect(report.signed?.release == 2 && report.signed?.origin == Self.origin && report.tilesFetched < report.tiles)
        #expect(try SyncTests.identity(setup.v1.pmtiles).tiles == SyncTests.identity(setup.v2.pmtiles).tiles)
        #expect(SyncTests.fileBytes(setup.v1.pmtiles + ".tpsig") == SyncTests.fileBytes(setup.v2.pmtiles + ".tpsig"))
        // Of the publisher's sidecar only its first answer (header and signed root) was read: the
        // tiles were checked against the root by their own tree, which LOCAL.tpsig is.
        let sidecarRequests = publisher.server.requests.filter { $0.path.hasSuffix(".tpsig") }
        let sidecarSize = try #require(SyncTests.fileBytes(setup.v2.pmtiles + ".tpsig")).count
        #expect(sidecarRequests.count == 1 && sidecarSize > 16 << 10, "\(sidecarRequests.map(\.target)), \(sidecarSize) bytes")
        let verified = try ArchiveSignature.verify(archivePath: setup.v1.pmtiles, key: Self.key.verifier, minimumRelease: 2)
        #expect(verified.root.release == 2)
    }

    @Test func anOlderReleaseReplayedOverTheLocalOneBelowMinReleaseOrOfAnotherDatasetIsRefused() throws {
        let setup = try SyncTests.Setup(indexed: false)
        _ = try ArchiveIndexer.run(archive: setup.v1.pmtiles)
        _ = try ArchiveIndexer.run(archive: setup.v2.pmtiles)
        try Self.sign(setup.v1.pmtiles, release: 1)
        try Self.sign(setup.v2.pmtiles, release: 2)
        // The publisher's URL now serves v1's signed release 1; the local copy is release 2.
        let publisher = try SyncTests.Publisher(files: Self.served(setup.v1.pmtiles, as: "world.pmtiles"))
        defer { publisher.server.stop() }
        let url = publisher.url("world.pmtiles")
        let replay = try Self.refused(setup.v2.pmtiles, url, key: SyncKey(key: Self.key.verifier))
        #expect(replay.contains("release 1") && replay.contains("release 2") && replay.contains("replayed"), "\(replay)")
        #expect(replay.contains(url + ".tpsig"), "\(replay)")
        // Below --min-release, with no local root to compare with.
        let fresh = setup.dir.file("fresh.pmtiles")
        let low = try Self.refused(fresh, url, key: SyncKey(key: Self.key.verifier, minimumRelease: 3))
        #expect(low.contains("release 1") && low.contains("release 3"), "\(low)")
        // A root of another dataset than the local one's, even of a newer release.
        _ = try ArchiveSignature.sign(archivePath: setup.v1.pmtiles, key: Self.key, release: 9, origin: "example.org/other", time: 0)
        publisher.files.withLock { $0 = Self.served(setup.v1.pmtiles, as: "world.pmtiles") }
        let other = try Self.refused(setup.v2.pmtiles, url, key: SyncKey(key: Self.key.verifier))
        #expect(other.contains("\"example.org/other\"") && other.contains("\"\(Self.origin)\""), "\(other)")
    }

    @Test func aRootNotSignedByTheKeyOrNoSignatureAtAllIsRefused() throws {
        let setup = try SyncTests.Setup()
        try Self.sign(setup.v1.pmtiles, release: 1)
        try Self.sign(setup.v2.pmtiles, release: 2, key: Self.otherKey)
        var files = Self.served(setup.v2.pmtiles, as: "v2.pmtiles")
        files["unsigned.pmtiles"] = files["v2.pmtiles"]
        files["unsigned.pmtiles.tpindex"] = files["v2.pmtiles.tpindex"]
        let publisher = try SyncTests.Publisher(files: files)
        defer { publisher.server.stop() }
        let other = try Self.refused(setup.v1.pmtiles, publisher.url("v2.pmtiles"), key: SyncKey(key: Self.key.verifier))
        #expect(other.contains("not signed by the key \(Self.key.verifier)") || other.contains("does not verify"), "\(other)")
        #expect(other.contains(publisher.url("v2.pmtiles.tpsig")), "\(other)")
        // Refused from the first answer's 16 KiB: the sidecar's tree (120 KB here) was never asked for.
        #expect(publisher.served.withLock { $0 }.allSatisfy { $0.count <= 16 << 10 }, "\(publisher.served.withLock { $0 })")
        let none = try Self.refused(setup.v1.pmtiles, publisher.url("unsigned.pmtiles"), key: SyncKey(key: Self.key.verifier))
        #expect(none.contains(publisher.url("unsigned.pmtiles.tpsig")) && none.contains("404"), "\(none)")
    }

    @Test func aTamperedTileWithItsIndexRewrittenIsRefusedByTheSignature() throws {
        let setup = try SyncTests.Setup()
        try Self.sign(setup.v1.pmtiles, release: 1)
        try Self.sign(setup.v2.pmtiles, release: 2)
        // v2 with one changed tile, its index rebuilt to match, served with v2's signature.
        let target = TileCoordinate(uncheckedZoom: 6, x: 9, y: 0)
        let tampered = try SyncTests.make(version: 2, name: "tampered", in: setup.dir) { tile, bytes in
            if tile == target { bytes[20] ^= 0x01 }
        }
        _ = try ArchiveIndexer.run(archive: tampered.pmtiles)
        let publisher = try SyncTests.Publisher(
            files: Self.served(tampered.pmtiles, as: "v2.pmtiles", signature: setup.v2.pmtiles + ".tpsig"))
        defer { publisher.server.stop() }
        let error = try Self.refused(setup.v1.pmtiles, publisher.url("v2.pmtiles"), key: SyncKey(key: Self.key.verifier))
        #expect(error.contains("tile 6/9/0: its bytes differ from the signed tile") && error.contains(".tpsig"), "\(error)")
    }
}

/// `sync --key` from an `s3://` object (moto's S3 on loopback): `KEY.tpsig` read by signed
/// requests with the app's client, as the archive is; a replayed release refused there too.
@Suite(.needs(.motoServer))
struct S3SyncSignatureTests {
    @Test func aSignedObjectSyncsThroughTheAppsClientAndAReplayIsRefused() async throws {
        let moto = try await MotoS3.shared()
        let setup = try SyncTests.Setup(indexed: false)
        for (path, release) in [(setup.v1.bundle, UInt64(1)), (setup.v2.bundle, 2)] {
            _ = try ArchiveIndexer.run(archive: path)
            try SyncSignatureTests.sign(path, release: release)
        }
        let s3 = S3SyncTests.appClient(moto, S3SyncTests.AppCredentials(moto.keys))
        let prefix = "sync-key/\(UUID().uuidString)"
        for (name, data) in SyncSignatureTests.served(setup.v2.bundle, as: "world.tilepack")
            .merging(SyncSignatureTests.served(setup.v1.bundle, as: "old.tilepack"), uniquingKeysWith: { a, _ in a })
        {
            _ = try await s3.put(data, at: S3Location(bucket: "tiles", key: "\(prefix)/\(name)"))
        }
        let local = setup.dir.file("app.tilepack")
        try FileManager.default.copyItem(atPath: setup.v1.bundle, toPath: local)
        try FileManager.default.copyItem(atPath: setup.v1.bundle + ".tpsig", toPath: local + ".tpsig")
        let trust = SyncKey(key: SyncSignatureTests.key.verifier)
        let request = SyncRequest.start(local: local, url: "s3://tiles/\(prefix)/world.tilepack", s3: s3, key: trust)
        #expect(await request.finished() == .success, "\(String(describing: request.error))")
        #expect(request.report?.signed?.release == 2 && request.report?.mode == "index", "\(String(describing: request.report))")
        #expect(SyncTests.fileBytes(local + ".tpsig") == SyncTests.fileBytes(setup.v2.bundle + ".tpsig"))
        // The old release's object, synced over the new local copy: refused, nothing changed.
        let before = [SyncTests.fileBytes(local), SyncTests.fileBytes(local + ".tpsig")]
        let replay = SyncRequest.start(local: local, url: "s3://tiles/\(prefix)/old.tilepack", s3: s3, key: trust)
        #expect(await replay.finished() == .failure)
        let message = replay.error?.description ?? ""
        #expect(message.contains("s3://tiles/\(prefix)/old.tilepack.tpsig") && message.contains("release 1"), "\(message)")
        #expect([SyncTests.fileBytes(local), SyncTests.fileBytes(local + ".tpsig")] == before)
        #expect(!FileManager.default.fileExists(atPath: local + ".tpsync"))
    }
}
