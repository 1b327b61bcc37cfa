// The code of the article "Updating an archive while it is shown" (Sources/Tilepack/Tilepack.docc),
// compiled here and run by DocSampleTests. tools/check-docs.sh checks that the article shows the
// lines between the markers, unchanged.
// docs:begin
import Tilepack
import TilepackRemote

/// Applies the patch at `patchPath` to the archive at `path`, which `source` serves to `layer`,
/// in the background; `progress` hears how far it is. When the new version is in place, the
/// source opens it and the layer reloads, drawing the old tiles until each new one arrives.
func applyPatch(
    _ patchPath: String, to path: String, shownBy source: ArchiveTileSource, in layer: MapTileLayer,
    progress: @escaping @Sendable (Double) -> Void
) async throws -> PatchReport {
    // The patch runs on a thread of its own; the callback hears every step forward (the
    // progress never goes back) and the end. request.cancel() stops it.
    let request = PatchRequest.start(base: path, patch: patchPath) { request in
        progress(request.progress)
    }
    return try await showWhenDone(request, path: path, shownBy: source, in: layer)
}

/// Brings the archive at `path` to the version published at `url`, an https:// URL or an
/// s3://BUCKET/KEY object read with the app's own client `s3` (its endpoint, region and
/// credentials provider, as for reading a remote archive). With the publisher's tile index beside
/// it (`tilepack index`), only the tiles whose bytes changed are downloaded. With the publisher's
/// public key (`SyncKey(key: try VerifierKey(contentsOf: "publisher.pub"))`), the publisher's
/// signature (`url.tpsig`) must be of the key and of a release no older than the copy's own
/// (`path.tpsig`, replaced with it), and every tile is checked against it before the copy is replaced.
func syncArchive(
    _ path: String, from url: String, s3: S3Client? = nil, key: SyncKey? = nil, shownBy source: ArchiveTileSource,
    in layer: MapTileLayer, progress: @escaping @Sendable (Double) -> Void
) async throws -> SyncReport {
    let request = SyncRequest.start(local: path, url: url, s3: s3, key: key) { request in
        progress(request.progress)
    }
    return try await showWhenDone(request, path: path, shownBy: source, in: layer)
}

/// Waits for a patch or a sync without holding a thread and, when it succeeded, shows the new version.
func showWhenDone<Report>(
    _ request: BackgroundRequest<Report>, path: String, shownBy source: ArchiveTileSource, in layer: MapTileLayer
) async throws -> Report {
    // Meanwhile the layer draws the archive as it was: the new version replaces it whole.
    guard await request.finished() == .success, let report = request.report else {
        // .failure or .cancelled: the archive is as it was, and the error names the file and
        // the fault (a patch for another version, a damaged patch, a store that changed the
        // object mid-sync, a full disk, a cancel).
        throw request.error ?? OperationError(path: path, fault: .io("the update ended without a report"))
    }

    // The new version, drawn tile by tile over the old one: no blank frame.
    try source.reopen(reloading: [layer])
    return report
}
// docs:end
