import Foundation
import Testing
import Tilepack
import TilepackOperations
import TilepackTestSupport

/// Runs the code of each DocC article (the files beside this one) against the sample archive and
/// a loopback tile server, so that an article's code both compiles and does what its text says.
@Suite struct DocSampleTests {
    static let sampleArchive = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path

    @Test func readingTilesGivesTheTileInTheAppsPixelFormat() throws {
        let bitmap = try #require(try readOneTile(path: Self.sampleArchive))
        #expect(bitmap.width == 256 && bitmap.height == 256 && bitmap.pixelFormat == .bgra8888Premultiplied)
        // The same pixels as the tile decoded on its own (the sample tiles are opaque).
        let rgba = try #require(
            try openTileArchive(path: Self.sampleArchive)
                .bitmap(at: TileCoordinate(zoom: 1, x: 1, y: 0), pixelFormat: .rgba8888))
        for (x, y) in [(0, 0), (17, 200), (128, 128), (255, 255)] {
            #expect(bitmap.pixel(x: x, y: y) == rgba.pixel(x: x, y: y))
        }
        #expect(throws: TileArchiveError.self) { try readOneTile(path: Self.sampleArchive + ".missing") }
    }

    @Test func aSideLoadedPackIsServedOnlyWithItsPublishersKeyAndRelease() throws {
        let dir = try TemporaryDirectory("side-loaded")
        let pack = dir.file("sample.tilepack")
        try FileManager.default.copyItem(atPath: Self.sampleArchive, toPath: pack)
        // The publisher's key of the article's line (its seed: SHA-256 of "tilepack doc sample").
        let seed = [UInt8](Data(base64Encoded: "lm6T8okbeq2YUpGiYVAW+UVKTYsuggKqg4MxiMK679M=")!)
        let publisher = try #require(SigningKey(name: "maps.example.org/sample", seed: seed))
        #expect(publisher.verifier.line == publisherKey + "\n")
        _ = try ArchiveSignature.sign(archivePath: pack, key: publisher, release: 3, time: 0)

        let source = try openSignedPack(path: pack, lowestRelease: 3)
        #expect((source.archive as? VerifiedTileArchive)?.root.treeSize == 341)
        #expect(try source.archive.tileData(at: TileCoordinate(zoom: 4, x: 3, y: 5)) != nil)
        #expect(throws: SignatureError.self) { try openSignedPack(path: pack, lowestRelease: 4) }
        let other = try SigningKey.generate(name: "maps.example.org/sample")
        #expect(throws: SignatureError.self) { try openSignedPack(path: pack, lowestRelease: 0, key: other.verifier.line) }
    }

    @Test func showingAnArchiveDrawsItsTilesAtTheScreensScale() async throws {
        let frame = try await showArchive(path: Self.sampleArchive, timeout: TestSupport.settleSeconds)
        #expect(frame.bitmap.width == 1024 && frame.bitmap.height == 1024)
        #expect(!frame.drawn.isEmpty)
        #expect(frame.drawn.allSatisfy { !$0.isApproximate })
    }

    @Test func prefetchingCancelsWhereAskedAndTheSameCallResumes() async throws {
        let tiles = TestSupport.packageRoot.appendingPathComponent("samples/tiles")
        let files = LoopbackHTTPServer.fileHandler(root: tiles)
        // While `holding`, a zoom-4 tile asked for a second time (the estimate samples it first)
        // is answered only when the test lets go: the first fetch cannot end before its cancel,
        // however late the machine delivers its first progress event.
        let holding = Locked(true)
        let asked = Locked(Set<String>())
        let server = try LoopbackHTTPServer { request in
            let again = !asked.withLock { $0.insert(request.path).inserted }
            if again && request.path.hasPrefix("/4/") {
                let deadline = Date().addingTimeInterval(30)
                while holding.withLock({ $0 }) && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
            }
            return files(request)
        }
        defer { server.stop() }
        let directory = try TemporaryDirectory("doc-prefetch")
        let store = directory.file("europe.mbtiles")
        let template = server.baseURL + "/{z}/{x}/{y}.png"

        let cancelled = try #require(try await prefetchEurope(template: template, storePath: store, cancelAt: 0.05))
        holding.withLock { $0 = false }
        #expect(cancelled.status == .cancelled)
        #expect(cancelled.downloaded > 0 && cancelled.downloaded < cancelled.tiles)

        let resumed = try #require(try await prefetchEurope(template: template, storePath: store))
        #expect(resumed.status == .success)
        #expect(resumed.tiles == cancelled.tiles && resumed.absent == 0)
        #expect(resumed.alreadyPresent >= cancelled.downloaded && resumed.downloaded == resumed.tiles - resumed.alreadyPresent)

        // The store holds every tile of the area, byte for byte as the server sent it.
        let archive = try openTileArchive(path: store)
        #expect(try archive.tileCount() == resumed.tiles)
        let tile = try TileCoordinate(zoom: 4, x: 8, y: 5)
        let served = try Data(contentsOf: tiles.appendingPathComponent("4/8/5.png"))
        #expect(try archive.tileData(at: tile) == served)
    }

    @Test func planningADownloadFetchesThePlanTheUserSawWithinTheBudget() async throws {
        let tiles = TestSupport.packageRoot.appendingPathComponent("samples/tiles")
        let server = try LoopbackHTTPServer(files: tiles)
        defer { server.stop() }
        let directory = try TemporaryDirectory("doc-plan")
        let store = directory.file("planned.mbtiles")
        let template = server.baseURL + "/{z}/{x}/{y}.png"
        let bern = GeoCoordinate(latitude: 46.95, longitude: 7.45)
        // Declined: nothing is stored.
        let declined = try await downloadWithinSpace(template: template, storePath: store, freeBytes: 90_000, home: bern) { _ in false }
        let nothing = try openTileArchive(path: store).tileCount()
        #expect(declined == nil && nothing == 0)
        var shown: TilePlan?
        let report = try #require(
            try await downloadWithinSpace(template: template, storePath: store, freeBytes: 90_000, home: bern) { plan in
                shown = plan
                return true
            })
        let plan = try #require(shown)
        let budget = try #require(report.budget)
        #expect(report.status == .success && budget.plannedTiles == plan.tiles && budget.deepestZoom == plan.deepestZoom, "\(report)")
        // Deeper around home than elsewhere, and within the budget.
        #expect((plan.deepestZoom ?? 0) > (plan.completeZoom ?? 0) && plan.predictedSize + plan.margin <= 90_000, "\(plan)")
        let archive = try openTileArchive(path: store)
        var bytes = 0, stored = 0
        try archive.forEachTile { _, data in
            bytes += data.count
            stored += 1
        }
        #expect(bytes <= 90_000 && stored == report.downloaded && stored <= plan.tiles, "\(stored) tiles, \(bytes) bytes stored")
    }

    /// The colour the new version of the updating article's tests draws tile 1/1/0 in.
    static let blue = RGBA8(r: 20, g: 60, b: 200)

    /// The sample as `map.tilepack` in `directory` and its new version in `new`: tile 1/1/0
    /// re-rendered in one blue; a layer showing `map.tilepack` in a view of zoom 1, where tile
    /// 1/1/0 is the view's north-east quarter, drawn once (not blue).
    static func shownSample(in directory: TemporaryDirectory, new: String) async throws
        -> (base: String, source: ArchiveTileSource, layer: MapTileLayer, view: HeadlessMapView)
    {
        let base = directory.file("map.tilepack")
        try FileManager.default.copyItem(atPath: Self.sampleArchive, toPath: base)
        let changed = try TileCoordinate(zoom: 1, x: 1, y: 0)
        let old = try openTileArchive(path: base)
        let writer = try BundleWriter(destination: new, content: try #require(old.content), metadata: try old.metadata())
        try old.forEachTile { tile, bytes in
            if tile == changed {
                let png = try PNGEncoder.encode(Bitmap(width: 256, height: 256, pixelFormat: .rgba8888, fill: blue))
                try Array(png).withUnsafeBytes { try writer.addTile(at: tile, bytes: $0) }
            } else {
                try writer.addTile(at: tile, bytes: bytes)
            }
        }
        _ = try writer.finish()
        let source = try ArchiveTileSource(path: base)
        let layer = source.makeLayer(pixelFormat: .rgba8888)
        let view = HeadlessMapView(viewport: ViewportSize(width: 512, height: 512), zoomLevel: 1)
        view.addMapTileLayer(layer)
        #expect(await view.render(timeout: TestSupport.settleSeconds).bitmap.pixel(x: 384, y: 128) != blue)
        return (base, source, layer, view)
    }

    @Test func applyingAPatchToAShownArchiveSwitchesItsLayerToTheNewVersion() async throws {
        let directory = try TemporaryDirectory("doc-patch")
        let new = directory.file("v2.tilepack")
        let (base, source, layer, view) = try await Self.shownSample(in: directory, new: new)
        let blue = Self.blue
        let patch = directory.file("v1-v2.tppatch")
        _ = try ArchiveDiff.run(old: base, new: new, patch: patch)
        let seen = Locked<[Double]>([])
        let report = try await applyPatch(patch, to: base, shownBy: source, in: layer) { value in seen.withLock { $0.append(value) } }
        #expect(report.tilesWritten == 1)
        let values = seen.withLock { $0 }
        #expect(zip(values, values.dropFirst()).allSatisfy { $0 <= $1 } && values.last == 1, "\(values)")
        #expect(await view.render(timeout: TestSupport.settleSeconds).bitmap.pixel(x: 384, y: 128) == blue)
        #expect(try ContentIdentity.compute(openTileArchive(path: base)) == ContentIdentity.compute(openTileArchive(path: new)))
        // Applied again: the archive is already the version the patch makes; nothing is written.
        let bytes = FileManager.default.contents(atPath: base)
        #expect(try await applyPatch(patch, to: base, shownBy: source, in: layer) { _ in }.alreadyApplied)
        #expect(FileManager.default.contents(atPath: base) == bytes)
    }

    @Test(.needs(.nginx)) func syncingAShownArchiveFromItsPublisherSwitchesItsLayerToTheNewVersion() async throws {
        let directory = try TemporaryDirectory("doc-sync")
        let www = try TemporaryDirectory("doc-sync-www")
        let new = www.file("v2.tilepack")
        let (base, source, layer, view) = try await Self.shownSample(in: directory, new: new)
        _ = try ArchiveIndexer.run(archive: new)
        let server = try NginxServer(root: www.url)
        defer { server.stop() }
        let seen = Locked<[Double]>([])
        let report = try await syncArchive(base, from: "\(server.baseURL)/v2.tilepack", shownBy: source, in: layer) { value in
            seen.withLock { $0.append(value) }
        }
        // Only the re-rendered tile came over the wire.
        #expect(report.mode == "index" && report.tilesFetched == 1, "\(report)")
        let values = seen.withLock { $0 }
        #expect(zip(values, values.dropFirst()).allSatisfy { $0 <= $1 } && values.last == 1, "\(values)")
        #expect(await view.render(timeout: TestSupport.settleSeconds).bitmap.pixel(x: 384, y: 128) == Self.blue)
        #expect(try ContentIdentity.compute(openTileArchive(path: base)) == ContentIdentity.compute(openTileArchive(path: new)))
        // A publisher that has no such archive: an error naming it, the archive as it is.
        let before = FileManager.default.contents(atPath: base)
        await #expect(throws: OperationError.self) {
            _ = try await syncArchive(base, from: "\(server.baseURL)/gone.tilepack", shownBy: source, in: layer) { _ in }
        }
        #expect(FileManager.default.contents(atPath: base) == before)
    }

    /// The background article: the plan, its units downloaded by URLSession (FoundationNetworking's
    /// on Linux) as files, then applied; the archive is the new version.
    @Test(.needs(.nginx)) func syncingInTheBackgroundDownloadsTheUnitsThenAppliesThem() async throws {
        let directory = try TemporaryDirectory("doc-background")
        let www = try TemporaryDirectory("doc-background-www")
        let new = www.file("v2.tilepack")
        let (base, _, _, _) = try await Self.shownSample(in: directory, new: new)
        _ = try ArchiveIndexer.run(archive: new)
        let server = try NginxServer(root: www.url)
        defer { server.stop() }
        let url = "\(server.baseURL)/v2.tilepack"
        let plan = try planSync(base, from: url)
        #expect(plan.units.count == 1 && plan.changedBytes > 0, "\(plan)")
        let folder = directory.file("units")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let downloads = UnitDownloads(plan: plan, url: URL(string: url)!, folder: folder, identifier: "doc-background")
        downloads.start()
        for _ in 0..<300 where !plan.units.allSatisfy({ FileManager.default.fileExists(atPath: downloads.units.path(of: $0)) }) {
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        downloads.session.finishTasksAndInvalidate()
        let report = try applySync(base, from: url, folder: folder)
        #expect(report.tilesFetched == 1 && report.planUnits == 1, "\(report)")
        #expect(try ContentIdentity.compute(openTileArchive(path: base)) == ContentIdentity.compute(openTileArchive(path: new)))
        #expect(!FileManager.default.fileExists(atPath: folder))
    }
}
