import TilepackCore

/// The tile layer's one place for which image sizes stand for a tile.
///
/// HERE's iOS SDK guide, Custom Raster Tiles: tiles "should be sized at 256 x 256 or 512 x 512 pixels … the NMAMapView can scale
/// the image to fit". A layer of `tileSize` pixels accepts square images whose side is a power of
/// two from half to four times `tileSize` (a 256 px layer: 128, 256, 512, 1024), keeps them at
/// their own resolution and scales them when drawing; on a 2x screen a 512 px image of a 256 px
/// layer lands on 512 output pixels and is drawn pixel for pixel (Apple's MKTileOverlay reference: Retina tiles are not
/// scaled). Raw bitmaps handed over synchronously or through a tile request's buffer are exactly
/// `tileSize` pixels (HERE's NMAMapTileLayer reference: "you are expected to supply tiles sized 256 x 256 pixels").
public enum TileImageSize {
    /// The smallest image side accepted, as a fraction of the tile size: one half.
    public static let smallestFactorDenominator = 2
    /// The largest image side accepted, as a multiple of the tile size: four times.
    public static let largestFactor = 4

    /// The image sides a layer of `tileSize` pixels accepts (powers of two within this range).
    public static func acceptedSides(tileSize: Int) -> ClosedRange<Int> {
        max(1, tileSize / smallestFactorDenominator)...(tileSize * largestFactor)
    }

    /// Whether a `width` x `height` image may stand for a tile of a `tileSize` px layer.
    public static func isAccepted(width: Int, height: Int, tileSize: Int) -> Bool {
        width == height && width.nonzeroBitCount == 1 && acceptedSides(tileSize: tileSize).contains(width)
    }

    /// The rule in words, for error messages.
    public static func describe(tileSize: Int) -> String {
        let sides = acceptedSides(tileSize: tileSize)
        return "a \(tileSize) px layer takes square images of a power of two from \(sides.lowerBound) to \(sides.upperBound) px"
    }
}
