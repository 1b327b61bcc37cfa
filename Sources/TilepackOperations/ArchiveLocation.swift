import Foundation
import TilepackCore
import TilepackStorage

/// Opens the archive an operation reads: a path on this machine (MBTiles, bundle or PMTiles,
/// recognised by its bytes).
public enum ArchiveLocation {
    public static func open(_ location: String) throws(OperationError) -> any TileArchive {
        do {
            return try openTileArchive(path: location)
        } catch {
            throw OperationError(path: location, fault: .archive(error))
        }
    }

    /// The file name without its extension (a default `name` for metadata that has none).
    public static func baseName(_ location: String) -> String {
        let last = location.split(separator: "/").last.map(String.init) ?? location
        guard let dot = last.lastIndex(of: "."), dot != last.startIndex else { return last }
        return String(last[..<dot])
    }
}
