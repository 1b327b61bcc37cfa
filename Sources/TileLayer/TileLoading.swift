import Foundation
import TilepackCore
import TilepackImaging

/// Getting one tile for a layer: the disk cache first, then the data source's three ways in
/// their order of precedence, then the disk cache again to keep what arrived.
enum TileLoading {
    static func load(_ tile: TileCoordinate, layer: MapTileLayer, settings: MapTileLayer.Settings,
                     scale: Double) async -> Result<Bitmap, StringError> {
        guard let source = settings.dataSource else { return .failure("the layer has no data source") }
        let cache = layer.diskCache(settings)
        if let cache {
            switch cache.lookup(tile, tileSize: settings.tileSize, pixelFormat: settings.pixelFormat,
                                timeToLive: settings.cacheTimeToLive) {
            case .hit(let entry): return .success(entry.bitmap)
            case .damaged(let reason):
                layer.record(TileLayerDiagnostic(kind: .cacheEntryDamaged, tile: tile, message: "\(reason); entry deleted"))
            case .expired, .miss: break
            }
        }
        func keep(_ bitmap: Bitmap, encoded: Data? = nil) -> Result<Bitmap, StringError> {
            if let cache {
                do {
                    try cache.store(tile, bitmap: bitmap, encoded: encoded, sizeLimit: settings.cacheSizeLimit)
                } catch {
                    layer.record(TileLayerDiagnostic(kind: .cacheError, tile: tile, message: "\(error)"))
                }
            }
            return .success(bitmap)
        }

        // Way 1: pixels returned synchronously.
        switch source.mapTileLayer(layer, dataForTileAt: tile) {
        case .bitmap(let data):
            guard data.count == settings.bytesPerTile,
                  let bitmap = Bitmap(width: settings.tileSize, height: settings.tileSize,
                                      pixelFormat: settings.pixelFormat, pixels: [UInt8](data)) else {
                return .failure("the data source returned \(data.count) bytes, a \(settings.tileSize)px \(settings.pixelFormat) tile takes \(settings.bytesPerTile)")
            }
            return keep(bitmap)
        case .unavailable:
            return .failure("the data source has no tile now")
        case .notSupplied:
            break
        }

        // Way 2: pixels written into a tile request, completed later from any thread.
        let outcome: RequestAnswer = await withCheckedContinuation { continuation in
            let once = ResumeOnce(continuation)
            let request = TileRequest(tile: tile, tileSize: settings.tileSize, pixelFormat: settings.pixelFormat,
                                      contentScaleFactor: scale, diagnose: { layer.record($0) },
                                      finish: { once.resume(.finished($0)) })
            if source.mapTileLayer(layer, requestDataForTileAt: tile, tileRequest: request) == .declined {
                request.withdraw()
                once.resume(.declined)
            }
        }
        switch outcome {
        case .finished(.complete(let bitmap)): return keep(bitmap)
        case .finished(.failed(let reason)): return .failure("\(reason)")
        case .finished(.dropped): return .failure("the tile request was released without being completed")
        case .declined: break
        }

        // Way 3: a URL the layer loads and converts.
        guard let url = source.mapTileLayer(layer, urlForTileAt: tile) else {
            return .failure("the data source supplied the tile in none of the three ways")
        }
        do {
            let data = try await TileURLLoader.load(url)
            let bitmap = try TileDecoding.bitmap(data, tileSize: settings.tileSize, pixelFormat: settings.pixelFormat,
                                                 source: url.absoluteString)
            return keep(bitmap, encoded: data)
        } catch {
            return .failure("\(error)")
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
}
