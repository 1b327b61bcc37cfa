import Foundation
import Synchronization
import Testing
import TilepackCore
import TilepackImaging
import TilepackTestSupport

@testable import TileLayer

/// Counts synchronous requests; answers a colour per tile.
final class CountingSource: MapTileLayerDataSource {
    let count = Atomic<Int>(0)
    let color: RGBA8
    init(_ color: RGBA8 = green) { self.color = color }
    func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData {
        count.add(1, ordering: .relaxed)
        return .bitmap(Data(solid(color, size: layer.tileSize, format: layer.pixelFormat).pixels))
    }
    var calls: Int { count.load(ordering: .relaxed) }
}

/// A zoom-1 view of the whole world (4 tiles), drawn once with `layer`, which is then removed.
func renderWorldOnce(_ layer: MapTileLayer, clock: ManualClock? = nil) async -> MapFrame {
    let view = HeadlessMapView(
        viewport: ViewportSize(width: 512, height: 512), zoomLevel: 1,
        clock: clock?.function ?? HeadlessMapView.uptime)
    view.addMapTileLayer(layer)
    let frame = await settledFrame(view)
    view.removeMapTileLayer(layer)
    return frame
}

@Suite("Disk cache")
struct DiskCacheTests {
    @Test("persistent: a new layer with the same identifier is served from disk without asking its source")
    func persistent() async throws {
        let root = try TemporaryDirectory()
        let first = CountingSource(green)
        let layer = makeLayer(first, cacheRoot: root)
        layer.setCacheEnabled(true, identifier: "Persist")
        #expect(await renderWorldOnce(layer).drawn.count == 4)
        #expect(first.calls == 4)
        for (x, y) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            #expect(FileManager.default.fileExists(atPath: root.file("Persist/1/\(x)/\(y).tile")))
        }
        let second = CountingSource(red)
        let again = makeLayer(second, cacheRoot: root)
        again.setCacheEnabled(true, identifier: "Persist")
        let frame = await renderWorldOnce(again)
        #expect(second.calls == 0)
        #expect(frame.bitmap.pixel(x: 100, y: 100) == green)
        // Cache disabled: the source is asked.
        let off = makeLayer(second, cacheRoot: root)
        _ = await renderWorldOnce(off)
        #expect(second.calls == 4)
    }

    @Test("the folder is the sanitised identifier; the first identifier sticks")
    func folderName() async throws {
        let root = try TemporaryDirectory()
        let layer = makeLayer(CountingSource(), cacheRoot: root)
        layer.setCacheEnabled(true, identifier: "My Cache/../v1")
        layer.setCacheEnabled(true, identifier: "Second")
        _ = await renderWorldOnce(layer)
        #expect(FileManager.default.fileExists(atPath: root.file("MyCachev1/1/0/0.tile")))
        #expect(!FileManager.default.fileExists(atPath: root.file("Second")))
    }

    @Test("time to live: expired tiles are requested again; 0 never expires")
    func timeToLive() async throws {
        let root = try TemporaryDirectory()
        let clock = ManualClock()
        let source = CountingSource()
        let layer = makeLayer(source, cacheRoot: root, clock: clock)
        layer.setCacheEnabled(true, identifier: "ttl")
        layer.setCacheTimeToLive(60)
        _ = await renderWorldOnce(layer, clock: clock)
        #expect(source.calls == 4)
        clock.advance(59)
        _ = await renderWorldOnce(layer, clock: clock)
        #expect(source.calls == 4)
        clock.advance(2)
        _ = await renderWorldOnce(layer, clock: clock)
        #expect(source.calls == 8)

        let forever = CountingSource()
        let keep = makeLayer(forever, cacheRoot: root, clock: clock)
        keep.setCacheEnabled(true, identifier: "forever")
        keep.setCacheTimeToLive(-1)  // negative: 0, never expires
        _ = await renderWorldOnce(keep, clock: clock)
        clock.advance(10 * 365 * 86_400)
        _ = await renderWorldOnce(keep, clock: clock)
        #expect(forever.calls == 4)
    }

    @Test("clearCache after removal empties the folder; tiles are requested again")
    func clear() async throws {
        let root = try TemporaryDirectory()
        let source = CountingSource()
        let layer = makeLayer(source, cacheRoot: root)
        layer.setCacheEnabled(true, identifier: "clear")
        _ = await renderWorldOnce(layer)
        #expect(try #require(layer.diskCache(layer.settings)).diskSize() > 0)
        try layer.clearCache()
        #expect(try #require(layer.diskCache(layer.settings)).diskSize() == 0)
        _ = await renderWorldOnce(layer)
        #expect(source.calls == 8)
        try MapTileLayer().clearCache()  // no identifier: nothing to clear
    }

    @Test("size limit: grows at most 5 MB past the limit, then evicts least recently used down to the limit")
    func sizeLimitLRU() throws {
        let root = try TemporaryDirectory()
        let clock = ManualClock()
        let cache = TileDiskCache(directory: root.url.appendingPathComponent("lru"), now: clock.dateFunction)
        let limit = 4 << 20
        let bitmap = solid(red, size: 512)  // 1 MiB + 32 bytes per entry
        for x in 0..<8 {
            clock.advance(1)
            try cache.store(tile(5, x, 0), bitmap: bitmap, encoded: nil, sizeLimit: limit)
            #expect(cache.diskSize() <= limit + TileDiskCache.sizeLimitSlack)
        }
        #expect(cache.entries().count == 8)  // 8 MiB: past the limit, within the slack
        clock.advance(1)
        guard case .hit = cache.lookup(tile(5, 0, 0), tileSize: 512, pixelFormat: .rgba8888, timeToLive: 0) else {
            Issue.record("tile 0 not cached")
            return
        }
        clock.advance(1)
        try cache.store(tile(5, 8, 0), bitmap: bitmap, encoded: nil, sizeLimit: limit)
        let left = Set(
            cache.entries().map { ($0.path as NSString).deletingPathExtension.split(separator: "/").suffix(2).joined(separator: "/") })
        #expect(left == ["0/0", "7/0", "8/0"])
        #expect(cache.diskSize() <= limit)
        // An entry larger than the whole limit is not stored.
        try cache.store(tile(5, 9, 0), bitmap: solid(red, size: 2048), encoded: nil, sizeLimit: limit)
        #expect(cache.entries().count == 3)
    }

    @Test("a damaged entry is dropped, never served, and the tile asked again", arguments: ["flip", "truncate", "magic", "empty", "size"])
    func damaged(_ damage: String) async throws {
        let root = try TemporaryDirectory()
        let source = CountingSource(green)
        let layer = makeLayer(source, cacheRoot: root)
        layer.setCacheEnabled(true, identifier: "damage")
        _ = await renderWorldOnce(layer)
        let path = root.file("damage/1/0/0.tile")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        switch damage {
        case "flip": bytes[40_000] ^= 0x10
        case "truncate": bytes.removeLast(1000)
        case "magic": bytes[0] = UInt8(ascii: "X")
        case "empty": bytes = []
        default: bytes[10] = 2  // declares a 131328 px tile: the checksum fails first
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let frame = await renderWorldOnce(layer)
        #expect(source.calls == 5)
        #expect(frame.bitmap.pixel(x: 100, y: 100) == green)
        #expect(layer.diagnostics.contains { $0.kind == .cacheEntryDamaged })
        // Re-stored whole.
        let cache = try #require(layer.diskCache(layer.settings))
        guard case .hit = cache.lookup(tile(1, 0, 0), tileSize: 256, pixelFormat: .rgba8888, timeToLive: 0) else {
            Issue.record("not re-stored")
            return
        }
    }

    @Test("an entry of another tile size or pixel format is not served")
    func settingsMismatch() throws {
        let root = try TemporaryDirectory()
        let cache = TileDiskCache(directory: root.url)
        try cache.store(tile(0, 0, 0), bitmap: solid(red, size: 256, format: .rgba8888), encoded: nil, sizeLimit: 0)
        guard case .damaged = cache.lookup(tile(0, 0, 0), tileSize: 256, pixelFormat: .bgra8888, timeToLive: 0) else {
            Issue.record("served a mismatched entry")
            return
        }
        guard case .miss = cache.lookup(tile(0, 0, 0), tileSize: 256, pixelFormat: .rgba8888, timeToLive: 0) else {
            Issue.record("mismatched entry not dropped")
            return
        }
    }

    @Test("many threads and two cache instances on one folder: every entry whole, size bookkeeping exact")
    func concurrentWriters() throws {
        let root = try TemporaryDirectory()
        let folder = root.url.appendingPathComponent("shared")
        let caches = [TileDiskCache(directory: folder), TileDiskCache(directory: folder)]
        let bitmaps = [solid(red, size: 64), solid(green, size: 64), solid(blue, size: 64)]
        let limit = 256 << 10
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for i in 0..<40 {
                let t = tile(4, (worker * 7 + i) % 16, i % 3)
                try? caches[worker % 2].store(t, bitmap: bitmaps[(worker + i) % 3], encoded: nil, sizeLimit: limit)
                _ = caches[(worker + 1) % 2].lookup(t, tileSize: 64, pixelFormat: .rgba8888, timeToLive: 0)
            }
        }
        let entries = caches[0].entries()
        #expect(!entries.isEmpty)
        for entry in entries {
            let data = try Data(contentsOf: URL(fileURLWithPath: entry.path))
            guard case .success = TileDiskCache.parse(data, tileSize: 64, pixelFormat: .rgba8888, source: entry.path) else {
                Issue.record("damaged entry \(entry.path)")
                continue
            }
        }
        let recorded = try String(contentsOf: folder.appendingPathComponent(".size"), encoding: .utf8)
        #expect(Int(recorded.trimmingCharacters(in: .whitespacesAndNewlines)) == caches[0].diskSize())
        #expect(caches[0].diskSize() <= limit + TileDiskCache.sizeLimitSlack)
        // No temporary files left behind.
        let names = FileManager.default.enumerator(atPath: folder.path)?.allObjects as? [String] ?? []
        #expect(!names.contains { $0.hasSuffix(".tmp") })
    }

    @Test("another process holding the cache lock makes a writer wait (flock(1) from util-linux)", .needs(.flock))
    func crossProcessLock() async throws {
        let root = try TemporaryDirectory()
        let folder = root.url.appendingPathComponent("proc")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let marker = root.file("locked")
        let release = root.file("release")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        process.arguments = [
            folder.appendingPathComponent(".lock").path, "-c",
            "touch '\(marker)'; while [ ! -e '\(release)' ]; do sleep 0.02; done",
        ]
        try process.run()
        while !FileManager.default.fileExists(atPath: marker) { try await Task.sleep(for: .milliseconds(5)) }
        let cache = TileDiskCache(directory: folder)
        let stored = Flag()
        let thread = Thread {
            try? cache.store(tile(0, 0, 0), bitmap: solid(red, size: 16), encoded: nil, sizeLimit: 0)
            stored.set()
        }
        thread.start()
        try await Task.sleep(for: .milliseconds(400))
        let storedEarly = stored.isSet
        #expect(!storedEarly)  // blocked by the other process's lock
        _ = FileManager.default.createFile(atPath: release, contents: nil)
        process.waitUntilExit()
        let deadline = ContinuousClock.now + .seconds(10)
        while !stored.isSet && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        let storedLater = stored.isSet
        #expect(storedLater)
        guard case .hit = cache.lookup(tile(0, 0, 0), tileSize: 16, pixelFormat: .rgba8888, timeToLive: 0) else {
            Issue.record("not stored")
            return
        }
    }

    @Test("URL tiles are kept as downloaded (encoded) and decoded again on a hit")
    func encodedEntries() async throws {
        let directory = try TemporaryDirectory()
        let tilesRoot = try writeTileTree(directory, tiles: [tile(0, 0, 0)]) { _ in blue }
        let source = RecordingSource(ways: [.url], urlFor: { tilesRoot.appendingPathComponent("\($0.zoom)/\($0.x)/\($0.y).png") })
        let layer = makeLayer(source, cacheRoot: directory)
        layer.setCacheEnabled(true, identifier: "encoded")
        _ = await settledFrame(worldView(layer))
        let entry = try Data(contentsOf: URL(fileURLWithPath: directory.file("encoded/0/0/0.tile")))
        #expect(entry[5] == 1)  // payload kind: encoded
        #expect(entry.count < 256 * 256 * 4)
        let cache = try #require(layer.diskCache(layer.settings))
        guard case .hit(let hit) = cache.lookup(tile(0, 0, 0), tileSize: 256, pixelFormat: .rgba8888, timeToLive: 0) else {
            Issue.record("no hit")
            return
        }
        #expect(hit.bitmap.pixel(x: 9, y: 9) == blue)
    }
}

final class Flag: Sendable {
    private let value = Locked(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
