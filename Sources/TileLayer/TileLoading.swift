import Foundation
import TilepackCore
import TilepackImaging

/// How one tile load ended.
enum TileLoadResult: Sendable {
    /// The tile, at a size ``TileImageSize`` accepts for the layer (the layer's own size for raw bitmaps).
    case loaded(Bitmap)
    /// No tile this time; asked again after a back-off.
    case failed(String)
    /// The view cancelled the load (the tile left it): not a failure.
    case cancelled
}

/// Getting one tile for a layer: the disk cache first, then the data source's three ways in
/// their order of precedence, then the disk cache again to keep what arrived. Cancelling the task
/// that runs a load cancels its tile request (the data source sees it) and its URL transfer.
enum TileLoading {
    static func load(
        _ tile: TileCoordinate, layer: MapTileLayer, settings: MapTileLayer.Settings,
        scale: Double, standIn: Bool = false
    ) async -> TileLoadResult {
        let result = await loadOnce(tile, layer: layer, settings: settings, scale: scale, standIn: standIn)
        if case .failed = result, Task.isCancelled { return .cancelled }
        return result
    }

    private static func loadOnce(
        _ tile: TileCoordinate, layer: MapTileLayer, settings: MapTileLayer.Settings,
        scale: Double, standIn: Bool
    ) async -> TileLoadResult {
        guard let source = settings.dataSource else { return .failed("the layer has no data source") }
        let cache = layer.diskCache(settings)
        if let cache, let bitmap = cached(tile, in: cache, layer: layer, settings: settings) { return .loaded(bitmap) }
        func keep(_ bitmap: Bitmap, encoded: Data? = nil) -> TileLoadResult {
            if let cache {
                do {
                    try cache.store(tile, bitmap: bitmap, encoded: encoded, sizeLimit: settings.cacheSizeLimit)
                } catch {
                    layer.record(TileLayerDiagnostic(kind: .cacheError, tile: tile, message: "\(error)"))
                }
            }
            return .loaded(bitmap)
        }

        // Way 1: pixels returned synchronously.
        switch source.mapTileLayer(layer, dataForTileAt: tile) {
        case .bitmap(let data):
            guard data.count == settings.bytesPerTile,
                let bitmap = Bitmap(
                    width: settings.tileSize, height: settings.tileSize,
                    pixelFormat: settings.pixelFormat, pixels: [UInt8](data))
            else {
                return .failed(
                    "the data source returned \(data.count) bytes, a \(settings.tileSize)px \(settings.pixelFormat) tile takes \(settings.bytesPerTile)"
                )
            }
            return keep(bitmap)
        case .unavailable:
            return .failed("the data source has no tile now")
        case .notSupplied:
            break
        }

        // Way 2: pixels written into a tile request, completed later from any thread.
        switch await requested(tile, from: source, layer: layer, settings: settings, scale: scale, standIn: standIn) {
        case .finished(.complete(let bitmap)): return keep(bitmap)
        case .finished(.failed(let reason)): return .failed("\(reason)")
        case .finished(.dropped): return .failed("the tile request was released without being completed")
        case .declined: break
        }

        // Way 3: a URL the layer loads and converts.
        guard let url = source.mapTileLayer(layer, urlForTileAt: tile) else {
            return .failed("the data source supplied the tile in none of the three ways")
        }
        do {
            let data = try await TileURLLoader.load(url)
            let bitmap = try TileDecoding.bitmap(
                data, tileSize: settings.tileSize, pixelFormat: settings.pixelFormat,
                source: url.absoluteString)
            return keep(bitmap, encoded: data)
        } catch {
            return .failed("\(error)")
        }
    }

    /// The tile from the disk cache, when it holds a fresh one; a damaged entry is reported (the
    /// cache deletes it).
    private static func cached(
        _ tile: TileCoordinate, in cache: TileDiskCache, layer: MapTileLayer, settings: MapTileLayer.Settings
    ) -> Bitmap? {
        switch cache.lookup(tile, tileSize: settings.tileSize, pixelFormat: settings.pixelFormat, timeToLive: settings.cacheTimeToLive) {
        case .hit(let entry): return entry.bitmap
        case .damaged(let reason):
            layer.record(TileLayerDiagnostic(kind: .cacheEntryDamaged, tile: tile, message: "\(reason); entry deleted"))
            return nil
        case .expired, .miss: return nil
        }
    }

    /// Way 2: a tile request handed to the data source, and how it ended. The task's cancellation
    /// reaches the request without keeping it alive (a released request is a drop).
    private static func requested(
        _ tile: TileCoordinate, from source: any MapTileLayerDataSource, layer: MapTileLayer, settings: MapTileLayer.Settings,
        scale: Double, standIn: Bool
    ) async -> RequestAnswer {
        let link = RequestLink()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let once = ResumeOnce(continuation)
                let request = TileRequest(
                    tile: tile, tileSize: settings.tileSize, pixelFormat: settings.pixelFormat,
                    contentScaleFactor: scale, isFallbackStandIn: standIn, diagnose: { layer.record($0) },
                    finish: { once.resume(.finished($0)) })
                link.attach(request)
                if source.mapTileLayer(layer, requestDataForTileAt: tile, tileRequest: request) == .declined {
                    request.withdraw()
                    once.resume(.declined)
                }
            }
        } onCancel: {
            link.cancel()
        }
    }

    enum RequestAnswer: Sendable {
        case finished(TileRequestOutcome)
        case declined
    }

    /// Resumes a continuation once, whoever calls first.
    final class ResumeOnce: Sendable {
        private let continuation: Locked<CheckedContinuation<RequestAnswer, Never>?>

        init(_ continuation: CheckedContinuation<RequestAnswer, Never>) {
            self.continuation = Locked(continuation)
        }

        func resume(_ answer: RequestAnswer) {
            let taken = continuation.withLock { c -> CheckedContinuation<RequestAnswer, Never>? in
                defer { c = nil }
                return c
            }
            taken?.resume(returning: answer)
        }
    }

    /// Passes a cancellation to a tile request that may not exist yet, holding it weakly.
    final class RequestLink: Sendable {
        private struct State: Sendable {
            weak var request: TileRequest?
            var cancelled = false
        }

        private let state = Locked(State())

        func attach(_ request: TileRequest) {
            let cancelNow = state.withLock { s -> Bool in
                s.request = request
                return s.cancelled
            }
            if cancelNow { request.cancel() }
        }

        func cancel() {
            let request = state.withLock { s -> TileRequest? in
                s.cancelled = true
                return s.request
            }
            request?.cancel()
        }
    }
}
