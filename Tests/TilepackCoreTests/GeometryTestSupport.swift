import Foundation
import TilepackCore

/// Great-circle distance in metres (haversine) on a sphere of `radius` metres.
func haversine(_ a: GeoCoordinate, _ b: GeoCoordinate, radius: Double = 6_371_008.8) -> Double {
    let phi1 = a.latitude * .pi / 180, phi2 = b.latitude * .pi / 180
    let dPhi = phi2 - phi1, dLambda = (b.longitude - a.longitude) * .pi / 180
    let h = sin(dPhi / 2) * sin(dPhi / 2) + cos(phi1) * cos(phi2) * sin(dLambda / 2) * sin(dLambda / 2)
    return 2 * radius * asin(min(1, h.squareRoot()))
}

func isClose(_ a: Double, _ b: Double, tolerance: Double = 1e-9) -> Bool { abs(a - b) <= tolerance }
