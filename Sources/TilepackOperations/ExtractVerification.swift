import Foundation
import TilepackCore
import TilepackRemote
import TilepackStorage

/// `extract SOURCE OUT --key`: every tile the extract copies is checked against the source's
/// signed root before the output is written (Specs/signing.md §7.1), and the output gets its own
/// `.tpsig`: the source's signed root, the tiles' leaves and their multi-leaf proof.
///
/// The source's `.tpsig` (beside it: a file, or `URL.tpsig` / `s3://BUCKET/KEY.tpsig` read by
/// range) is read in part: its header, signed root and fences at once; at the end, the tile-id
/// groups of the tiles copied, in one batch of ranges, then the proof's nodes, in another. Each
/// tile is hashed as it is copied; before the output is renamed into place, each must be in the
/// signed tree, and the tiles' leaves and the proof must give the signed root, else the tiles
/// the tree lacks or that differ from their stored leaves are named (or the sidecar, when none
/// does) and nothing is written.
package final class ExtractVerification: @unchecked Sendable {
    package let reader: SignedTreeReader
    private var entries: [(index: Int, id: UInt64, leaf: [UInt8])] = []
    private var copied: [(id: UInt64, leaf: [UInt8])] = []
    private var written: String?
    private let archiveName: String
    private let tileHasher = ContentIdentity.TileHasher()
    private let treeHasher = TreeHasher()

    /// Opens `source`'s sidecar (`sidecar`, or beside it) and checks its signed root with `key`.
    package init(source: String, key: VerifierKey, minimumRelease: UInt64 = 0, sidecar: String? = nil) throws(OperationError) {
        let location = sidecar ?? source + ".tpsig"
        do {
            let bytes: any ByteSource
            if ArchiveLocation.isRemote(location) {
                bytes = try Self.remoteSource(location)
            } else {
                guard FileManager.default.fileExists(atPath: location) else {
                    throw SignatureError.sidecar(
                        path: location, reason: "missing: \(source) is not signed, and --key asks for its signature")
                }
                bytes = try FileByteSource(path: location)
            }
            reader = try SignedTreeReader(source: bytes, key: key, minimumRelease: minimumRelease, origin: nil)
            archiveName = source
        } catch {
            throw Self.named(error, path: location)
        }
    }

    /// `verify ARCHIVE --key` of an `http(s)://` or `s3://` archive: every tile read by range and
    /// checked against `ARCHIVE.tpsig`, read by range beside it.
    package static func verifyRemote(_ location: String, key: VerifierKey, minimumRelease: UInt64) throws -> ArchiveSignature.Report {
        let archive = try ArchiveLocation.open(location)
        let sidecar: any ByteSource
        do { sidecar = try remoteSource(location + ".tpsig") } catch { throw named(error, path: location + ".tpsig") }
        return try ArchiveSignature.verify(archive: archive, sidecar: sidecar, key: key, minimumRelease: minimumRelease)
    }

    /// `info ARCHIVE --key`: the signed root beside a file or an `http(s)://` / `s3://` archive,
    /// checked without reading a tile: the key's signature, the release, and the stored hashes
    /// the root folds from (the sidecar's header, root and fences, its top level and right edge).
    package static func signedRoot(of location: String, key: VerifierKey, minimumRelease: UInt64) throws(OperationError) -> SignedRoot {
        let verification = try ExtractVerification(source: location, key: key, minimumRelease: minimumRelease)
        do {
            guard try verification.reader.storedRoot() == verification.reader.root.rootHash else {
                throw SignatureError.sidecar(
                    path: verification.reader.source.name,
                    reason: "its stored hashes do not give its signed root (the sidecar was rewritten or damaged)")
            }
        } catch {
            throw named(error, path: verification.reader.source.name)
        }
        return verification.reader.root
    }

    /// A signature error as the operation's (it names its file, tile or key itself).
    static func named(_ error: any Error, path: String) -> OperationError {
        if let error = error as? SignatureError { return OperationError(path: "", fault: .badInput("\(error)")) }
        return OperationError.wrapping(error, path: path)
    }

    /// A remote sidecar read by range, pinned as an archive is, its neighbours not coalesced
    /// across gaps (a proof's hashes are 32 bytes apart from what it does not need).
    package static func remoteSource(_ location: String) throws -> any ByteSource {
        var options = HTTPByteSource.Options()
        options.coalescingGap = 256
        options.initialLength = 4096 + 64
        if S3Location.isS3(location), let s3 = S3Location(location) { return try HTTPByteSource(s3: s3, options: options) }
        guard let url = URL(string: location) else { throw OperationError(path: location, fault: .badInput("not a URL")) }
        return try HTTPByteSource(url: url, options: options)
    }

    /// One tile about to be copied: hashed with its coordinate (its place in the signed tree is
    /// looked up at the end, with the others', in one batch).
    package func check(_ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer) throws {
        copied.append((PMTilesFormat.tileID(of: tile), treeHasher.leaf(tileHasher.fullHash(tile, bytes))))
    }

    /// Each copied tile's leaf index; a tile the signed tree does not hold is refused, naming it.
    private func locate() throws {
        let indices = try reader.leafIndices(of: copied.map(\.id))
        let outside = zip(copied, indices).filter { $0.1 == nil }.compactMap { PMTilesFormat.tile(ofID: $0.0.id) }
        guard outside.isEmpty else {
            let named = outside.prefix(SignatureError.maximumNamedTiles).map { SignatureError.TileProblem(tile: $0, kind: .notSigned) }
            throw SignatureError.tiles(archive: archiveName, problems: Array(named), count: outside.count)
        }
        entries = zip(copied, indices).map { ($0.1!, $0.0.id, $0.0.leaf) }
        copied = []
    }

    /// The tiles checked against the signed root through their proof, then the output's `.tpsig`
    /// written beside `destination` (renamed into place; removed again by ``discard()``).
    package func finish(writingBeside destination: String) throws {
        do { try checkAndWrite(beside: destination) } catch { throw Self.named(error, path: reader.source.name) }
    }

    private func checkAndWrite(beside destination: String) throws {
        try locate()
        entries.sort { $0.index < $1.index }
        guard !entries.isEmpty else { return }
        let indices = entries.map(\.index)
        let proof = try reader.proof(for: indices)
        let leaves = entries.map(\.leaf)
        guard MerkleTree.root(size: reader.size, indices: indices, leaves: leaves, proof: proof) == reader.root.rootHash else {
            throw try refusal()
        }
        let signature = ExtractSignature(
            note: reader.note, tileIDs: entries.map(\.id), leaves: leaves.flatMap { $0 },
            proof: TileProof(treeSize: UInt64(reader.size), indices: indices, hashes: proof))
        let path = destination + ".tpsig"
        try ArchiveSignature.writeAtomically(signature.encoded(), to: path)
        written = path
    }

    /// Removes the `.tpsig` ``finish(writingBeside:)`` wrote (the output was not written after all).
    package func discard() {
        if let written { try? FileManager.default.removeItem(atPath: written) }
        written = nil
    }

    /// The tiles whose leaves differ from their stored leaves, named; else the sidecar.
    private func refusal() throws -> SignatureError {
        let stored = try reader.storedLeaves(entries.map(\.index))
        let differ = zip(entries, stored).filter { $0.0.leaf != $0.1 }.compactMap { PMTilesFormat.tile(ofID: $0.0.id) }
        guard differ.isEmpty else {
            let named = differ.prefix(SignatureError.maximumNamedTiles).map { SignatureError.TileProblem(tile: $0, kind: .bytesDiffer) }
            return .tiles(archive: archiveName, problems: Array(named), count: differ.count)
        }
        return .sidecar(
            path: reader.source.name, reason: "its stored hashes do not give its signed root (the sidecar was rewritten or damaged)")
    }
}
