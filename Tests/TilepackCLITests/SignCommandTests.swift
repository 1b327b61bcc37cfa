import Foundation
import Testing
import TilepackTestSupport

@testable import tilepack

/// `tilepack keygen`, `sign` and `verify --key` as a publisher and a receiver run them.
@Suite struct SignCommandTests {
    static func tilepack(_ arguments: [String], in dir: TemporaryDirectory, environment: [String: String] = [:]) async throws -> CommandOutput {
        try await TestSupport.run(
            try #require(TestSupport.tilepackBinary, "the tilepack binary is built beside the tests"), arguments, environment: environment)
    }

    @Test func keyFilesAreNamedAfterTheKey() {
        #expect(KeygenCommand.filePrefix(for: "maps.example.org/world") == "maps.example.org_world")
        #expect(KeygenCommand.filePrefix(for: "a:b\\c") == "a_b_c")
    }

    @Test func aPublisherSignsAndAReceiverVerifiesThenATamperedArchiveIsRefused() async throws {
        let dir = try TemporaryDirectory("sign-command")
        let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
        let archive = dir.file("world.tilepack")
        try FileManager.default.copyItem(atPath: sample, toPath: archive)

        let prefix = dir.file(KeygenCommand.filePrefix(for: "maps.example.org/world"))
        let keygen = try await Self.tilepack(["keygen", "maps.example.org/world", "-o", prefix], in: dir)
        #expect(keygen.status == 0, "\(keygen)")
        let keyFile = dir.file("maps.example.org_world.key"), publicFile = dir.file("maps.example.org_world.pub")
        let mode = try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let publicLine = try String(contentsOfFile: publicFile, encoding: .utf8)
        #expect(publicLine.hasPrefix("maps.example.org/world+") && publicLine.split(separator: "\n").count == 1)
        let again = try await Self.tilepack(["keygen", "maps.example.org/world", "-o", prefix], in: dir)
        #expect(again.status == 1 && again.stderr.contains("already exists"), "\(again)")

        let sign = try await Self.tilepack(
            ["sign", archive, "--private-key", keyFile, "--release", "7"], in: dir, environment: ["SOURCE_DATE_EPOCH": "1767323045"])
        #expect(sign.status == 0, "\(sign)")
        #expect(sign.stdout.hasPrefix("signed \(archive): 341 tiles, release 7 of maps.example.org/world/world, by maps.example.org/world+"))
        let note = try String(contentsOfFile: archive + ".tpsig", encoding: .isoLatin1)
        #expect(note.contains("release 7\ntime 2026-01-02T03:04:05Z\n"))

        let verify = try await Self.tilepack(["verify", archive, "--key", publicFile, "--min-release", "7"], in: dir)
        #expect(verify.status == 0, "\(verify)")
        #expect(verify.stdout.contains("signature: release 7 of maps.example.org/world/world by maps.example.org/world+"), "\(verify.stdout)")
        let replay = try await Self.tilepack(["verify", archive, "--key", publicFile, "--min-release", "8"], in: dir)
        #expect(replay.status == 1 && replay.stdout.contains("release 7 is older than release 8"), "\(replay)")
        // A converted archive holds the same tiles and metadata: the same signature verifies it.
        let converted = dir.file("world.pmtiles")
        #expect(try await Self.tilepack(["convert", archive, converted], in: dir).status == 0)
        try FileManager.default.copyItem(atPath: archive + ".tpsig", toPath: converted + ".tpsig")
        let verifyConverted = try await Self.tilepack(["verify", converted, "--key", publicFile], in: dir)
        #expect(verifyConverted.status == 0, "\(verifyConverted)")
        let privateAsKey = try await Self.tilepack(["verify", archive, "--key", keyFile], in: dir)
        #expect(privateAsKey.status == 1 && privateAsKey.stdout.contains("is a private key, not a public key"), "\(privateAsKey)")

        // Another publisher's archive under the same name: its tiles and its sidecar, signed by its key.
        let other = try await Self.tilepack(["keygen", "maps.example.org/world", "-o", dir.file("forger")], in: dir)
        #expect(other.status == 0)
        let extract = try await Self.tilepack(["extract", sample, archive, "--max-zoom", "3", "--force"], in: dir)
        #expect(extract.status == 0, "\(extract)")
        _ = try await Self.tilepack(["sign", archive, "--private-key", dir.file("forger.key"), "--release", "8"], in: dir)
        let forged = try await Self.tilepack(["verify", archive, "--key", publicFile], in: dir)
        #expect(forged.status == 1 && forged.stdout.contains("not signed by the key maps.example.org/world+"), "\(forged)")
    }
}
