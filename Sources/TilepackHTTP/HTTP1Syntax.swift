/// HTTP/1 syntax over raw bytes (RFC 9110 §5.6, RFC 9112 §2-3, §6, §9.6): token bytes, field
/// names compared ignoring ASCII case, decimal lengths, comma-separated lists such as
/// `Connection`'s, lines and the empty line that ends a head. The one place tilepack writes it:
/// the server's request-head parser (server/, `TilepackServer.RequestHead`) and the tests'
/// loopback server read heads with it.
///
/// `@_spi(HTTP1)`: the server lives in a package of its own, which `package` access does not
/// reach, and an app has no use for it, so it is not in the public API an app sees.
@_spi(HTTP1) public enum HTTP1Syntax {
    /// A line did not end as HTTP/1 lines end.
    public struct MalformedLine: Error, Equatable, Sendable {
        public let reason: String
    }

    /// The line starting at `start`, without its terminator (CRLF, or a bare LF as RFC 9112
    /// §2.2 allows), and where the next one starts; `nil` when it has not ended yet. A CR
    /// followed by anything but LF is malformed.
    public static func line(_ bytes: UnsafeRawBufferPointer, from start: Int) throws(MalformedLine) -> (line: Range<Int>, next: Int)? {
        var index = start
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0x0A { return (start..<index, index + 1) }
            if byte == 0x0D {
                guard index + 1 < bytes.count else { return nil }
                guard bytes[index + 1] == 0x0A else { throw MalformedLine(reason: "a CR not followed by LF") }
                return (start..<index, index + 2)
            }
            index += 1
        }
        return nil
    }

    /// Where the empty line (LF, an optional CR, LF) that ends a head ends, if it starts after
    /// the first `searched` bytes, which were looked at before: a head can have ended only then.
    /// A connection receiving a head in pieces has only its new bytes looked at, so a peer
    /// trickling a head byte by byte costs linear time, not quadratic.
    public static func endOfHead(_ bytes: UnsafeRawBufferPointer, after searched: Int) -> Int? {
        var index = max(0, searched - 2)
        while index + 1 < bytes.count {
            if bytes[index] == 0x0A {
                if bytes[index + 1] == 0x0A { return index + 2 }
                if bytes[index + 1] == 0x0D, index + 2 < bytes.count, bytes[index + 2] == 0x0A { return index + 3 }
            }
            index += 1
        }
        return nil
    }

    /// `tchar` of RFC 9110 §5.6.2.
    public static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// Whether the bytes are a token: not empty, token bytes only.
    public static func isToken(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Bool {
        !range.isEmpty && range.allSatisfy { isTokenByte(bytes[$0]) }
    }

    /// Whether the bytes equal `text` exactly (methods are case-sensitive).
    public static func equals(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ text: StaticString) -> Bool {
        guard range.count == text.utf8CodeUnitCount else { return false }
        return text.withUTF8Buffer { text in zip(range, text).allSatisfy { bytes[$0] == $1 } }
    }

    /// Whether the bytes equal `lowercase` ignoring ASCII case (field names, list tokens).
    public static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ lowercase: String) -> Bool {
        guard range.count == lowercase.utf8.count else { return false }
        return zip(range, lowercase.utf8).allSatisfy { index, lower in
            let byte = bytes[index]
            return (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) == lower
        }
    }

    /// A decimal of 1 to 18 digits (a `Content-Length`): no sign, no spaces, no overflow.
    public static func decimal(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Int? {
        guard !range.isEmpty, range.count <= 18 else { return nil }
        var value = 0
        for index in range {
            let byte = bytes[index]
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

    /// The range without optional white space (SP, HTAB) at either end.
    public static func trimmed(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Range<Int> {
        var start = range.lowerBound, end = range.upperBound
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        return start..<end
    }

    /// Calls `body` with each element of a comma-separated list value, trimmed; empty ones are
    /// skipped (RFC 9110 §5.6.1).
    public static func forEachListElement(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ body: (Range<Int>) -> Void) {
        var start = range.lowerBound
        while start <= range.upperBound {
            var end = start
            while end < range.upperBound, bytes[end] != 0x2C { end += 1 }
            let element = trimmed(bytes, start..<end)
            if !element.isEmpty { body(element) }
            start = end + 1
        }
    }

    /// The options of a `Connection` value that decide persistence (RFC 9112 §9.3, §9.6).
    public static func connectionOptions(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> (close: Bool, keepAlive: Bool) {
        var close = false, keepAlive = false
        forEachListElement(bytes, range) { token in
            if equalsIgnoringCase(bytes, token, "close") { close = true }
            if equalsIgnoringCase(bytes, token, "keep-alive") { keepAlive = true }
        }
        return (close, keepAlive)
    }

    /// Whether a connection stays open after this exchange: HTTP/1.1 unless `close`, HTTP/1.0
    /// only with `keep-alive` (RFC 9112 §9.3).
    public static func persists(minorVersion: Int, close: Bool, keepAlive: Bool) -> Bool {
        minorVersion >= 1 ? !close : (keepAlive && !close)
    }
}
