import ArgumentParser
import TilepackStorage

/// `--key NAME.pub [--min-release N]`: the publisher's public key that a signed archive is checked
/// with (its `ARCHIVE.tpsig`, Specs/signing.md), and the lowest release accepted. One option, one
/// meaning, on every command that checks a signature (info, verify, extract, sync, render); what
/// each checks with it, its discussion says.
struct PublisherKeyOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Check the publisher's signature (ARCHIVE.tpsig, read by range beside an http(s):// or s3:// archive) with this public key file (NAME.pub, from `tilepack keygen`).",
            valueName: "public-key-file"))
    var key: String?

    @Option(name: .customLong("min-release"), help: "With --key: the lowest signed release accepted (an older one is a replay).")
    var minimumRelease: UInt64?

    func validate() throws {
        if minimumRelease != nil, key == nil { throw ValidationError("--min-release is a check of the signature: give --key too") }
    }

    /// The lowest release accepted: `--min-release`, else any.
    var lowestRelease: UInt64 { minimumRelease ?? 0 }

    /// The key, read before anything else is done (a wrong key file fails the command at once).
    func verifier() throws -> VerifierKey? { try key.map { try VerifierKey(contentsOf: $0) } }
}
