import TilepackCore

/// Why a key, a signed root, a sidecar or an archive's tiles were refused (Specs/signing.md §8):
/// each case names what failed (the key, the file, the tile).
public enum SignatureError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A key file that is not a key of Specs/signing.md §1, or cannot be read.
    case keyFile(path: String, reason: String)
    /// A sidecar (`.tpsig`) or proof that is missing, truncated, malformed, or whose hashes do not
    /// give its signed root (rewritten or damaged).
    case sidecar(path: String, reason: String)
    /// The signed root carries no signature of the trusted key.
    case notSignedBy(key: String, path: String, signers: [String])
    /// The trusted key's signature line is there but does not verify.
    case badSignature(key: String, path: String)
    /// A validly signed root of a release lower than the one the receiver accepts (a replay).
    case olderRelease(path: String, release: UInt64, minimum: UInt64)
    /// A validly signed root of another dataset.
    case otherOrigin(path: String, origin: String, expected: String)
    /// Tiles that are not the signed ones; `problems` holds at most ``maximumNamedTiles``, `count` all.
    case tiles(archive: String, problems: [TileProblem], count: Int)
    /// The tiles are the signed ones but the metadata is not (its hash differs from the signed identity's).
    case metadata(archive: String, signed: String, actual: String)
    /// Signing could not be done (no randomness, an archive that cannot be a tree).
    case cannotSign(path: String, reason: String)

    /// The most tiles a ``tiles(archive:problems:count:)`` names.
    public static let maximumNamedTiles = 20

    /// One tile that is not a signed tile.
    public struct TileProblem: Sendable, Equatable, CustomStringConvertible {
        public enum Kind: String, Sendable, Equatable {
            /// Its bytes (or its coordinate) differ from the signed tile's.
            case bytesDiffer = "its bytes differ from the signed tile"
            /// No signed tile has its coordinate.
            case notSigned = "not in the signed tree"
            /// A signed tile the archive lacks.
            case missing = "a signed tile the archive lacks"
        }
        public var tile: TileCoordinate
        public var kind: Kind

        public init(tile: TileCoordinate, kind: Kind) {
            self.tile = tile
            self.kind = kind
        }
        public var description: String { "tile \(tile.zoom)/\(tile.x)/\(tile.y): \(kind.rawValue)" }
    }

    public var description: String {
        switch self {
        case .keyFile(let path, let reason): return "\(path): \(reason)"
        case .sidecar(let path, let reason): return "\(path): \(reason)"
        case .notSignedBy(let key, let path, let signers):
            let others = signers.isEmpty ? "it has no signature" : "it is signed by \(signers.joined(separator: ", ")) only"
            return "\(path): not signed by the key \(key): \(others)"
        case .badSignature(let key, let path):
            return
                "\(path): the signature of the key \(key) does not verify (the signed root was altered, or signed by another key of that name)"
        case .olderRelease(let path, let release, let minimum):
            return "\(path): release \(release) is older than release \(minimum), the lowest accepted (a replayed older version)"
        case .otherOrigin(let path, let origin, let expected):
            return "\(path): signed for the dataset \"\(origin)\", not \"\(expected)\""
        case .tiles(let archive, let problems, let count) where problems.isEmpty:
            return "\(archive): its tile count differs from the signed tree's by \(count)"
        case .tiles(let archive, let problems, let count):
            let more = count > problems.count ? "; and \(count - problems.count) more" : ""
            return "\(archive): \(count) tiles are not the signed ones: " + problems.map(\.description).joined(separator: "; ") + more
        case .metadata(let archive, let signed, let actual):
            return "\(archive): the tiles are the signed ones but the metadata is not (signed identity \(signed), the archive's \(actual))"
        case .cannotSign(let path, let reason): return "\(path): \(reason)"
        }
    }
}

/// The tiles a check found wrong: every one counted, the first
/// ``SignatureError/maximumNamedTiles`` named (by the tile id's coordinate).
package struct TileProblems {
    package private(set) var named: [SignatureError.TileProblem] = []
    package private(set) var count = 0

    package init() {}

    package mutating func note(_ id: UInt64, _ kind: SignatureError.TileProblem.Kind) {
        count += 1
        if named.count < SignatureError.maximumNamedTiles, let tile = PMTilesFormat.tile(ofID: id) {
            named.append(SignatureError.TileProblem(tile: tile, kind: kind))
        }
    }
}
