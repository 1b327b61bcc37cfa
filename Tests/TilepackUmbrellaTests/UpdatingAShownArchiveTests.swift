import Foundation
import Testing
import Tilepack
import TilepackOperations
import TilepackRemote
import TilepackTestSupport

/// Issue 30, item 6: a patch applied (``PatchRequest``) or a sync run (`SyncRequest`, from nginx
/// on loopback) while a tile layer shows the archive through the adapter. Every frame drawn while
/// it runs and after it is complete (every tile in view drawn, none approximate or missing), and
/// each tile shows the old version until it shows the new one, never back.
@Suite struct UpdatingAShownArchiveTests {
    /// The view: zoom 3, 512 x 512 points, the 2 x 2 tiles around (0.25, 0.25) of the world.
    static let shown: [TileCoordinate] = [(1, 1), (2, 1), (1, 2), (2, 2)].map { TileCoordinate(validatingZoom: 3, x: $0.0, y: $0.1)! }

    /// Whether v2 re-renders `tile`: two of the four shown, and a scattered share of the rest.
    static func changed(_ tile: TileCoordinate) -> Bool { (tile.x + tile.y) % 2 == 0 }

    /// A shown tile's colour: its red and blue say which tile, its green which version.
    static func colour(_ tile: TileCoordinate, version: Int) -> RGBA8 {
        RGBA8(r: UInt8(30 * tile.x), g: version == 2 && changed(tile) ? 220 : 40, b: UInt8(30 * tile.y))
    }

    /// The tiles of version `v` in `path` (its format by extension): the shown zoom 3 as solid
    /// PNGs, and 2,400 tiles of zoom 7 (PNG-signed noise: the bulk a patch pass reads) of which
    /// v2 re-renders a ninth and deletes ten.
    static func write(version: Int, to path: String, in dir: TemporaryDirectory) throws {
        let raw = dir.file("raw-\(version).tilepack")
        let writer = try BundleWriter(
            destination: raw, content: .encoded(.png), metadata: TileMetadata(["name": "shown", "format": "png", "version": "\(version)"]))
        for x in 0..<8 {
            for y in 0..<8 {
                let tile = TileCoordinate(validatingZoom: 3, x: x, y: y)!
                let bitmap = Bitmap(width: 256, height: 256, pixelFormat: .rgba8888, fill: colour(tile, version: version))
                try Array(try PNGEncoder.encode(bitmap)).withUnsafeBytes { try writer.addTile(at: tile, bytes: $0) }
            }
        }
        for i in 0..<2400 where version == 1 || i >= 10 {
            // Spread over the rows, so that the archive's bounds (the layer's) hold the shown tiles.
            let tile = TileCoordinate(validatingZoom: 7, x: i % 128, y: 6 * (i / 128))!
            var random = SplitMix64(seed: UInt64(i) &+ (version == 2 && i % 9 == 0 ? 1_000_000 : 0))
            // 600 to 1,200 bytes, 8 at a time (a debug build draws a byte at a time slowly).
            var words = [UInt64](repeating: 0, count: 75 + Int(random.next() % 75))
            for w in words.indices { words[w] = random.next() }
            words[0] = 0x0A1A_0A0D_474E_5089  // PNG's signature, little-endian
            try words.withUnsafeBytes { try writer.addTile(at: tile, bytes: $0) }
        }
        _ = try writer.finish()
        _ = try ArchiveConverter.run(source: raw, destination: path, options: ConvertOptions())
        try FileManager.default.removeItem(atPath: raw)
    }

    /// v1 as `map.EXT` and v2 as `v2.EXT` in a new folder, and the patch between them.
    static func patched(_ ext: String, _ name: String) throws -> (TemporaryDirectory, base: String, new: String, patch: String) {
        let dir = try TemporaryDirectory(name)
        let base = dir.file("map.\(ext)"), new = dir.file("v2.\(ext)"), patch = dir.file("v1-v2.tppatch")
        try write(version: 1, to: base, in: dir)
        try write(version: 2, to: new, in: dir)
        _ = try ArchiveDiff.run(old: base, new: new, patch: patch)
        return (dir, base, new, patch)
    }

    /// What a frame shows of each shown tile: its version (by the colour at its centre), or
    /// `nil` where the frame does not show it drawn whole.
    static func versions(in frame: MapFrame) -> [TileCoordinate: Int?] {
        var seen: [TileCoordinate: Int?] = [:]
        for tile in shown {
            let real = frame.drawn.contains { $0.tile == tile && !$0.isApproximate && $0.opacity == 1 }
            // Tile (x, y) of zoom 3 covers view pixels from (256 (x - 1), 256 (y - 1)).
            let pixel = frame.bitmap.pixel(x: 256 * (tile.x - 1) + 128, y: 256 * (tile.y - 1) + 128)
            let version = [1, 2].first { colour(tile, version: $0) == pixel }
            seen[tile] = real ? version : nil
        }
        return seen
    }

    /// Shows `path` in a layer, runs `update` (which starts a request and returns it), draws
    /// frames while it runs, reopens the source when it succeeded, and draws until the frames
    /// show v2; checks every frame.
    func check(_ path: String, update: (@escaping @Sendable () -> Void) async -> BackgroundStatus) async throws {
        let source = try ArchiveTileSource(path: path)
        let layer = source.makeLayer()
        let view = HeadlessMapView(
            viewport: ViewportSize(width: 512, height: 512),
            center: WebMercator.coordinate(atWorldPoint: MercatorPoint(x: 0.25, y: 0.25)), zoomLevel: 3)
        view.addMapTileLayer(layer)
        let first = await view.render(timeout: TestSupport.settleSeconds)
        #expect(Self.versions(in: first) == Dictionary(uniqueKeysWithValues: Self.shown.map { ($0, 1) }))

        let frames = Locked<[[TileCoordinate: Int?]]>([])
        let draw: @Sendable () -> Void = {
            view.update()
            let frame = view.renderFrame(settled: true)
            frames.withLock { $0.append(Self.versions(in: frame)) }
        }
        let status = await update(draw)
        #expect(status == .success)
        let during = frames.withLock { $0.count }
        try source.reopen(reloading: [layer])
        let deadline = Date().addingTimeInterval(TestSupport.settleSeconds)
        while Date() < deadline {
            draw()
            if let last = frames.withLock({ $0.last }), Self.shown.allSatisfy({ last[$0] == (Self.changed($0) ? 2 : 1) }) { break }
            try await Task.sleep(for: .milliseconds(2))
        }
        let all = frames.withLock { $0 }
        #expect(during > 2, "only \(during) frames drawn while the update ran")
        #expect(all.count > during)
        // Complete: every shown tile drawn whole, in a known version, in every frame.
        for (i, frame) in all.enumerated() {
            #expect(Self.shown.allSatisfy { frame[$0] != nil && frame[$0]! != nil }, "frame \(i): \(frame)")
        }
        // While it ran: v1 throughout. Then, tile by tile, v1 until v2 (never back), and v2 at the end.
        #expect(all.prefix(during).allSatisfy { frame in Self.shown.allSatisfy { frame[$0] == 1 } })
        for tile in Self.shown {
            let seen = all.compactMap { $0[tile] ?? nil }
            let expected = Self.changed(tile) ? 2 : 1
            #expect(zip(seen, seen.dropFirst()).allSatisfy { $0 <= $1 } && seen.last == expected, "\(tile): \(seen)")
        }
    }

    @Test(arguments: ["tilepack", "mbtiles", "pmtiles"])
    func aLayerShowingAPatchedArchiveDrawsTheOldVersionThenTheNewWithoutABlankFrame(_ ext: String) async throws {
        let (dir, base, new, patch) = try Self.patched(ext, "shown-patch")
        defer { withExtendedLifetime(dir) {} }  // the files live as long as the directory value
        try await check(base) { draw in
            let seen = Locked<[Double]>([])
            let request = PatchRequest.start(base: base, patch: patch) { request in
                seen.withLock { $0.append(request.progress) }
                if request.status == .inProgress { draw() }
            }
            let status = await request.finished()
            let values = seen.withLock { $0 }
            #expect(zip(values, values.dropFirst()).allSatisfy { $0 <= $1 } && values.last == 1, "\(values)")
            #expect(request.error == nil && request.report?.tilesWritten ?? 0 > 250, "\(String(describing: request.error))")
            return status
        }
        #expect(try ContentIdentity.compute(openTileArchive(path: base)) == ContentIdentity.compute(openTileArchive(path: new)))
    }

    @Test(.needs(.nginx), arguments: ["tilepack", "pmtiles"])
    func aLayerShowingASyncedArchiveDrawsTheOldVersionThenTheNewWithoutABlankFrame(_ ext: String) async throws {
        let dir = try TemporaryDirectory("shown-sync")
        let www = try TemporaryDirectory("shown-sync-www")
        let local = dir.file("map.\(ext)")
        try Self.write(version: 1, to: local, in: dir)
        try Self.write(version: 2, to: www.file("v2.\(ext)"), in: dir)
        _ = try ArchiveIndexer.run(archive: www.file("v2.\(ext)"))
        let server = try NginxServer(root: www.url)
        defer { server.stop() }
        try await check(local) { draw in
            let request = SyncRequest.start(local: local, url: "\(server.baseURL)/v2.\(ext)") { request in
                if request.status == .inProgress { draw() }
            }
            let status = await request.finished()
            #expect(request.error == nil && request.report?.tilesFetched ?? 0 > 250, "\(String(describing: request.error))")
            return status
        }
    }

    @Test func aCancelledPatchLeavesTheBaseAsItWasAndSaysSo() async throws {
        let (dir, base, new, patch) = try Self.patched("tilepack", "shown-cancel")
        let before = FileManager.default.contents(atPath: base)
        let request = PatchRequest.start(base: base, patch: patch) { request in
            if request.progress > 0.2 { request.cancel() }
        }
        #expect(await request.finished() == .cancelled)
        #expect(request.error?.description.contains("the patch was cancelled") == true, "\(String(describing: request.error))")
        #expect(request.progress < 1 && request.report == nil)
        #expect(FileManager.default.contents(atPath: base) == before)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: dir.url.path).sorted() == ["map.tilepack", "v1-v2.tppatch", "v2.tilepack"])
        // Given the version it makes: nothing to do, nothing written, no failure.
        let again = PatchRequest.start(base: new, patch: patch)
        #expect(await again.finished() == .success && again.report?.alreadyApplied == true)
        // A patch that does not fit fails with the patch's typed error, not as cancelled.
        let v3 = dir.file("v3.tilepack")
        try Self.write(version: 3, to: v3, in: dir)
        let other = PatchRequest.start(base: v3, patch: patch)
        #expect(await other.finished() == .failure)
        #expect(other.error?.description.contains(v3) == true, "\(String(describing: other.error))")
    }
}
