import Foundation
import Testing
import TilepackCore
import TilepackImaging
import TilepackTestSupport

@testable import TileLayer

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let seconds = Locked<Double>(1000)
    var now: Double { seconds.withLock { $0 } }
    func advance(_ delta: Double) { seconds.withLock { $0 += delta } }
    var function: @Sendable () -> Double { { self.now } }
    var dateFunction: @Sendable () -> Date { { Date(timeIntervalSince1970: 1_700_000_000 + self.now) } }
}

let red = RGBA8(r: 255, g: 0, b: 0, a: 255)
let green = RGBA8(r: 0, g: 255, b: 0, a: 255)
let blue = RGBA8(r: 0, g: 0, b: 255, a: 255)

func solid(_ color: RGBA8, size: Int = 256, format: PixelFormat = .rgba8888) -> Bitmap {
    Bitmap(width: size, height: size, pixelFormat: format, fill: color)
}

func pngData(_ color: RGBA8, size: Int = 256) throws -> Data {
    try PNGEncoder.encode(solid(color, size: size))
}

/// Counts calls per way and tile; answers with a colour per tile in the chosen way.
final class RecordingSource: MapTileLayerDataSource {
    enum Way: Sendable { case synchronous, request, url }
    struct Calls {
        var hasTile: [TileCoordinate] = []
        var sync: [TileCoordinate] = []
        var request: [TileCoordinate] = []
        var url: [TileCoordinate] = []
    }

    let ways: Set<Way>
    let color: @Sendable (TileCoordinate) -> RGBA8
    let exists: @Sendable (TileCoordinate) -> Bool
    let urlFor: @Sendable (TileCoordinate) -> URL?
    let calls = Locked(Calls())

    init(
        ways: Set<Way>, color: @escaping @Sendable (TileCoordinate) -> RGBA8 = { _ in red },
        exists: @escaping @Sendable (TileCoordinate) -> Bool = { _ in true },
        urlFor: @escaping @Sendable (TileCoordinate) -> URL? = { _ in nil }
    ) {
        self.ways = ways
        self.color = color
        self.exists = exists
        self.urlFor = urlFor
    }

    func mapTileLayer(_ layer: MapTileLayer, hasTileAt tile: TileCoordinate) -> Bool {
        calls.withLock { $0.hasTile.append(tile) }
        return exists(tile)
    }

    func mapTileLayer(_ layer: MapTileLayer, dataForTileAt tile: TileCoordinate) -> SynchronousTileData {
        guard ways.contains(.synchronous) else { return .notSupplied }
        calls.withLock { $0.sync.append(tile) }
        return .bitmap(Data(solid(color(tile), size: layer.tileSize, format: layer.pixelFormat).pixels))
    }

    func mapTileLayer(_ layer: MapTileLayer, requestDataForTileAt tile: TileCoordinate, tileRequest: TileRequest) -> TileRequestDisposition
    {
        guard ways.contains(.request) else { return .declined }
        calls.withLock { $0.request.append(tile) }
        let pixels = solid(color(tile), size: tileRequest.tileSize, format: tileRequest.pixelFormat).pixels
        DispatchQueue.global().async {
            tileRequest.copy(from: Data(pixels))
            tileRequest.complete(.complete)
        }
        return .accepted
    }

    func mapTileLayer(_ layer: MapTileLayer, urlForTileAt tile: TileCoordinate) -> URL? {
        guard ways.contains(.url) else { return nil }
        calls.withLock { $0.url.append(tile) }
        return urlFor(tile)
    }

    var snapshot: Calls { calls.withLock { $0 } }
}

/// A layer in a fresh temporary cache root.
func makeLayer(
    _ source: (any MapTileLayerDataSource)?, cacheRoot: TemporaryDirectory? = nil,
    clock: ManualClock? = nil
) -> MapTileLayer {
    var wallClock: @Sendable () -> Date = { Date() }
    if let clock { wallClock = clock.dateFunction }
    let root: URL = cacheRoot?.url ?? FileManager.default.temporaryDirectory
    let layer = MapTileLayer(name: "test", cacheRootDirectory: root, cacheClock: wallClock)
    layer.setDataSource(source)
    return layer
}

/// Renders after loading everything; fails the test when loads were still running at the timeout.
func settledFrame(_ view: HeadlessMapView, sourceLocation: SourceLocation = #_sourceLocation) async -> MapFrame {
    let frame = await view.render(timeout: TestSupport.settleSeconds)
    #expect(view.tilesLoading == 0, "the view did not settle in \(TestSupport.settleSeconds) s", sourceLocation: sourceLocation)
    return frame
}

/// The colour at the centre of a placement.
func color(in frame: MapFrame, at placement: TilePlacement) -> RGBA8 {
    frame.bitmap.pixel(x: (placement.left + placement.right) / 2, y: (placement.top + placement.bottom) / 2)
}

/// Writes a `z/x/y.png` tree of solid tiles; returns its folder.
func writeTileTree(
    _ directory: TemporaryDirectory, tiles: [TileCoordinate], size: Int = 256,
    color: (TileCoordinate) -> RGBA8
) throws -> URL {
    let root = directory.url.appendingPathComponent("tiles")
    for tile in tiles {
        let folder = root.appendingPathComponent("\(tile.zoom)/\(tile.x)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try pngData(color(tile), size: size).write(to: folder.appendingPathComponent("\(tile.y).png"))
    }
    return root
}

func tile(_ z: Int, _ x: Int, _ y: Int) -> TileCoordinate {
    TileCoordinate(validatingZoom: z, x: x, y: y)!
}
