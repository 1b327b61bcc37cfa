import Foundation
import TilepackCore
import TilepackRemote
import TilepackStorage

/// Opens the archive an operation reads: a path on this machine (MBTiles, bundle or PMTiles,
/// recognised by its bytes), or an `http(s)://` URL (PMTiles or a bundle, read by range requests).
package enum ArchiveLocation {
    /// Whether `location` is an http(s) URL.
    package static func isRemote(_ location: String) -> Bool { RemoteArchive.isRemote(location) }

    /// - Parameter bundleAccess: how a local bundle is read; tools read with `pread`, as another
    ///   process may cut the file (see `openTileArchive(path:bundleAccess:)`).
    package static func open(_ location: String, bundleAccess: BundleArchive.Access = .positionalReads) throws(OperationError)
        -> any TileArchive
    {
        do {
            if isRemote(location) { return try RemoteArchive.open(location) }
            return try openTileArchive(path: location, bundleAccess: bundleAccess)
        } catch {
            throw OperationError(path: location, fault: .archive(error))
        }
    }

    /// Has `note` told when a remote archive is pinned by less than an ETag (its Last-Modified and
    /// size, or its size alone): what a replacement underneath can still go unnoticed by.
    package static func reportPinning(to note: @escaping @Sendable (String) -> Void) {
        HTTPByteSource.notes.withLock { $0 = note }
    }

    /// The file name without its extension (a default `name` for metadata that has none).
    package static func baseName(_ location: String) -> String {
        let last = location.split(separator: "/").last.map(String.init) ?? location
        guard let dot = last.lastIndex(of: "."), dot != last.startIndex else { return last }
        return String(last[..<dot])
    }
}
