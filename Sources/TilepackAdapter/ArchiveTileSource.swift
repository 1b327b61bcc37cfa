import Foundation
import TileLayer
import TilepackCore
import TilepackImaging
import TilepackStorage

/// The bitmap data source that serves any archive (MBTiles, bundle) to a ``MapTileLayer``.
///
/// ```swift
/// let source = try ArchiveTileSource(path: "tiles.tilepack")
/// let layer = source.makeLayer()          // bounds, zooms, tile size, transparency from the archive
/// view.addMapTileLayer(layer)
/// ```
///
/// - `hasTile` is answered from the archive's index, without reading a tile (see
///   ``ArchiveTileReader/hasTile(_:tileSize:)``); `false` makes the layer never ask again.
/// - Tiles are supplied through the tile-request way: each request is queued on a bounded
///   concurrent `TileWorkQueue` and the call returns at once; a worker decodes the tile straight
///   into the request's buffer in the layer's pixel format (or LZ4-decompresses a raw-bitmap
///   bundle's payload into it) and completes the request.
/// - On a 2x or 3x screen (``TileRequest/contentScaleFactor``), where the archive holds more
///   pixels for a tile than the layer's tile size (its tiles one zoom deeper, or larger tiles),
///   the request is completed with an image of twice the tile size, drawn pixel for pixel.
/// - A cancelled tile request (the tile left the view) is not read if it still waits, and a
///   running read stops before its next archive tile; so do requests cancelled here
///   (``cancelRequests(notNeededBy:)``). Either way the request completes as failed.
/// - A tile that fails permanently is reported once and then answered `hasTile` false.
public final class ArchiveTileSource: MapTileLayerDataSource, CustomStringConvertible {
    public struct Options: Hashable, Sendable {
        /// How tiles are read (archive tile size, decoded-tile cache, image size limit).
        public var reader: ArchiveReaderOptions
        /// The most tiles read at once; default the number of active processors.
        public var maximumConcurrency: Int

        public init(
            reader: ArchiveReaderOptions = ArchiveReaderOptions(),
            maximumConcurrency: Int = ProcessInfo.processInfo.activeProcessorCount
        ) {
            self.reader = reader
            self.maximumConcurrency = maximumConcurrency
        }
    }

    /// The synchronous reader behind the source (also usable on its own); a new one after
    /// ``reopen(reloading:)``.
    public var reader: ArchiveTileReader { current.withLock { $0 } }
    private let current: Locked<ArchiveTileReader>
    /// The executor the tiles are read on.
    package let workQueue: TileWorkQueue

    /// - Parameters:
    ///   - archive: the archive to serve.
    ///   - onFailure: called once per archive tile that fails permanently, with the archive and
    ///     the tile, on a worker thread.
    public init(
        archive: any TileArchive, options: Options = Options(),
        onFailure: (@Sendable (ArchiveTileFailure) -> Void)? = nil
    ) {
        self.current = Locked(ArchiveTileReader(archive: archive, options: options.reader, onFailure: onFailure))
        self.onFailure = onFailure
        self.workQueue = TileWorkQueue(maximumConcurrency: options.maximumConcurrency)
    }

    /// Opens the archive at `path` (MBTiles or bundle, told apart by its first bytes) and serves it.
    public convenience init(
        path: String, options: Options = Options(),
        onFailure: (@Sendable (ArchiveTileFailure) -> Void)? = nil
    ) throws(TileArchiveError) {
        self.init(archive: try openTileArchive(path: path), options: options, onFailure: onFailure)
    }

    /// Opens the archive at `path` and serves only its publisher's tiles: each checked against the
    /// signed root in `path.tpsig` with `key` on its first read (a ``VerifiedTileArchive``); a tile
    /// that is not the signed one fails as a damaged tile does (`onFailure`). Throws
    /// `SignatureError` when the archive is not signed by `key` or its release is below
    /// `minimumRelease`.
    public convenience init(
        path: String, key: VerifierKey, minimumRelease: UInt64 = 0, options: Options = Options(),
        onFailure: (@Sendable (ArchiveTileFailure) -> Void)? = nil
    ) throws {
        let archive = try VerifiedTileArchive(base: try openTileArchive(path: path), key: key, minimumRelease: minimumRelease)
        self.init(archive: archive, options: options, onFailure: onFailure)
    }

    private let onFailure: (@Sendable (ArchiveTileFailure) -> Void)?

    /// The archive served.
    public var archive: any TileArchive { reader.archive }

    // MARK: - A new version

    /// Serves the archive now at the path of the one served (a patched or synced archive: a
    /// bundle or PMTiles renamed over it, an MBTiles file changed in place), with a new reader
    /// (its decoded tiles and failures forgotten), and reloads `layers`: they keep drawing the
    /// tiles they hold until each new one arrives (``MapTileLayer/reloadTiles()``). Requests
    /// already running finish from the old archive. Throws, and goes on serving the old one,
    /// when the path cannot be opened.
    public func reopen(reloading layers: [MapTileLayer] = []) throws(TileArchiveError) {
        let old = reader
        let archive: any TileArchive
        if let verified = old.archive as? VerifiedTileArchive {
            // A signed pack stays checked with its key (the new version's own sidecar).
            do { archive = try verified.reopened() } catch let error as TileArchiveError { throw error } catch {
                throw TileArchiveError(path: old.archive.path, fault: .corrupt("\(error)"))
            }
        } else {
            archive = try openTileArchive(path: old.archive.path)
        }
        let next = ArchiveTileReader(archive: archive, options: old.options, onFailure: onFailure)
        current.withLock { $0 = next }
        for layer in layers { layer.reloadTiles() }
    }

    /// Every tile that failed permanently.
    public var failures: [ArchiveTileFailure] { reader.failures }

    public var description: String { "ArchiveTileSource(\(archive.path))" }

    // MARK: - MapTileLayerDataSource

    public func mapTileLayer(_ layer: MapTileLayer, hasTileAt tile: TileCoordinate) -> Bool {
        reader.hasTile(tile, tileSize: layer.tileSize)
    }

    public func mapTileLayer(
        _ layer: MapTileLayer, requestDataForTileAt tile: TileCoordinate,
        tileRequest: TileRequest
    ) -> TileRequestDisposition {
        let reader = self.reader
        let token = workQueue.submit(
            tile,
            run: { token in
                let isCancelled = { token.isCancelled || tileRequest.isCancelled }
                do {
                    if let retina = Self.retinaTileSize(tileRequest, reader: reader),
                        let image = try reader.bitmap(
                            at: tile, tileSize: retina, pixelFormat: tileRequest.pixelFormat,
                            isCancelled: isCancelled)
                    {
                        if tileRequest.complete(with: image) { return }
                    }
                    let outcome = try reader.read(
                        tile, tileSize: tileRequest.tileSize, pixelFormat: tileRequest.pixelFormat,
                        into: tileRequest.bytes, isCancelled: isCancelled)
                    tileRequest.complete(outcome == .delivered ? .complete : .failed)
                } catch {
                    tileRequest.fail()
                }
            },
            cancelled: {
                tileRequest.fail()
            })
        let queue = workQueue
        tileRequest.onCancellation { queue.cancel(token) }
        return .accepted
    }

    /// The image size to deliver for a request on a 2x or 3x screen: twice the tile size when the
    /// archive holds that many pixels for the tile (not merely its own tile scaled up); else `nil`.
    static func retinaTileSize(_ request: TileRequest, reader: ArchiveTileReader) -> Int? {
        guard request.contentScaleFactor >= 2 else { return nil }
        let size = request.tileSize * 2
        guard TileSize.isValid(size), reader.hasPixels(for: request.tile, tileSize: size) else { return nil }
        return size
    }

    // MARK: - Cancelling

    /// Cancels the requests for tiles that match: waiting ones complete as failed at once without
    /// being read; running ones stop before their next archive tile. Returns how many waiting
    /// requests were dropped. The layer asks again for a cancelled tile if it is needed later.
    @discardableResult
    public func cancelRequests(where matches: (TileCoordinate) -> Bool) -> Int {
        workQueue.cancel(where: matches)
    }

    /// Cancels every request whose tile is not in `keeping`.
    @discardableResult
    public func cancelRequests(keeping: Set<TileCoordinate>) -> Int {
        workQueue.cancel { !keeping.contains($0) }
    }

    /// Cancels the requests a view no longer needs after it moved: every tile that is neither in
    /// `plan` (see ``HeadlessMapView/tilePlans()``) nor an ancestor of a tile drawn in it (which the
    /// view may want as a fallback).
    @discardableResult
    public func cancelRequests(notNeededBy plan: LayerTilePlan) -> Int {
        var keep = Set(plan.tiles)
        for placement in plan.placements {
            var tile = placement.tile
            keep.insert(tile)
            while let parent = tile.parent, keep.insert(parent).inserted { tile = parent }
        }
        return cancelRequests(keeping: keep)
    }

    /// Requests waiting to be read.
    public var waitingRequestCount: Int { workQueue.waitingCount }

    // MARK: - Layer configuration

    /// The layer settings the archive implies for a layer of `tileSize` (nil: the archive's own).
    public func layerConfiguration(tileSize: Int? = nil) -> ArchiveLayerConfiguration {
        ArchiveLayerConfiguration.make(reader: reader, tileSize: tileSize)
    }

    /// Applies ``layerConfiguration(tileSize:)`` to `layer`: tile size, bounding box, the zoom
    /// levels shown and transparency; the data source is not changed. Settings a locked layer
    /// ignores are in the returned updates.
    @discardableResult
    public func configure(_ layer: MapTileLayer, tileSize: Int? = nil) -> (
        configuration: ArchiveLayerConfiguration, updates: [String: LayerUpdate]
    ) {
        let configuration = layerConfiguration(tileSize: tileSize)
        var updates: [String: LayerUpdate] = [:]
        updates["tileSize"] = layer.setTileSize(configuration.tileSize)
        updates["boundingBox"] = layer.setBoundingBox(configuration.boundingBox)
        if let visible = configuration.visibleZoomLevels {
            updates["showLevels"] = layer.show(fromZoomLevel: MapTileLayer.minimumZoomLevel, toZoomLevel: MapTileLayer.maximumZoomLevel)
            if visible.lowerBound > MapTileLayer.minimumZoomLevel {
                updates["hideBelow"] = layer.hide(fromZoomLevel: MapTileLayer.minimumZoomLevel, toZoomLevel: visible.lowerBound - 1)
            }
            if visible.upperBound < MapTileLayer.maximumZoomLevel {
                updates["hideAbove"] = layer.hide(fromZoomLevel: visible.upperBound + 1, toZoomLevel: MapTileLayer.maximumZoomLevel)
            }
        } else if configuration.archiveZoomLevels != nil {
            updates["hideAll"] = layer.hide(fromZoomLevel: MapTileLayer.minimumZoomLevel, toZoomLevel: MapTileLayer.maximumZoomLevel)
        }
        updates["transparent"] = layer.setTransparent(configuration.transparent)
        return (configuration, updates)
    }

    /// A new layer with this source as its data source, configured from the archive.
    public func makeLayer(name: String? = nil, tileSize: Int? = nil, pixelFormat: PixelFormat = .rgba8888) -> MapTileLayer {
        let layer = MapTileLayer(name: name ?? URL(fileURLWithPath: archive.path).lastPathComponent)
        layer.setDataSource(self)
        layer.setPixelFormat(pixelFormat)
        configure(layer, tileSize: tileSize)
        return layer
    }
}
