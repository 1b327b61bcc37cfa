import Foundation
import TilepackCore

/// A layer of custom raster tiles for a map view: tilepack's `NMAMapTileLayer`.
///
/// Configure the properties, set a ``dataSource`` and add the layer to a ``HeadlessMapView``.
/// While the layer is in a view it is ``isLocked``: every setter is ignored and reports
/// ``LayerUpdate/ignoredLocked``. The layer unlocks when the view removes it. One view at a time.
///
/// Properties are read as properties and changed with `set...` methods that return a
/// ``LayerUpdate``, so an ignored change is visible to the caller (the SDK ignores silently).
/// Every method is safe to call from any thread.
public final class MapTileLayer: Sendable, CustomStringConvertible {
    /// The lowest map view zoom level (`NMAMapViewMinimumZoomLevel`).
    public static let minimumZoomLevel = 0
    /// The highest map view zoom level (`NMAMapViewMaximumZoomLevel`): tiles of the default size go to 20.
    public static let maximumZoomLevel = 20
    /// The lowest z-index (`NMAMapObjectMinimumZIndex`); also the default.
    public static let minimumZIndex = 0
    /// The highest z-index (`NMAMapObjectMaximumZIndex`).
    public static let maximumZIndex = 1000
    /// The deepest tile zoom any layer reaches: 21, the level of 128-pixel tiles at view level 20.
    /// Tiles smaller than 128 pixels are therefore not drawn at the highest view levels.
    public static let maximumTileZoom = 21

    /// A name for messages and diagnostics.
    public let name: String
    /// The folder under which ``setCacheEnabled(_:identifier:)`` keeps this layer's cache folder.
    public let cacheRootDirectory: URL

    let state: Locked<State>
    private let diagnosticLog = Locked<[TileLayerDiagnostic]>([])
    /// How many diagnostics a layer keeps (the oldest are dropped first).
    public static let diagnosticLimit = 256
    private let cacheStore = Locked<TileDiskCache?>(nil)
    private let cacheClock: @Sendable () -> Date

    /// A layer with the SDK's defaults.
    /// - Parameters:
    ///   - name: a name for messages.
    ///   - cacheRootDirectory: where the disk cache lives; default ``TileDiskCache/defaultRootDirectory``.
    ///   - cacheClock: the wall clock of the disk cache (store times, expiry); tests pass their own.
    public init(
        name: String = "tile layer", cacheRootDirectory: URL = TileDiskCache.defaultRootDirectory,
        cacheClock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.name = name
        self.cacheRootDirectory = cacheRootDirectory
        self.cacheClock = cacheClock
        self.state = Locked(State())
    }

    /// A layer showing an `MKTileOverlay`-style source: its data source is `overlay`, and it is
    /// opaque (``transparent`` false) exactly when `overlay.canReplaceMapContent` is true.
    public convenience init(
        overlay: URLTemplateTileSource, name: String = "tile overlay",
        cacheRootDirectory: URL = TileDiskCache.defaultRootDirectory,
        cacheClock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.init(name: name, cacheRootDirectory: cacheRootDirectory, cacheClock: cacheClock)
        state.withLock {
            $0.dataSource = overlay
            $0.transparent = !overlay.canReplaceMapContent
        }
    }

    public var description: String { "MapTileLayer(\(name))" }

    // MARK: - State

    struct State: Sendable {
        var boundingBox: GeoBoundingBox?
        var cacheEnabled = false
        var cacheIdentifier: String?
        var cacheSizeLimit = 0
        var cacheTimeToLive: TimeInterval = 0
        var dataSource: (any MapTileLayerDataSource)?
        var fadingEnabled = false
        var fallbackEnabled = true
        var mapLayerType = MapLayerType.area
        var pixelFormat = PixelFormat.rgba8888
        var tileSize = TileSize.default
        var transparent = false
        var zIndex = MapTileLayer.minimumZIndex
        /// Bit n set: hidden at view zoom level n.
        var hiddenLevels: UInt32 = 0
        /// The view holding the layer, when locked.
        var owner: ObjectIdentifier?
    }

    /// A consistent copy of every setting, taken by a view when it plans and loads tiles.
    struct Settings: Sendable {
        var boundingBox: GeoBoundingBox?
        var cacheEnabled: Bool
        var cacheIdentifier: String?
        var cacheSizeLimit: Int
        var cacheTimeToLive: TimeInterval
        var dataSource: (any MapTileLayerDataSource)?
        var fadingEnabled: Bool
        var fallbackEnabled: Bool
        var mapLayerType: MapLayerType
        var pixelFormat: PixelFormat
        var tileSize: Int
        var transparent: Bool
        var zIndex: Int
        var hiddenLevels: UInt32

        var bytesPerTile: Int { tileSize * tileSize * pixelFormat.bytesPerPixel }

        func isShown(atZoomLevel level: Int) -> Bool {
            MapTileLayer.zoomLevels.contains(level) && hiddenLevels & (1 << UInt32(level)) == 0
        }
    }

    var settings: Settings {
        state.withLock {
            Settings(
                boundingBox: $0.boundingBox, cacheEnabled: $0.cacheEnabled, cacheIdentifier: $0.cacheIdentifier,
                cacheSizeLimit: $0.cacheSizeLimit, cacheTimeToLive: $0.cacheTimeToLive, dataSource: $0.dataSource,
                fadingEnabled: $0.fadingEnabled, fallbackEnabled: $0.fallbackEnabled, mapLayerType: $0.mapLayerType,
                pixelFormat: $0.pixelFormat, tileSize: $0.tileSize, transparent: $0.transparent, zIndex: $0.zIndex,
                hiddenLevels: $0.hiddenLevels)
        }
    }

    static let zoomLevels = minimumZoomLevel...maximumZoomLevel

    /// Applies `change` unless the layer is locked; records a diagnostic when ignored.
    /// Sets a property that takes any value (when the layer is not locked).
    private func assign<Value>(_ keyPath: WritableKeyPath<State, Value>, _ value: Value, _ property: String) -> LayerUpdate {
        update(property) { state in
            state[keyPath: keyPath] = value
            return .applied
        }
    }

    private func update(_ property: String, _ change: (inout State) -> LayerUpdate) -> LayerUpdate {
        let result = state.withLock { state -> LayerUpdate in
            guard state.owner == nil else { return .ignoredLocked }
            return change(&state)
        }
        if !result.wasApplied {
            record(TileLayerDiagnostic(kind: .settingIgnored, message: "\(property): \(result)"))
        }
        return result
    }

    // MARK: - Locking

    /// Whether the layer is in a map view; while locked, setters are ignored.
    public var isLocked: Bool { state.withLock { $0.owner != nil } }

    /// Locks the layer for `view`; false when another view holds it.
    func lock(for view: ObjectIdentifier) -> Bool {
        state.withLock {
            if let owner = $0.owner { return owner == view }
            $0.owner = view
            return true
        }
    }

    /// Unlocks the layer if `view` holds it.
    func unlock(for view: ObjectIdentifier) {
        state.withLock { if $0.owner == view { $0.owner = nil } }
    }

    // MARK: - Properties

    /// The box within which tiles are requested and drawn; `nil` (the default) is unbounded.
    /// Tiles falling fully outside the box (touching only its edge counts as outside) are never requested.
    public var boundingBox: GeoBoundingBox? { state.withLock { $0.boundingBox } }

    /// Sets ``boundingBox``. A box with a latitude outside -90...90, a longitude outside -180...180,
    /// south above north, or a value that is not finite is ignored. `west > east` crosses the antimeridian.
    @discardableResult
    public func setBoundingBox(_ box: GeoBoundingBox?) -> LayerUpdate {
        update("boundingBox") { state in
            if let box {
                let values = [box.west, box.south, box.east, box.north]
                guard values.allSatisfy(\.isFinite), (-90...90).contains(box.south), (-90...90).contains(box.north),
                    (-180...180).contains(box.west), (-180...180).contains(box.east), box.south <= box.north
                else { return .ignoredInvalid("\(box) is not a bounding box (west,south,east,north in degrees)") }
            }
            state.boundingBox = box
            return .applied
        }
    }

    /// The data source that supplies tiles. Held strongly (see Specs/tile-layer.md).
    public var dataSource: (any MapTileLayerDataSource)? { state.withLock { $0.dataSource } }

    @discardableResult
    public func setDataSource(_ source: (any MapTileLayerDataSource)?) -> LayerUpdate {
        assign(\.dataSource, source, "dataSource")
    }

    /// Whether tiles fade in when drawn for the first time; default false.
    public var fadingEnabled: Bool { state.withLock { $0.fadingEnabled } }

    @discardableResult
    public func setFadingEnabled(_ enabled: Bool) -> LayerUpdate {
        assign(\.fadingEnabled, enabled, "fadingEnabled")
    }

    /// Whether a lower zoom level's tile may stand in for a missing one; default true.
    public var fallbackEnabled: Bool { state.withLock { $0.fallbackEnabled } }

    @discardableResult
    public func setFallbackEnabled(_ enabled: Bool) -> LayerUpdate {
        assign(\.fallbackEnabled, enabled, "fallbackEnabled")
    }

    /// The map layer the tiles are drawn in; default ``MapLayerType/area``.
    public var mapLayerType: MapLayerType { state.withLock { $0.mapLayerType } }

    /// Sets ``mapLayerType``; ``MapLayerType/pointOfInterest`` and ``MapLayerType/transitStop`` are ignored.
    @discardableResult
    public func setMapLayerType(_ type: MapLayerType) -> LayerUpdate {
        update("mapLayerType") { state in
            guard type.isAllowedForTileLayers else { return .ignoredInvalid("a tile layer cannot be drawn in the \(type) layer") }
            state.mapLayerType = type
            return .applied
        }
    }

    /// The pixel format of the tile bitmaps; default ``PixelFormat/rgba8888``.
    public var pixelFormat: PixelFormat { state.withLock { $0.pixelFormat } }

    /// Sets ``pixelFormat``. `nil` stands for `NMAPixelFormatUnknown` and is ignored.
    @discardableResult
    public func setPixelFormat(_ format: PixelFormat?) -> LayerUpdate {
        update("pixelFormat") { state in
            guard let format else { return .ignoredInvalid("an unknown pixel format is not a pixel format") }
            state.pixelFormat = format
            return .applied
        }
    }

    /// The width and height of the tile bitmaps in pixels; default 256.
    ///
    /// It shifts the tile zoom relative to the view zoom by log2(256 / tileSize): 256-pixel tiles
    /// are asked for up to zoom 20, 512-pixel tiles up to 19, 128-pixel tiles up to 21.
    public var tileSize: Int { state.withLock { $0.tileSize } }

    /// Sets ``tileSize``; a size that breaks Core's `TileSize` rule (a power of two in 16...4096) is ignored.
    @discardableResult
    public func setTileSize(_ size: Int) -> LayerUpdate {
        update("tileSize") { state in
            if let reason = TileSize.invalidReason(size) { return .ignoredInvalid(reason) }
            state.tileSize = size
            return .applied
        }
    }

    /// Whether the tiles have transparency; default false.
    ///
    /// An opaque layer is drawn without blending (its alpha is ignored), and the layers below do not
    /// load what its tiles cover (only tiles that exist and have not failed cover anything).
    public var transparent: Bool { state.withLock { $0.transparent } }

    @discardableResult
    public func setTransparent(_ transparent: Bool) -> LayerUpdate {
        assign(\.transparent, transparent, "transparent")
    }

    /// The stacking order within ``mapLayerType``, highest on top; default ``minimumZIndex``.
    public var zIndex: Int { state.withLock { $0.zIndex } }

    /// Sets ``zIndex``, clamped to ``minimumZIndex``...``maximumZIndex``.
    @discardableResult
    public func setZIndex(_ index: Int) -> LayerUpdate {
        update("zIndex") { state in
            let clamped = min(max(index, Self.minimumZIndex), Self.maximumZIndex)
            state.zIndex = clamped
            return clamped == index ? .applied : .adjusted("zIndex \(index) clamped to \(clamped)")
        }
    }

    // MARK: - Zoom level visibility

    /// Whether tiles are shown at view zoom level `level`; false outside ``minimumZoomLevel``...``maximumZoomLevel``.
    public func isShown(atZoomLevel level: Int) -> Bool {
        settings.isShown(atZoomLevel: level)
    }

    /// Shows tiles at `level`; a level outside the view's range is ignored.
    @discardableResult
    public func show(atZoomLevel level: Int) -> LayerUpdate {
        setVisibility(true, from: level, to: level, what: "show(atZoomLevel: \(level))")
    }

    /// Hides tiles at `level`; a level outside the view's range is ignored.
    @discardableResult
    public func hide(atZoomLevel level: Int) -> LayerUpdate {
        setVisibility(false, from: level, to: level, what: "hide(atZoomLevel: \(level))")
    }

    /// Shows tiles at levels `from...to`; does nothing if either is outside the range or `from > to`.
    @discardableResult
    public func show(fromZoomLevel from: Int, toZoomLevel to: Int) -> LayerUpdate {
        setVisibility(true, from: from, to: to, what: "show(fromZoomLevel: \(from), toZoomLevel: \(to))")
    }

    /// Hides tiles at levels `from...to`; does nothing if either is outside the range or `from > to`.
    @discardableResult
    public func hide(fromZoomLevel from: Int, toZoomLevel to: Int) -> LayerUpdate {
        setVisibility(false, from: from, to: to, what: "hide(fromZoomLevel: \(from), toZoomLevel: \(to))")
    }

    private func setVisibility(_ shown: Bool, from: Int, to: Int, what: String) -> LayerUpdate {
        update(what) { state in
            guard Self.zoomLevels.contains(from), Self.zoomLevels.contains(to) else {
                return .ignoredInvalid("zoom levels must be in \(Self.zoomLevels)")
            }
            guard from <= to else { return .ignoredInvalid("from level \(from) is above to level \(to)") }
            for level in from...to {
                if shown { state.hiddenLevels &= ~(1 << UInt32(level)) } else { state.hiddenLevels |= 1 << UInt32(level) }
            }
            return .applied
        }
    }

    // MARK: - Disk cache settings

    /// Whether tiles are cached on disk; default false. Changed by ``setCacheEnabled(_:identifier:)``.
    public var cacheEnabled: Bool { state.withLock { $0.cacheEnabled } }

    /// The name of this layer's cache folder, set by the first ``setCacheEnabled(_:identifier:)``
    /// with a usable identifier and never changed afterwards.
    public var cacheIdentifier: String? { state.withLock { $0.cacheIdentifier } }

    /// Turns the disk cache on or off.
    ///
    /// Only letters and digits (of any script), `_` and `-` of `identifier` are kept. A `nil` or empty identifier
    /// (also one that is empty after stripping) leaves caching disabled. The first usable
    /// identifier sticks for the lifetime of the layer; later ones are not used.
    @discardableResult
    public func setCacheEnabled(_ enabled: Bool, identifier: String?) -> LayerUpdate {
        update("setCacheEnabled") { state in
            let cleaned = Self.sanitizeCacheIdentifier(identifier ?? "")
            guard !cleaned.isEmpty else {
                state.cacheEnabled = false
                return enabled ? .ignoredInvalid("a nil or empty cache identifier leaves caching disabled") : .applied
            }
            var notes: [String] = []
            if cleaned != identifier { notes.append("identifier stripped to \"\(cleaned)\"") }
            if let existing = state.cacheIdentifier {
                if existing != cleaned { notes.append("identifier stays \"\(existing)\" (the first one sticks)") }
            } else {
                state.cacheIdentifier = cleaned
            }
            state.cacheEnabled = enabled
            return notes.isEmpty ? .applied : .adjusted(notes.joined(separator: "; "))
        }
    }

    /// Keeps letters, digits (and combining marks) of any script, `_` and `-` (HERE's NMAMapTileLayer reference: "non
    /// alphanumeric characters … will be stripped … with the exception of "_" and "-"";
    /// `NSCharacterSet.alphanumericCharacterSet` is Unicode-wide). The identifier is put in
    /// canonical composed form (NFC) first, so that `é` typed either way names one folder.
    public static func sanitizeCacheIdentifier(_ identifier: String) -> String {
        var kept = String.UnicodeScalarView()
        for scalar in identifier.precomposedStringWithCanonicalMapping.unicodeScalars
        where CharacterSet.alphanumerics.contains(scalar) || scalar == "_" || scalar == "-" {
            kept.append(scalar)
        }
        return String(kept)
    }

    /// The most bytes the cache may take on disk (it may grow 5 MB past it); 0 (default) is unlimited.
    public var cacheSizeLimit: Int { state.withLock { $0.cacheSizeLimit } }

    /// Sets ``cacheSizeLimit``; a negative size is ignored.
    @discardableResult
    public func setCacheSizeLimit(_ bytes: Int) -> LayerUpdate {
        update("cacheSizeLimit") { state in
            guard bytes >= 0 else { return .ignoredInvalid("a size limit cannot be negative") }
            state.cacheSizeLimit = bytes
            return .applied
        }
    }

    /// Seconds after which a cached tile expires and is requested again; 0 (default) never expires.
    public var cacheTimeToLive: TimeInterval { state.withLock { $0.cacheTimeToLive } }

    /// Sets ``cacheTimeToLive``; a negative value is set to 0, a value that is not a number is ignored.
    @discardableResult
    public func setCacheTimeToLive(_ seconds: TimeInterval) -> LayerUpdate {
        update("cacheTimeToLive") { state in
            guard !seconds.isNaN else { return .ignoredInvalid("the time to live is not a number") }
            if seconds < 0 {
                state.cacheTimeToLive = 0
                return .adjusted("negative time to live \(seconds) set to 0")
            }
            state.cacheTimeToLive = seconds
            return .applied
        }
    }

    /// The cache folder in use, or `nil` when caching is disabled.
    public var cacheDirectory: URL? {
        let s = settings
        guard s.cacheEnabled, let id = s.cacheIdentifier else { return nil }
        return cacheRootDirectory.appendingPathComponent(id, isDirectory: true)
    }

    /// The disk cache, created on first use; `nil` when caching is disabled.
    func diskCache(_ settings: Settings) -> TileDiskCache? {
        guard settings.cacheEnabled, let id = settings.cacheIdentifier else { return nil }
        return cacheStore.withLock { store in
            if let store { return store }
            let cache = TileDiskCache(directory: cacheRootDirectory.appendingPathComponent(id, isDirectory: true), now: cacheClock)
            store = cache
            return cache
        }
    }

    /// Removes every tile of this layer's cache folder (whether or not caching is enabled now).
    ///
    /// Tiles still loading when this runs may be written afterwards: to be sure the cache ends
    /// empty, remove the layer from its view first.
    /// - Throws: ``TileCacheError`` when the folder cannot be cleared.
    public func clearCache() throws(TileCacheError) {
        guard let id = cacheIdentifier else { return }
        let cache = cacheStore.withLock { store in
            store ?? TileDiskCache(directory: cacheRootDirectory.appendingPathComponent(id, isDirectory: true), now: cacheClock)
        }
        try cache.clear()
    }

    // MARK: - Reloading

    private let contentVersion = Locked(0)

    /// How many times ``reloadTiles()`` was called: a view asks again for tiles it loaded before.
    var contentGeneration: Int { contentVersion.withLock { $0 } }

    /// Tells the views showing the layer that its data source's tiles changed (a patched or
    /// synced archive): at their next update they ask for every tile in view again, and for the
    /// tiles `hasTile` had said were absent, while drawing the tiles they hold until each new one
    /// arrives, so that no frame goes blank; a tile that no longer exists is no longer drawn.
    /// Allowed while the layer is in a view (it changes no setting); the disk cache is not
    /// cleared (``clearCache()``).
    public func reloadTiles() { contentVersion.withLock { $0 += 1 } }

    // MARK: - Diagnostics

    /// What the layer noticed and ignored, oldest first (at most ``diagnosticLimit``).
    public var diagnostics: [TileLayerDiagnostic] { diagnosticLog.withLock { $0 } }

    func record(_ diagnostic: TileLayerDiagnostic) {
        diagnosticLog.withLock { log in
            if log.count >= Self.diagnosticLimit { log.removeFirst(log.count - Self.diagnosticLimit + 1) }
            log.append(diagnostic)
        }
    }
}
