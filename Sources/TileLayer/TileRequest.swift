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
/// The buffer belongs to the request and stays valid as long as the request lives; the layer
/// copies the pixels out when the request completes, so writes after completion change nothing.
public final class TileRequest: @unchecked Sendable, CustomStringConvertible {
    /// The tile asked for (XYZ, at the tile zoom).
    public let tile: TileCoordinate
    /// The tile's width and height in pixels (the layer's ``MapTileLayer/tileSize``).
    public let tileSize: Int
    /// The layout the pixels must have (the layer's ``MapTileLayer/pixelFormat``).
    public let pixelFormat: PixelFormat
    /// The screen scale the tile is drawn for (1, 2 or 3), as `MKTileOverlayPath.contentScaleFactor`.
    public let contentScaleFactor: Double
    /// `tileSize * tileSize * pixelFormat.bytesPerPixel`: the size of ``bytes``.
    public let bytesLength: Int
    /// The buffer to write the pixels into (`bytesPtr`): exactly ``bytesLength`` bytes, zero-filled.
    ///
    /// `@unchecked Sendable`: the buffer is written by the data source only; the request reads it
    /// once, in ``complete(_:)`` on the completing thread, so nothing reads it concurrently with a write.
    public let bytes: UnsafeMutableRawBufferPointer

    private let status_ = Locked<TileRequestStatus>(.pending)
    private let withdrawn = Atomic<Bool>(false)
    private let finish: @Sendable (TileRequestOutcome) -> Void
    private let diagnose: @Sendable (TileLayerDiagnostic) -> Void

    init(tile: TileCoordinate, tileSize: Int, pixelFormat: PixelFormat, contentScaleFactor: Double,
         diagnose: @escaping @Sendable (TileLayerDiagnostic) -> Void,
         finish: @escaping @Sendable (TileRequestOutcome) -> Void) {
        self.tile = tile
        self.tileSize = tileSize
        self.pixelFormat = pixelFormat
        self.contentScaleFactor = contentScaleFactor
        self.bytesLength = tileSize * tileSize * pixelFormat.bytesPerPixel
        self.bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: bytesLength, alignment: 16)
        bytes.initializeMemory(as: UInt8.self, repeating: 0)
        self.diagnose = diagnose
        self.finish = finish
    }

    /// A request not tied to any layer, for testing a data source on its own: `finish` receives the
    /// bitmap (or `nil` when failed or dropped).
    public convenience init(tile: TileCoordinate, tileSize: Int = 256, pixelFormat: PixelFormat = .rgba8888,
                            contentScaleFactor: Double = 1, finish: @escaping @Sendable (Bitmap?) -> Void) {
        self.init(tile: tile, tileSize: tileSize, pixelFormat: pixelFormat, contentScaleFactor: contentScaleFactor,
                  diagnose: { _ in }, finish: { outcome in
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
            diagnose(TileLayerDiagnostic(kind: .requestDropped, tile: tile,
                                         message: "the tile request was released without being completed; treated as failed"))
            finish(.dropped)
        }
        bytes.deallocate()
    }

    /// ``TileRequestStatus/pending`` until completed, then how it was completed.
    public var status: TileRequestStatus { status_.withLock { $0 } }

    /// Completes the request with ``TileRequestStatus/complete`` (the buffer holds the tile) or
    /// ``TileRequestStatus/failed``. Returns false, changes nothing and records a diagnostic when the
    /// request was already completed or `status` is ``TileRequestStatus/pending``.
    @discardableResult
    public func complete(_ status: TileRequestStatus = .complete) -> Bool {
        guard status != .pending else {
            diagnose(TileLayerDiagnostic(kind: .requestCompletedAgain, tile: tile,
                                         message: "a tile request cannot be completed with status pending"))
            return false
        }
        let previous = status_.withLock { current -> TileRequestStatus in
            let previous = current
            if current == .pending { current = status }
            return previous
        }
        guard previous == .pending else {
            diagnose(TileLayerDiagnostic(kind: .requestCompletedAgain, tile: tile,
                                         message: "completed as \(status) after it was already \(previous); ignored"))
            return false
        }
        if status == .complete {
            let pixels = [UInt8](UnsafeRawBufferPointer(bytes))
            if let bitmap = Bitmap(width: tileSize, height: tileSize, pixelFormat: pixelFormat, pixels: pixels) {
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

    /// Copies `data` into the buffer. Returns false and copies nothing when `data.count` is not
    /// ``bytesLength`` or the request is no longer pending.
    @discardableResult
    public func copy(from data: Data) -> Bool {
        guard data.count == bytesLength else {
            diagnose(TileLayerDiagnostic(kind: .tileFailed, tile: tile,
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

    public var description: String { "TileRequest(\(tile), \(tileSize)px \(pixelFormat), \(status))" }
}

/// How a tile request ended, as the view sees it.
enum TileRequestOutcome: Sendable {
    case complete(Bitmap)
    case failed(String)
    case dropped
}
