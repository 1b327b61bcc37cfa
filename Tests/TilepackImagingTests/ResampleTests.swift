import Foundation
import Testing
import TilepackCore

@testable import TilepackImaging

@Suite struct ResampleTests {
    func gradient(_ size: Int, _ format: PixelFormat = .rgba8888) -> Bitmap {
        var b = Bitmap(width: size, height: size, pixelFormat: format)
        for y in 0..<size {
            for x in 0..<size {
                b.setPixel(
                    x: x, y: y, RGBA8(r: UInt8(x * 255 / (size - 1)), g: UInt8(y * 255 / (size - 1)), b: UInt8((x * 7 + y * 13) & 255)))
            }
        }
        return b
    }

    @Test func halvingAveragesTwoByTwoBlocks() {
        let source = gradient(512)
        let half = source.resized(width: 256, height: 256)
        #expect(half.width == 256 && half.pixelFormat == .rgba8888)
        for (x, y) in [(0, 0), (17, 200), (255, 255), (128, 3)] {
            let block = [(0, 0), (1, 0), (0, 1), (1, 1)].map { source.pixel(x: 2 * x + $0.0, y: 2 * y + $0.1) }
            func avg(_ k: KeyPath<RGBA8, UInt8>) -> Double { block.map { Double($0[keyPath: k]) }.reduce(0, +) / 4 }
            let p = half.pixel(x: x, y: y)
            #expect(abs(Double(p.r) - avg(\.r)) <= 0.5 && abs(Double(p.g) - avg(\.g)) <= 0.5 && abs(Double(p.b) - avg(\.b)) <= 0.5)
        }
        // 1024 -> 256 is two halvings.
        let quarter = gradient(1024).resized(width: 256, height: 256)
        #expect(quarter.width == 256)
    }

    @Test func nearestUpscaleReplicatesPixelsExactly() {
        let source = gradient(8, .rgb565)
        let up = source.resized(width: 32, height: 32, filter: .nearest)
        #expect(up.pixelFormat == .rgb565)
        for y in 0..<32 { for x in 0..<32 { #expect(up.pixel(x: x, y: y) == source.pixel(x: x / 4, y: y / 4)) } }
        // And nearest downscale by two picks one pixel of each block.
        let down = source.resized(width: 4, height: 4, filter: .nearest)
        #expect(down.pixel(x: 1, y: 2) == source.pixel(x: 3, y: 5))
    }

    @Test func bilinearUpscaleInterpolatesBetweenCentres() {
        var source = Bitmap(width: 2, height: 1, pixelFormat: .rgba8888)
        source.setPixel(x: 0, y: 0, RGBA8(r: 0, g: 0, b: 0))
        source.setPixel(x: 1, y: 0, RGBA8(r: 200, g: 0, b: 0))
        let up = source.resized(width: 4, height: 1)
        // Centres at 0.25, 0.75 source px from the left edge... of 2 px: u = -0.25, 0.25, 0.75, 1.25 clamped.
        #expect(up.pixels.enumerated().filter { $0.offset % 4 == 0 }.map(\.element) == [0, 50, 150, 200])
    }

    @Test func transparentNeighboursDoNotDarkenEdges() {
        var source = Bitmap(width: 2, height: 2, pixelFormat: .rgba8888)
        source.setPixel(x: 0, y: 0, RGBA8(r: 255, g: 255, b: 255, a: 255))
        // the other three are transparent black
        let half = source.resized(width: 1, height: 1)
        let p = half.pixel(x: 0, y: 0)
        #expect(p.a == 64 && p.r == 255 && p.g == 255 && p.b == 255)
    }

    @Test func subSquareOfAnAncestorScalesTheRightQuadrant() throws {
        let ancestor = gradient(256)
        // One level down, descendant (1, 0): the top-right 128 px quadrant at double size.
        let nearest = try ancestor.subSquare(levelsDown: 1, column: 1, row: 0, outputSize: 256, filter: .nearest)
        let reference = try ancestor.cropped(x: 128, y: 0, width: 128, height: 128).resized(width: 256, height: 256, filter: .nearest)
        #expect(nearest == reference)
        // Bilinear: inside the quadrant it matches the cropped-and-scaled image.
        let bilinear = try ancestor.subSquare(levelsDown: 1, column: 1, row: 0, outputSize: 256)
        let croppedBilinear = try ancestor.cropped(x: 128, y: 0, width: 128, height: 128).resized(width: 256, height: 256)
        #expect(bilinear.pixel(x: 100, y: 100) == croppedBilinear.pixel(x: 100, y: 100))
        // Deep overzoom: 10 levels below, each output pixel is an interpolation of at most 2x2 pixels.
        let deep = try ancestor.subSquare(levelsDown: 10, column: 1023, row: 0, outputSize: 256)
        let corner = ancestor.pixel(x: 255, y: 0)
        #expect(abs(Int(deep.pixel(x: 128, y: 128).r) - Int(corner.r)) <= 1)
        // Downscaling a whole ancestor (levelsDown 0) to a smaller output halves first.
        let whole = try ancestor.subSquare(levelsDown: 0, column: 0, row: 0, outputSize: 128)
        #expect(whole == ancestor.resized(width: 128, height: 128))
        // Same size, zero levels: the identity.
        #expect(try ancestor.subSquare(levelsDown: 0, column: 0, row: 0, outputSize: 256) == ancestor)
    }

    @Test func subSquareRejectsBadArguments() {
        let tile = Bitmap(width: 256, height: 256, pixelFormat: .rgba8888)
        #expect(imagingError { _ = try tile.subSquare(levelsDown: 2, column: 4, row: 0, outputSize: 256) } != nil)
        #expect(imagingError { _ = try tile.subSquare(levelsDown: -1, column: 0, row: 0, outputSize: 256) } != nil)
        #expect(imagingError { _ = try tile.subSquare(levelsDown: 31, column: 0, row: 0, outputSize: 256) } != nil)
        #expect(imagingError { _ = try tile.subSquare(levelsDown: 1, column: 0, row: -1, outputSize: 256) } != nil)
        #expect(imagingError { _ = try tile.subSquare(levelsDown: 1, column: 0, row: 0, outputSize: 0) } != nil)
    }

    @Test func resizingKeepsTheFormatAndHandlesEmpty() {
        for format in PixelFormat.allCases {
            let b = Bitmap(width: 4, height: 4, pixelFormat: format, fill: RGBA8(r: 10, g: 20, b: 30))
            let up = b.resized(width: 8, height: 8)
            #expect(up.pixelFormat == format && up.pixel(x: 5, y: 5) == b.pixel(x: 0, y: 0))
        }
        #expect(Bitmap(width: 4, height: 4, pixelFormat: .rgba8888).resized(width: 0, height: 3).pixels.isEmpty)
    }

    @Test func premultipliedToStraightMatchesThePixelCodecForEveryAlpha() {
        for (premultiplied, straight) in [(PixelFormat.rgba8888Premultiplied, PixelFormat.rgba8888), (.bgra8888Premultiplied, .bgra8888)] {
            var pixels: [UInt8] = []
            for a in 0...255 {
                for c in stride(from: 0, through: 255, by: 17) {
                    pixels += [
                        premultiply(UInt8(c), UInt8(a)), premultiply(UInt8(255 - c), UInt8(a)), premultiply(UInt8(c / 2), UInt8(a)),
                        UInt8(a),
                    ]
                }
            }
            let count = pixels.count / 4
            let source = Bitmap(width: count, height: 1, pixelFormat: premultiplied, pixels: pixels)!
            let converted = source.converted(to: straight)
            #expect((0..<count).allSatisfy { converted.pixel(x: $0, y: 0) == source.pixel(x: $0, y: 0) })
        }
    }

    @Test func deepOverzoomJoinsNeighbouringDescendantsSeamlessly() throws {
        // 12 levels down, a source pixel spans 4096 descendants' worth: the plain-Swift path
        // (finer than pixman's fixed point) must still join neighbours within one step.
        let ancestor = gradient(256)
        let left = try ancestor.subSquare(levelsDown: 12, column: 2047, row: 1000, outputSize: 256)
        let right = try ancestor.subSquare(levelsDown: 12, column: 2048, row: 1000, outputSize: 256)
        for y in [0, 128, 255] {
            let a = left.pixel(x: 255, y: y), b = right.pixel(x: 0, y: y)
            #expect(abs(Int(a.r) - Int(b.r)) <= 1 && abs(Int(a.g) - Int(b.g)) <= 1 && abs(Int(a.b) - Int(b.b)) <= 1)
        }
        // And it agrees with pixman's path 8 levels down at the same place (within rounding).
        let coarse = try ancestor.subSquare(levelsDown: 8, column: 127, row: 62, outputSize: 256)
        let fine = try ancestor.subSquare(levelsDown: 12, column: 127 * 16 + 8, row: 62 * 16 + 8, outputSize: 256)
        // Coarse pixel 136 samples 127 + 136.5/256 = 127.5 + 136/4096; fine pixel 135, 127.5 + 135.5/4096.
        let a = coarse.pixel(x: 136, y: 136), b = fine.pixel(x: 135, y: 135)
        #expect(abs(Int(a.r) - Int(b.r)) <= 2 && abs(Int(a.g) - Int(b.g)) <= 2)
    }
}
