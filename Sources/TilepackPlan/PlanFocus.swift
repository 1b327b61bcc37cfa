import Foundation
import TilepackCore

/// Where detail matters most: a point (where the user is going) or a route. A tile's detail falls
/// off with its distance `d` from the focus: within ``radius`` it counts in full, and each time the
/// distance doubles beyond it the tile counts as if it were one zoom deeper (`Specs/plan.md` §2).
public struct PlanFocus: Hashable, Sendable {
    /// One point, or a polyline (each segment straight in Web Mercator, as `RouteCover` draws it).
    public var points: [GeoCoordinate]
    /// The distance in metres within which detail counts in full.
    public var radius: Double

    /// - Throws: ``GeometryError`` for no points, a coordinate off the map, a radius not above 0.
    public init(points: [GeoCoordinate], radius: Double = 2_000) throws(GeometryError) {
        guard !points.isEmpty else { throw .emptyRoute }
        guard radius.isFinite, radius > 0 else { throw .invalidRadius(radius) }
        for point in points { _ = try WebMercator.worldPoint(of: point) }
        self.points = points
        self.radius = radius
    }

    /// The focus as world points and segments, ready for distances.
    func prepared() -> Prepared {
        let world = points.map { (try? WebMercator.worldPoint(of: $0)) ?? MercatorPoint(x: 0, y: 0) }
        return Prepared(points: world, radius: radius)
    }

    /// The focus in world units (0...1 on both axes), with what `falloff` needs.
    struct Prepared {
        let points: [MercatorPoint]
        let radius: Double
        /// Metres per world unit at each point's latitude (the Mercator scale, cos φ × equator).
        let scales: [Double]
        /// Segments grouped 32 at a time with their boxes, so far groups are skipped.
        let groups: [(range: Range<Int>, minX: Double, maxX: Double, minY: Double, maxY: Double)]

        init(points: [MercatorPoint], radius: Double) {
            self.points = points
            self.radius = radius
            scales = points.map { point in
                let latitude = atan(sinh(Double.pi * (1 - 2 * point.y)))
                return 2 * Double.pi * WebMercator.earthRadius * cos(latitude)
            }
            var groups: [(Range<Int>, Double, Double, Double, Double)] = []
            // Consecutive groups share their end point, so every segment lies in one group.
            var start = 0
            while true {
                let end = min(points.count, start + 33)
                let slice = points[start..<end]
                groups.append(
                    (start..<end, slice.map(\.x).min()!, slice.map(\.x).max()!, slice.map(\.y).min()!, slice.map(\.y).max()!))
                if end == points.count { break }
                start = end - 1
            }
            self.groups = groups
        }

        /// `log2(1 + d / radius)`, `d` the distance in metres from the focus to the tile's nearest point.
        func falloff(zoom: Int, x: Int, y: Int) -> Double {
            let side = 1 / Double(1 << zoom)
            let box = (minX: Double(x) * side, maxX: Double(x + 1) * side, minY: Double(y) * side, maxY: Double(y + 1) * side)
            var best = Double.infinity
            for group in groups {
                let gap = Self.gap(box, (group.minX, group.maxX, group.minY, group.maxY)) * scales[group.range.lowerBound]
                guard gap < best else { continue }
                if group.range.count == 1 {
                    best = min(best, Self.distance(points[group.range.lowerBound], box) * scales[group.range.lowerBound])
                    continue
                }
                for i in group.range.dropLast() {
                    let d = Self.distance(points[i], points[i + 1], box) * (scales[i] + scales[i + 1]) / 2
                    best = min(best, d)
                }
            }
            return log2(1 + best / radius)
        }

        typealias Box = (minX: Double, maxX: Double, minY: Double, maxY: Double)

        /// The distance between two boxes (0 when they meet).
        static func gap(_ a: Box, _ b: Box) -> Double {
            let dx = max(0, max(a.minX - b.maxX, b.minX - a.maxX))
            let dy = max(0, max(a.minY - b.maxY, b.minY - a.maxY))
            return (dx * dx + dy * dy).squareRoot()
        }

        /// A point's distance to a box.
        static func distance(_ p: MercatorPoint, _ box: Box) -> Double {
            gap((p.x, p.x, p.y, p.y), box)
        }

        /// A segment's distance to a box: 0 when it crosses it, else the least of its ends' distances
        /// to the box and the box's corners' distances to it.
        static func distance(_ a: MercatorPoint, _ b: MercatorPoint, _ box: Box) -> Double {
            if crosses(a, b, box) { return 0 }
            var best = min(distance(a, box), distance(b, box))
            for corner in [(box.minX, box.minY), (box.minX, box.maxY), (box.maxX, box.minY), (box.maxX, box.maxY)] {
                best = min(best, pointToSegment(corner.0, corner.1, a, b))
            }
            return best
        }

        static func pointToSegment(_ px: Double, _ py: Double, _ a: MercatorPoint, _ b: MercatorPoint) -> Double {
            let dx = b.x - a.x, dy = b.y - a.y
            let length = dx * dx + dy * dy
            let t = length > 0 ? min(1, max(0, ((px - a.x) * dx + (py - a.y) * dy) / length)) : 0
            let ex = a.x + t * dx - px, ey = a.y + t * dy - py
            return (ex * ex + ey * ey).squareRoot()
        }

        /// Whether the segment meets the box (Liang-Barsky clipping).
        static func crosses(_ a: MercatorPoint, _ b: MercatorPoint, _ box: Box) -> Bool {
            var t0 = 0.0, t1 = 1.0
            let dx = b.x - a.x, dy = b.y - a.y
            for (p, q) in [(-dx, a.x - box.minX), (dx, box.maxX - a.x), (-dy, a.y - box.minY), (dy, box.maxY - a.y)] {
                if p == 0 {
                    if q < 0 { return false }
                } else {
                    let r = q / p
                    if p < 0 { t0 = max(t0, r) } else { t1 = min(t1, r) }
                    if t0 > t1 { return false }
                }
            }
            return true
        }
    }
}
