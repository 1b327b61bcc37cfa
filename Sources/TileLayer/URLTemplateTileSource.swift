import Foundation
import TilepackCore
import TilepackImaging

/// The address of one tile as an ``URLTemplateTileSource`` sees it (`MKTileOverlayPath`).
public struct TilePath: Hashable, Sendable, CustomStringConvertible {
    /// The column.
    public var x: Int
    /// The row, counted from the north (XYZ); ``URLTemplateTileSource/isGeometryFlipped`` flips it
    /// when the URL is built.
    public var y: Int
    /// The zoom level.
    public var z: Int
    /// The screen scale the tile is for: 1, 2 or 3.
    public var contentScaleFactor: Double

    public init(x: Int, y: Int, z: Int, contentScaleFactor: Double = 1) {
        self.x = x
        self.y = y
        self.z = z
        self.contentScaleFactor = contentScaleFactor
    }

    public init(_ tile: TileCoordinate, contentScaleFactor: Double = 1) {
        self.init(x: tile.x, y: tile.y, z: tile.zoom, contentScaleFactor: contentScaleFactor)
    }

    public var description: String { "\(z)/\(x)/\(y)@\(contentScaleFactor)x" }
}

/// A tile source built from a URL template: tilepack's `MKTileOverlay`, usable as the data source
/// of a ``MapTileLayer`` (see ``MapTileLayer/init(overlay:name:cacheRootDirectory:cacheClock:)``).
///
/// `{x}`, `{y}`, `{z}` and `{scale}` in the template are replaced by the tile's column, row, zoom
/// and screen scale, `{-y}` by its TMS row, and `{s}` by one of ``subdomains`` (the same one for a
/// tile every time: `subdomains[(x + y) % count]`, as Leaflet picks them); Core's
/// `TileURLTemplate` does it. The template may name a local file (`file:///tiles/{z}/{x}/{y}.png`) or a
/// server (`https://host/{z}/{x}/{y}.png`). Downloaded PNG or JPEG tiles are converted to the
/// layer's pixel format and kept at their own resolution when ``TileImageSize`` accepts it (a
/// 512 px `@2x` tile of a 256 px layer is drawn pixel for pixel on a 2x screen); other sizes are
/// refused.
///
/// Subclass and override ``url(forTilePath:)`` or ``loadTile(at:)`` to change how tiles are found
/// or loaded. Subclasses must stay immutable (their stored properties `let` and Sendable).
open class URLTemplateTileSource: MapTileLayerDataSource, @unchecked Sendable {
    /// The template given at initialisation, or `nil` (then a subclass builds URLs or loads tiles itself).
    public let urlTemplate: String?
    /// Whether rows count from the south (TMS) instead of the north; default false.
    public let isGeometryFlipped: Bool
    /// The lowest zoom with tiles; default 0. No tile below it is ever requested.
    public let minimumZ: Int
    /// The highest zoom with tiles; default 21. No tile above it is ever requested (with fallback
    /// on, the layer scales up tiles of this zoom instead).
    public let maximumZ: Int
    /// Whether the tiles are fully opaque and may replace the map content below; default false.
    public let canReplaceMapContent: Bool
    /// What `{s}` stands for; default `a`, `b`, `c`.
    public let subdomains: [String]
    /// ``urlTemplate`` parsed once.
    private let parsedTemplate: TileURLTemplate?

    public init(
        urlTemplate: String?, isGeometryFlipped: Bool = false, minimumZ: Int = 0, maximumZ: Int = 21,
        canReplaceMapContent: Bool = false, subdomains: [String] = ["a", "b", "c"]
    ) {
        self.urlTemplate = urlTemplate
        self.parsedTemplate = urlTemplate.map { TileURLTemplate($0) }
        self.subdomains = subdomains.isEmpty ? ["a", "b", "c"] : subdomains
        self.isGeometryFlipped = isGeometryFlipped
        self.minimumZ = minimumZ
        self.maximumZ = maximumZ
        self.canReplaceMapContent = canReplaceMapContent
    }

    /// The URL of a tile: the template with its placeholders replaced by Core's
    /// `TileURLTemplate` (`{y}` flipped when ``isGeometryFlipped``, with the path's own zoom;
    /// `{-y}` always the TMS row). `nil` when there is no template or the result is not a URL.
    open func url(forTilePath path: TilePath) -> URL? {
        parsedTemplate?.url(
            z: path.z, x: path.x, y: path.y, scheme: isGeometryFlipped ? .tms : .xyz,
            scale: path.contentScaleFactor, subdomains: subdomains)
    }

    /// The encoded bytes of a tile. The default loads ``url(forTilePath:)`` from a file or server.
    /// - Throws: ``TileLoadError`` (or any error of an override): the tile fails and is asked again later.
    open func loadTile(at path: TilePath) async throws -> Data {
        guard let url = url(forTilePath: path) else {
            throw TileLoadError.noURL(
                TileCoordinate(validatingZoom: path.z, x: path.x, y: path.y)
                    ?? TileCoordinate(uncheckedZoom: 0, x: 0, y: 0))
        }
        return try await TileURLLoader.load(url)
    }

    // MARK: MapTileLayerDataSource

    /// Tiles exist only from ``minimumZ`` to ``maximumZ``.
    public func mapTileLayer(_ layer: MapTileLayer, hasTileAt tile: TileCoordinate) -> Bool {
        (minimumZ...max(minimumZ, maximumZ)).contains(tile.zoom) && minimumZ <= maximumZ
    }

    /// Loads the tile in a task and decodes it into the request's buffer (or, for an image of
    /// another accepted size, into a bitmap of its own size). Cancelling the request cancels the task.
    public func mapTileLayer(
        _ layer: MapTileLayer, requestDataForTileAt tile: TileCoordinate,
        tileRequest: TileRequest
    ) -> TileRequestDisposition {
        let path = TilePath(tile, contentScaleFactor: tileRequest.contentScaleFactor)
        let task = Task {
            do {
                let data = try await self.loadTile(at: path)
                try Task.checkCancellation()
                let name = self.url(forTilePath: path)?.absoluteString ?? path.description
                if let image = try TileDecoding.decode(data, into: tileRequest, source: name) {
                    tileRequest.complete(with: image)
                } else {
                    tileRequest.complete(.complete)
                }
            } catch {
                if !tileRequest.isCancelled && !tileRequest.isFallbackStandIn {
                    layer.record(TileLayerDiagnostic(kind: .tileFailed, tile: tile, message: "\(error)"))
                }
                tileRequest.complete(.failed)
            }
        }
        tileRequest.onCancellation { task.cancel() }
        return .accepted
    }
}

/// Decoding downloaded tiles into a layer's pixel format, at a size ``TileImageSize`` accepts.
enum TileDecoding {
    /// Decodes PNG/JPEG `data` in the request's pixel format: straight into its buffer when the
    /// image is the request's tile size (returns `nil`), else into a new bitmap of the image's own
    /// accepted size (returned, for ``TileRequest/complete(with:)``).
    static func decode(_ data: Data, into request: TileRequest, source: String) throws(TileLoadError) -> Bitmap? {
        let info = try imageInfo(data, tileSize: request.tileSize, source: source)
        if info.width == request.tileSize {
            try decode(data, into: request.bytes, side: info.width, pixelFormat: request.pixelFormat, source: source)
            return nil
        }
        return try bitmap(data, side: info.width, pixelFormat: request.pixelFormat, source: source)
    }

    /// Decodes `data` into a new bitmap of its own size (one the layer accepts) and the layer's format.
    static func bitmap(_ data: Data, tileSize: Int, pixelFormat: PixelFormat, source: String) throws(TileLoadError) -> Bitmap {
        let info = try imageInfo(data, tileSize: tileSize, source: source)
        return try bitmap(data, side: info.width, pixelFormat: pixelFormat, source: source)
    }

    /// The image's header, refused unless ``TileImageSize`` accepts its size for `tileSize`.
    private static func imageInfo(_ data: Data, tileSize: Int, source: String) throws(TileLoadError) -> ImageInfo {
        let result: Result<ImageInfo, TileLoadError> = data.withUnsafeBytes { bytes in
            do {
                return .success(try ImageDecoder.imageInfo(bytes))
            } catch {
                return .failure(.undecodable(url: source, reason: "\(error)"))
            }
        }
        let info = try result.get()
        guard TileImageSize.isAccepted(width: info.width, height: info.height, tileSize: tileSize) else {
            throw .wrongSize(url: source, expected: tileSize, width: info.width, height: info.height)
        }
        return info
    }

    private static func decode(
        _ data: Data, into buffer: UnsafeMutableRawBufferPointer, side: Int,
        pixelFormat: PixelFormat, source: String
    ) throws(TileLoadError) {
        let failure: TileLoadError? = data.withUnsafeBytes { bytes in
            do {
                try ImageDecoder.decode(bytes, into: buffer, pixelFormat: pixelFormat, expectedWidth: side, expectedHeight: side)
            } catch {
                return .undecodable(url: source, reason: "\(error)")
            }
            return nil
        }
        if let failure { throw failure }
    }

    private static func bitmap(_ data: Data, side: Int, pixelFormat: PixelFormat, source: String) throws(TileLoadError) -> Bitmap {
        var pixels = [UInt8](repeating: 0, count: side * side * pixelFormat.bytesPerPixel)
        let failure = pixels.withUnsafeMutableBytes { buffer -> TileLoadError? in
            let result = Result { () throws(TileLoadError) in
                try decode(data, into: buffer, side: side, pixelFormat: pixelFormat, source: source)
            }
            if case .failure(let error) = result { return error }
            return nil
        }
        if let failure { throw failure }
        guard let bitmap = Bitmap(width: side, height: side, pixelFormat: pixelFormat, pixels: pixels) else {
            throw .undecodable(url: source, reason: "the pixels do not make a bitmap")
        }
        return bitmap
    }
}
