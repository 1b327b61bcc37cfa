import Foundation
import TilepackCore

/// The archive formats tilepack reads and writes: an archive read is told apart by its first bytes
/// (never by the file name, ``openTileArchive(path:bundleAccess:mbtiles:)``), an archive written is
/// chosen by its name's extension (``init(destinationPath:)``, ``openTileSink(path:format:metadata:options:)``).
public enum TileArchiveFormat: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case mbtiles
    case bundle
    case pmtiles

    public var description: String {
        switch self {
        case .mbtiles: "MBTiles"
        case .bundle: "tilepack bundle"
        case .pmtiles: "PMTiles"
        }
    }

    /// The extension of a file written in this format (an output's extension chooses its format).
    package var fileExtension: String { "." + (self == .bundle ? "tilepack" : rawValue) }

    /// Every format's extension, `.mbtiles, .tilepack or .pmtiles` (with `conjunction`): the one list
    /// of the formats tilepack reads and writes, for help texts and messages.
    package static func extensions(_ conjunction: String = "or") -> String {
        let all = allCases.map(\.fileExtension)
        return all.dropLast().joined(separator: ", ") + " " + conjunction + " " + all[all.count - 1]
    }

    /// The format a file named `path` is written in, chosen by its extension (any case):
    /// `.mbtiles`, `.tilepack` or `.pmtiles`; `nil` for any other name.
    package static func named(by path: String) -> TileArchiveFormat? {
        let lower = path.lowercased()
        return allCases.first { lower.hasSuffix($0.fileExtension) }
    }

    /// The format of an output named `path`, by its extension.
    /// - Throws: ``TileArchiveError/Fault/cannotWrite(_:)`` for a name of no format, saying which to use.
    public init(destinationPath path: String) throws(TileArchiveError) {
        guard let format = Self.named(by: path) else {
            let choices = Self.allCases.map { "\($0.fileExtension) (\($0))" }
            throw TileArchiveError(
                path: path,
                fault: .cannotWrite(
                    "the output's extension chooses its format: use \(choices.dropLast().joined(separator: ", ")) or \(choices[choices.count - 1])"
                ))
        }
        self = format
    }

    /// Whether the format stores raw pixels (a bundle); the others hold encoded images only.
    package var storesRawPixels: Bool { self == .bundle }

    /// Recognises the file's format from its first bytes.
    /// - Throws: ``TileArchiveError`` with `notAnArchive` saying what the file looks like
    ///   (empty, PMTiles, an image, text, ...), or `cannotOpen`.
    package static func detect(path: String) throws(TileArchiveError) -> TileArchiveFormat {
        if let info = FileSystem.stat(path), (info.st_mode & S_IFMT) == S_IFDIR {
            throw TileArchiveError(path: path, fault: .notAnArchive(detected: "a folder (to import a tile tree use `tilepack import`)"))
        }
        // Never a blocking open: a FIFO named like an archive is named for what it is.
        let fd = try RegularFile.openForReading(path).fd
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: 16)
        let count = head.withUnsafeMutableBytes { read(fd, $0.baseAddress, 16) }
        guard count > 0 else { throw TileArchiveError(path: path, fault: .notAnArchive(detected: "an empty file")) }
        head.removeLast(16 - count)
        let sqlite = Array("SQLite format 3\0".utf8)
        if head.starts(with: sqlite) { return .mbtiles }
        if head.starts(with: BundleFormat.magic) { return .bundle }
        // PMTiles of any version (v2 begins `PM` and the 16-bit version 2): the reader names the version.
        if head.starts(with: PMTilesFormat.magic) || head.starts(with: [0x50, 0x4D, 2, 0]) { return .pmtiles }
        // A file cut inside its magic is a truncated archive of that kind: its reader says so.
        if count < BundleFormat.magic.count, BundleFormat.magic.starts(with: head) { return .bundle }
        if count < sqlite.count, sqlite.starts(with: head) { return .mbtiles }
        throw TileArchiveError(path: path, fault: .notAnArchive(detected: describe(head)))
    }

    /// What a file that is neither MBTiles nor a bundle looks like.
    static func describe(_ head: [UInt8]) -> String {
        if head.starts(with: Array("PMTiles".utf8)) {
            let version = head.count > 7 ? head[7] : 0
            let shown =
                version >= 0x20 && version < 0x7F
                ? "'\(Character(UnicodeScalar(version)))' (0x\(String(version, radix: 16)))" : "\(version)"
            return "a PMTiles archive (spec version \(shown)); tilepack reads MBTiles and .tilepack bundles"
        }
        if let format = head.withUnsafeBytes({ TileFormat.sniff($0) }), format.isRaster {
            return "a single \(format) image, not an archive"
        }
        if head.starts(with: [0x50, 0x4B, 0x03, 0x04]) { return "a ZIP file" }
        if head.allSatisfy({ $0 == 0x09 || $0 == 0x0A || $0 == 0x0D || ($0 >= 0x20 && $0 < 0x7F) }) {
            return "a text file"
        }
        return "a file of unknown format (first bytes \(head.prefix(8).map { String(format: "%02x", $0) }.joined(separator: " ")))"
    }
}

/// Opens an MBTiles file, a bundle or a PMTiles archive, whichever the bytes say it is.
/// - Parameter bundleAccess: how a bundle is read: mapped (an app's own files), or with
///   `pread` (`.positionalReads`: tools reading files another process may cut).
/// - Parameter mbtiles: how an MBTiles file is opened (for example `immutable` for a file that
///   changes only by being replaced).
public func openTileArchive(
    path: String, bundleAccess: BundleArchive.Access = .memoryMap,
    mbtiles: MBTilesOpenOptions = MBTilesOpenOptions()
) throws(TileArchiveError) -> any TileArchive {
    switch try TileArchiveFormat.detect(path: path) {
    case .mbtiles: try MBTilesArchive(path: path, options: mbtiles)
    case .bundle: try BundleArchive(path: path, options: BundleArchive.Options(access: bundleAccess))
    case .pmtiles: try PMTilesArchive(path: path)
    }
}

/// Opens a sink that writes a new archive at `path` in `format`, or a tile tree, or adds tiles to
/// an MBTiles file (``TileSinkOptions/append``): the one door for writing, as
/// ``openTileArchive(path:bundleAccess:mbtiles:)`` is the one for reading. The sink stages
/// the output beside `path` and alone puts it in place (``TileSink/finish(metadata:)``); dropped
/// or cancelled before, it leaves no file behind.
/// - Parameter metadata: what is known before the tiles (an MBTiles file's name, at least);
///   ``TileSink/finish(metadata:)`` gives the rest.
/// - Throws: ``TileArchiveError`` naming `path`: `alreadyExists` (without
///   ``TileSinkOptions/overwrite``), `cannotWrite` for an append to a file written in one pass,
///   `io` for a folder that takes no new file, an MBTiles writer's `invalidMetadata`.
public func openTileSink(
    path: String, format: TileSinkFormat, metadata: TileMetadata = TileMetadata(), options: TileSinkOptions = TileSinkOptions()
) throws(TileArchiveError) -> TileSink {
    try TileSink(path: path, format: format, metadata: metadata, options: options)
}
