// The code of the article "Reading tiles from an archive" (Sources/Tilepack/Tilepack.docc),
// compiled here and run by DocSampleTests. tools/check-docs.sh checks that the article shows the
// lines between the markers, unchanged.
// docs:begin
import Tilepack

/// Opens the archive at `path` and reads tile 1/1/0: its bytes, then its pixels.
func readOneTile(path: String) throws -> Bitmap? {
    // MBTiles, PMTiles or a .tilepack bundle, told apart by its bytes, never by its name.
    let archive = try openTileArchive(path: path)
    let name = try archive.metadata().name ?? "unnamed"
    print("\(name): \(try archive.tileCount()) tiles")

    // Tiles are named z/x/y with XYZ rows, whatever the format stores.
    let tile = try TileCoordinate(zoom: 1, x: 1, y: 0)
    if let bytes = try archive.tileData(at: tile) {
        let format = TileFormat.sniff(bytes).map { "\($0)" } ?? "unknown"
        print("\(tile): \(bytes.count) bytes of \(format)")
    }

    // The pixels, decoded into the format the app draws with; nil when there is no such tile.
    return try archive.bitmap(at: tile, pixelFormat: .bgra8888Premultiplied)
}
// docs:end
