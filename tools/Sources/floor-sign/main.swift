// The floor of `tilepack sign` (tools/bench-sign.sh, issue 45): opens an archive as tilepack
// does (TilepackStorage's openTileArchive, a bundle by positional reads as sign opens it), reads
// every tile through the same forEachTile and computes SHA-256 over it (libcrypto's SHA256_Init,
// _Update, _Final on a stack context: its cheapest call), and nothing else: no coordinates, no tree, no signature, nothing written.
//
//   floor-sign ARCHIVE      prints "<tiles> tiles <bytes> bytes <xor of the digests' first bytes>"
import CSHA256Floor
import Foundation
import TilepackStorage

guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: floor-sign ARCHIVE\n".utf8))
    exit(2)
}
let archive = try openTileArchive(path: CommandLine.arguments[1], bundleAccess: .positionalReads)
var tiles = 0
var bytes = 0
var fold: UInt8 = 0
var digest = [UInt8](repeating: 0, count: 32)
try archive.forEachTile { _, data in
    guard sha256_floor(data.baseAddress, data.count, &digest) == 0 else { fatalError("libcrypto failed") }
    tiles += 1
    bytes += data.count
    fold ^= digest[0]
}
print("\(tiles) tiles \(bytes) bytes \(fold)")
