import Testing
import TilepackCore
import TilepackImaging

@Suite struct BitmapTests {
    @Test func sizesFollowThePixelFormat() {
        #expect(Bitmap(width: 256, height: 256, pixelFormat: .rgba8888).pixels.count == 262_144)
        #expect(Bitmap(width: 256, height: 256, pixelFormat: .rgb565).pixels.count == 131_072)
        #expect(Bitmap(width: 3, height: 2, pixelFormat: .rgb888, pixels: [UInt8](repeating: 0, count: 17)) == nil)
    }
}
