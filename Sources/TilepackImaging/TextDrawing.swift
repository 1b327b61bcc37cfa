import TilepackCore

/// A 5 x 7 pixel font for labels on tiles: digits, `/`, `-`, `.`, `:`, `x`, `z`, `y` and space.
///
/// Enough to write a tile's own `z/x/y` on it, so that a wrong row flip or a misplaced tile is
/// visible at a glance (the sample tree, `render`, the adapter's orientation tests).
@_spi(TilepackInternal) public enum TileFont {
    /// Glyph width and height in font pixels; glyphs are set one font pixel apart.
    public static let glyphWidth = 5
    public static let glyphHeight = 7

    /// Each glyph is seven rows of five bits, the leftmost pixel in the highest bit.
    static let glyphs: [Character: [UInt8]] = [
        "0": [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E],
        "1": [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
        "2": [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F],
        "3": [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
        "4": [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02],
        "5": [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
        "6": [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E],
        "7": [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
        "8": [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E],
        "9": [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
        "/": [0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x10],
        "-": [0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00],
        ".": [0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C],
        ":": [0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00],
        "x": [0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11],
        "y": [0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E],
        "z": [0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F],
        " ": [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
    ]

    /// Whether the font pixel (`column`, `row`) of `character` is set; unknown characters are blank.
    public static func isSet(_ character: Character, column: Int, row: Int) -> Bool {
        guard let rows = glyphs[character], (0..<glyphWidth).contains(column), (0..<glyphHeight).contains(row) else { return false }
        return rows[row] & (0x10 >> UInt8(column)) != 0
    }

    /// The size in bitmap pixels of `text` drawn at `scale`.
    public static func size(of text: String, scale: Int) -> (width: Int, height: Int) {
        let count = text.count
        return (count == 0 ? 0 : (count * (glyphWidth + 1) - 1) * scale, glyphHeight * scale)
    }
}

extension Bitmap {
    /// Draws `text` with its top-left corner at (`x`, `y`), each font pixel a `scale` x `scale`
    /// square of `color`; pixels outside the bitmap are clipped.
    public mutating func drawText(_ text: String, x: Int, y: Int, scale: Int = 1, color: RGBA8) {
        var left = x
        for character in text {
            for row in 0..<TileFont.glyphHeight {
                for column in 0..<TileFont.glyphWidth where TileFont.isSet(character, column: column, row: row) {
                    fillRect(x: left + column * scale, y: y + row * scale, width: scale, height: scale, color: color)
                }
            }
            left += (TileFont.glyphWidth + 1) * scale
        }
    }

    /// Fills a rectangle with `color`, clipped to the bitmap.
    public mutating func fillRect(x: Int, y: Int, width: Int, height: Int, color: RGBA8) {
        let x0 = max(0, x), y0 = max(0, y)
        let x1 = min(self.width, x + width), y1 = min(self.height, y + height)
        guard x0 < x1, y0 < y1 else { return }
        for py in y0..<y1 {
            for px in x0..<x1 { setPixel(x: px, y: py, color) }
        }
    }
}
