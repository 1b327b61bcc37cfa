/// Spherical Web Mercator (EPSG:3857), the projection of every tile pyramid tilepack handles.
public enum WebMercator {
    /// The latitude at which the Mercator square ends: atan(sinh(pi)) in degrees.
    public static let maximumLatitude = 85.05112878
}
