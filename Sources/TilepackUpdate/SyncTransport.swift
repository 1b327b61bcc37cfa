import Foundation
import TilepackCore
import TilepackStorage

/// Who moves a ``SyncPlan``'s units (Specs/updates.md §8.1): tilepack's own HTTP transport (the
/// command's `sync`), or an app's downloader (a background `URLSession` on Apple platforms). A
/// transport fetches the units it is given in any order, any number at a time, and hands each
/// one's bytes to `deliver` as it arrives; the sync records them in its journal (`LOCAL.tpsync`)
/// and checks their tiles against the index's hashes before anything replaces the local copy. A
/// unit delivered twice is kept once; one delivered with other bytes is named and fetched again;
/// one not delivered is named. A transport that throws stops the sync with what arrived kept: the
/// next sync of the same version asks only for the units that did not arrive.
public protocol SyncTransport: Sendable {
    func transfer(_ units: [TransferUnit], of plan: SyncPlan, deliver: (TransferUnit, Data) throws -> Void) throws
}

/// The units an app's downloader saved as files in a folder (``TransferUnit/fileName``), delivered
/// from there: what a background download left behind, across any number of process restarts.
/// A unit without its file is not delivered (the sync names it).
public struct DeliveredUnits: SyncTransport {
    /// The folder the downloader saved the units in.
    public var folder: String

    public init(folder: String) { self.folder = folder }

    /// Where the downloader saves `unit`.
    public func path(of unit: TransferUnit) -> String { (folder as NSString).appendingPathComponent(unit.fileName) }

    public func transfer(_ units: [TransferUnit], of plan: SyncPlan, deliver: (TransferUnit, Data) throws -> Void) throws {
        for unit in units {
            // A unit is at most 8 MiB (SyncPlan.maximumUnitBytes); a longer file is not it.
            guard let size = FileSystem.stat(path(of: unit))?.st_size, Int(size) == unit.length,
                let data = FileManager.default.contents(atPath: path(of: unit))
            else { continue }
            try deliver(unit, data)
        }
    }
}

extension TransferUnit {
    /// The name a downloader saves the unit under: `unit-ID-FIRST-LENGTH` (the range in it, so that
    /// a file of another plan's unit is not taken for it).
    public var fileName: String { "unit-\(id)-\(offset)-\(length)" }
}
