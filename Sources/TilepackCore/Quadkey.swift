/// Why a string is not a quadkey.
public enum QuadkeyError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Longer than `TileCoordinate.maximumZoom` digits (the quadkey's length is its zoom).
    case tooLong(String, length: Int)
    /// A character other than the digits 0, 1, 2, 3, at a zero-based position.
    case invalidDigit(String, character: Character, offset: Int)

    /// The key as shown in messages: at most 40 characters of hostile input.
    static func shown(_ key: String) -> String { key.count > 40 ? key.prefix(40) + "..." : key }

    public var description: String {
        switch self {
        case .tooLong(let key, let length):
            "quadkey \"\(Self.shown(key))\" has \(length) digits; at most \(TileCoordinate.maximumZoom) are allowed"
        case .invalidDigit(let key, let character, let offset):
            "quadkey \"\(Self.shown(key))\" has \"\(character)\" at offset \(offset); only the digits 0, 1, 2, 3 are allowed"
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
        var x = 0, y = 0, zoom = 0
        for (offset, character) in quadkey.enumerated() {
            // Characters, not bytes: "0" followed by a combining accent is one invalid character.
            guard let ascii = character.asciiValue, (UInt8(ascii: "0")...UInt8(ascii: "3")).contains(ascii) else {
                throw .invalidDigit(quadkey, character: character, offset: offset)
            }
            guard zoom < Self.maximumZoom else { throw .tooLong(quadkey, length: quadkey.count) }
            let digit = Int(ascii - UInt8(ascii: "0"))
            x = (x << 1) | (digit & 1)
            y = (y << 1) | (digit >> 1)
            zoom += 1
        }
        self.init(uncheckedZoom: zoom, x: x, y: y)
    }
}
