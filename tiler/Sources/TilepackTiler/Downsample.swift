import Foundation

/// The lower zooms' resampling: GDAL's names (`near`, `bilinear`, `cubic`, `lanczos`,
/// `average`), gdal2tiles' default (`average`). A parent tile is made from its four children,
/// already cut, by halving a 2x2 mosaic of them: separable filters on colours weighted by alpha
/// (premultiplied), so that transparent pixels outside the data do not darken the edges.
public enum Resampling: String, CaseIterable, Sendable {
    case near, bilinear, cubic, lanczos, average

    /// gdal2tiles' default.
    public static let `default` = Resampling.average

    /// The weights of the source pixels `2i - r + 1 ... 2i + r` for output pixel `i` when halving
    /// (a filter of support `r` output pixels, stretched by 2), normalised to sum to 1.
    var taps: [Double] {
        func weights(radius: Int, _ kernel: (Double) -> Double) -> [Double] {
            // Source pixel centres relative to the output centre, in output pixels: ±0.25, ±0.75, ...
            let w = (0..<(2 * radius)).map { k -> Double in kernel((Double(k - radius) + 0.5) / 2) }
            let sum = w.reduce(0, +)
            return w.map { $0 / sum }
        }
        switch self {
        case .near: return [1]  // not a filter: ``parent(of:side:)`` takes each 2x2 block's top-left pixel
        case .average: return [0.5, 0.5]
        case .bilinear: return weights(radius: 2) { max(0, 1 - abs($0)) }
        case .cubic:
            // Keys' cubic convolution with a = -0.5 (GDAL's cubic).
            return weights(radius: 4) { x in
                let t = abs(x)
                if t < 1 { return 1.5 * t * t * t - 2.5 * t * t + 1 }
                if t < 2 { return -0.5 * t * t * t + 2.5 * t * t - 4 * t + 2 }
                return 0
            }
        case .lanczos:
            return weights(radius: 6) { x in
                if x == 0 { return 1 }
                if abs(x) >= 3 { return 0 }
                let p = Double.pi * x
                return 3 * sin(p) * sin(p / 3) / (p * p)
            }
        }
    }

    /// The parent of four `side` x `side` RGBA children (nil: transparent), `side` x `side`.
    public func parent(of children: [[UInt8]?], side: Int) -> [UInt8] {
        precondition(children.count == 4)
        if self == .near { return Self.nearestParent(of: children, side: side) }
        let w = taps.map { Float($0) }
        let mosaic = Self.premultipliedMosaic(of: children, side: side)
        return Self.halvedVertically(Self.halvedHorizontally(mosaic, side: side, taps: w), side: side, taps: w)
    }

    /// GDAL's nearest neighbour when halving: the top-left pixel of each 2x2 block.
    private static func nearestParent(of children: [[UInt8]?], side: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: side * side * 4)
        for (q, child) in children.enumerated() {
            guard let child else { continue }
            let ox = (q % 2) * side / 2, oy = (q / 2) * side / 2
            for y in 0..<(side / 2) {
                for x in 0..<(side / 2) {
                    let s = ((2 * y) * side + 2 * x) * 4, d = ((oy + y) * side + ox + x) * 4
                    out[d] = child[s]
                    out[d + 1] = child[s + 1]
                    out[d + 2] = child[s + 2]
                    out[d + 3] = child[s + 3]
                }
            }
        }
        return out
    }

    /// The 2x2 mosaic of the children, `2 side` x `2 side`, premultiplied, as floats.
    private static func premultipliedMosaic(of children: [[UInt8]?], side: Int) -> [Float] {
        let big = 2 * side
        var mosaic = [Float](repeating: 0, count: big * big * 4)
        for (q, child) in children.enumerated() {
            guard let child else { continue }
            let ox = (q % 2) * side, oy = (q / 2) * side
            for y in 0..<side {
                var s = y * side * 4
                var d = ((oy + y) * big + ox) * 4
                for _ in 0..<side {
                    let a = Float(child[s + 3]) / 255
                    mosaic[d] = Float(child[s]) * a
                    mosaic[d + 1] = Float(child[s + 1]) * a
                    mosaic[d + 2] = Float(child[s + 2]) * a
                    mosaic[d + 3] = Float(child[s + 3])
                    s += 4
                    d += 4
                }
            }
        }
        return mosaic
    }

    /// Horizontal: big x big -> side x big; the edges clamp (a mosaic's edge is the map's edge).
    private static func halvedHorizontally(_ mosaic: [Float], side: Int, taps w: [Float]) -> [Float] {
        let big = 2 * side
        let radius = w.count / 2
        var half = [Float](repeating: 0, count: side * big * 4)
        for y in 0..<big {
            for x in 0..<side {
                var acc: (Float, Float, Float, Float) = (0, 0, 0, 0)
                for (k, weight) in w.enumerated() {
                    let sx = min(max(2 * x - radius + 1 + k, 0), big - 1)
                    let s = (y * big + sx) * 4
                    acc.0 += weight * mosaic[s]
                    acc.1 += weight * mosaic[s + 1]
                    acc.2 += weight * mosaic[s + 2]
                    acc.3 += weight * mosaic[s + 3]
                }
                let d = (y * side + x) * 4
                half[d] = acc.0
                half[d + 1] = acc.1
                half[d + 2] = acc.2
                half[d + 3] = acc.3
            }
        }
        return half
    }

    /// Vertical: side x big -> side x side, then back to straight alpha.
    private static func halvedVertically(_ half: [Float], side: Int, taps w: [Float]) -> [UInt8] {
        let big = 2 * side
        let radius = w.count / 2
        var out = [UInt8](repeating: 0, count: side * side * 4)
        for y in 0..<side {
            for x in 0..<side {
                var acc: (Float, Float, Float, Float) = (0, 0, 0, 0)
                for (k, weight) in w.enumerated() {
                    let sy = min(max(2 * y - radius + 1 + k, 0), big - 1)
                    let s = (sy * side + x) * 4
                    acc.0 += weight * half[s]
                    acc.1 += weight * half[s + 1]
                    acc.2 += weight * half[s + 2]
                    acc.3 += weight * half[s + 3]
                }
                let alpha = min(max(acc.3, 0), 255)
                let d = (y * side + x) * 4
                let a8 = UInt8(alpha.rounded())
                out[d + 3] = a8
                guard a8 > 0 else { continue }
                let scale = 255 / alpha
                out[d] = UInt8(min(max(acc.0 * scale, 0), 255).rounded())
                out[d + 1] = UInt8(min(max(acc.1 * scale, 0), 255).rounded())
                out[d + 2] = UInt8(min(max(acc.2 * scale, 0), 255).rounded())
            }
        }
        return out
    }
}
