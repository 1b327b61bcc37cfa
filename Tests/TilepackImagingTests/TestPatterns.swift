import Foundation
import Testing
import TilepackCore

@testable import TilepackImaging

/// The test resources and the pattern the hand-built PNGs in Resources/ hold (see
/// Resources/make-test-pngs.py, which computes the same pattern independently).
enum Patterns {
    static let width = 13
    static let height = 11

    static func r(_ x: Int, _ y: Int) -> UInt8 { UInt8((x * 19 + y * 7) & 255) }
    static func g(_ x: Int, _ y: Int) -> UInt8 { UInt8((x * 5 + y * 31 + 40) & 255) }
    static func b(_ x: Int, _ y: Int) -> UInt8 { UInt8((x * y * 3 + 11) & 255) }
    static func a(_ x: Int, _ y: Int) -> UInt8 { [0, 255, UInt8((x * 23 + y * 41) & 255)][(x + y) % 3] }
    static func grey(_ x: Int, _ y: Int, depth: Int) -> Int { ((x + y * width) * 7) % (1 << depth) }
    static func index(_ x: Int, _ y: Int, depth: Int) -> Int { (x + 3 * y) % min(1 << depth, 200) }
    static func palette(_ i: Int) -> (UInt8, UInt8, UInt8) {
        (UInt8((i * 37) & 255), UInt8((i * 91) & 255), UInt8((i * 53) & 255))
    }
    static func paletteAlpha(_ i: Int) -> UInt8 { i < 150 ? [0, 128, 255, 64][i % 4] : 255 }

    /// The straight RGBA each test PNG decodes to.
    static func expected(_ name: String) -> (Int, Int) -> RGBA8 {
        switch name {
        case "grey1.png", "grey1-adam7.png": return { x, y in greyRGBA(grey(x, y, depth: 1) * 255) }
        case "grey2.png": return { x, y in greyRGBA(grey(x, y, depth: 2) * 85) }
        case "grey4.png": return { x, y in greyRGBA(grey(x, y, depth: 4) * 17) }
        case "grey8.png": return { x, y in greyRGBA(grey(x, y, depth: 8)) }
        case "grey16.png": return { x, y in greyRGBA(Int(g(x, y))) }
        case "grey8-trns.png":
            let key = grey(2, 3, depth: 8)
            return { x, y in
                let v = grey(x, y, depth: 8)
                return RGBA8(r: UInt8(v), g: UInt8(v), b: UInt8(v), a: v == key ? 0 : 255)
            }
        case "ga8.png", "ga16.png": return { x, y in RGBA8(r: g(x, y), g: g(x, y), b: g(x, y), a: a(x, y)) }
        case "rgb8.png", "rgb16.png": return { x, y in RGBA8(r: r(x, y), g: g(x, y), b: b(x, y)) }
        case "rgb8-trns.png":
            return { x, y in
                let c = RGBA8(r: r(x, y), g: g(x, y), b: b(x, y))
                let key = RGBA8(r: r(4, 5), g: g(4, 5), b: b(4, 5))
                return c == key ? RGBA8(r: c.r, g: c.g, b: c.b, a: 0) : c
            }
        case "rgba8.png", "rgba16.png", "rgba8-adam7.png", "rgba16-adam7.png":
            return { x, y in RGBA8(r: r(x, y), g: g(x, y), b: b(x, y), a: a(x, y)) }
        case "pal1.png", "pal2.png", "pal4.png", "pal8.png", "pal4-adam7.png":
            let depth = Int(name.dropFirst(3).prefix(1))!
            return { x, y in
                let (r, g, b) = palette(index(x, y, depth: depth))
                return RGBA8(r: r, g: g, b: b)
            }
        case "pal8-trns.png":
            return { x, y in
                let i = index(x, y, depth: 8)
                let (r, g, b) = palette(i)
                return RGBA8(r: r, g: g, b: b, a: paletteAlpha(i))
            }
        default: fatalError("no pattern for \(name)")
        }
    }

    static func greyRGBA(_ v: Int) -> RGBA8 { RGBA8(r: UInt8(v), g: UInt8(v), b: UInt8(v)) }

    static let pngNames = [
        "grey1.png", "grey2.png", "grey4.png", "grey8.png", "grey16.png", "grey8-trns.png", "ga8.png", "ga16.png",
        "rgb8.png", "rgb16.png", "rgb8-trns.png", "rgba8.png", "rgba16.png", "pal1.png", "pal2.png", "pal4.png",
        "pal8.png", "pal8-trns.png", "rgba8-adam7.png", "pal4-adam7.png", "grey1-adam7.png", "rgba16-adam7.png",
    ]
}

enum Resources {
    static func data(_ name: String) throws -> Data {
        switch name {
        case "martin-webp-0-0-0.webp": return try FixtureTile.data("martin/webp.mbtiles", zoom: 0, x: 0, tmsRow: 0)
        case "geography-class-1-1-0.jpg": return try FixtureTile.data("martin/geography-class-jpg.mbtiles", zoom: 1, x: 1, tmsRow: 0)
        case "plain_1-3-4-4.png": return try FixtureTile.data("node-mbtiles/plain_1.mbtiles", zoom: 3, x: 4, tmsRow: 4)
        default: break
        }
        let url = try #require(
            Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Resources"),
            "missing test resource \(name)")
        return try Data(contentsOf: url)
    }

    /// Real tiles of the shared fixtures, read in place (see FixtureTile).
    static let fixtureTiles = ["martin-webp-0-0-0.webp", "geography-class-1-1-0.jpg", "plain_1-3-4-4.png"]
}

/// Every pixel of `bitmap` matches `expected` within `tolerance` per channel; colour is ignored
/// where the expected alpha is 0.
func expectPixels(
    _ bitmap: Bitmap, _ expected: (Int, Int) -> RGBA8, tolerance: Int = 0,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    var mismatches: [String] = []
    for y in 0..<bitmap.height {
        for x in 0..<bitmap.width {
            let got = bitmap.pixel(x: x, y: y), want = expected(x, y)
            var ok = abs(Int(got.a) - Int(want.a)) <= tolerance
            if want.a != 0 {
                ok =
                    ok && abs(Int(got.r) - Int(want.r)) <= tolerance && abs(Int(got.g) - Int(want.g)) <= tolerance
                    && abs(Int(got.b) - Int(want.b)) <= tolerance
            }
            if !ok && mismatches.count < 5 { mismatches.append("(\(x), \(y)): got \(got), want \(want)") }
        }
    }
    #expect(mismatches.isEmpty, "\(mismatches.joined(separator: "; "))", sourceLocation: sourceLocation)
}

/// Runs `body` expecting it to throw an `ImagingError`, and returns that error.
func imagingError(_ body: () throws -> Void) -> ImagingError? {
    do {
        try body()
        return nil
    } catch let error as ImagingError {
        return error
    } catch {
        Issue.record("expected an ImagingError, got \(error)")
        return nil
    }
}
