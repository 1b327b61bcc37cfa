import Foundation
import Synchronization
import TilepackCore
import TilepackImaging

/// The state of a ``TileRequest`` (`NMAMapTileRequestStatus`).
public enum TileRequestStatus: Hashable, Sendable, CustomStringConvertible {
    /// Not completed yet.
    case pending
    /// The buffer holds the tile (`NMAMapTileRequestStatusComplete`).
    case complete
    /// There is no tile this time (`NMAMapTileRequestStatusFailed`); it is asked again later.
    case failed

    public var description: String {
        switch self {
        case .pending: "pending"
        case .complete: "complete"
        case .failed: "failed"
        }
    }
}

/// One tile asked of a data source: tilepack's `NMAMapTileRequest`.
///
/// Write exactly ``bytesLength`` bytes of pixels in ``pixelFormat`` into ``bytes`` (or use
/// ``copy(from:)`` / ``withUnsafeMutableBytes(_:)``), then call ``complete(_:)`` once with
/// ``TileRequestStatus/complete`` or ``TileRequestStatus/failed``, from any thread. Later completions
/// are ignored (the call returns false) and recorded as a diagnostic of the layer. A request
/// released without being completed counts as failed.
///
/// The buffer belongs to the request and stays valid as long as the request lives. There is no
/// copy at completion (HERE's iOS SDK guide to NMAMapTileRequest: write straight into `bytesPtr` "to avoid copying memory"): the
/// buffer is the storage of the bitmap the layer keeps, so it must not be written after
/// completion.
///
/// When the tile is no longer needed (it left the view), the layer cancels the request:
/// ``isCancelled`` turns true and the handlers given to ``onCancellation(_:)`` run. A data source
/// may then stop and complete the request as failed; the layer does not count that as a failure.
public final class TileRequest: @unchecked Sendable, CustomStringConvertible {
    /// The tile asked for (XYZ, at the tile zoom).
    public let tile: TileCoordinate
    /// The tile's width and height in pixels (the layer's ``MapTileLayer/tileSize``).
    public let tileSize: Int
    /// The layout the pixels must have (the layer's ``MapTileLayer/pixelFormat``).
    public let pixelFormat: PixelFormat
    /// The screen scale the tile is drawn for (1, 2 or 3), as `MKTileOverlayPath.contentScaleFactor`.
    public let contentScaleFactor: Double
    /// Whether the layer asks for this tile only as a fallback stand-in for a deeper tile that is
    /// still loading or failing (not to draw it in its own place). A data source may give it lower
    /// priority and need not report its failure (the layer does not: the deeper tile's is reported).
    public let isFallbackStandIn: Bool
    /// `tileSize * tileSize * pixelFormat.bytesPerPixel`: the size of ``bytes``.
    public let bytesLength: Int
    /// The buffer to write the pixels into (`bytesPtr`): exactly ``bytesLength`` bytes, zero-filled.
    ///
    /// `@unchecked Sendable`: the buffer is written by the data source only, before completion; the
    /// layer reads it only after completion, so nothing reads it concurrently with a write.
    public let bytes: UnsafeMutableRawBufferPointer

    /// The array ``bytes`` points into. It is never mutated through Swift and never resized, so its
    /// storage does not move while the request holds it; at completion the bitmap shares it
    /// (copy-on-write, a reference count, no copy of the pixels).
    private let storage: [UInt8]
    private let status_ = Locked<TileRequestStatus>(.pending)
    private let withdrawn = Atomic<Bool>(false)
    /// The cancellation handlers; `nil` once cancelled.
    private let cancellation = Locked<[@Sendable () -> Void]?>([])
    private let finish: @Sendable (TileRequestOutcome) -> Void
    private let diagnose: @Sendable (TileLayerDiagnostic) -> Void

    init(
        tile: TileCoordinate, tileSize: Int, pixelFormat: PixelFormat, contentScaleFactor: Double,
        isFallbackStandIn: Bool = false,
        diagnose: @escaping @Sendable (TileLayerDiagnostic) -> Void,
        finish: @escaping @Sendable (TileRequestOutcome) -> Void
    ) {
        self.tile = tile
        self.isFallbackStandIn = isFallbackStandIn
        self.tileSize = tileSize
        self.pixelFormat = pixelFormat
        self.contentScaleFactor = contentScaleFactor
        self.bytesLength = tileSize * tileSize * pixelFormat.bytesPerPixel
        let storage = [UInt8](repeating: 0, count: bytesLength)
        self.storage = storage
        // A read-only access never copies (a mutating one may, to make the array unique, and the
        // optimizer may share the array before it runs), and the array is never changed through
        // Swift afterwards, so its buffer stays where it is as long as `self.storage` holds it.
        self.bytes = storage.withUnsafeBufferPointer { UnsafeMutableRawBufferPointer(mutating: UnsafeRawBufferPointer($0)) }
        self.diagnose = diagnose
        self.finish = finish
    }

    /// A request not tied to any layer, for testing a data source on its own: `finish` receives the
    /// bitmap (or `nil` when failed or dropped).
    public convenience init(
        tile: TileCoordinate, tileSize: Int = TileSize.default, pixelFormat: PixelFormat = .rgba8888,
        contentScaleFactor: Double = 1, finish: @escaping @Sendable (Bitmap?) -> Void
    ) {
        self.init(
            tile: tile, tileSize: tileSize, pixelFormat: pixelFormat, contentScaleFactor: contentScaleFactor,
            diagnose: { _ in },
            finish: { outcome in
                if case .complete(let bitmap) = outcome { finish(bitmap) } else { finish(nil) }
            })
    }

    deinit {
        let wasPending = status_.withLock { status -> Bool in
            guard status == .pending else { return false }
            status = .failed
            return true
        }
        if wasPending && !withdrawn.load(ordering: .acquiring) {
            if !isCancelled {
                diagnose(
                    TileLayerDiagnostic(
                        kind: .requestDropped, tile: tile,
                        message: "the tile request was released without being completed; treated as failed"))
            }
            finish(.dropped)
        }
    }

    /// ``TileRequestStatus/pending`` until completed, then how it was completed.
    public var status: TileRequestStatus { status_.withLock { $0 } }

    /// Completes the request with ``TileRequestStatus/complete`` (the buffer holds the tile) or
    /// ``TileRequestStatus/failed``. Returns false, changes nothing and records a diagnostic when the
    /// request was already completed or `status` is ``TileRequestStatus/pending``.
    @discardableResult
    public func complete(_ status: TileRequestStatus = .complete) -> Bool {
        guard status != .pending else {
            diagnose(
                TileLayerDiagnostic(
                    kind: .requestCompletedAgain, tile: tile,
                    message: "a tile request cannot be completed with status pending"))
            return false
        }
        guard settle(as: status, how: "as \(status)") else { return false }
        if status == .complete {
            // No copy: the bitmap shares the buffer's storage.
            if let bitmap = Bitmap(width: tileSize, height: tileSize, pixelFormat: pixelFormat, pixels: storage) {
                finish(.complete(bitmap))
            } else {
                finish(.failed("the buffer does not make a bitmap"))
            }
        } else {
            finish(.failed("the data source completed the request as failed"))
        }
        return true
    }

    /// Completes the request as failed; see ``complete(_:)``.
    @discardableResult
    public func fail() -> Bool { complete(.failed) }

    /// Completes the request with `image` instead of the buffer: a tile image of another resolution
    /// (an `@2x` image, a 512 px image for a 256 px layer), which the layer keeps at its own size
    /// and scales when drawing. `image` must be in ``pixelFormat`` and of a size ``TileImageSize``
    /// accepts for ``tileSize``. Returns false, completes nothing and records a diagnostic when it
    /// is not, or when the request was already completed.
    @discardableResult
    public func complete(with image: Bitmap) -> Bool {
        guard image.pixelFormat == pixelFormat,
            TileImageSize.isAccepted(width: image.width, height: image.height, tileSize: tileSize)
        else {
            diagnose(
                TileLayerDiagnostic(
                    kind: .tileFailed, tile: tile,
                    message:
                        "complete(with:) got a \(image.width)x\(image.height) \(image.pixelFormat) image; the request takes \(pixelFormat) and \(TileImageSize.describe(tileSize: tileSize))"
                ))
            return false
        }
        guard settle(as: .complete, how: "with an image") else { return false }
        finish(.complete(image))
        return true
    }

    /// Moves a pending request to `status`, once: false (and a diagnostic saying it was completed
    /// `how` after it already was) when it is no longer pending.
    private func settle(as status: TileRequestStatus, how: String) -> Bool {
        let previous = status_.withLock { current -> TileRequestStatus in
            let previous = current
            if current == .pending { current = status }
            return previous
        }
        guard previous == .pending else {
            diagnose(
                TileLayerDiagnostic(
                    kind: .requestCompletedAgain, tile: tile, message: "completed \(how) after it was already \(previous); ignored"))
            return false
        }
        return true
    }

    // MARK: - Cancellation

    /// Whether the layer cancelled the request (the tile is no longer needed).
    public var isCancelled: Bool { cancellation.withLock { $0 == nil } }

    /// Runs `handler` once when the request is cancelled (at once, on this thread, if it already
    /// was). Handlers run on the cancelling thread and must not block.
    public func onCancellation(_ handler: @escaping @Sendable () -> Void) {
        let runNow = cancellation.withLock { handlers -> Bool in
            guard handlers != nil else { return true }
            handlers?.append(handler)
            return false
        }
        if runNow { handler() }
    }

    /// Cancels the request: the layer calls it when the tile left the view; a data source tested on
    /// its own may call it too. Runs the cancellation handlers once; does not complete the request.
    public func cancel() {
        let handlers = cancellation.withLock { handlers -> [@Sendable () -> Void] in
            defer { handlers = nil }
            return handlers ?? []
        }
        for handler in handlers { handler() }
    }

    /// Copies `data` into the buffer. Returns false and copies nothing when `data.count` is not
    /// ``bytesLength`` or the request is no longer pending.
    @discardableResult
    public func copy(from data: Data) -> Bool {
        guard data.count == bytesLength else {
            diagnose(
                TileLayerDiagnostic(
                    kind: .tileFailed, tile: tile,
                    message: "copy(from:) got \(data.count) bytes, the tile takes \(bytesLength)"))
            return false
        }
        guard status == .pending else { return false }
        data.withUnsafeBytes { bytes.copyMemory(from: $0) }
        return true
    }

    /// Calls `body` with the buffer (``bytesLength`` bytes).
    public func withUnsafeMutableBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(bytes)
    }

    /// Marks the request as not taken, so that releasing it is not a drop (the data source declined it).
    func withdraw() { withdrawn.store(true, ordering: .releasing) }

    public var description: String {
        "TileRequest(\(tile), \(tileSize)px \(pixelFormat), \(status)\(isCancelled ? ", cancelled" : ""))"
    }
}

/// How a tile request ended, as the view sees it.
enum TileRequestOutcome: Sendable {
    case complete(Bitmap)
    case failed(String)
    case dropped
}
