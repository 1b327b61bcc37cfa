/// File names are bytes; Swift strings are Unicode. A name that is not valid UTF-8 is kept in a
/// `String` reversibly: each byte of an invalid sequence becomes the private-use scalar
/// U+10FF00 + byte (U+10FF80...U+10FFFF), and ``bytes(of:)`` turns those back into the bytes, so
/// that no two names become one and none is altered on the way to a report.
package enum PathBytes {
    private static let base: UInt32 = 0x10FF00

    /// The bytes as a string: valid UTF-8 decoded, each other byte escaped.
    package static func string<Bytes: Collection>(from bytes: Bytes) -> String where Bytes.Element == UInt8 {
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        var result = String.UnicodeScalarView()
        // Sequence by sequence, so that an invalid sequence's bytes are known exactly.
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            let length = byte < 0x80 ? 1 : byte >= 0xF0 && byte < 0xF5 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC2 && byte < 0xE0 ? 2 : 0
            let end = bytes.index(index, offsetBy: length, limitedBy: bytes.endIndex) ?? bytes.endIndex
            if length > 0, bytes.distance(from: index, to: end) == length,
                let text = String(validating: bytes[index..<end], as: UTF8.self)
            {
                result.append(contentsOf: text.unicodeScalars)
                index = end
            } else {
                if let scalar = Unicode.Scalar(base + UInt32(byte)) { result.append(scalar) }
                index = bytes.index(after: index)
            }
        }
        return String(result)
    }

    /// The bytes a string from ``string(from:)`` stands for.
    package static func bytes(of string: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(string.utf8.count)
        for scalar in string.unicodeScalars {
            if scalar.value >= base + 0x80, scalar.value <= base + 0xFF {
                out.append(UInt8(scalar.value - base))
            } else {
                out.append(contentsOf: String(scalar).utf8)
            }
        }
        return out
    }

    /// Whether the string holds escaped bytes (its name is not valid UTF-8).
    package static func hasEscapes(_ string: String) -> Bool {
        // Every escape starts with the UTF-8 byte F4 (U+100000 and up): most names are rejected
        // by one scan of their bytes.
        guard string.utf8.contains(0xF4) else { return false }
        return string.unicodeScalars.contains { $0.value >= base + 0x80 && $0.value <= base + 0xFF }
    }
}
