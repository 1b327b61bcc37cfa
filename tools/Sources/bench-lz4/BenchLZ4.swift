// bench-lz4: tilepack's portable LZ4 block codec (Apple platforms' bundle codec) against liblz4
// on the payloads LZ4 bundles hold: raw RGBA bitmaps (release build).
//
//   swift run -c release --package-path tools bench-lz4 [TILE_TREE]   (default: samples/tiles)
//
// Decodes every PNG of the tree into 256x256 RGBA (what `--encode raw-rgba` stores), then, in one
// run: compresses them all with each codec (MB/s of input, median of 5), decompresses each
// codec's blocks with the same codec (MB/s of output, median of 5) and compares the sizes.
import BenchSupport
import Foundation
import TilepackCore
import TilepackImaging
@_spi(TilepackInternal) import TilepackStorage

let root = CommandLine.arguments.dropFirst().first ?? "samples/tiles"
var tiles: [[UInt8]] = []
for case let path as String in FileManager.default.enumerator(atPath: root)! where path.hasSuffix(".png") {
    guard let data = FileManager.default.contents(atPath: "\(root)/\(path)"),
        let bitmap = try? ImageDecoder.decode(data, pixelFormat: .rgba8888)
    else { continue }
    tiles.append(bitmap.pixels)
}
guard !tiles.isEmpty else {
    print("bench-lz4: no PNG tiles under \(root)")
    exit(2)
}
let rawBytes = Double(tiles.reduce(0) { $0 + $1.count })

@MainActor func blocks<C: LZ4BlockCodec>(_ codec: C.Type) -> [[UInt8]] {
    tiles.map { tile in
        var out = [UInt8](repeating: 0, count: tile.count + tile.count / 255 + 16)
        let n = tile.withUnsafeBytes { src in out.withUnsafeMutableBytes { codec.compress(src, into: $0) } }
        precondition(n > 0)
        return Array(out[0..<n])
    }
}

@MainActor func compressSeconds<C: LZ4BlockCodec>(_ codec: C.Type) -> Double {
    var out = [UInt8](repeating: 0, count: 300_000)
    return medianSeconds {
        for tile in tiles {
            let n = tile.withUnsafeBytes { src in out.withUnsafeMutableBytes { codec.compress(src, into: $0) } }
            precondition(n > 0)
        }
    }
}

@MainActor func decompressSeconds<C: LZ4BlockCodec>(_ codec: C.Type, _ blocks: [[UInt8]]) -> Double {
    var out = [UInt8](repeating: 0, count: tiles[0].count)
    return medianSeconds {
        for (block, tile) in zip(blocks, tiles) {
            let n = block.withUnsafeBytes { src in out.withUnsafeMutableBytes { codec.decompress(src, into: $0) } }
            precondition(n == tile.count)
        }
    }
}

let portableBlocks = blocks(PortableLZ4.self), liblz4Blocks = blocks(SystemLZ4.self)
let mb = 1_000_000.0
print("bench-lz4: \(tiles.count) RGBA tiles, \(format(rawBytes / mb)) MB raw")
report(
    "LZ4 blocks of raw RGBA tiles: tilepack's portable codec vs liblz4",
    [
        Comparison(
            "compress", value: rawBytes / compressSeconds(PortableLZ4.self) / mb, unit: "MB/s", vs: "liblz4 LZ4_compress_default",
            referenceValue: rawBytes / compressSeconds(SystemLZ4.self) / mb),
        Comparison(
            "decompress", value: rawBytes / decompressSeconds(PortableLZ4.self, portableBlocks) / mb, unit: "MB/s",
            vs: "liblz4 LZ4_decompress_safe", referenceValue: rawBytes / decompressSeconds(SystemLZ4.self, liblz4Blocks) / mb),
        Comparison(
            "compressed size", value: Double(portableBlocks.reduce(0) { $0 + $1.count }) / mb, unit: "MB", vs: "liblz4",
            referenceValue: Double(liblz4Blocks.reduce(0) { $0 + $1.count }) / mb),
    ])
