#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TilepackHTTP

/// Reads HTTP/1.x responses (RFC 9112) as their bytes arrive, for ``SocketTransport``: the head
/// (status line and fields, at most ``maximumHeadBytes``), then the body framed by
/// `Content-Length`, by chunked transfer coding, or by the end of the connection. Bytes in,
/// events out; it never owns a socket, so every framing rule is tested without one.
///
/// Hostile input is the normal case: every length is bounded (head, chunk-size line, trailers),
/// a `Content-Length` that is not all digits or that disagrees with another is refused, a chunk
/// size that overflows is refused, and a `Transfer-Encoding` other than chunked alone is refused
/// (the framing would be guesswork). A refusal ends the connection; nothing is read past it.
struct ResponseParser {
    /// The largest response head accepted (curl's limit is 300 KiB, nginx's request heads 32 KiB;
    /// a tile server's heads are a few hundred bytes).
    static let maximumHeadBytes = 64 << 10
    /// The largest chunk-size line or trailer section accepted.
    static let maximumLineBytes = 4 << 10

    enum Event {
        /// A final (non-1xx) head: status and fields in arrival order.
        case head(status: Int, fields: HTTPFields)
        /// Body bytes, a range of the buffer given to ``feed(_:_:)``.
        case body(Range<Int>)
        /// The response ended; `reusable` says whether the connection may carry another request.
        case end(reusable: Bool)
        /// The bytes break HTTP/1.1's framing; the connection must close.
        case malformed(String)
    }

    private enum State: Equatable {
        case head
        case fixed(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
        case untilClose
        case done
        case failed
    }

    /// Whether the request was `HEAD` (its response has no body whatever it declares).
    let isHead: Bool
    private var state = State.head
    /// Bytes of an unfinished head, chunk-size line or trailer section, kept across reads.
    private var pending: [UInt8] = []
    private var keepAlive = true
    /// Whether the response's status line said HTTP/1.1 (only then does the transport pipeline
    /// requests on its connection: HTTP/1.0's keep-alive is an older extension).
    private(set) var isHTTP11 = false
    /// Bytes of trailer fields read so far (bounded with ``maximumLineBytes``).
    private var trailerBytes = 0

    init(isHead: Bool) {
        self.isHead = isHead
    }

    /// Whether the response is complete or refused: bytes after it are not this response's.
    var isFinished: Bool { state == .done || state == .failed }

    /// Whether any byte of the response arrived.
    private(set) var hasStarted = false

    /// Feeds bytes; `emit` receives what they complete, in order, and returns `false` to stop
    /// (the caller refused the head or a body piece). Returns how many bytes were used: fewer than
    /// given only when the response finished (or was stopped) before their end.
    @discardableResult
    mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (Event) -> Bool) -> Int {
        var index = 0
        if !bytes.isEmpty { hasStarted = true }
        while index < bytes.count {
            switch state {
            case .done, .failed:
                return index
            case .head:
                guard let used = takeHead(bytes, from: index, emit) else { return bytes.count }
                index = used
            case .fixed(let remaining):
                let count = min(remaining, bytes.count - index)
                if !emit(.body(index..<(index + count))) { state = .failed; return index + count }
                index += count
                if remaining == count { finish(emit) } else { state = .fixed(remaining: remaining - count) }
            case .untilClose:
                if !emit(.body(index..<bytes.count)) { state = .failed }
                return bytes.count
            case .chunkSize:
                switch takeLine(bytes, from: index) {
                case .incomplete: return bytes.count
                case .tooLong: fail("a chunk-size line over \(Self.maximumLineBytes) bytes", emit); return index
                case .line(let line, let next):
                    index = next
                    guard let size = Self.chunkSize(line) else { fail("a chunk size that is not hexadecimal or too large", emit); return index }
                    state = size == 0 ? .trailers : .chunkData(remaining: size)
                }
            case .chunkData(let remaining):
                let count = min(remaining, bytes.count - index)
                if !emit(.body(index..<(index + count))) { state = .failed; return index + count }
                index += count
                state = remaining == count ? .chunkDataEnd : .chunkData(remaining: remaining - count)
            case .chunkDataEnd:
                switch takeLine(bytes, from: index) {
                case .incomplete: return bytes.count
                case .tooLong: fail("chunk data longer than its size", emit); return index
                case .line(let line, let next):
                    index = next
                    guard line.isEmpty else { fail("chunk data longer than its size", emit); return index }
                    state = .chunkSize
                }
            case .trailers:
                switch takeLine(bytes, from: index) {
                case .incomplete: return bytes.count
                case .tooLong: fail("trailer fields over \(Self.maximumLineBytes) bytes", emit); return index
                case .line(let line, let next):
                    index = next
                    trailerBytes += line.count + 1
                    if line.isEmpty { finish(emit) }
                }
            }
        }
        return index
    }

    /// The connection ended (the peer closed it). A response read until the close ends here;
    /// any other unfinished response is cut short, and the caller reports it.
    /// Returns whether the response is complete.
    mutating func endOfInput(_ emit: (Event) -> Bool) -> Bool {
        guard state == .untilClose else { return state == .done }
        state = .done
        _ = emit(.end(reusable: false))
        return true
    }

    // MARK: Head

    /// Reads a head from `bytes[index...]`, joined to what earlier reads left. Returns the index
    /// after the head, or `nil` when all bytes were used (kept, or the head refused).
    private mutating func takeHead(_ bytes: UnsafeRawBufferPointer, from index: Int, _ emit: (Event) -> Bool) -> Int? {
        // The end of the head: an empty line (CRLF CRLF, or bare LFs as RFC 9112 §2.2 allows).
        if !pending.isEmpty {
            // Joined to the bytes kept from earlier reads; the end may straddle the two.
            let kept = pending.count
            let available = min(bytes.count - index, Self.maximumHeadBytes + 1 - kept)
            pending.append(contentsOf: bytes[index..<(index + max(0, available))])
            let found = pending.withUnsafeBytes { Self.endOfHead($0, from: max(0, kept - 3)) }
            guard let end = found else {
                if pending.count > Self.maximumHeadBytes {
                    fail("a response head over \(Self.maximumHeadBytes >> 10) KiB", emit)
                }
                return nil
            }
            pending.removeSubrange(end...)
            let parsed = pending.withUnsafeBytes { Self.parseHead($0) }
            pending.removeAll(keepingCapacity: true)
            return takeParsedHead(parsed, endingAt: index + end - kept, emit)
        }
        guard let end = Self.endOfHead(UnsafeRawBufferPointer(rebasing: bytes[index...]), from: 0).map({ $0 + index }),
              end - index <= Self.maximumHeadBytes else {
            guard bytes.count - index <= Self.maximumHeadBytes else {
                fail("a response head over \(Self.maximumHeadBytes >> 10) KiB", emit)
                return nil
            }
            pending.append(contentsOf: bytes[index...])
            return nil
        }
        return takeParsedHead(Self.parseHead(UnsafeRawBufferPointer(rebasing: bytes[index..<end])), endingAt: end, emit)
    }

    /// The index after the empty line that ends a head in `bytes`, searching from `start`.
    static func endOfHead(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard let base = bytes.baseAddress else { return nil }
        var i = start
        while i < bytes.count, let found = memchr(base + i, 0x0A, bytes.count - i) {
            let newline = base.distance(to: UnsafeRawPointer(found))
            if newline + 1 < bytes.count, bytes[newline + 1] == 0x0A { return newline + 2 }
            if newline + 2 < bytes.count, bytes[newline + 1] == 0x0D, bytes[newline + 2] == 0x0A { return newline + 3 }
            i = newline + 1
        }
        return nil
    }

    private mutating func takeParsedHead(_ parsed: Result<Head, Malformed>, endingAt end: Int, _ emit: (Event) -> Bool) -> Int? {
        let head: Head
        switch parsed {
        case .failure(let malformed):
            fail(malformed.reason, emit)
            return nil
        case .success(let value):
            head = value
        }
        // Interim responses (100 Continue, 103 Early Hints) precede the real one.
        if (100..<200).contains(head.status), head.status != 101 { return end }
        if head.status == 101 {
            fail("a protocol switch (101) that was not asked for", emit)
            return nil
        }
        keepAlive = head.keepAlive
        isHTTP11 = head.isHTTP11
        guard emit(.head(status: head.status, fields: head.fields)) else {
            state = .failed
            return nil
        }
        if isHead || head.status == 204 || head.status == 304 {
            finish(emit)
        } else if head.chunked {
            state = .chunkSize
        } else if let length = head.contentLength {
            if length == 0 { finish(emit) } else { state = .fixed(remaining: length) }
        } else {
            keepAlive = false
            state = .untilClose
        }
        return end
    }

    private mutating func finish(_ emit: (Event) -> Bool) {
        state = .done
        _ = emit(.end(reusable: keepAlive))
    }

    private mutating func fail(_ reason: String, _ emit: (Event) -> Bool) {
        state = .failed
        pending = []
        _ = emit(.malformed(reason))
    }

    struct Malformed: Error {
        var reason: String
    }

    struct Head {
        var status: Int
        var fields: HTTPFields
        var contentLength: Int?
        var chunked: Bool
        var keepAlive: Bool
        var isHTTP11: Bool
    }

    /// Parses a complete head (status line, fields, empty line). Field names are lower-cased
    /// (HTTP compares them without case), values trimmed of spaces and tabs.
    static func parseHead(_ head: UnsafeRawBufferPointer) -> Result<Head, Malformed> {
        guard let base = head.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return .failure(Malformed(reason: "an empty response head")) }
        let count = head.count
        /// The end of the line starting at `start` (before CR LF or LF), and where the next starts.
        func line(from start: Int) -> (end: Int, next: Int)? {
            guard start < count, let found = memchr(base + start, 0x0A, count - start) else { return nil }
            let newline = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
            let end = newline > start && base[newline - 1] == 0x0D ? newline - 1 : newline
            return (end, newline + 1)
        }
        guard let status = line(from: 0) else { return .failure(Malformed(reason: "an empty response head")) }
        // "HTTP/1.x SSS[ reason]"
        let prefix: [UInt8] = [0x48, 0x54, 0x54, 0x50, 0x2F, 0x31, 0x2E]  // "HTTP/1."
        guard status.end >= 12, (0..<7).allSatisfy({ base[$0] == prefix[$0] }), base[7] == 0x30 || base[7] == 0x31, base[8] == 0x20 else {
            return .failure(Malformed(reason: "not an HTTP/1.x status line"))
        }
        let minor = base[7] - 0x30
        var code = 0
        for k in 9..<12 {
            guard (0x30...0x39).contains(base[k]) else { return .failure(Malformed(reason: "a status code that is not three digits")) }
            code = code * 10 + Int(base[k] - 0x30)
        }
        guard code >= 100, status.end == 12 || base[12] == 0x20 else {
            return .failure(Malformed(reason: "a status code that is not three digits"))
        }
        var result = Head(status: code, fields: HTTPFields(), contentLength: nil, chunked: false, keepAlive: minor == 1, isHTTP11: minor == 1)
        result.fields.reserveCapacity(12)
        var sawTransferEncoding = false
        var start = status.next
        while let (end, next) = line(from: start) {
            defer { start = next }
            if end == start {
                guard next == count else { return .failure(Malformed(reason: "bytes after the end of the head")) }
                break
            }
            guard base[start] != 0x20, base[start] != 0x09 else { return .failure(Malformed(reason: "obsolete line folding")) }
            var colon = start
            while colon < end, base[colon] != 0x3A {
                guard isTokenByte(base[colon]) else {
                    return .failure(Malformed(reason: "a header name with a byte outside HTTP's token characters"))
                }
                colon += 1
            }
            guard colon < end, colon > start else { return .failure(Malformed(reason: "a header line without a name and a colon")) }
            var valueStart = colon + 1
            var valueEnd = end
            while valueStart < valueEnd, base[valueStart] == 0x20 || base[valueStart] == 0x09 { valueStart += 1 }
            while valueEnd > valueStart, base[valueEnd - 1] == 0x20 || base[valueEnd - 1] == 0x09 { valueEnd -= 1 }
            for k in valueStart..<valueEnd {
                let byte = base[k]
                if (byte < 0x20 && byte != 0x09) || byte == 0x7F { return .failure(Malformed(reason: "a control byte in a header value")) }
            }
            let name = String(unsafeUninitializedCapacity: colon - start) { buffer in
                for k in 0..<(colon - start) {
                    let byte = base[start + k]
                    buffer[k] = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
                }
                return colon - start
            }
            let value = UnsafeBufferPointer(start: base + valueStart, count: valueEnd - valueStart)
            switch name {
            case "content-length":
                guard let length = Self.contentLength(value), result.contentLength ?? length == length else {
                    return .failure(Malformed(reason: "a Content-Length that is not a number, or lengths that disagree"))
                }
                result.contentLength = length
            case "transfer-encoding":
                guard !sawTransferEncoding, equalsLowercased(value, "chunked") else {
                    return .failure(Malformed(reason: "a Transfer-Encoding other than chunked (\(String(decoding: value, as: UTF8.self)))"))
                }
                sawTransferEncoding = true
                result.chunked = true
            case "connection":
                for option in value.split(separator: 0x2C) {
                    var token = option[...]
                    while let first = token.first, first == 0x20 || first == 0x09 { token = token.dropFirst() }
                    while let last = token.last, last == 0x20 || last == 0x09 { token = token.dropLast() }
                    if equalsLowercased(token, "close") { result.keepAlive = false }
                    if equalsLowercased(token, "keep-alive"), minor == 0 { result.keepAlive = true }
                }
            default:
                break
            }
            result.fields.append(lowercasedName: name, value: String(decoding: value, as: UTF8.self))
        }
        // Chunked framing wins over a length (RFC 9112 §6.3); such a connection is not reused.
        if result.chunked, result.contentLength != nil {
            result.contentLength = nil
            result.keepAlive = false
        }
        if result.chunked, minor == 0 { return .failure(Malformed(reason: "chunked transfer coding in an HTTP/1.0 response")) }
        return .success(result)
    }

    private enum Line {
        case incomplete
        case tooLong
        case line([UInt8], next: Int)
    }

    /// A line from `bytes[index...]`, joined to what earlier reads kept: its bytes without the
    /// line end, and the index after it. At most ``maximumLineBytes``, counting earlier trailer
    /// lines too (``trailerBytes``).
    private mutating func takeLine(_ bytes: UnsafeRawBufferPointer, from index: Int) -> Line {
        var i = index
        while i < bytes.count, bytes[i] != 0x0A { i += 1 }
        let length = pending.count + i - index
        guard trailerBytes + length <= Self.maximumLineBytes else { return .tooLong }
        guard i < bytes.count else {
            pending.append(contentsOf: bytes[index...])
            return .incomplete
        }
        var line = pending
        line.append(contentsOf: bytes[index..<i])
        pending.removeAll(keepingCapacity: true)
        if line.last == 0x0D { line.removeLast() }
        return .line(line, next: i + 1)
    }

    /// The length a `Content-Length` value states: digits, or a list of equal ones ("1, 1", which
    /// a repeated field joined gives; RFC 9110 §8.6).
    static func contentLength(_ value: UnsafeBufferPointer<UInt8>) -> Int? {
        var result: Int?
        for part in value.split(separator: 0x2C, omittingEmptySubsequences: false) {
            var digits = part[...]
            while let first = digits.first, first == 0x20 || first == 0x09 { digits = digits.dropFirst() }
            while let last = digits.last, last == 0x20 || last == 0x09 { digits = digits.dropLast() }
            guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            let length = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            if let result, result != length { return nil }
            result = length
        }
        return result
    }

    /// A chunk-size line's size (hexadecimal, extensions after `;` ignored).
    static func chunkSize(_ line: [UInt8]) -> Int? {
        var size = 0
        var digits = 0
        for byte in line {
            let value: Int
            switch byte {
            case 0x30...0x39: value = Int(byte - 0x30)
            case 0x41...0x46: value = Int(byte - 0x41 + 10)
            case 0x61...0x66: value = Int(byte - 0x61 + 10)
            case UInt8(ascii: ";"), 0x20, 0x09:
                return digits > 0 ? size : nil
            default:
                return nil
            }
            digits += 1
            guard digits <= 15 else { return nil }
            size = size << 4 | value
        }
        return digits > 0 ? size : nil
    }

    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): true
        default: false
        }
    }

    /// Whether `bytes` equal `lowercased` ignoring ASCII case (`lowercased` is lower case already).
    static func equalsLowercased<C: Collection<UInt8>>(_ bytes: C, _ lowercased: StaticString) -> Bool {
        guard bytes.count == lowercased.utf8CodeUnitCount else { return false }
        var index = 0
        for byte in bytes {
            let folded = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
            guard folded == lowercased.utf8Start[index] else { return false }
            index += 1
        }
        return true
    }
}

