import ArgumentParser
import Foundation
import TilepackOperations
import TilepackStorage

struct KeygenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Make an Ed25519 key pair for signing archives: NAME.key (private, mode 0600) and NAME.pub (the line to publish).",
        discussion: """
            NAME names the key in every signature and message: no spaces and no '+'; a host name and \
            path the publisher controls (maps.example.org/world) says whose it is. The files are \
            written in the current folder, named after NAME ('/' and other characters a file name \
            should not hold become '_'), or at --output PREFIX (PREFIX.key, PREFIX.pub). The public \
            key is one line, name+keyid+base64 key, in C2SP signed-note's key format (Specs/signing.md §1). \
            An existing key file is never replaced without --force.
            """)

    @Argument(help: "The key's name.")
    var name: String

    @Option(name: .shortAndLong, help: "Write PREFIX.key and PREFIX.pub (default: NAME, made a file name).")
    var output: String?

    @Flag(help: ArgumentHelp(SharedHelp.force + " (a key lost cannot be made again)."))
    var force = false

    func run() throws {
        let key = try SigningKey.generate(name: name)
        let prefix = output ?? Self.filePrefix(for: name)
        try key.write(privateKeyTo: prefix + ".key", publicKeyTo: prefix + ".pub", overwrite: force)
        print("\(prefix).key: the private key of \(key.verifier) (keep it secret)")
        print("\(prefix).pub: \(key.verifier.line)", terminator: "")
    }

    /// The key's name as a file name: characters other than letters, digits, '.', '_' and '-' become '_'.
    static func filePrefix(for name: String) -> String {
        String(name.map { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) ? $0 : "_" })
    }
}

struct SignCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Sign an archive's tiles: writes ARCHIVE.tpsig, the signed root and the tree's hashes, beside it.",
        discussion: """
            Every tile is hashed with its coordinate into a Merkle tree (RFC 6962, in PMTiles tile-id \
            order), whose root, the tile count, the archive's content identity (its metadata \
            included), --release and the time are signed with the private key (Specs/signing.md). \
            Publish ARCHIVE.tpsig beside the archive; a receiver checks it with `tilepack verify \
            ARCHIVE --key NAME.pub`. The time is now, or SOURCE_DATE_EPOCH's when it is set (a \
            reproducible signature). An older ARCHIVE.tpsig is replaced.
            """)

    @Argument(help: "The archive (\(TileArchiveFormat.extensions()); a local file).")
    var archive: String

    @Option(name: .customLong("private-key"), help: "The private key file (NAME.key, from `tilepack keygen`).")
    var privateKey: String

    @Option(help: "The release number: an integer the publisher increases with each release (a receiver refuses an older one).")
    var release: UInt64

    @Option(help: "The dataset's name (default: KEYNAME/ARCHIVE's file name without its extension).")
    var origin: String?

    @Flag(help: "\(SharedHelp.json): what was signed.")
    var json = false

    struct Output: Encodable {
        var archive, sidecar, key, origin, root, identity, time: String
        var release: UInt64
        var tiles: Int
        /// The signed tree's size, and whether the archive is an extract proven against it.
        var treeSize: UInt64
        var extract: Bool
    }

    func run() throws {
        let key = try SigningKey(contentsOf: privateKey)
        let epoch = ProcessInfo.processInfo.environment["SOURCE_DATE_EPOCH"].flatMap { Int64($0) }
        let report = try ArchiveSignature.sign(
            archivePath: archive, key: key, release: release, origin: origin, time: epoch ?? Int64(Date().timeIntervalSince1970))
        let output = Output(report, archive: archive)
        if json { return try printJSON(output) }
        print("signed \(archive): \(report.tiles) tiles, release \(report.root.release) of \(report.root.origin), by \(report.key)")
        print("  \(report.sidecar): root \(output.root), \(report.root.identity)")
    }
}

extension SignCommand.Output {
    init(_ report: ArchiveSignature.Report, archive: String) {
        self.init(
            archive: archive, sidecar: report.sidecar, key: report.key, origin: report.root.origin,
            root: Data(report.root.rootHash).base64EncodedString(), identity: report.root.identity.description, time: report.root.time,
            release: report.root.release, tiles: report.tiles, treeSize: report.root.treeSize, extract: report.extract)
    }
}

/// `verify --key`: the signature check after the archive's own checks.
struct SignatureCheck: Encodable {
    var verified: Bool
    var error: String?
    var signed: SignCommand.Output?

    static func run(archive: String, keyFile: String, minimumRelease: UInt64) -> SignatureCheck {
        do {
            let key = try VerifierKey(contentsOf: keyFile)
            let report =
                ArchiveLocation.isRemote(archive)
                ? try ExtractVerification.verifyRemote(archive, key: key, minimumRelease: minimumRelease)
                : try ArchiveSignature.verify(archivePath: archive, key: key, minimumRelease: minimumRelease)
            return SignatureCheck(verified: true, signed: SignCommand.Output(report, archive: archive))
        } catch {
            return SignatureCheck(verified: false, error: "\(error)")
        }
    }

    var text: String {
        guard let signed else { return "Error: signature: \(error ?? "")" }
        if signed.extract {
            return
                "signature: release \(signed.release) of \(signed.origin) by \(signed.key), signed \(signed.time): all \(signed.tiles) tiles of this extract are the publisher's, proven against its signed tree of \(signed.treeSize) (the extract's metadata is its own, not signed)"
        }
        return
            "signature: release \(signed.release) of \(signed.origin) by \(signed.key), signed \(signed.time): all \(signed.tiles) tiles, the metadata and the tree are the signed ones"
    }
}

/// `--sign NAME.key --release N` on every writer that takes `--index` (import, convert, extract,
/// merge): the output signed once it is written, its `.tpsig` beside it (uploaded beside an
/// `s3://` output, as the `.tpindex` is).
struct SigningOptions: ParsableArguments {
    @Option(
        name: .customLong("sign"),
        help: ArgumentHelp(
            "Sign the output with this private key file (NAME.key, from `tilepack keygen`): writes OUTPUT.tpsig, as `tilepack sign` does.",
            valueName: "key-file"))
    var privateKey: String?

    @Option(help: "With --sign: the release number (an integer the publisher increases with each release).")
    var release: UInt64?

    @Option(help: "With --sign: the dataset's name (default: KEYNAME/OUTPUT's file name without its extension).")
    var origin: String?

    func validate() throws {
        if privateKey != nil, release == nil { throw ValidationError("--sign needs --release N") }
        if privateKey == nil, release != nil || origin != nil { throw ValidationError("--release and --origin go with --sign") }
    }

    /// The key, read before anything is written (a wrong key file fails the command at once).
    func key() throws -> SigningKey? { try privateKey.map { try SigningKey(contentsOf: $0) } }

    /// Runs `build`, which writes the archive at `path` (`destination`, or its local copy for an
    /// `s3://` one), then signs it with `key` (from ``key()``) as `tilepack sign` does.
    func signed<R>(_ path: String, key: SigningKey?, as destination: String, _ build: () throws -> R) throws -> R {
        let result = try build()
        try sign(path, key: key, destination: destination)
        return result
    }

    func sign(_ path: String, key: SigningKey?, destination: String) throws {
        guard let key, let release else { return }
        let epoch = ProcessInfo.processInfo.environment["SOURCE_DATE_EPOCH"].flatMap { Int64($0) }
        let origin = origin ?? ArchiveSignature.defaultOrigin(key: key, archivePath: destination)
        _ = try ArchiveSignature.sign(
            archivePath: path, key: key, release: release, origin: origin, time: epoch ?? Int64(Date().timeIntervalSince1970))
    }
}

/// `info --key NAME.pub [--min-release N]`: each archive's signed root, checked without reading a tile.
enum SignedRoots {
    struct Shown: Encodable {
        var archive: String
        var origin: String
        var release: UInt64
        var tiles: UInt64
        var root: String
        var identity: String
        var time: String
        var key: String
    }

    /// Each archive's signed root, checked (as JSON: an object, or an array for several); the
    /// first refusal fails the command, naming the file or key.
    static func show(archives: [String], key verifier: VerifierKey, minimumRelease: UInt64, json: Bool) throws {
        var shown: [Shown] = []
        for archive in archives {
            let root = try ExtractVerification.signedRoot(of: archive, key: verifier, minimumRelease: minimumRelease)
            shown.append(
                Shown(
                    archive: archive, origin: root.origin, release: root.release, tiles: root.treeSize,
                    root: Data(root.rootHash).base64EncodedString(), identity: root.identity.description, time: root.time,
                    key: verifier.description))
            if !json {
                print(
                    "  signature  release \(root.release) of \(root.origin) by \(verifier), signed \(root.time): \(root.treeSize) tiles, root checked (not the tiles: `verify --key` checks them)"
                )
            }
        }
        if json { try printJSON(shown.count == 1 ? AnyEncodable(shown[0]) : AnyEncodable(shown)) }
    }
}

/// One of two JSON shapes.
struct AnyEncodable: Encodable {
    let value: any Encodable
    init(_ value: any Encodable) { self.value = value }
    func encode(to encoder: any Encoder) throws { try value.encode(to: encoder) }
}
