/// The side of a square map tile in pixels: the one rule for tile sizes in tilepack. The tile
/// layer, the adapter, prefetch, `render`, the bundle's raw tiles, `verify` and the Mercator
/// pixel maths all ask it; none keeps a rule or a default of its own.
///
/// A tile size is a power of two from 16 to 4096 pixels; the default is 256. That is what a map
/// SDK user expects: the HERE SDK's `tileSize` "defaults to 256" and "MUST be a power of 2 value
/// (32, 64, 128, 256, 512 etc)", MapKit's `MKTileOverlay.tileSize` defaults to 256 x 256, and a
/// power of two is what lets one zoom's tiles be cut from, or merged into, another's. 16 is the
/// smallest a layer still draws (four zoom levels below a 256 px tile's; HERE: "tiles smaller
/// than 128 will not be rendered at higher zoom levels"), 4096 the largest image tilepack decodes.
public enum TileSize {
    /// 256 pixels, the HERE SDK's and MapKit's default.
    public static let `default` = 256
    /// The sizes that may be tile sizes when they are powers of two.
    public static let range: ClosedRange<Int> = 16...4096
    /// What the rule says, for messages: "a power of two in 16...4096".
    public static let rule = "a power of two in \(range)"

    /// Whether `side` is a tile size: a power of two in ``range``.
    public static func isValid(_ side: Int) -> Bool {
        range.contains(side) && side.nonzeroBitCount == 1
    }

    /// Why `side` is not a tile size ("tile size 300 is not a power of two in 16...4096"), or `nil`.
    public static func invalidReason(_ side: Int) -> String? {
        isValid(side) ? nil : "tile size \(side) is not \(rule)"
    }
}
