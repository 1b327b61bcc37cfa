/// One pixel as four 8-bit channels with straight (not premultiplied) alpha.
public struct RGBA8: Hashable, Sendable, CustomStringConvertible {
    public var r: UInt8
    public var g: UInt8
    public var b: UInt8
    public var a: UInt8

    public init(r: UInt8, g: UInt8, b: UInt8, a: UInt8 = 255) {
        self.r = r
        self.g = g
        self.b = b
        self.a = a
    }

    public static let transparent = RGBA8(r: 0, g: 0, b: 0, a: 0)
    public static let black = RGBA8(r: 0, g: 0, b: 0)
    public static let white = RGBA8(r: 255, g: 255, b: 255)

    public var description: String { "RGBA(\(r), \(g), \(b), \(a))" }
}

/// How pixels are interpolated when a bitmap is scaled.
public enum ResampleFilter: Sendable, Hashable {
    /// Each output pixel takes the value of the source pixel under its centre.
    case nearest
    /// Bilinear interpolation in premultiplied space (no dark fringes at transparent edges);
    /// downscaling by powers of two averages 2x2 blocks per halving.
    case bilinear
}
