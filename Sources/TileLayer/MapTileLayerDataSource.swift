import Foundation
import TilepackCore

/// What a data source answers when asked for a tile's bitmap synchronously (the first way).
public enum SynchronousTileData: Sendable {
    /// This data source does not supply this tile synchronously: ask the next way (the default).
    case notSupplied
    /// The tile's pixels: exactly `tileSize * tileSize * bytesPerPixel` bytes in the layer's pixel format.
    case bitmap(Data)
    /// There is no tile here now (the request fails and is asked again later, with back-off).
    case unavailable
}

/// What a data source answers when handed a ``TileRequest`` (the second way).
public enum TileRequestDisposition: Sendable {
    /// The data source took the request and will complete it, from any thread.
    case accepted
    /// The data source does not take tile requests: ask the next way (the default).
    case declined
}

/// Supplies the tiles of a ``MapTileLayer``: tilepack's `NMAMapTileLayerDataSource`.
///
/// There are three ways to supply a tile, tried in this order (a way that is not implemented
/// answers with its default and passes to the next):
/// 1. ``mapTileLayer(_:dataForTileAt:)``: the pixels, returned synchronously;
/// 2. ``mapTileLayer(_:requestDataForTileAt:tileRequest:)``: the pixels written into a
///    ``TileRequest``'s buffer, completed later from any thread;
/// 3. ``mapTileLayer(_:urlForTileAt:)``: a `file:` or `http(s):` URL of a PNG or JPEG, which the
///    layer loads and converts to its pixel format.
///
/// ``mapTileLayer(_:hasTileAt:)`` is asked first: `false` means the tile does not exist and is
/// never asked for again by that view; not implementing it means every tile exists.
/// Coordinates are XYZ (row 0 at the north), at the tile zoom (see ``MapTileLayer/tileSize``).
/// The methods are called off the caller's thread and must not block for long.
public protocol MapTileLayerDataSource: Sendable {
    /// Whether the tile exists. Default: true.
    func mapTileLayer(_ layer: MapTileLayer, hasTileAt tile: TileCoordinate) -> Bool

    /// Way 1: the tile's pixels, synchronously. Default: ``SynchronousTileData/notSupplied``.
    func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData

    /// Way 2: write the pixels into `tileRequest` and complete it exactly once.
    /// Default: ``TileRequestDisposition/declined``.
    func mapTileLayer(
        _ layer: MapTileLayer, requestDataForTileAt tile: TileCoordinate,
        tileRequest: TileRequest
    ) -> TileRequestDisposition

    /// Way 3: where to load the tile image from. Default: `nil` (no tile).
    func mapTileLayer(_ layer: MapTileLayer, urlForTileAt tile: TileCoordinate) -> URL?
}

extension MapTileLayerDataSource {
    public func mapTileLayer(_ layer: MapTileLayer, hasTileAt tile: TileCoordinate) -> Bool { true }

    public func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData {
        .notSupplied
    }

    public func mapTileLayer(
        _ layer: MapTileLayer, requestDataForTileAt tile: TileCoordinate,
        tileRequest: TileRequest
    ) -> TileRequestDisposition {
        .declined
    }

    public func mapTileLayer(_ layer: MapTileLayer, urlForTileAt tile: TileCoordinate) -> URL? { nil }
}
