// make-versions --changed N (issue 44's apply-scaling benchmark): v1 of N tiles and a v2 that
// differs from it in exactly the chosen number of tiles, spread evenly over the archive, and in
// nothing else (no tile added or deleted; metadata `version` 1 against 2).
//
// A million tiles rendered and PNG-encoded one by one would take this shared machine most of an
// hour, so each tile here is one of 16 rendered PNG tiles (about 1 KB each: TileSynth's small
// tiles) with a `tEXt` chunk naming the tile and its version inserted before `IEND`: a valid PNG,
// bytes found in no other tile. A changed tile is one of 16 re-rendered tiles (a new road across
// it) with its own chunk, so its bytes appear nowhere in v1.
import Foundation
import TileSynth
import TilepackCore
import TilepackImaging
import TilepackStorage

enum Scattered {
    /// The positions (in `TileSynth.firstTiles(count)`'s order) of the `changed` tiles: evenly
    /// spaced over the whole archive, from half a step in.
    static func changedPositions(count: Int, changed: Int) -> [Int] {
        guard changed > 0 else { return [] }
        let half = count / changed / 2
        return (0..<changed).map { k in k * count / changed + half }
    }

    /// `png` with a tEXt chunk (keyword "tile") carrying `text` inserted before its IEND chunk.
    static func tagged(_ png: [UInt8], _ text: String) -> [UInt8] {
        let body = Array("tEXt".utf8) + Array("tile".utf8) + [0] + Array(text.utf8)
        var chunk = bigEndian(UInt32(body.count - 4)) + body
        chunk += bigEndian(crc32(body))
        return Array(png[..<(png.count - 12)]) + chunk + Array(png[(png.count - 12)...])
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [
            UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8),
            UInt8(truncatingIfNeeded: value),
        ]
    }

    static let crcTable: [UInt32] = (0..<256).map { n in
        (0..<8).reduce(UInt32(n)) { c, _ in c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
    }

    /// CRC-32 as PNG's chunks carry it.
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        ~bytes.reduce(UInt32.max) { c, b in crcTable[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
    }

    /// Writes OUT/v1.mbtiles and OUT/v2.mbtiles, streamed in batches (memory does not grow with
    /// the tile count beyond the coordinates).
    static func write(out: String, count: Int, changed: Int, rerendered: @Sendable (TileCoordinate) -> Bitmap) throws {
        let tiles = TileSynth.firstTiles(count)
        let samples = tiles.prefix(16)
        let palette = try samples.map { Array(try PNGEncoder.encode(TileSynth.smallTile($0))) }
        let repainted = try samples.map { Array(try PNGEncoder.encode(rerendered($0))) }
        let positions = changedPositions(count: count, changed: min(changed, count))
        let isChanged = Set(positions)
        func writer(_ path: String, version: String) throws -> MBTilesWriter {
            try? FileManager.default.removeItem(atPath: path)
            var metadata = TileMetadata()
            metadata.name = "bench-update"
            metadata[TileMetadata.Key.version] = version
            return try MBTilesWriter(creating: path, metadata: metadata, options: MBTilesWriterOptions(aggregateTilesHash: false))
        }
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let v1 = try writer("\(out)/v1.mbtiles", version: "1")
        let v2 = try writer("\(out)/v2.mbtiles", version: "2")
        var changedBytes = 0
        for start in stride(from: 0, to: tiles.count, by: 10_000) {
            var rows1: [(tile: TileCoordinate, bytes: [UInt8])] = []
            var rows2: [(tile: TileCoordinate, bytes: [UInt8])] = []
            for i in start..<min(start + 10_000, tiles.count) {
                let tile = tiles[i]
                let name = "\(tile.zoom)/\(tile.x)/\(tile.y)"
                let old = tagged(palette[i % palette.count], name)
                rows1.append((tile, old))
                if isChanged.contains(i) {
                    let new = tagged(repainted[i % repainted.count], name + " v2")
                    changedBytes += new.count
                    rows2.append((tile, new))
                } else {
                    rows2.append((tile, old))
                }
            }
            try v1.write(rows1)
            try v2.write(rows2)
        }
        try v1.finish()
        try v2.finish()
        print(
            "v1 \(tiles.count) tiles; v2: \(positions.count) re-rendered, spread over the archive (every \(count / max(1, positions.count))th tile); changed tiles \(changedBytes) bytes"
        )
    }
}
