import Atomics
import Foundation
import HTTPTypes
import NIOCore
import TilepackCore
import TilepackImaging
import TilepackRemote
import TilepackRequestHead
@_spi(TilepackInternal) import TilepackStorage
@_spi(TilepackInternal) import TilepackCompression

/// A response before it goes on the wire.
struct ServerResponse: Sendable {
    var status: HTTPResponse.Status
    var headers: ResponseHeaders
    var body: ByteBuffer?

    init(status: HTTPResponse.Status, headers: ResponseHeaders = ResponseHeaders(), body: ByteBuffer? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// The HTTP contract of `Specs/serve.md` as one synchronous function of the request head, so that
/// routing and headers are tested without a socket; ``InlineHTTP1Channel`` answers requests with it.
final class TileService: Sendable {
    let options: TileServerOptions
    let catalog: ArchiveCatalog
    let leaflet: LeafletAssets
    let metrics: ServerMetrics
    let encodedTiles: EncodedTileCache
    /// `http://host:port` of the listening socket, once it listens (the base URL when the request has no usable Host).
    let listeningBase = Locked<String?>(nil)
    /// When the reload watcher last finished looking at every file (uptime, ns); 0 while no
    /// watcher runs. `/_/health` says `degraded` when it stalls.
    let lastReloadCheck = ManagedAtomic<UInt64>(0)
    private let cacheControl: String
    private let allocator = ByteBufferAllocator()
    private let log: @Sendable (String) -> Void

    /// The largest tile a gzip-stored vector tile may inflate to for a client that does not accept gzip.
    static let maximumInflatedTileSize = 64 << 20

    init(options: TileServerOptions, store: RemoteStore = RemoteStore(), log: @escaping @Sendable (String) -> Void = { _ in })
        throws(TileServerError)
    {
        self.options = options
        self.catalog = try ArchiveCatalog(
            paths: options.archivePaths,
            remote: RemoteSettings(
                store: store, cacheBytes: options.remoteCacheBytes, recheckInterval: options.recheckInterval,
                timeout: .nanoseconds(Int64(max(options.remoteTimeout, 0.001) * 1e9)),
                signature: try options.keyPath.map { path throws(TileServerError) in
                    try SignatureCheck(keyPath: path, minimumRelease: options.minimumRelease)
                }))
        self.leaflet = LeafletAssets(folder: options.leafletPath)
        self.metrics = ServerMetrics()
        self.encodedTiles = EncodedTileCache(capacity: options.encodedTileCacheBytes)
        self.cacheControl = options.effectiveCacheControl
        self.log = log
    }

    // MARK: Requests

    /// Answers one request (the body of a `HEAD` answer is dropped by the caller, its length kept).
    /// A tile of a remote archive whose bytes are not held waits for the store.
    func respond(to request: RequestHead) -> ServerResponse {
        answer(request) ?? text(.internalServerError, "the answer needed the store where it could not wait for it\n")
    }

    /// Answers one request without waiting for a remote archive's store (an event loop must not
    /// block): `nil` when the answer needs bytes of a remote archive that are not held (in its
    /// first request's bytes or its cache). The caller then gets the answer from
    /// ``respond(to:)`` on a thread that may wait.
    func respondWithoutWaiting(to request: RequestHead) -> ServerResponse? {
        HTTPByteSource.withoutWaiting { answer(request) }
    }

    /// The answer; `nil` only while ``HTTPByteSource/withoutWaiting(_:)`` runs and a tile needs the store.
    private func answer(_ request: RequestHead) -> ServerResponse? {
        let target = request.target
        var response: ServerResponse
        switch request.method {
        case .options:
            response = preflight(request)
        case .get, .head:
            if let denied = checkToken(request, target: target) {
                response = denied
            } else if let routed = route(request, target: target) {
                response = routed
            } else {
                return nil
            }
        default:
            response = text(.methodNotAllowed, "\(request.method.name) is not served: use GET or HEAD\n")
            response.headers[.allow] = "GET, HEAD, OPTIONS"
        }
        addCORS(request, to: &response)
        return response
    }

    private func route(_ request: RequestHead, target: String) -> ServerResponse? {
        switch Route(target: target) {
        case .tile(let name, let zoom, let x, let y, let fileExtension):
            return tile(request, name: name, zoom: zoom, x: x, y: y, fileExtension: fileExtension)
        case .tileJSON(let name):
            guard let slot = catalog.slot(named: name) else { return noArchive(name) }
            let body = TileJSON.document(slot.current, base: base(request), query: tokenQuery(target))
            return document(body, type: "application/json", cacheControl: "no-cache", request: request)
        case .preview(let name):
            guard let slot = catalog.slot(named: name) else { return noArchive(name) }
            let body = Pages.preview(slot.current, leaflet: leaflet, base: base(request), query: tokenQuery(target))
            return document(body, type: "text/html; charset=utf-8", cacheControl: "no-cache", request: request)
        case .previewWithoutSlash(let name):
            guard catalog.slot(named: name) != nil else { return noArchive(name) }
            var response = ServerResponse(status: .movedPermanently)
            response.headers[.location] = "/\(percentEncodedSegment(String(name)))/\(tokenQuery(target))"
            return response
        case .index:
            let body = Pages.index(catalog.slots.map(\.current), base: base(request), query: tokenQuery(target))
            return document(body, type: "text/html; charset=utf-8", cacheControl: "no-cache", request: request)
        case .leaflet(let file):
            guard let asset = leaflet.files[file] else {
                return text(.notFound, leaflet.problem ?? "no Leaflet file '\(file)'\n")
            }
            var response = ServerResponse(status: .ok, body: allocator.buffer(bytes: asset.bytes))
            response.headers[.contentType] = asset.contentType
            response.headers[.cacheControl] = "public, max-age=86400"
            return response
        case .health:
            return health()
        case .metrics:
            var response = ServerResponse(status: .ok, body: allocator.buffer(bytes: metrics.render()))
            response.headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            response.headers[.cacheControl] = "no-store"
            return response
        case .notFound(let reason):
            return text(.notFound, reason + "\n")
        }
    }

    // MARK: Tiles

    private func tile(_ request: RequestHead, name: Substring, zoom: Int, x: Int, y: Int, fileExtension: Substring) -> ServerResponse? {
        guard let slot = catalog.slot(named: name) else { return noArchive(name) }
        let generation = slot.current
        // An archive of unknown format (tiles of no format tilepack knows) takes any extension.
        guard generation.allowsExtension(fileExtension) else {
            let format = generation.servedFormat.map(\.description) ?? "unknown"
            return text(
                .notFound, "'\(generation.name)' serves \(format) tiles: use .\(generation.extensions.joined(separator: " or ."))\n")
        }
        guard let coordinate = TileCoordinate(validatingZoom: zoom, x: x, y: y) else {
            return text(.notFound, "\(zoom)/\(x)/\(y) is not a tile (zoom 0-\(TileCoordinate.maximumZoom), x and y below 2^zoom)\n")
        }
        do {
            return try tileResponse(request, generation: generation, tile: coordinate)
        } catch {
            // Not an error: the bytes are in the store, and this caller may not wait for them.
            if HTTPByteSource.waitingForbidden, HTTPByteSource.wouldWait(error) { return nil }
            // The file was replaced while this request ran, and the old version can no longer give
            // what it needs (a new database connection to a file that is gone): answer from the
            // new version, whole, rather than fail or mix.
            // A remote object is looked at again only when a read found it replaced (its ETag
            // changed): a store that fails is not asked twice per request.
            if generation.remote == nil || Self.objectChanged(error), let newer = slot.replacement(of: generation),
                let retried = try? tileResponse(request, generation: newer, tile: coordinate)
            {
                return retried
            }
            let message = "tile \(coordinate) of '\(generation.name)': \(generation.describe(error))"
            log(message)
            // The store failed, not this server: 504 when it did not answer in time, else 502.
            if generation.remote != nil {
                return text(Self.timedOut(error) ? .gatewayTimeout : .badGateway, message + "\n")
            }
            return text(.internalServerError, message + "\n")
        }
    }

    private func tileResponse(_ request: RequestHead, generation: ArchiveGeneration, tile: TileCoordinate) throws -> ServerResponse {
        let gzipAccepted = HeaderRules.acceptsGzip(request.acceptEncoding)
        var headers = ResponseHeaders()
        headers[.contentType] = generation.tileContentType
        headers[.cacheControl] = cacheControl
        if generation.isVector { headers[.vary] = "Accept-Encoding" }
        // The representation: stored bytes, or (vector tiles for a client without gzip) inflated ones.
        let variant = generation.isVector && !gzipAccepted ? "-i" : ""

        // A bundle names each payload by CRC and length: the ETag and a 304 need no payload read.
        var etag: String?
        if let bundle = generation.bundle {
            guard let signature = bundle.payloadSignature(at: tile) else { return missing(generation, tile) }
            etag = Self.payloadETag(crc32: signature.crc32, length: signature.rawLength, inflated: !variant.isEmpty)
            if let etag, HeaderRules.ifNoneMatch(request.ifNoneMatch, matches: etag) {
                return notModified(etag: etag, headers: headers)
            }
        }

        if case .rawBitmap(let layout) = generation.content {
            let tag = etag ?? "\"g\(generation.identityTag)-\(tile.zoom)-\(tile.x)-\(tile.y)\""
            guard let png = try encodedPNG(generation, tile: tile, layout: layout) else { return missing(generation, tile) }
            if etag == nil, HeaderRules.ifNoneMatch(request.ifNoneMatch, matches: tag) {
                return notModified(etag: tag, headers: headers)
            }
            headers[.eTag] = tag
            return ServerResponse(status: .ok, headers: headers, body: allocator.buffer(bytes: png))
        }

        let outcome: Result<ServerResponse, Gzip.Failure>? = try generation.archive.withTileBytes(at: tile) { bytes in
            let tag = etag ?? "\"g\(generation.identityTag)-\(tile.zoom)-\(tile.x)-\(tile.y)\(variant)\""
            var headers = headers
            headers[.eTag] = tag
            if etag == nil, HeaderRules.ifNoneMatch(request.ifNoneMatch, matches: tag) {
                return .success(notModified(etag: tag, headers: headers))
            }
            if generation.isVector, TileFormat.isGzip(bytes) {
                if gzipAccepted {
                    headers[.contentEncoding] = "gzip"
                } else {
                    var inflated: [UInt8] = []
                    switch Gzip.inflate(bytes, into: &inflated, limit: Self.maximumInflatedTileSize) {
                    case .failure(let failure): return .failure(failure)
                    case .success(let count):
                        return .success(ServerResponse(status: .ok, headers: headers, body: allocator.buffer(bytes: inflated[0..<count])))
                    }
                }
            }
            return .success(ServerResponse(status: .ok, headers: headers, body: allocator.buffer(bytes: bytes)))
        }
        switch outcome {
        case nil: return missing(generation, tile)
        case .success(let response)?: return response
        case .failure(let failure)?:
            throw TileServerError("the stored gzip tile cannot be sent to a client without gzip: \(failure)")
        }
    }

    /// Whether a remote read failed because the object was replaced since it was opened.
    static func objectChanged(_ error: any Error) -> Bool {
        guard case .corrupt(let reason)? = (error as? TileArchiveError)?.fault else { return false }
        return reason.contains("the object changed")
    }

    /// Whether a remote read failed for want of an answer in time.
    static func timedOut(_ error: any Error) -> Bool {
        guard case .io(let code, _)? = (error as? TileArchiveError)?.fault else { return false }
        return code == ETIMEDOUT
    }

    /// `"b<crc32>-<length>"` in hex, `-i` added for the inflated variant: a bundle tile's ETag,
    /// from its payload signature (formatted without intermediate strings: this runs per tile).
    static func payloadETag(crc32: UInt32, length: Int, inflated: Bool) -> String {
        String(unsafeUninitializedCapacity: 40) { text in
            var count = 0
            func put(_ byte: UInt8) {
                text[count] = byte
                count += 1
            }
            func hex(_ value: UInt64) {
                var shift = max(0, (64 - value.leadingZeroBitCount + 3) / 4 * 4 - 4)
                while true {
                    let digit = UInt8((value >> UInt64(shift)) & 0xF)
                    put(digit < 10 ? 0x30 + digit : 0x61 + digit - 10)
                    if shift == 0 { break }
                    shift -= 4
                }
            }
            put(UInt8(ascii: "\""))
            put(UInt8(ascii: "b"))
            hex(UInt64(crc32))
            put(UInt8(ascii: "-"))
            hex(UInt64(max(0, length)))
            if inflated {
                put(UInt8(ascii: "-"))
                put(UInt8(ascii: "i"))
            }
            put(UInt8(ascii: "\""))
            return count
        }
    }

    /// A raw-bitmap tile as PNG, encoded once and kept in the bounded cache; `nil` when there is no such tile.
    private func encodedPNG(_ generation: ArchiveGeneration, tile: TileCoordinate, layout: RawBitmapLayout) throws -> [UInt8]? {
        let key = EncodedTileCache.Key(name: generation.name, identity: generation.identity, tile: tile)
        if let cached = encodedTiles[key] { return cached }
        guard let length = layout.byteCount else { return nil }
        var pixels = [UInt8](repeating: 0, count: length)
        let read = try pixels.withUnsafeMutableBytes { try generation.archive.readTile(at: tile, into: $0) }
        guard let read else { return nil }
        guard read == length,
            let bitmap = Bitmap(width: layout.width, height: layout.height, pixelFormat: layout.pixelFormat, pixels: pixels)
        else {
            throw TileServerError("the raw tile has \(read) bytes, \(layout) takes \(length)")
        }
        let png = [UInt8](try PNGEncoder.encode(bitmap))
        encodedTiles[key] = png
        return png
    }

    /// The missing-tile rule: 204 inside the archive's zooms and bounds (a tile the archive has
    /// no data for: an empty tile to MapLibre and Leaflet), 404 outside (never there to be had).
    private func missing(_ generation: ArchiveGeneration, _ tile: TileCoordinate) -> ServerResponse {
        if generation.coverage?.contains(tile) == true {
            var response = ServerResponse(status: .noContent)
            response.headers[.cacheControl] = cacheControl
            if generation.isVector { response.headers[.vary] = "Accept-Encoding" }
            return response
        }
        let zooms = Pages.describeZooms(generation)
        return text(.notFound, "tile \(tile) is outside '\(generation.name)' (zooms \(zooms), bounds \(generation.bounds))\n")
    }

    private func notModified(etag: String, headers: ResponseHeaders) -> ServerResponse {
        var response = ServerResponse(status: .notModified)
        response.headers[.eTag] = etag
        response.headers[.cacheControl] = headers[.cacheControl]
        if let vary = headers[.vary] { response.headers[.vary] = vary }
        return response
    }

    // MARK: Other resources

    /// Seconds without a finished pass of the reload watcher after which health says it is stuck.
    static func reloadStall(interval: Double) -> Double { max(10, 40 * interval) }

    private func health() -> ServerResponse {
        var archives: [[String: Any]] = []
        var problems = 0
        for slot in catalog.slots {
            let status = slot.snapshot
            var entry: [String: Any] = [
                "name": slot.name, "path": slot.path, "content": status.generation.content?.description ?? "empty",
                "tiles": status.generation.tileCount, "reloads": status.reloads,
                "file": String(status.generation.identity.hash, radix: 16),
            ]
            if let remote = status.generation.remote {
                entry["version"] = remote.version.description
                entry["storeRequests"] = remote.requestCount
            }
            if let problem = status.problem {
                entry["problem"] = problem
                problems += 1
            }
            archives.append(entry)
        }
        var document: [String: Any] = ["archives": archives]
        let lastCheck = lastReloadCheck.load(ordering: .relaxed)
        if lastCheck != 0 {
            // A watcher stuck on a file stops every reload: health must not say ok meanwhile.
            let seconds = Double(DispatchTime.now().uptimeNanoseconds &- lastCheck) / 1e9
            document["lastReloadCheckSeconds"] = (seconds * 1000).rounded() / 1000
            if seconds > Self.reloadStall(interval: options.reloadInterval) {
                document["problem"] = "the files have not been checked for replacement for \(Int(seconds)) s (the reload watcher is stuck)"
                problems += 1
            }
        }
        document["status"] = problems == 0 ? "ok" : "degraded"
        let data = (try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        var response = ServerResponse(status: .ok, body: allocator.buffer(bytes: data))
        response.headers[.contentType] = "application/json"
        response.headers[.cacheControl] = "no-store"
        return response
    }

    /// A generated document (TileJSON, a page) with an ETag of its bytes, so revalidation is a 304.
    private func document(_ body: [UInt8], type: String, cacheControl: String, request: RequestHead) -> ServerResponse {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in body { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        let etag = "\"d\(String(hash, radix: 16))\""
        var headers = ResponseHeaders()
        headers[.cacheControl] = cacheControl
        headers[.eTag] = etag
        if HeaderRules.ifNoneMatch(request.ifNoneMatch, matches: etag) {
            return ServerResponse(status: .notModified, headers: headers)
        }
        headers[.contentType] = type
        return ServerResponse(status: .ok, headers: headers, body: allocator.buffer(bytes: body))
    }

    private func text(_ status: HTTPResponse.Status, _ message: String) -> ServerResponse {
        var response = ServerResponse(status: status, body: allocator.buffer(string: message))
        response.headers[.contentType] = "text/plain; charset=utf-8"
        return response
    }

    private func noArchive(_ name: Substring) -> ServerResponse {
        text(.notFound, "no archive named '\(name)'\n")
    }

    /// The base URL of links: `--public-url`, else `http://` and the request's Host, else the listening address.
    private func base(_ request: RequestHead) -> String {
        if let publicURL = options.publicURL {
            return publicURL.hasSuffix("/") ? String(publicURL.dropLast()) : publicURL
        }
        if let host = HeaderRules.validHost(request.host) {
            return "http://" + host
        }
        return listeningBase.withLock { $0 } ?? ""
    }

    // MARK: Token and CORS

    /// `nil` when the request may proceed; a 401 when a token is required and not given.
    private func checkToken(_ request: RequestHead, target: String) -> ServerResponse? {
        guard let token = options.token else { return nil }
        if let authorization = request.authorization {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer",
                HeaderRules.constantTimeEqual(parts[1].trimmingCharacters(in: .whitespaces), token)
            {
                return nil
            }
        }
        if let given = HeaderRules.queryValue(target, "token"), HeaderRules.constantTimeEqual(given, token) { return nil }
        var response = text(.unauthorized, "a token is required: send Authorization: Bearer TOKEN or add ?token=TOKEN\n")
        response.headers[.wwwAuthenticate] = "Bearer realm=\"tilepack\""
        response.headers[.cacheControl] = "no-store"
        return response
    }

    /// `?token=...` to carry into links and tile URLs when the request authenticated that way.
    private func tokenQuery(_ target: String) -> String {
        guard let token = options.token, let given = HeaderRules.queryValue(target, "token"),
            HeaderRules.constantTimeEqual(given, token)
        else { return "" }
        return "?token=" + percentEncodedSegment(given)
    }

    /// The `Access-Control-Allow-Origin` value for the request's Origin, if CORS allows it.
    private func allowedOrigin(_ request: RequestHead) -> String? {
        guard !options.corsOrigins.isEmpty else { return nil }
        if options.corsOrigins.contains("*") { return "*" }
        guard let origin = request.origin, options.corsOrigins.contains(origin) else { return nil }
        return origin
    }

    private func addCORS(_ request: RequestHead, to response: inout ServerResponse) {
        guard !options.corsOrigins.isEmpty else { return }
        if !options.corsOrigins.contains("*") {
            response.headers[.vary] = response.headers[.vary].map { $0 + ", Origin" } ?? "Origin"
        }
        guard let origin = allowedOrigin(request) else { return }
        response.headers[.accessControlAllowOrigin] = origin
        response.headers[.accessControlExposeHeaders] = "ETag, Content-Length, Content-Encoding"
    }

    /// `OPTIONS`: a CORS preflight (answered without a token: browsers send none with it) or a plain `Allow`.
    private func preflight(_ request: RequestHead) -> ServerResponse {
        var response = ServerResponse(status: .noContent)
        response.headers[.allow] = "GET, HEAD, OPTIONS"
        if request.accessControlRequestMethod != nil, allowedOrigin(request) != nil {
            response.headers[.accessControlAllowMethods] = "GET, HEAD, OPTIONS"
            response.headers[.accessControlAllowHeaders] = "Authorization, If-None-Match, Accept-Encoding"
            response.headers[.accessControlMaxAge] = "86400"
        }
        return response
    }
}

/// The header fields of a ``ServerResponse``, in the order set; setting a name again replaces its
/// value, setting `nil` removes it. A few fields per answer, so a list: no index, no validation
/// pass (the values are the server's own, and ``TileRequestHandler`` writes any control byte in
/// one as a space).
struct ResponseHeaders: Sendable, Sequence {
    private var fields: [(name: HTTPField.Name, value: String)] = []

    init() {
        fields.reserveCapacity(6)
    }

    subscript(name: HTTPField.Name) -> String? {
        get { fields.first(where: { $0.name == name })?.value }
        set {
            if let index = fields.firstIndex(where: { $0.name == name }) {
                if let newValue { fields[index].value = newValue } else { fields.remove(at: index) }
            } else if let newValue {
                fields.append((name, newValue))
            }
        }
    }

    func makeIterator() -> IndexingIterator<[(name: HTTPField.Name, value: String)]> { fields.makeIterator() }
}
