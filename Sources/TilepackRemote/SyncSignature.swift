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

/// A verified sync's signature (Specs/signing.md §7.2): `URL.tpsig`, read by range with the
/// archive's options (pinned by its ETag, signed requests for `s3://`) before anything is staged:
/// its header and signed root only (within the first request's bytes), checked with the key, its
/// release against `--min-release` and against the local archive's own `LOCAL.tpsig` (a replayed
/// older version, or another dataset, is refused). The staged result's tiles are then checked
/// against the signed root itself (``checkTiles(of:local:source:)``): the tree of every tile of the
/// result must give it, so the publisher's tree is not downloaded; only a refusal reads its tile ids
/// and leaves, a part at a time, to name the tiles. `LOCAL.tpsig` is the tree just computed, under
/// the publisher's signed root, committed after the archive (``stage(beside:)``).
final class SyncSignature: @unchecked Sendable {
    let name: String
    let note: [UInt8]
    let root: SignedRoot
    let key: VerifierKey
    private let source: HTTPByteSource
    /// Where the publisher's tile ids and leaves start in `URL.tpsig`.
    private let idsOffset: Int
    /// `LOCAL.tpsig`, written by ``checkTiles(of:local:source:)`` when the tiles gave the signed root.
    private var staged: AtomicFile?

    init(url: String, local: String, trust: SyncKey, options: HTTPByteSource.Options, s3: S3Client?) throws(OperationError) {
        name = SignatureSidecar.sidecarName(of: url)
        key = trust.key
        do {
            source = try Self.open(name, options: options, s3: s3)
        } catch {
            throw OperationError(
                path: name,
                fault: .badInput(
                    "cannot be read (\(error.fault)): --key asks for the signature of \(url), and it has none here; nothing was changed"))
        }
        do {
            // The signed root alone (within the first answer's bytes): a root the key did not
            // sign, an older release or a replay is refused before anything else is read.
            let early = try Self.signedRoot(of: source, key: trust.key)
            if early.release < trust.minimumRelease {
                throw SignatureError.olderRelease(path: name, release: early.release, minimum: trust.minimumRelease)
            }
            try Self.checkReplay(of: early, from: name, local: local, key: trust.key)
            let header = try source.withBytes(offset: 0, length: SignatureSidecar.headerLength) { [UInt8]($0) }
            let (noteLength, size) = try SignatureSidecar.parseHeader(header, path: name)
            let expected = SignatureSidecar.fileLength(noteLength: noteLength, size: size)
            guard source.count == expected else {
                let what = source.count < expected ? "truncated" : "longer than its tree"
                throw SignatureError.sidecar(
                    path: name, reason: "\(what): \(source.count) bytes, the signed root and tree of \(size) leaves need \(expected)")
            }
            try ArchiveSignature.checkRoot(early, treeSize: size, minimumRelease: trust.minimumRelease, origin: nil, path: name)
            root = early
            note = try source.withBytes(offset: SignatureSidecar.headerLength, length: noteLength) { [UInt8]($0) }
            idsOffset =
                SignatureSidecar.headerLength + (noteLength + 7) / 8 * 8 + 8
                * ((size + SignatureSidecar.groupSize - 1) / SignatureSidecar.groupSize)
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

    /// Every tile of the staged result against the signed root (one pass, which also gives its
    /// identity): the tree of its tiles, written as `LOCAL.tpsig` (staged) as it is computed, must
    /// give the signed root; else the publisher's tile ids and leaves are read to name the tiles
    /// that differ, are not signed or are missing.
    func checkTiles(of archive: any TileArchive, local: String, source: String) throws -> ContentIdentity {
        let leaves = try ArchiveSignature.leaves(of: archive, path: local)
        let file = try AtomicFile(destination: SignatureSidecar.sidecarName(of: local), overwrite: true)
        let computed = try SignatureSidecar.write(note: note, tileIDs: leaves.ids, leaves: leaves.hashes, to: file.temporaryPath)
        if UInt64(leaves.ids.count) == root.treeSize, computed == root.rootHash {
            staged = file
            return leaves.identity
        }
        let refusal: SignatureError
        do { refusal = try namedTiles(leaves, archive: "\(source) (synced for \(local))") } catch {
            throw Self.refusal(error, path: name)
        }
        throw OperationError(
            path: "", fault: .badInput("\(refusal) (checked against \(name), signed by \(key)): \(local) was left as it was"))
    }

    /// The tiles of `leaves` that differ from the publisher's leaves at their tile ids, are not in
    /// its tree, or are missing from `leaves`: its tile ids and leaves read by range, 16,384 at a
    /// time (bounded memory); the sidecar itself when no tile differs.
    private func namedTiles(_ leaves: ArchiveSignature.Leaves, archive: String) throws -> SignatureError {
        let size = Int(root.treeSize)
        let chunk = 16384
        var ids: [UInt64] = []
        var stored: [UInt8] = []
        var first = 0
        func load(_ j: Int) throws {
            guard j >= first + ids.count else { return }
            first = j
            let count = min(chunk, size - j)
            ids = try source.withBytes(offset: idsOffset + 8 * j, length: 8 * count) { raw in
                (0..<count).map { UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8 * $0, as: UInt64.self)) }
            }
            stored = try source.withBytes(offset: idsOffset + 8 * size + 32 * j, length: 32 * count) { [UInt8]($0) }
        }
        var found = TileProblems()
        func note(_ id: UInt64, _ kind: SignatureError.TileProblem.Kind) { found.note(id, kind) }
        var i = 0
        var j = 0
        while i < leaves.ids.count || j < size {
            if j < size { try load(j) }
            let theirs = j < size ? ids[j - first] : nil
            if let theirs, i < leaves.ids.count, leaves.ids[i] == theirs {
                let at = 32 * (j - first)
                if !leaves.hashes[(32 * i)..<(32 * i + 32)].elementsEqual(stored[at..<(at + 32)]) { note(theirs, .bytesDiffer) }
                i += 1
                j += 1
            } else if let theirs, i == leaves.ids.count || theirs < leaves.ids[i] {
                note(theirs, .missing)
                j += 1
            } else {
                note(leaves.ids[i], .notSigned)
                i += 1
            }
        }
        guard found.count == 0 else { return .tiles(archive: archive, problems: found.named, count: found.count) }
        return .sidecar(
            path: name,
            reason: "its stored leaves are the synced tiles', which do not give its signed root (the sidecar was rewritten or damaged)")
    }

    /// `LOCAL.tpsig`, staged beside LOCAL by ``checkTiles(of:local:source:)``, not yet in place:
    /// the caller commits it once the archive is renamed into place (dropped uncommitted, it is removed).
    func stage(beside local: String) throws -> AtomicFile {
        guard let staged, staged.destination == SignatureSidecar.sidecarName(of: local) else {
            throw OperationError(path: local, fault: .badInput("the synced tiles were not checked against \(name) before the rename"))
        }
        return staged
    }

    /// A signature error as the operation's (it names its file, tile or key itself).
    static func refusal(_ error: any Error, path: String) -> OperationError {
        if let error = error as? SignatureError { return OperationError(path: "", fault: .badInput("\(error); nothing was changed")) }
        return OperationError.wrapping(error, path: path)
    }
}
