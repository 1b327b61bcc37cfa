import TilepackCore

/// The map layer a tile layer is drawn in (`NMAMapLayerType`), bottom to top.
///
/// The compositor draws layers in this order first and by ``MapTileLayer/zIndex`` second.
/// ``pointOfInterest`` and ``transitStop`` exist because the SDK's enum has them, but a tile layer
/// refuses them (``MapTileLayer/setMapLayerType(_:)`` reports ``LayerUpdate/ignoredInvalid(_:)``).
public enum MapLayerType: Int, Hashable, Sendable, CaseIterable, Comparable, CustomStringConvertible {
    /// Below the base map's areas.
    case background = 0
    /// The areas (parks, water, land use): the tile layer's default (`NMAMapLayerTypeArea`).
    case area = 1
    /// Buildings.
    case building = 2
    /// Points of interest: not allowed for tile layers.
    case pointOfInterest = 3
    /// Transit stops: not allowed for tile layers.
    case transitStop = 4
    /// Above everything else on the map (`NMAMapLayerTypeForeground`).
    case foreground = 5

    /// Whether a tile layer may be drawn in this map layer.
    public var isAllowedForTileLayers: Bool { self != .pointOfInterest && self != .transitStop }

    public static func < (a: MapLayerType, b: MapLayerType) -> Bool { a.rawValue < b.rawValue }

    public var description: String {
        switch self {
        case .background: "background"
        case .area: "area"
        case .building: "building"
        case .pointOfInterest: "point of interest"
        case .transitStop: "transit stop"
        case .foreground: "foreground"
        }
    }
}

/// What became of an attempt to change a layer property.
///
/// The SDK silently ignores a setter while the layer is locked or when the value is invalid;
/// tilepack does the same but says so, and also records a ``TileLayerDiagnostic``.
public enum LayerUpdate: Hashable, Sendable, CustomStringConvertible {
    /// The value was stored as given.
    case applied
    /// The value was stored after being brought into range (a clamped zIndex, a negative time to
    /// live set to 0, a cache identifier with characters stripped); the text says how.
    case adjusted(String)
    /// Nothing changed: the layer is locked (added to a map view).
    case ignoredLocked
    /// Nothing changed: the value is not allowed; the text says why.
    case ignoredInvalid(String)

    /// Whether the property now holds the new (possibly adjusted) value.
    public var wasApplied: Bool {
        switch self {
        case .applied, .adjusted: true
        case .ignoredLocked, .ignoredInvalid: false
        }
    }

    public var description: String {
        switch self {
        case .applied: "applied"
        case .adjusted(let how): "applied after adjusting: \(how)"
        case .ignoredLocked: "ignored: the layer is locked (added to a map view)"
        case .ignoredInvalid(let why): "ignored: \(why)"
        }
    }
}

/// Something a tile layer noticed and did not turn into an error: an ignored setter, a tile request
/// completed twice or dropped, a tile that failed, a damaged cache entry.
public struct TileLayerDiagnostic: Hashable, Sendable, CustomStringConvertible {
    public enum Kind: Hashable, Sendable {
        case settingIgnored
        case requestCompletedAgain
        case requestDropped
        case tileFailed
        case cacheEntryDamaged
        case cacheError
    }

    public var kind: Kind
    public var tile: TileCoordinate?
    public var message: String

    public init(kind: Kind, tile: TileCoordinate? = nil, message: String) {
        self.kind = kind
        self.tile = tile
        self.message = message
    }

    public var description: String {
        if let tile { "\(kind) \(tile): \(message)" } else { "\(kind): \(message)" }
    }
}
