import TilepackCore
import TilepackImaging

/// A tile that could not be served from an archive: which archive, which tile, what went wrong.
public struct ArchiveTileError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The archive's path.
    public var archivePath: String
    /// The archive tile at fault (XYZ). For a layer tile made of several archive tiles, the one
    /// that failed.
    public var tile: TileCoordinate
    /// What went wrong.
    public var reason: Reason

    public init(archivePath: String, tile: TileCoordinate, reason: Reason) {
        self.archivePath = archivePath
        self.tile = tile
        self.reason = reason
    }

    public enum Reason: Hashable, Sendable, CustomStringConvertible {
        /// The archive could not give the tile's bytes (damaged, NULL data, I/O error).
        case archive(TileArchiveError.Fault)
        /// The bytes are not an image that decodes (corrupt, unknown format, vector tile, too large).
        case decoding(ImagingError)
        /// A raw-bitmap payload of the wrong length.
        case rawPayload(String)
        /// The caller's buffer is not `tileSize * tileSize * bytesPerPixel` bytes.
        case bufferSize(expected: Int, actual: Int)
        /// The tile size asked for breaks Core's `TileSize` rule (a power of two in 16...4096).
        case tileSize(Int)

        public var description: String {
            switch self {
            case .archive(let fault): "\(fault)"
            case .decoding(let error): "does not decode: \(error)"
            case .rawPayload(let text): "raw bitmap payload: \(text)"
            case .bufferSize(let expected, let actual): "the buffer holds \(actual) bytes, the tile takes \(expected)"
            case .tileSize(let size): TileSize.invalidReason(size) ?? "tile size \(size)"
            }
        }

        /// Whether asking again could succeed: an I/O or database error may be passing; a damaged
        /// or undecodable tile stays so.
        public var isTransient: Bool {
            switch self {
            case .archive(let fault):
                switch fault {
                case .io, .database, .cannotOpen: true
                default: false
                }
            case .decoding, .rawPayload, .bufferSize, .tileSize: false
            }
        }
    }

    public var description: String { "\(archivePath): tile \(tile): \(reason)" }
}

/// A tile of an archive that failed permanently and is no longer served (``ArchiveTileReader``
/// answers `hasTile` false for it from then on).
public struct ArchiveTileFailure: Hashable, Sendable, CustomStringConvertible {
    /// The error, naming the archive and the tile.
    public var error: ArchiveTileError

    public var archivePath: String { error.archivePath }
    public var tile: TileCoordinate { error.tile }
    public var description: String { error.description }
}
