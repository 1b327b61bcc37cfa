import Foundation
import TilepackCore
import TilepackStorage

/// What `sync --key` trusts (Specs/signing.md §7): the publisher's public key, and the lowest
/// release it accepts beside the local archive's own.
public struct SyncKey: Sendable {
    public var key: VerifierKey
    /// The lowest release accepted (`--min-release`), whatever the local archive's is.
    public var minimumRelease: UInt64

    public init(key: VerifierKey, minimumRelease: UInt64 = 0) {
        self.key = key
        self.minimumRelease = minimumRelease
    }
}

/// A verified sync's signature (Specs/signing.md §7): `URL.tpsig`, read by range with the
/// archive's options (pinned by its ETag, signed requests for `s3://`) before anything is staged,
/// its signed root checked with the key, its stored hashes against the root, and its release
/// against `--min-release` and against the local archive's own `LOCAL.tpsig` (a replayed older
/// version, or another dataset, is refused). The staged result's tiles are then checked against
/// it before the rename (``checkTiles(of:local:source:)``), and it is written as `LOCAL.tpsig`
/// after the archive (``stage(beside:)``).
final class SyncSignature: @unchecked Sendable {
    let name: String
    let sidecar: SignatureSidecar
    let root: SignedRoot
    let key: VerifierKey

    init(url: String, local: String, trust: SyncKey, options: HTTPByteSource.Options, s3: S3Client?) throws(OperationError) {
        name = SignatureSidecar.sidecarName(of: url)
        key = trust.key
        let source: HTTPByteSource
        do {
            source = try Self.open(name, options: options, s3: s3)
        } catch {
            throw OperationError(
                path: name,
                fault: .badInput(
                    "cannot be read (\(error.fault)): --key asks for the signature of \(url), and it has none here; nothing was changed"))
        }
        do {
            // The signed root first (within the first answer's bytes): a root the key did not
            // sign, an older release or a replay is refused before the tree (40 bytes a tile) is read.
            let early = try Self.signedRoot(of: source, key: trust.key)
            if early.release < trust.minimumRelease {
                throw SignatureError.olderRelease(path: name, release: early.release, minimum: trust.minimumRelease)
            }
            try Self.checkReplay(of: early, from: name, local: local, key: trust.key)
            sidecar = try SignatureSidecar.read(source: source)
            root = try ArchiveSignature.checkSidecar(
                sidecar, path: name, key: trust.key, minimumRelease: trust.minimumRelease, origin: nil)
        } catch let error as OperationError {
            throw error
        } catch { throw Self.refusal(error, path: name) }
    }

    /// The signed root of a sidecar read by range, checked with `key`, without its tree.
    static func signedRoot(of source: any ByteSource, key: VerifierKey) throws -> SignedRoot {
        let header = try source.withBytes(offset: 0, length: min(SignatureSidecar.headerLength, source.count)) { [UInt8]($0) }
        let (noteLength, _) = try SignatureSidecar.parseHeader(header, path: source.name)
        guard source.count >= SignatureSidecar.headerLength + noteLength else {
            throw SignatureError.sidecar(path: source.name, reason: "truncated: \(source.count) bytes, shorter than its signed root")
        }
        let note = try source.withBytes(offset: SignatureSidecar.headerLength, length: noteLength) { [UInt8]($0) }
        return try SignedRoot.open(note, key: key, source: source.name)
    }

    static func open(_ name: String, options: HTTPByteSource.Options, s3: S3Client?) throws(TileArchiveError) -> HTTPByteSource {
        if S3Location.isS3(name), let location = S3Location(name) {
            return try HTTPByteSource(s3: location, client: s3 ?? .environment, options: options)
        }
        guard let url = URL(string: name) else { throw TileArchiveError(path: name, fault: .corrupt("not a URL")) }
        return try HTTPByteSource(url: url, options: options)
    }

    /// The remote root against the local archive's own (`LOCAL.tpsig`, when there is one): the
    /// same dataset, a release no older.
    static func checkReplay(of root: SignedRoot, from name: String, local: String, key: VerifierKey) throws(OperationError) {
        let localName = SignatureSidecar.sidecarName(of: local)
        guard FileSystem.stat(localName) != nil else { return }
        let held: SignedRoot
        do { held = try Self.signedRoot(of: FileByteSource(path: localName), key: key) } catch {
            throw OperationError(
                path: localName,
                fault: .badInput(
                    "\(error): the local archive's signed root, which a sync with --key checks the remote's release against, cannot be used; nothing was changed"
                ))
        }
        if held.origin != root.origin {
            throw OperationError(
                path: name,
                fault: .badInput(
                    "signed for the dataset \"\(root.origin)\", and \(local) is of \"\(held.origin)\" (\(localName)): nothing was changed"))
        }
        if root.release < held.release {
            throw OperationError(
                path: name,
                fault: .badInput(
                    "release \(root.release) is older than release \(held.release), the local archive's (\(localName)): a replayed older version; nothing was changed"
                ))
        }
    }

    /// The remote archive's metadata against the signed identity's, before a tile is fetched.
    func checkMetadata(of archive: any TileArchive, source: String) throws(OperationError) {
        let metadata: TileMetadata
        do { metadata = try archive.metadata() } catch { throw OperationError.wrapping(error, path: source) }
        let hash = ContentIdentity.metadataHash(metadata)
        guard hash != root.identity.metadata else { return }
        var actual = root.identity
        actual.metadata = hash
        throw Self.refusal(
            SignatureError.metadata(archive: source, signed: root.identity.description, actual: actual.description), path: name)
    }

    /// Every tile of the staged result against the signed tree (one pass, which also gives its
    /// identity); the tiles that differ, are not signed or are missing, named.
    func checkTiles(of archive: any TileArchive, local: String, source: String) throws -> ContentIdentity {
        let leaves = try ArchiveSignature.leaves(of: archive, path: local)
        do {
            try ArchiveSignature.compareTiles(leaves, with: sidecar, archive: "\(source) (synced for \(local))")
        } catch {
            throw OperationError(
                path: "", fault: .badInput("\(error) (checked against \(name), signed by \(key)): \(local) was left as it was"))
        }
        return leaves.identity
    }

    /// `LOCAL.tpsig` written beside LOCAL, not yet in place: the caller commits it once the
    /// archive is renamed into place (dropped uncommitted, it is removed).
    func stage(beside local: String) throws -> AtomicFile {
        let path = SignatureSidecar.sidecarName(of: local)
        let file = try AtomicFile(destination: path, overwrite: true)
        do { try Data(sidecar.encoded()).write(to: URL(fileURLWithPath: file.temporaryPath)) } catch {
            throw TileArchiveError(path: path, fault: .io(errno: 0, reason: "cannot write the signature: \(error.localizedDescription)"))
        }
        return file
    }

    /// A signature error as the operation's (it names its file, tile or key itself).
    static func refusal(_ error: any Error, path: String) -> OperationError {
        if let error = error as? SignatureError { return OperationError(path: "", fault: .badInput("\(error); nothing was changed")) }
        return OperationError.wrapping(error, path: path)
    }
}
