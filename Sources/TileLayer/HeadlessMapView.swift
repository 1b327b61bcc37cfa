import Foundation
import Synchronization
import TilepackCore
import TilepackImaging

/// The screen scale of a map view: how many pixels make one point.
public enum ScreenScale: Int, Hashable, Sendable, CaseIterable {
    case x1 = 1
    case x2 = 2
    case x3 = 3
}

/// A viewport size in points.
public struct ViewportSize: Hashable, Sendable, CustomStringConvertible {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    public var description: String { "\(width)x\(height)" }
}

/// Where one tile lands in a rendered frame, in output pixels (half-open).
public struct TilePlacement: Hashable, Sendable {
    /// The tile (XYZ, at the layer's tile zoom; the column wrapped into the world).
    public var tile: TileCoordinate
    /// Left, top, right, bottom edges in output pixels; neighbouring tiles share edges exactly.
    public var left: Int
    public var top: Int
    public var right: Int
    public var bottom: Int
}

/// What a view wants of one layer for its current centre, zoom and viewport.
public struct LayerTilePlan: Sendable {
    /// The layer.
    public var layer: MapTileLayer
    /// The zoom the layer's tiles are asked at, or `nil` when the layer shows nothing at this zoom
    /// (hidden at the view's level, or tiles smaller than 128 pixels beyond tile zoom 21).
    public var tileZoom: Int?
    /// Every place a tile of the layer is drawn: inside the bounding box, and not hidden by opaque
    /// tiles of layers above.
    public var placements: [TilePlacement]
    /// The distinct tiles to draw, in drawing order: those of ``placements`` that, as far as
    /// `hasTile` said, exist. These are the tiles the view requests.
    public var tiles: [TileCoordinate]
    /// Whether every place the layer would draw is hidden by opaque tiles of layers above, so that
    /// it loads nothing (HERE's NMAMapTileLayer reference: "not loading data for lower layers covered by the raster tile").
    public var coveredByOpaqueLayer: Bool
}

/// How one tile was drawn in a frame.
public struct DrawnTile: Hashable, Sendable {
    /// The index of the layer in ``HeadlessMapView/mapTileLayers``.
    public var layerIndex: Int
    /// The tile drawn at this place.
    public var tile: TileCoordinate
    /// Whether an ancestor's scaled-up sub-square stood in for the tile (fallback).
    public var isApproximate: Bool
    /// The zoom of the bitmap drawn: the tile's own, or the ancestor's for a fallback.
    public var sourceZoom: Int
    /// The opacity the tile was drawn with (below 1 while fading in).
    public var opacity: Double
}

/// One composed frame.
///
/// Printed (`print(frame)`, `"\(frame)"`, a debugger's `po`) it is one line of facts, not its
/// pixels: a 1000x1000 frame holds 4 MB of them.
public struct MapFrame: Sendable {
    /// The image: viewport size x screen scale pixels, ``PixelFormat/rgba8888``.
    public var bitmap: Bitmap
    /// Every tile drawn, bottom layer first.
    public var drawn: [DrawnTile]
    /// The view time of the frame (seconds on the view's clock).
    public var time: Double
    /// The screen scale the frame was drawn at: the bitmap is the viewport's points times it.
    public var scale: ScreenScale = .x1
}

extension MapFrame: CustomStringConvertible, CustomDebugStringConvertible {
    /// `MapFrame(800x600 px = 400x300 pt at scale 2, rgba8888, 2 layers, 12 tiles drawn (3 scaled
    /// up from lower zooms), time 1.250 s)`.
    public var description: String {
        let points = "\(bitmap.width / scale.rawValue)x\(bitmap.height / scale.rawValue) pt"
        let approximate = drawn.filter(\.isApproximate).count
        let fading = drawn.filter { $0.opacity < 1 }.count
        let layers = Set(drawn.map(\.layerIndex)).count
        var tiles = "\(drawn.count) tiles drawn"
        var notes: [String] = []
        if approximate > 0 { notes.append("\(approximate) scaled up from lower zooms") }
        if fading > 0 { notes.append("\(fading) fading in") }
        if !notes.isEmpty { tiles += " (\(notes.joined(separator: ", ")))" }
        return
            "MapFrame(\(bitmap.width)x\(bitmap.height) px = \(points) at scale \(scale.rawValue), \(bitmap.pixelFormat), \(layers) \(layers == 1 ? "layer" : "layers"), \(tiles), time \(String(format: "%.3f", time)) s)"
    }

    /// The same one line as ``description``: the pixels are never dumped.
    public var debugDescription: String { description }
}

/// A map view without a screen, driving ``MapTileLayer``s as a map would: it works out the tiles
/// each layer needs, asks the data sources for them concurrently without blocking the caller, and
/// composes the result into a bitmap.
///
/// The zoom level is fractional in 0...20; the world is `256 * 2^zoom` points wide, and a layer's
/// tile of `tileSize` pixels covers `tileSize` points, so on a 2x or 3x screen tiles are enlarged.
/// Safe to use from any thread.
public final class HeadlessMapView: Sendable {
    /// How long a tile takes to fade in when its layer has fading enabled: 0.25 s.
    public static let fadeDuration = 0.25
    /// The first retry delay after a tile failed; doubled for each further failure.
    public static let initialRetryDelay = 0.5
    /// The longest retry delay.
    public static let maximumRetryDelay = 60.0
    /// How many tiles a layer keeps in memory beyond those in view.
    public static let memoryTileLimit = 512
    /// How many zoom levels up the view looks for an existing ancestor to fetch as a stand-in for
    /// a tile that is still loading or failing (a tile that does not exist looks all the way up).
    public static let fallbackFetchLevels = 3

    private let state: Locked<ViewState>
    private let clock: @Sendable () -> Double
    private let inFlightCount = Atomic<Int>(0)

    /// - Parameters:
    ///   - viewport: the size in points.
    ///   - scale: the screen scale.
    ///   - center: the centre of the view.
    ///   - zoomLevel: the view zoom, clamped to 0...20.
    ///   - background: the colour under all layers.
    ///   - clock: seconds on a monotonic clock; drives fading and retry back-off (tests pass their own).
    public init(
        viewport: ViewportSize, scale: ScreenScale = .x1,
        center: GeoCoordinate = GeoCoordinate(latitude: 0, longitude: 0), zoomLevel: Double = 0,
        background: RGBA8 = RGBA8(r: 0xF2, g: 0xEF, b: 0xE9, a: 0xFF),
        clock: @escaping @Sendable () -> Double = HeadlessMapView.uptime
    ) {
        var state = ViewState(viewport: viewport, scale: scale, center: center, background: background)
        state.zoomLevel = Self.clampZoom(zoomLevel)
        self.state = Locked(state)
        self.clock = clock
    }

    deinit {
        let id = ObjectIdentifier(self)
        for entry in state.withLock({ $0.layers }) { entry.layer.unlock(for: id) }
    }

    /// Seconds since an arbitrary start, monotonic.
    public static func uptime() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds) / 1e9
    }

    private static func clampZoom(_ zoom: Double) -> Double {
        guard zoom.isFinite else { return Double(MapTileLayer.minimumZoomLevel) }
        return min(max(zoom, Double(MapTileLayer.minimumZoomLevel)), Double(MapTileLayer.maximumZoomLevel))
    }

    // MARK: - View state

    struct LayerEntry: Sendable {
        let layer: MapTileLayer
        let runtime: LayerRuntime
        let order: Int
    }

    struct ViewState: Sendable {
        var viewport: ViewportSize
        var scale: ScreenScale
        var center: GeoCoordinate
        var zoomLevel: Double = 0
        var background: RGBA8
        var layers: [LayerEntry] = []
        var nextOrder = 0
    }

    /// The centre of the view.
    public var center: GeoCoordinate {
        get { state.withLock { $0.center } }
        set { state.withLock { $0.center = newValue } }
    }

    /// The view zoom level, fractional, clamped to 0...20 when set.
    public var zoomLevel: Double {
        get { state.withLock { $0.zoomLevel } }
        set { state.withLock { $0.zoomLevel = Self.clampZoom(newValue) } }
    }

    /// Sets centre and zoom together.
    public func setCenter(_ center: GeoCoordinate, zoomLevel: Double) {
        state.withLock {
            $0.center = center
            $0.zoomLevel = Self.clampZoom(zoomLevel)
        }
    }

    /// The viewport in points.
    public var viewport: ViewportSize {
        get { state.withLock { $0.viewport } }
        set { state.withLock { $0.viewport = ViewportSize(width: max(0, newValue.width), height: max(0, newValue.height)) } }
    }

    /// The screen scale.
    public var scale: ScreenScale {
        get { state.withLock { $0.scale } }
        set { state.withLock { $0.scale = newValue } }
    }

    /// The output size in pixels: viewport x scale.
    public var pixelSize: (width: Int, height: Int) {
        state.withLock { ($0.viewport.width * $0.scale.rawValue, $0.viewport.height * $0.scale.rawValue) }
    }

    // MARK: - Layers

    /// The layers in the order they were added.
    public var mapTileLayers: [MapTileLayer] { state.withLock { $0.layers.map(\.layer) } }

    /// Adds and locks `layer`. Returns false (and changes nothing) when the layer is already in
    /// this view or in another one.
    @discardableResult
    public func addMapTileLayer(_ layer: MapTileLayer) -> Bool {
        let id = ObjectIdentifier(self)
        return state.withLock { state in
            guard !state.layers.contains(where: { $0.layer === layer }) else { return false }
            guard layer.lock(for: id) else { return false }
            state.layers.append(LayerEntry(layer: layer, runtime: LayerRuntime(), order: state.nextOrder))
            state.nextOrder += 1
            return true
        }
    }

    /// Removes and unlocks `layer`; false when it is not in this view. Tiles still loading for it are discarded.
    @discardableResult
    public func removeMapTileLayer(_ layer: MapTileLayer) -> Bool {
        let id = ObjectIdentifier(self)
        let removed = state.withLock { state -> LayerEntry? in
            guard let index = state.layers.firstIndex(where: { $0.layer === layer }) else { return nil }
            return state.layers.remove(at: index)
        }
        guard let removed else { return false }
        removed.runtime.detach()
        layer.unlock(for: id)
        return true
    }

    // MARK: - Planning

    /// The layers in drawing order (bottom first): map layer type, then zIndex, then the order added.
    private func drawingOrder(_ layers: [LayerEntry]) -> [(entry: LayerEntry, settings: MapTileLayer.Settings, index: Int)] {
        let indexed = layers.enumerated().map { (entry: $0.element, settings: $0.element.layer.settings, index: $0.offset) }
        return indexed.sorted {
            ($0.settings.mapLayerType.rawValue, $0.settings.zIndex, $0.entry.order)
                < ($1.settings.mapLayerType.rawValue, $1.settings.zIndex, $1.entry.order)
        }
    }

    struct Geometry {
        var viewport: ViewportSize
        var scale: Int
        var zoom: Double
        /// The view centre in world fractions.
        var center: MercatorPoint
        var pixelWidth: Int { viewport.width * scale }
        var pixelHeight: Int { viewport.height * scale }
        /// Output pixels across the whole world at this zoom.
        var worldPixels: Double { 256 * pow(2, zoom) * Double(scale) }
        var originX: Double { center.x * worldPixels - Double(pixelWidth) / 2 }
        var originY: Double { center.y * worldPixels - Double(pixelHeight) / 2 }
        var level: Int { Int(zoom.rounded(.down)) }
    }

    private func geometry(_ state: ViewState) -> Geometry {
        let center = (try? WebMercator.worldPoint(of: state.center)) ?? MercatorPoint(x: 0.5, y: 0.5)
        return Geometry(viewport: state.viewport, scale: state.scale.rawValue, zoom: state.zoomLevel, center: center)
    }

    /// The tile zoom of a layer at a view level, or `nil` when its tiles are not drawn there.
    static func tileZoom(viewLevel: Int, tileSize: Int) -> Int? {
        // log2(256 / tileSize): view levels count 256 px tiles (the default tile size).
        let shift = TileSize.default.trailingZeroBitCount - tileSize.trailingZeroBitCount
        let zoom = viewLevel + shift
        guard zoom <= MapTileLayer.maximumTileZoom else { return nil }
        return max(0, zoom)
    }

    /// Whether a tile overlaps the box with a positive area (a box with `west > east` crosses the antimeridian).
    static func tile(_ tile: TileCoordinate, overlaps box: GeoBoundingBox) -> Bool {
        let t = WebMercator.boundingBox(of: tile)
        guard t.south < box.north, t.north > box.south else { return false }
        if box.west <= box.east {
            return t.west < box.east && t.east > box.west
        }
        return t.east > box.west || t.west < box.east
    }

    /// The placements of a layer's tiles (inside its bounding box) for geometry `g`.
    static func placements(_ g: Geometry, tileZoom: Int, tileSize: Int, box: GeoBoundingBox?) -> [TilePlacement] {
        guard g.pixelWidth > 0, g.pixelHeight > 0 else { return [] }
        let n = 1 << tileZoom
        let tilePixels = g.worldPixels / Double(n)
        let ox = g.originX, oy = g.originY
        let firstColumn = Int((ox / tilePixels).rounded(.down))
        let lastColumn = Int(((ox + Double(g.pixelWidth)) / tilePixels).rounded(.up)) - 1
        let firstRow = max(0, Int((oy / tilePixels).rounded(.down)))
        let lastRow = min(n - 1, Int(((oy + Double(g.pixelHeight)) / tilePixels).rounded(.up)) - 1)
        guard firstRow <= lastRow, firstColumn <= lastColumn else { return [] }
        var result: [TilePlacement] = []
        for row in firstRow...lastRow {
            for column in firstColumn...lastColumn {
                let x = ((column % n) + n) % n
                let tile = TileCoordinate(uncheckedZoom: tileZoom, x: x, y: row)
                if let box, !Self.tile(tile, overlaps: box) { continue }
                let left = Int((Double(column) * tilePixels - ox).rounded())
                let right = Int((Double(column + 1) * tilePixels - ox).rounded())
                let top = Int((Double(row) * tilePixels - oy).rounded())
                let bottom = Int((Double(row + 1) * tilePixels - oy).rounded())
                guard right > 0, bottom > 0, left < g.pixelWidth, top < g.pixelHeight, right > left, bottom > top else { continue }
                result.append(TilePlacement(tile: tile, left: left, top: top, right: right, bottom: bottom))
            }
        }
        return result
    }

    /// What each layer needs now, in the order the layers were added. Asks each data source's
    /// `hasTile` for tiles it has not answered before.
    public func tilePlans() -> [LayerTilePlan] {
        let (entries, g) = state.withLock { ($0.layers, geometry($0)) }
        return plans(entries, g).sorted { $0.index < $1.index }.map(\.plan)
    }

    struct PlannedLayer {
        var entry: LayerEntry
        var settings: MapTileLayer.Settings
        var index: Int
        var plan: LayerTilePlan
    }

    /// Plans in drawing order (bottom first).
    ///
    /// Top down: each layer's placements hidden by opaque tiles of the layers above are dropped
    /// (and so not loaded). An opaque layer's tile hides what is under it when it exists (`hasTile`)
    /// and has not failed at its last attempt; a tile without data, a failing tile, a fallback
    /// stand-in or a transparent layer hides nothing.
    private func plans(_ entries: [LayerEntry], _ g: Geometry) -> [PlannedLayer] {
        let ordered = drawingOrder(entries)
        var result: [PlannedLayer] = []
        var cover: [PixelRect] = []
        let viewport = PixelRect(left: 0, top: 0, right: g.pixelWidth, bottom: g.pixelHeight)
        for (entry, settings, index) in ordered.reversed() {
            var plan = LayerTilePlan(layer: entry.layer, tileZoom: nil, placements: [], tiles: [], coveredByOpaqueLayer: false)
            if g.level >= 0, settings.isShown(atZoomLevel: min(g.level, MapTileLayer.maximumZoomLevel)),
                let zoom = Self.tileZoom(viewLevel: g.level, tileSize: settings.tileSize)
            {
                plan.tileZoom = zoom
                let all = Self.placements(g, tileZoom: zoom, tileSize: settings.tileSize, box: settings.boundingBox)
                plan.placements = all.filter { placement in
                    guard let visible = PixelRect(placement).intersection(viewport) else { return false }
                    return !visible.isCovered(by: cover)
                }
                plan.coveredByOpaqueLayer = !all.isEmpty && plan.placements.isEmpty
                var exists: [TileCoordinate: Bool] = [:]
                var hiding: [PixelRect] = []
                for placement in plan.placements {
                    let tile = placement.tile
                    let present: Bool
                    if let known = exists[tile] {
                        present = known
                    } else {
                        present = entry.runtime.hasTile(tile, layer: entry.layer, source: settings.dataSource)
                        exists[tile] = present
                        if present { plan.tiles.append(tile) }
                    }
                    if !settings.transparent, present, !entry.runtime.isFailing(tile) { hiding.append(PixelRect(placement)) }
                }
                cover += hiding
            }
            result.append(PlannedLayer(entry: entry, settings: settings, index: index, plan: plan))
        }
        return result.reversed()
    }

    // MARK: - Loading

    /// Starts requests for every tile the layers need and do not have, and returns at once.
    /// Tiles that failed are asked again only after their back-off delay. With fallback enabled,
    /// each tile that does not exist has its nearest existing ancestor requested (all the way up:
    /// overzoom), and so does each tile still loading since an earlier update or failing, within
    /// ``fallbackFetchLevels`` (unless an ancestor that close is loaded), so that a scaled stand-in
    /// shows until the tile arrives. Loads of tiles no longer wanted (they left the view) are
    /// cancelled; that is no failure.
    public func update() {
        let (entries, g) = state.withLock { ($0.layers, geometry($0)) }
        let now = clock()
        for planned in plans(entries, g) {
            let runtime = planned.entry.runtime
            let layer = planned.entry.layer
            let settings = planned.settings
            runtime.follow(generation: layer.contentGeneration)
            let (wanted, standIns) = wantedTiles(planned)
            let keep = Set(wanted)
            runtime.dropStale(keeping: keep)
            runtime.cancelLoads(keeping: keep)
            runtime.trim(keeping: keep, limit: Self.memoryTileLimit)
            for tile in wanted {
                let standIn = standIns.contains(tile)
                _ = runtime.startIfNeeded(tile, now: now, quiet: standIn) {
                    start(tile, layer: layer, settings: settings, runtime: runtime, scale: Double(g.scale), standIn: standIn)
                }
            }
        }
    }

    /// The tiles a planned layer wants, ancestors first (they show soonest), then its own; and the
    /// ancestors wanted only as stand-ins for tiles loading or failing (their failures are not
    /// diagnosed: the tile they stand in for is).
    private func wantedTiles(_ planned: PlannedLayer) -> (tiles: [TileCoordinate], standIns: Set<TileCoordinate>) {
        let runtime = planned.entry.runtime
        let layer = planned.entry.layer
        let settings = planned.settings
        guard settings.fallbackEnabled, let zoom = planned.plan.tileZoom else { return (planned.plan.tiles, []) }
        let present = Set(planned.plan.tiles)
        var ancestors: [TileCoordinate] = []
        var overzoomed = Set<TileCoordinate>()
        var seen = present
        var looked = Set<TileCoordinate>()
        for placement in planned.plan.placements where looked.insert(placement.tile).inserted {
            let tile = placement.tile
            let levels: Int
            if !present.contains(tile) {
                levels = zoom  // no tile here: the deepest ancestor that has one (overzoom)
            } else if !(runtime.isLoading(tile) || runtime.isFailing(tile))
                || runtime.hasLoadedAncestor(of: tile, within: Self.fallbackFetchLevels)
            {
                continue  // loaded, or not asked for yet (it may come at once), or a close stand-in is there
            } else {
                levels = min(zoom, Self.fallbackFetchLevels)  // loading or failing: a stand-in close by
            }
            for ancestorZoom in stride(from: zoom - 1, through: zoom - levels, by: -1) {
                guard let ancestor = tile.ancestor(atZoom: ancestorZoom) else { break }
                if runtime.hasTile(ancestor, layer: layer, source: settings.dataSource) {
                    if seen.insert(ancestor).inserted { ancestors.append(ancestor) }
                    if !present.contains(tile) { overzoomed.insert(ancestor) }
                    break
                }
            }
        }
        return (ancestors + planned.plan.tiles, Set(ancestors).subtracting(overzoomed))
    }

    private func start(
        _ tile: TileCoordinate, layer: MapTileLayer, settings: MapTileLayer.Settings,
        runtime: LayerRuntime, scale: Double, standIn: Bool
    ) -> Task<Void, Never> {
        inFlightCount.add(1, ordering: .relaxed)
        return Task.detached { [self] in
            let result = await TileLoading.load(tile, layer: layer, settings: settings, scale: scale, standIn: standIn)
            runtime.finish(tile, result: result, now: clock(), layer: layer)
            inFlightCount.subtract(1, ordering: .releasing)
        }
    }

    /// How many tile loads are running.
    public var tilesLoading: Int { inFlightCount.load(ordering: .acquiring) }

    /// Waits until no tile load is running, or `timeout` seconds passed; true when idle.
    public func waitUntilIdle(timeout: Double = 60) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int64(max(0, timeout) * 1000))
        while inFlightCount.load(ordering: .acquiring) > 0 {
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return true
    }

    // MARK: - Composing

    /// Composes what the layers have now: real tiles where loaded, fallback tiles where not,
    /// fading tiles partly transparent. Does not start requests (see ``update()``).
    /// - Parameter settled: draw every loaded tile as if its fade had finished.
    public func renderFrame(settled: Bool = false) -> MapFrame {
        let (entries, g, background) = state.withLock { ($0.layers, geometry($0), $0.background) }
        let now = clock()
        var canvas = Bitmap(width: g.pixelWidth, height: g.pixelHeight, pixelFormat: .rgba8888, fill: background)
        var drawn: [DrawnTile] = []
        for planned in plans(entries, g) {
            let settings = planned.settings
            let runtime = planned.entry.runtime
            guard let zoom = planned.plan.tileZoom else { continue }
            for placement in planned.plan.placements {
                let width = placement.right - placement.left, height = placement.bottom - placement.top
                let real = runtime.loaded(placement.tile)
                var opacity = 1.0
                if real != nil, settings.fadingEnabled, !settled {
                    let shown = runtime.firstShown(placement.tile, now: now)
                    opacity = min(1, max(0, (now - shown) / Self.fadeDuration))
                }
                if real == nil || opacity < 1, settings.fallbackEnabled,
                    let (fallback, sourceZoom) = runtime.fallback(for: placement.tile, tileZoom: zoom, outputSize: max(width, height))
                {
                    Self.draw(
                        fallback, on: &canvas, placement: placement, width: width, height: height,
                        opaque: !settings.transparent, opacity: 1)
                    drawn.append(
                        DrawnTile(
                            layerIndex: planned.index, tile: placement.tile, isApproximate: true,
                            sourceZoom: sourceZoom, opacity: 1))
                }
                if let real {
                    Self.draw(
                        real, on: &canvas, placement: placement, width: width, height: height,
                        opaque: !settings.transparent, opacity: opacity)
                    drawn.append(
                        DrawnTile(
                            layerIndex: planned.index, tile: placement.tile, isApproximate: false,
                            sourceZoom: placement.tile.zoom, opacity: opacity))
                }
            }
        }
        return MapFrame(bitmap: canvas, drawn: drawn, time: now, scale: ScreenScale(rawValue: g.scale) ?? .x1)
    }

    private static func draw(
        _ tile: Bitmap, on canvas: inout Bitmap, placement: TilePlacement, width: Int, height: Int,
        opaque: Bool, opacity: Double
    ) {
        var image = tile
        if opaque && image.pixelFormat.hasAlpha {
            // An opaque layer's alpha is ignored: every 4-byte format keeps alpha in byte 3.
            image.pixels.withUnsafeMutableBytes { bytes in
                for i in stride(from: 3, to: bytes.count, by: 4) { bytes[i] = 255 }
            }
        }
        image = image.resized(width: width, height: height)
        canvas.composite(image, atX: placement.left, y: placement.top, opacity: opacity)
    }

    /// Requests what is missing, waits for the loads (at most `timeout` seconds) and composes a
    /// settled frame: the way `tilepack render` draws a map.
    public func render(timeout: Double = 60) async -> MapFrame {
        update()
        _ = await waitUntilIdle(timeout: timeout)
        // Ancestors asked for on behalf of tiles that do not exist are known only now.
        update()
        _ = await waitUntilIdle(timeout: timeout)
        return renderFrame(settled: true)
    }
}

/// A rectangle of output pixels (half-open), for working out what opaque tiles hide.
struct PixelRect: Hashable {
    var left: Int
    var top: Int
    var right: Int
    var bottom: Int

    init(left: Int, top: Int, right: Int, bottom: Int) {
        self.left = left
        self.top = top
        self.right = right
        self.bottom = bottom
    }

    init(_ placement: TilePlacement) {
        self.init(left: placement.left, top: placement.top, right: placement.right, bottom: placement.bottom)
    }

    /// The overlap with `other`, `nil` when it has no area.
    func intersection(_ other: PixelRect) -> PixelRect? {
        let r = PixelRect(
            left: max(left, other.left), top: max(top, other.top),
            right: min(right, other.right), bottom: min(bottom, other.bottom))
        return r.left < r.right && r.top < r.bottom ? r : nil
    }

    /// Whether the union of `rects` covers this rectangle: the rectangles overlapping it are cut
    /// along all their edges into cells, and every cell must lie in one of them.
    func isCovered(by rects: [PixelRect]) -> Bool {
        let parts = rects.compactMap { $0.intersection(self) }
        guard !parts.isEmpty else { return false }
        if parts.contains(self) { return true }
        let xs = Set(parts.flatMap { [$0.left, $0.right] } + [left, right]).sorted()
        let ys = Set(parts.flatMap { [$0.top, $0.bottom] } + [top, bottom]).sorted()
        for x in xs.dropLast() {
            for y in ys.dropLast() where !parts.contains(where: { $0.left <= x && x < $0.right && $0.top <= y && y < $0.bottom }) {
                return false
            }
        }
        return true
    }
}
