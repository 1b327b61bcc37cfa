// The code of the article "Syncing in the background" (Sources/Tilepack/Tilepack.docc), compiled
// here (on Linux with FoundationNetworking's URLSession, which has no background sessions) and run
// by DocSampleTests. tools/check-docs.sh checks that the article shows the lines between the
// markers, unchanged.
// docs:begin
import Foundation
import Tilepack
import TilepackRemote

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Downloads the units of a sync plan with a URLSession (a background one on Apple platforms),
/// each unit a plain range request saved as a file in `units.folder`. The system runs the
/// downloads while the app is suspended or killed; on relaunch, a session made with the same
/// identifier delivers the ones that finished to this delegate.
final class UnitDownloads: NSObject, URLSessionDownloadDelegate, @unchecked Sendable {
    let units: DeliveredUnits
    let plan: SyncPlan
    let url: URL
    var session: URLSession!

    init(plan: SyncPlan, url: URL, folder: String, identifier: String) {
        self.plan = plan
        self.url = url
        units = DeliveredUnits(folder: folder)
        super.init()
        session = URLSession(configuration: Self.configuration(identifier), delegate: self, delegateQueue: nil)
    }

    static func configuration(_ identifier: String) -> URLSessionConfiguration {
        #if canImport(Darwin)
        let configuration = URLSessionConfiguration.background(withIdentifier: identifier)
        configuration.sessionSendsLaunchEvents = true
        return configuration
        #else
        return .default  // FoundationNetworking has no background sessions
        #endif
    }

    /// Starts a download for every unit not saved yet (after a relaunch, only those).
    func start() {
        for unit in plan.units where !FileManager.default.fileExists(atPath: units.path(of: unit)) {
            var request = URLRequest(url: url)
            request.setValue(unit.rangeHeader, forHTTPHeaderField: "Range")
            if let etag = plan.etag { request.setValue(etag, forHTTPHeaderField: "If-Match") }
            let task = session.downloadTask(with: request)
            task.taskDescription = unit.fileName
            task.resume()
        }
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        // Only a 206 answer is the unit; anything else is left out, and the sync names it.
        guard let name = downloadTask.taskDescription, (downloadTask.response as? HTTPURLResponse)?.statusCode == 206 else { return }
        let saved = URL(fileURLWithPath: units.folder).appendingPathComponent(name)
        try? FileManager.default.removeItem(at: saved)
        try? FileManager.default.moveItem(at: location, to: saved)
    }
}

/// Step 1, in the foreground: the plan (the archive's directories and index are read; no tile),
/// kept as JSON beside the archive so that the app finds it again after a relaunch.
func planSync(_ path: String, from url: String) throws -> SyncPlan {
    let plan = try ArchiveSync.plan(local: path, url: url)
    try plan.encoded().write(to: URL(fileURLWithPath: path + ".plan.json"))
    return plan
}

/// Step 3, once the downloads are done (in this process or a later one): the units are checked
/// against the index's tile hashes, and the new version replaces the archive. A unit missing or
/// with other bytes is named in the error; download it again and apply again.
func applySync(_ path: String, from url: String, folder: String) throws -> SyncReport {
    let report = try ArchiveSync.run(local: path, url: url, transport: DeliveredUnits(folder: folder))
    try? FileManager.default.removeItem(atPath: folder)
    try? FileManager.default.removeItem(atPath: path + ".plan.json")
    return report
}
// docs:end
