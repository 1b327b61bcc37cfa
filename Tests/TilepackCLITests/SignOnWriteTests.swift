import Foundation
import Testing
import TilepackTestSupport

@testable import tilepack

/// Issue 45, items 3-5: `--sign KEY --release N` on every writer that takes `--index`, `extract
/// --key` and `render --key`, as a publisher and a receiver run them.
@Suite struct SignOnWriteTests {
    static func tilepack(_ arguments: [String]) async throws -> CommandOutput {
        try await TestSupport.run(try #require(TestSupport.tilepackBinary, "the tilepack binary is built beside the tests"), arguments)
    }

    static let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
    static let tree = TestSupport.packageRoot.appendingPathComponent("samples/tiles").path

    @Test func everyWriterThatTakesIndexSignsItsOutput() async throws {
        let dir = try TemporaryDirectory("sign-on-write")
        #expect(try await Self.tilepack(["keygen", "maps.example.org/w", "-o", dir.file("k")]).status == 0)
        let sign = ["--sign", dir.file("k.key"), "--release", "4"]
        let writes: [(String, [String])] = [
            (dir.file("imported.mbtiles"), ["import", Self.tree, dir.file("imported.mbtiles")]),
            (dir.file("converted.pmtiles"), ["convert", Self.sample, dir.file("converted.pmtiles")]),
            (dir.file("extracted.tilepack"), ["extract", Self.sample, dir.file("extracted.tilepack"), "--max-zoom", "2"]),
            (dir.file("merged.mbtiles"), ["merge", Self.sample, dir.file("converted.pmtiles"), dir.file("merged.mbtiles")]),
        ]
        for (output, command) in writes {
            let run = try await Self.tilepack(command + sign)
            #expect(run.status == 0, "\(command[0]): \(run)")
            let verify = try await Self.tilepack(["verify", output, "--key", dir.file("k.pub"), "--min-release", "4", "--quick"])
            #expect(verify.status == 0 && verify.stdout.contains("signature: release 4 of maps.example.org/w/"), "\(command[0]): \(verify)")
        }
        // --sign without --release is a usage error, and nothing is written.
        let missing = try await Self.tilepack(["convert", Self.sample, dir.file("x.pmtiles"), "--sign", dir.file("k.key")])
        #expect(missing.status == 64 && missing.stderr.contains("--sign needs --release"), "\(missing)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("x.pmtiles")))
        // A public key given as the private one: refused before anything is written.
        let wrong = try await Self.tilepack(["convert", Self.sample, dir.file("x.pmtiles"), "--sign", dir.file("k.pub"), "--release", "1"])
        #expect(wrong.status == 1 && wrong.stderr.contains("is not a private key"), "\(wrong)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("x.pmtiles")))
    }

    @Test func anExtractWithKeyIsVerifiableAloneAndRenderDrawsOnlySignedTiles() async throws {
        let dir = try TemporaryDirectory("sign-extract")
        let world = dir.file("world.pmtiles")
        #expect(try await Self.tilepack(["keygen", "maps.example.org/w", "-o", dir.file("k")]).status == 0)
        #expect(try await Self.tilepack(["keygen", "maps.example.org/w", "-o", dir.file("other")]).status == 0)
        #expect(try await Self.tilepack(["convert", Self.sample, world, "--sign", dir.file("k.key"), "--release", "3"]).status == 0)
        let alps = dir.file("alps.mbtiles")
        let extract = try await Self.tilepack(["extract", world, alps, "--bbox", "5,44,17,48", "--key", dir.file("k.pub"), "--min-release", "3"])
        #expect(extract.status == 0, "\(extract)")
        let verify = try await Self.tilepack(["verify", alps, "--key", dir.file("k.pub"), "--quick"])
        #expect(verify.status == 0 && verify.stdout.contains("tiles of this extract are the publisher's, proven against its signed tree of 341"), "\(verify)")
        let replay = try await Self.tilepack(["extract", world, dir.file("x.mbtiles"), "--bbox", "5,44,17,48", "--key", dir.file("k.pub"), "--min-release", "4"])
        #expect(replay.status == 1 && replay.stderr.contains("release 3 is older than release 4"), "\(replay)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("x.mbtiles")) && !FileManager.default.fileExists(atPath: dir.file("x.mbtiles.tpsig")))
        let both = try await Self.tilepack(["extract", world, dir.file("x.mbtiles"), "--key", dir.file("k.pub"), "--sign", dir.file("k.key"), "--release", "1"])
        #expect(both.status == 64, "\(both)")

        let view = ["--center", "11,47", "--zoom", "4", "--size", "256x256"]
        let render = try await Self.tilepack(["render", world] + view + ["-o", dir.file("a.png"), "--key", dir.file("k.pub")])
        #expect(render.status == 0 && render.stdout.contains("4 tiles"), "\(render)")
        let other = try await Self.tilepack(["render", world] + view + ["-o", dir.file("b.png"), "--key", dir.file("other.pub")])
        #expect(other.status == 1 && other.stderr.contains("not signed by the key maps.example.org/w+"), "\(other)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("b.png")))
    }

    @Test(.needs(.cryptographyPython)) func theIndependentVerifierChecksAnExtract() async throws {
        let dir = try TemporaryDirectory("sign-extract-py")
        let world = dir.file("world.pmtiles")
        #expect(try await Self.tilepack(["keygen", "maps.example.org/w", "-o", dir.file("k")]).status == 0)
        #expect(try await Self.tilepack(["convert", Self.sample, world, "--sign", dir.file("k.key"), "--release", "3"]).status == 0)
        let alps = dir.file("alps.mbtiles")
        #expect(try await Self.tilepack(["extract", world, alps, "--bbox", "5,44,17,48", "--key", dir.file("k.pub")]).status == 0)
        let result = try TestSupport.runPython(script: "tools/verify_signed.py", [alps, "--key", dir.file("k.pub")])
        #expect(result.status == 0, "\(result.errors)")
        let theirs = try JSONSerialization.jsonObject(with: result.output) as? [String: Any]
        #expect(theirs?["extract"] as? Bool == true && theirs?["tree_size"] as? Int == 341 && theirs?["release"] as? Int == 3)
        // The proof is the minimal multi-leaf proof of the extract's tiles.
        let minimal = try TestSupport.runPython(script: "tools/verify_signed.py", ["--minimal-proof", world + ".tpsig", alps])
        let floor = try JSONSerialization.jsonObject(with: minimal.output) as? [String: Any]
        #expect(floor?["hashes"] as? Int == theirs?["proof_hashes"] as? Int, "\(minimal.errors)")
    }
}
