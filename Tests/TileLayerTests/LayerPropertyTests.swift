import Foundation
import Testing
import TilepackCore
import TilepackImaging

@testable import TileLayer

@Suite("MapTileLayer properties")
struct LayerPropertyTests {
    @Test("defaults: unbounded, cache off, fading off, fallback on, area, RGBA, 256, opaque, minimum zIndex")
    func defaults() {
        let layer = MapTileLayer()
        #expect(layer.boundingBox == nil)
        #expect(layer.cacheEnabled == false)
        #expect(layer.cacheIdentifier == nil)
        #expect(layer.cacheSizeLimit == 0)
        #expect(layer.cacheTimeToLive == 0)
        #expect(layer.dataSource == nil)
        #expect(layer.fadingEnabled == false)
        #expect(layer.fallbackEnabled == true)
        #expect(layer.isLocked == false)
        #expect(layer.mapLayerType == .area)
        #expect(layer.pixelFormat == .rgba8888)
        #expect(layer.tileSize == 256)
        #expect(layer.transparent == false)
        #expect(layer.zIndex == MapTileLayer.minimumZIndex)
        for level in 0...20 { #expect(layer.isShown(atZoomLevel: level)) }
    }

    @Test("boundingBox: set, cleared to unbounded, invalid boxes ignored")
    func boundingBox() {
        let layer = MapTileLayer()
        let park = GeoBoundingBox(west: -0.042772, south: 51.525941, east: 0.028296, north: 51.557)
        #expect(layer.setBoundingBox(park) == .applied)
        #expect(layer.boundingBox == park)
        for bad in [
            GeoBoundingBox(west: 0, south: 10, east: 1, north: 5), GeoBoundingBox(west: 0, south: -91, east: 1, north: 0),
            GeoBoundingBox(west: -181, south: 0, east: 1, north: 1), GeoBoundingBox(west: .nan, south: 0, east: 1, north: 1),
        ] {
            guard case .ignoredInvalid = layer.setBoundingBox(bad) else {
                Issue.record("accepted \(bad)")
                continue
            }
            #expect(layer.boundingBox == park)
        }
        #expect(layer.setBoundingBox(nil) == .applied)
        #expect(layer.boundingBox == nil)
    }

    @Test("show/hide one level; out-of-range levels ignored; isShown false out of range")
    func singleLevelVisibility() {
        let layer = MapTileLayer()
        #expect(layer.hide(atZoomLevel: 5) == .applied)
        #expect(!layer.isShown(atZoomLevel: 5))
        #expect(layer.isShown(atZoomLevel: 4) && layer.isShown(atZoomLevel: 6))
        #expect(layer.show(atZoomLevel: 5) == .applied)
        #expect(layer.isShown(atZoomLevel: 5))
        for bad in [-1, 21, 100] {
            #expect(!layer.hide(atZoomLevel: bad).wasApplied)
            #expect(!layer.show(atZoomLevel: bad).wasApplied)
            #expect(!layer.isShown(atZoomLevel: bad))
        }
        for level in 0...20 { #expect(layer.isShown(atZoomLevel: level)) }
    }

    @Test("levels 0, 5, 7 only, as the reference's example")
    func onlySomeLevels() {
        let layer = MapTileLayer()
        #expect(layer.hide(fromZoomLevel: 0, toZoomLevel: 20) == .applied)
        layer.show(atZoomLevel: 0)
        layer.show(atZoomLevel: 5)
        layer.show(atZoomLevel: 7)
        #expect((0...20).filter { layer.isShown(atZoomLevel: $0) } == [0, 5, 7])
    }

    @Test("range show/hide: any bad argument or from > to does nothing")
    func rangeVisibility() {
        let layer = MapTileLayer()
        #expect(layer.hide(fromZoomLevel: 3, toZoomLevel: 6) == .applied)
        #expect((0...20).filter { !layer.isShown(atZoomLevel: $0) } == [3, 4, 5, 6])
        let before = (0...20).map { layer.isShown(atZoomLevel: $0) }
        for (from, to) in [(-1, 5), (0, 21), (-3, 30), (8, 7)] {
            guard case .ignoredInvalid = layer.hide(fromZoomLevel: from, toZoomLevel: to) else {
                Issue.record("hide \(from)...\(to)")
                continue
            }
            guard case .ignoredInvalid = layer.show(fromZoomLevel: from, toZoomLevel: to) else {
                Issue.record("show \(from)...\(to)")
                continue
            }
        }
        #expect((0...20).map { layer.isShown(atZoomLevel: $0) } == before)
        #expect(layer.show(fromZoomLevel: 4, toZoomLevel: 5) == .applied)
        #expect((0...20).filter { !layer.isShown(atZoomLevel: $0) } == [3, 6])
        #expect(layer.hide(fromZoomLevel: 9, toZoomLevel: 9) == .applied)
        #expect(!layer.isShown(atZoomLevel: 9))
    }

    @Test("tileSize: powers of two accepted, others ignored")
    func tileSize() {
        let layer = MapTileLayer()
        for size in [32, 64, 128, 512, 1024, 256] {
            #expect(layer.setTileSize(size) == .applied)
            #expect(layer.tileSize == size)
        }
        for bad in [0, -256, 100, 255, 257, 384, 8192, 8] {
            guard case .ignoredInvalid = layer.setTileSize(bad) else {
                Issue.record("accepted \(bad)")
                continue
            }
            #expect(layer.tileSize == 256)
        }
    }

    @Test("tileSize shifts the tile zoom: 256 -> max 20, 512 -> 19, 128 -> 21, below 128 not drawn at top levels")
    func tileZoomShift() {
        #expect(HeadlessMapView.tileZoom(viewLevel: 20, tileSize: 256) == 20)
        #expect(HeadlessMapView.tileZoom(viewLevel: 20, tileSize: 512) == 19)
        #expect(HeadlessMapView.tileZoom(viewLevel: 20, tileSize: 128) == 21)
        #expect(HeadlessMapView.tileZoom(viewLevel: 14, tileSize: 1024) == 12)
        #expect(HeadlessMapView.tileZoom(viewLevel: 0, tileSize: 512) == 0)
        #expect(HeadlessMapView.tileZoom(viewLevel: 19, tileSize: 64) == 21)
        #expect(HeadlessMapView.tileZoom(viewLevel: 20, tileSize: 64) == nil)
        #expect(HeadlessMapView.tileZoom(viewLevel: 18, tileSize: 32) == 21)
        #expect(HeadlessMapView.tileZoom(viewLevel: 19, tileSize: 32) == nil)
    }

    @Test("pixelFormat: every format settable, unknown (nil) ignored")
    func pixelFormat() {
        let layer = MapTileLayer()
        for format in PixelFormat.allCases {
            #expect(layer.setPixelFormat(format) == .applied)
            #expect(layer.pixelFormat == format)
        }
        guard case .ignoredInvalid = layer.setPixelFormat(nil) else {
            Issue.record("unknown accepted")
            return
        }
        #expect(layer.pixelFormat == PixelFormat.allCases.last)
    }

    @Test("transparent, fadingEnabled, fallbackEnabled toggle")
    func flags() {
        let layer = MapTileLayer()
        #expect(layer.setTransparent(true) == .applied && layer.transparent)
        #expect(layer.setFadingEnabled(true) == .applied && layer.fadingEnabled)
        #expect(layer.setFallbackEnabled(false) == .applied && !layer.fallbackEnabled)
    }

    @Test("zIndex clamped to its range")
    func zIndex() {
        let layer = MapTileLayer()
        #expect(layer.setZIndex(42) == .applied)
        #expect(layer.zIndex == 42)
        guard case .adjusted = layer.setZIndex(-5) else {
            Issue.record("not clamped")
            return
        }
        #expect(layer.zIndex == MapTileLayer.minimumZIndex)
        guard case .adjusted = layer.setZIndex(1_000_000) else {
            Issue.record("not clamped")
            return
        }
        #expect(layer.zIndex == MapTileLayer.maximumZIndex)
    }

    @Test("mapLayerType: area default, foreground/background/building allowed, POI and transit stop refused")
    func mapLayerType() {
        let layer = MapTileLayer()
        #expect(layer.setMapLayerType(.foreground) == .applied)
        #expect(layer.mapLayerType == .foreground)
        for refused in [MapLayerType.pointOfInterest, .transitStop] {
            guard case .ignoredInvalid = layer.setMapLayerType(refused) else {
                Issue.record("accepted \(refused)")
                continue
            }
            #expect(layer.mapLayerType == .foreground)
        }
        #expect(layer.setMapLayerType(.background) == .applied)
        #expect(layer.setMapLayerType(.building) == .applied)
        #expect(layer.setMapLayerType(.area) == .applied)
    }

    @Test("cache identifier: stripped to letters, digits, _ and -; nil or empty leaves caching off; the first sticks")
    func cacheIdentifier() {
        let layer = MapTileLayer()
        guard case .ignoredInvalid = layer.setCacheEnabled(true, identifier: nil) else {
            Issue.record("nil enabled")
            return
        }
        #expect(!layer.cacheEnabled && layer.cacheIdentifier == nil)
        guard case .ignoredInvalid = layer.setCacheEnabled(true, identifier: "") else {
            Issue.record("empty enabled")
            return
        }
        guard case .ignoredInvalid = layer.setCacheEnabled(true, identifier: "../..//") else {
            Issue.record("stripped-empty enabled")
            return
        }
        #expect(!layer.cacheEnabled)

        guard case .adjusted = layer.setCacheEnabled(true, identifier: "My Tile/Cache: v2_x-y!") else {
            Issue.record("not adjusted")
            return
        }
        #expect(layer.cacheEnabled)
        #expect(layer.cacheIdentifier == "MyTileCachev2_x-y")
        #expect(layer.cacheDirectory?.lastPathComponent == "MyTileCachev2_x-y")

        guard case .adjusted = layer.setCacheEnabled(true, identifier: "Other") else {
            Issue.record("second id not reported")
            return
        }
        #expect(layer.cacheIdentifier == "MyTileCachev2_x-y")
        #expect(layer.setCacheEnabled(false, identifier: "MyTileCachev2_x-y") == .applied)
        #expect(!layer.cacheEnabled && layer.cacheDirectory == nil)
        #expect(layer.cacheIdentifier == "MyTileCachev2_x-y")
        #expect(layer.setCacheEnabled(true, identifier: "MyTileCachev2_x-y") == .applied)
        // nil turns caching off but keeps the identifier.
        _ = layer.setCacheEnabled(true, identifier: nil)
        #expect(!layer.cacheEnabled && layer.cacheIdentifier == "MyTileCachev2_x-y")
        #expect(MapTileLayer.sanitizeCacheIdentifier("é-ü_1") == "é-ü_1")
    }

    @Test("cacheSizeLimit: 0 default, negative ignored; cacheTimeToLive: negative set to 0, NaN ignored")
    func cacheLimits() {
        let layer = MapTileLayer()
        #expect(layer.setCacheSizeLimit(64 << 20) == .applied)
        #expect(layer.cacheSizeLimit == 64 << 20)
        guard case .ignoredInvalid = layer.setCacheSizeLimit(-1) else {
            Issue.record("negative size")
            return
        }
        #expect(layer.cacheSizeLimit == 64 << 20)
        #expect(layer.setCacheTimeToLive(86_400) == .applied)
        #expect(layer.cacheTimeToLive == 86_400)
        guard case .adjusted = layer.setCacheTimeToLive(-5) else {
            Issue.record("negative ttl")
            return
        }
        #expect(layer.cacheTimeToLive == 0)
        guard case .ignoredInvalid = layer.setCacheTimeToLive(.nan) else {
            Issue.record("nan ttl")
            return
        }
        #expect(layer.cacheTimeToLive == 0)
    }

    @Test("locked while in a view: every setter ignored and reported, diagnostics kept; unlocked on removal")
    func locking() {
        let layer = MapTileLayer()
        let view = HeadlessMapView(viewport: ViewportSize(width: 256, height: 256))
        #expect(view.addMapTileLayer(layer))
        #expect(layer.isLocked)
        let source = RecordingSource(ways: [.synchronous])
        let attempts: [LayerUpdate] = [
            layer.setBoundingBox(GeoBoundingBox(west: 0, south: 0, east: 1, north: 1)),
            layer.setDataSource(source), layer.setFadingEnabled(true), layer.setFallbackEnabled(false),
            layer.setMapLayerType(.foreground), layer.setPixelFormat(.bgra8888), layer.setTileSize(512),
            layer.setTransparent(true), layer.setZIndex(7), layer.show(atZoomLevel: 3), layer.hide(atZoomLevel: 3),
            layer.show(fromZoomLevel: 1, toZoomLevel: 2), layer.hide(fromZoomLevel: 1, toZoomLevel: 2),
            layer.setCacheEnabled(true, identifier: "x"), layer.setCacheSizeLimit(1), layer.setCacheTimeToLive(1),
        ]
        #expect(attempts.allSatisfy { $0 == .ignoredLocked })
        #expect(layer.diagnostics.filter { $0.kind == .settingIgnored }.count == attempts.count)
        #expect(layer.boundingBox == nil && layer.dataSource == nil && !layer.fadingEnabled && layer.fallbackEnabled)
        #expect(layer.mapLayerType == .area && layer.pixelFormat == .rgba8888 && layer.tileSize == 256)
        #expect(!layer.transparent && layer.zIndex == 0 && layer.isShown(atZoomLevel: 3) && !layer.cacheEnabled)

        #expect(view.removeMapTileLayer(layer))
        #expect(!layer.isLocked)
        #expect(layer.setTileSize(512) == .applied)
        #expect(!view.removeMapTileLayer(layer))
    }

    @Test("one view at a time: a second view refuses the layer until the first removes it")
    func oneViewAtATime() {
        let layer = MapTileLayer()
        let first = HeadlessMapView(viewport: ViewportSize(width: 10, height: 10))
        let second = HeadlessMapView(viewport: ViewportSize(width: 10, height: 10))
        #expect(first.addMapTileLayer(layer))
        #expect(!first.addMapTileLayer(layer))
        #expect(!second.addMapTileLayer(layer))
        #expect(second.mapTileLayers.isEmpty)
        first.removeMapTileLayer(layer)
        #expect(second.addMapTileLayer(layer))
        #expect(layer.isLocked)
    }

    @Test("a view released while holding a layer unlocks it")
    func viewDeinitUnlocks() {
        let layer = MapTileLayer()
        do {
            let view = HeadlessMapView(viewport: ViewportSize(width: 10, height: 10))
            view.addMapTileLayer(layer)
            #expect(layer.isLocked)
        }
        #expect(!layer.isLocked)
    }
}
