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
            sidecar = try SignatureSidecar.read(source: source)
            root = try ArchiveSignature.checkSidecar(
                sidecar, path: name, key: trust.key, minimumRelease: trust.minimumRelease, origin: nil)
        } catch { throw Self.refusal(error, path: name) }
        try checkReplay(local: local)
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
    func checkReplay(local: String) throws(OperationError) {
        let localName = SignatureSidecar.sidecarName(of: local)
        guard FileSystem.stat(localName) != nil else { return }
        let held: SignedRoot
        do { held = try Self.signedRoot(ofFile: localName, key: key) } catch {
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

    /// The signed root of a sidecar file, checked with `key`, read without its tree (its header
    /// and note only).
    static func signedRoot(ofFile path: String, key: VerifierKey) throws -> SignedRoot {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw SignatureError.sidecar(path: path, reason: String(cString: strerror(errno)))
        }
        defer { try? handle.close() }
        let header = [UInt8]((try handle.read(upToCount: SignatureSidecar.headerLength)) ?? Data())
        let (noteLength, _) = try SignatureSidecar.parseHeader(header, path: path)
        let note = [UInt8]((try handle.read(upToCount: noteLength)) ?? Data())
        guard note.count == noteLength else { throw SignatureError.sidecar(path: path, reason: "truncated in its signed root") }
        return try SignedRoot.open(note, key: key, source: path)
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
