import Foundation

/// Elevations as colours (`--encoding`): a DEM's band 1, in metres, written into the RGB of
/// lossless tiles that a map (MapLibre's raster-dem source, hillshading, 3D terrain) decodes.
///
/// - `terrarium` (Mapzen/Tilezen, PMTiles metadata `encoding: terrarium`): `h + 32768 = R·256 + G + B/256`.
/// - `mapbox` (terrain-RGB): `h = -10000 + (R·65536 + G·256 + B) · 0.1`.
///
/// A pixel without data is transparent (alpha 0); every other is opaque.
package enum ElevationEncoding: String, CaseIterable, Sendable {
    case terrarium, mapbox

    /// The RGBA bytes of `values` (NaN: no data), clamped to what the encoding can hold.
    package func rgba(_ values: [Float]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: values.count * 4)
        for (i, h) in values.enumerated() where !h.isNaN {
            let d = i * 4
            switch self {
            case .terrarium:
                let v = min(max(Double(h) + 32768, 0), 65535.996)
                let whole = v.rounded(.down)
                out[d] = UInt8(Int(whole) >> 8)
                out[d + 1] = UInt8(Int(whole) & 255)
                out[d + 2] = UInt8(min(255, Int(((v - whole) * 256).rounded(.down))))
            case .mapbox:
                let v = Int(min(max(((Double(h) + 10000) * 10).rounded(), 0), 16_777_215))
                out[d] = UInt8(v >> 16)
                out[d + 1] = UInt8((v >> 8) & 255)
                out[d + 2] = UInt8(v & 255)
            }
            out[d + 3] = 255
        }
        return out
    }

    /// The elevation one pixel's colour stands for (the decoders' formula), NaN when transparent.
    package func elevation(r: UInt8, g: UInt8, b: UInt8, a: UInt8) -> Double {
        guard a > 0 else { return .nan }
        switch self {
        case .terrarium: return Double(r) * 256 + Double(g) + Double(b) / 256 - 32768
        case .mapbox: return -10000 + Double(Int(r) << 16 | Int(g) << 8 | Int(b)) * 0.1
        }
    }
}

extension Resampling {
    /// The parent of four `side` x `side` children of elevations (nil or NaN: no data): the same
    /// filters as colours, weighted by which samples have data; a parent sample with data on less
    /// than half its weight has none. Made from the elevations, never from their colours.
    package func parent(ofElevations children: [[Float]?], side: Int) -> [Float] {
        precondition(children.count == 4)
        let big = 2 * side
        var mosaic = [Float](repeating: .nan, count: big * big)
        for (q, child) in children.enumerated() {
            guard let child else { continue }
            let ox = (q % 2) * side, oy = (q / 2) * side
            for y in 0..<side {
                for x in 0..<side { mosaic[(oy + y) * big + ox + x] = child[y * side + x] }
            }
        }
        var out = [Float](repeating: .nan, count: side * side)
        if self == .near {
            for y in 0..<side {
                for x in 0..<side { out[y * side + x] = mosaic[2 * y * big + 2 * x] }
            }
            return out
        }
        let w = taps.map { Float($0) }
        let radius = w.count / 2
        // Horizontal then vertical, each carrying the weight that had data.
        var half = [Float](repeating: 0, count: side * big)
        var halfWeight = [Float](repeating: 0, count: side * big)
        for y in 0..<big {
            for x in 0..<side {
                var sum: Float = 0, weight: Float = 0
                for (k, tap) in w.enumerated() {
                    let v = mosaic[y * big + min(max(2 * x - radius + 1 + k, 0), big - 1)]
                    if !v.isNaN {
                        sum += tap * v
                        weight += tap
                    }
                }
                half[y * side + x] = sum
                halfWeight[y * side + x] = weight
            }
        }
        for y in 0..<side {
            for x in 0..<side {
                var sum: Float = 0, weight: Float = 0
                for (k, tap) in w.enumerated() {
                    let s = min(max(2 * y - radius + 1 + k, 0), big - 1) * side + x
                    sum += tap * half[s]
                    weight += tap * halfWeight[s]
                }
                if weight >= 0.5 { out[y * side + x] = sum / weight }
            }
        }
        return out
    }
}
