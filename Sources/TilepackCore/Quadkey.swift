/// Why a string is not a quadkey.
public enum QuadkeyError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Longer than `TileCoordinate.maximumZoom` digits (the quadkey's length is its zoom).
    case tooLong(String, length: Int)
    /// A character other than the digits 0, 1, 2, 3, at a zero-based position.
    case invalidDigit(String, character: Character, offset: Int)

    public var description: String {
        switch self {
        case .tooLong(let key, let length):
            "quadkey \"\(key.prefix(40))\(key.count > 40 ? "..." : "")\" has \(length) digits; at most \(TileCoordinate.maximumZoom) are allowed"
        case .invalidDigit(let key, let character, let offset):
            "quadkey \"\(key)\" has \"\(character)\" at offset \(offset); only the digits 0, 1, 2, 3 are allowed"
        }
    }
}

extension TileCoordinate {
    /// The tile's Bing Maps quadkey: one digit per zoom level, from zoom 1 down, each digit
    /// `(x bit) + 2 * (y bit)` (0 north-west, 1 north-east, 2 south-west, 3 south-east). The tile
    /// at zoom 0 has the empty quadkey. Example: 3/3/5 is "213".
    public var quadkey: String {
        var digits = [UInt8](repeating: 0, count: zoom)
        for level in 0..<zoom {
            let bit = zoom - 1 - level
            digits[level] = UInt8(ascii: "0") + UInt8((x >> bit) & 1) + 2 * UInt8((y >> bit) & 1)
        }
        return String(decoding: digits, as: UTF8.self)
    }

    /// Creates the tile a Bing Maps quadkey names (the empty quadkey is the zoom-0 tile).
    /// - Throws: ``QuadkeyError`` for a character other than 0...3 or more than 30 digits.
    public init(quadkey: String) throws(QuadkeyError) {
        let utf8 = quadkey.utf8
        var x = 0, y = 0, zoom = 0
        for (offset, byte) in utf8.enumerated() {
            guard (UInt8(ascii: "0")...UInt8(ascii: "3")).contains(byte) else {
                let index = quadkey.utf8.index(quadkey.utf8.startIndex, offsetBy: offset)
                let character = quadkey[index...].first ?? "?"
                let characterOffset = quadkey.distance(from: quadkey.startIndex, to: String.Index(index, within: quadkey) ?? index)
                throw .invalidDigit(quadkey, character: character, offset: characterOffset)
            }
            guard zoom < Self.maximumZoom else { throw .tooLong(quadkey, length: utf8.count) }
            let digit = Int(byte - UInt8(ascii: "0"))
            x = (x << 1) | (digit & 1)
            y = (y << 1) | (digit >> 1)
            zoom += 1
        }
        self.init(uncheckedZoom: zoom, x: x, y: y)
    }
}
