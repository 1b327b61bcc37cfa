// Writes samples/tiles: a small XYZ tree (zooms 0-4, 341 tiles) of map-like PNG tiles, each
// with its own z/x/y drawn in the top-left corner so that a wrong row flip shows at a glance.
// Usage: swift run -c release --package-path tools make-samples [output-folder]
import Foundation
import TileSynth

let output = CommandLine.arguments.dropFirst().first ?? "samples/tiles"
try? FileManager.default.removeItem(atPath: output)
let tiles = TileSynth.pyramid(0...4)
try TileSynth.writeTree(root: output, tiles: tiles) { TileSynth.mapTile($0) }
print("wrote \(tiles.count) tiles to \(output)")
