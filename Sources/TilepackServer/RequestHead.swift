/// One HTTP/1.x request head (RFC 9112 §2-3, §5, §6.3), read from the bytes a connection
/// received: the request line, and of the header section only what the server consults. The
/// rest of the section is checked for well-formedness and skipped without being copied.
///
/// tilepack parses heads itself rather than through SwiftNIO's llhttp-based decoder: answering
/// a tile takes a few microseconds, and the decoder's per-request objects (a head with every
/// field as strings, message parts boxed through the pipeline) were a fifth of the server's own
/// CPU time per tile (`tools/bench-serve.sh`, perf). The server takes no request bodies, so the
/// grammar it needs is the head alone; a request that has a body is answered and its connection
/// closed, which leaves no body framing to get wrong (no request smuggling).
struct RequestHead: Sendable, Equatable {
    enum Method: Sendable, Equatable {
        case get, head, options
        case other(String)

        var name: String {
            switch self {
            case .get: "GET"
            case .head: "HEAD"
            case .options: "OPTIONS"
            case .other(let name): name
            }
        }
    }

    var method: Method
    /// The request target as sent (origin form `/path?query`; an absolute-form target's path).
    var target: String
    /// 0 for HTTP/1.0, 1 for HTTP/1.1 (and later 1.x).
    var minorVersion: Int
    /// Whether the connection may stay open after the answer (RFC 9112 §9.3).
    var keepAlive: Bool
    /// Whether a body follows the head (`Content-Length` above 0, or a `Transfer-Encoding`).
    var hasBody: Bool
    /// `Host`, or the authority of an absolute-form target.
    var host: String?
    var acceptEncoding: String?
    var ifNoneMatch: String?
    var authorization: String?
    var origin: String?
    var accessControlRequestMethod: String?

    /// The most bytes a head may take, request line included: nginx's default total (four 8 KiB
    /// buffers). Browsers send 1-2 KiB, more with many cookies for the host.
    static let maximumSize = 32 * 1024

    enum Parse: Sendable, Equatable {
        /// A whole head, and the bytes it took (empty lines before it included).
        case complete(RequestHead, length: Int)
        /// The head has not ended yet.
        case incomplete
        /// Not a request this server can read: answer `status` and close.
        case invalid(status: Int, reason: String)
    }

    /// Whether `bytes` holds an empty line (LF, an optional CR, LF) that starts after the first
    /// `searched` bytes, which were looked at before: a head can have ended only then. A
    /// connection sending its head in pieces has only its new bytes looked at, so a client
    /// trickling a head byte by byte costs linear time, not quadratic.
    static func hasEmptyLine(_ bytes: UnsafeRawBufferPointer, after searched: Int) -> Bool {
        var index = max(0, searched - 2)
        while index + 1 < bytes.count {
            if bytes[index] == 0x0A {
                if bytes[index + 1] == 0x0A { return true }
                if bytes[index + 1] == 0x0D, index + 2 < bytes.count, bytes[index + 2] == 0x0A { return true }
            }
            index += 1
        }
        return false
    }

    /// Parses the head at the start of `bytes`.
    static func parse(_ bytes: UnsafeRawBufferPointer) -> Parse {
        var parser = Parser(bytes: bytes)
        return parser.run()
    }

    private struct Parser {
        let bytes: UnsafeRawBufferPointer
        var position = 0

        /// The next line, without its terminator (CRLF, or a bare LF as RFC 9112 §2.2 allows);
        /// `nil` when it has not ended yet. A CR elsewhere is malformed.
        mutating func line() throws(Failure) -> Range<Int>? {
            let start = position
            var index = start
            while index < bytes.count {
                let byte = bytes[index]
                if byte == 0x0A {
                    position = index + 1
                    return start..<index
                }
                if byte == 0x0D {
                    guard index + 1 < bytes.count else { return nil }
                    guard bytes[index + 1] == 0x0A else { throw Failure(400, "a CR not followed by LF") }
                    position = index + 2
                    return start..<index
                }
                index += 1
            }
            return nil
        }

        mutating func run() -> Parse {
            do throws(Failure) {
                guard let head = try parseHead() else {
                    return bytes.count >= RequestHead.maximumSize
                        ? .invalid(status: 431, reason: "the request head is larger than \(RequestHead.maximumSize) bytes")
                        : .incomplete
                }
                guard position <= RequestHead.maximumSize else {
                    return .invalid(status: 431, reason: "the request head is larger than \(RequestHead.maximumSize) bytes")
                }
                return .complete(head, length: position)
            } catch {
                return .invalid(status: error.status, reason: error.reason)
            }
        }

        mutating func parseHead() throws(Failure) -> RequestHead? {
            // Empty lines before the request line are ignored (RFC 9112 §2.2), a few of them.
            var requestLine: Range<Int>
            var skipped = 0
            repeat {
                guard let line = try line() else { return nil }
                requestLine = line
                skipped += 1
            } while requestLine.isEmpty && skipped <= 4
            guard !requestLine.isEmpty else { throw Failure(400, "empty lines instead of a request line") }
            var head = try parseRequestLine(requestLine)

            var contentLength: Int?
            var transferEncoding = false
            var connectionClose = false
            var connectionKeepAlive = false
            var hosts = 0
            while true {
                guard let line = try line() else { return nil }
                if line.isEmpty { break }
                let first = bytes[line.lowerBound]
                guard first != 0x20, first != 0x09 else { throw Failure(400, "a folded header line (obsolete line folding)") }
                guard let colon = line.first(where: { bytes[$0] == 0x3A }) else { throw Failure(400, "a header line without a colon") }
                guard colon > line.lowerBound, (line.lowerBound..<colon).allSatisfy({ Self.isTokenByte(bytes[$0]) }) else {
                    throw Failure(400, "a header name that is not a token")
                }
                var valueStart = colon + 1, valueEnd = line.upperBound
                while valueStart < valueEnd, bytes[valueStart] == 0x20 || bytes[valueStart] == 0x09 { valueStart += 1 }
                while valueEnd > valueStart, bytes[valueEnd - 1] == 0x20 || bytes[valueEnd - 1] == 0x09 { valueEnd -= 1 }
                for index in valueStart..<valueEnd {
                    let byte = bytes[index]
                    guard byte >= 0x20 || byte == 0x09, byte != 0x7F else { throw Failure(400, "a control character in a header value") }
                }
                let name = line.lowerBound..<colon, value = valueStart..<valueEnd
                switch Self.field(bytes, name) {
                case .host:
                    hosts += 1
                    if head.host == nil { head.host = string(value) }
                case .acceptEncoding: Self.append(string(value), to: &head.acceptEncoding)
                case .ifNoneMatch: Self.append(string(value), to: &head.ifNoneMatch)
                case .authorization: Self.append(string(value), to: &head.authorization)
                case .origin: Self.append(string(value), to: &head.origin)
                case .accessControlRequestMethod: Self.append(string(value), to: &head.accessControlRequestMethod)
                case .connection:
                    forEachToken(value) { token in
                        if Self.equalsLowercase(bytes, token, "close") { connectionClose = true }
                        if Self.equalsLowercase(bytes, token, "keep-alive") { connectionKeepAlive = true }
                    }
                case .contentLength:
                    guard let length = Self.decimal(bytes, value) else { throw Failure(400, "a Content-Length that is not a number") }
                    guard contentLength == nil || contentLength == length else { throw Failure(400, "two different Content-Lengths") }
                    contentLength = length
                case .transferEncoding:
                    transferEncoding = true
                case nil:
                    break
                }
            }
            if head.minorVersion >= 1 {
                // RFC 9112 §3.2: an HTTP/1.1 request without exactly one Host is answered 400.
                guard hosts == 1 || (hosts == 0 && head.host != nil) else {
                    throw Failure(400, hosts == 0 ? "an HTTP/1.1 request without Host" : "more than one Host")
                }
            }
            head.hasBody = transferEncoding || (contentLength ?? 0) > 0
            head.keepAlive = head.minorVersion >= 1 ? !connectionClose : (connectionKeepAlive && !connectionClose)
            return head
        }

        /// `method SP request-target SP HTTP-version` (RFC 9112 §3).
        func parseRequestLine(_ line: Range<Int>) throws(Failure) -> RequestHead {
            guard let firstSpace = line.first(where: { bytes[$0] == 0x20 }),
                  let lastSpace = line.last(where: { bytes[$0] == 0x20 }), lastSpace > firstSpace + 1 else {
                throw Failure(400, "a request line that is not 'method target version'")
            }
            let methodBytes = line.lowerBound..<firstSpace, targetBytes = (firstSpace + 1)..<lastSpace
            let versionBytes = (lastSpace + 1)..<line.upperBound
            guard !methodBytes.isEmpty, methodBytes.allSatisfy({ Self.isTokenByte(bytes[$0]) }) else {
                throw Failure(400, "a method that is not a token")
            }
            // The target is visible ASCII; spaces, controls and raw non-ASCII bytes are not (RFC 3986).
            guard targetBytes.allSatisfy({ bytes[$0] > 0x20 && bytes[$0] < 0x7F }) else {
                throw Failure(400, "a request target with a space, control or non-ASCII byte")
            }
            let minor: Int
            let version = versionBytes.map { bytes[$0] }
            if version.count == 8, version.starts(with: Array("HTTP/".utf8)), version[6] == UInt8(ascii: "."),
               version[5] >= 0x30, version[5] <= 0x39, version[7] >= 0x30, version[7] <= 0x39 {
                guard version[5] == UInt8(ascii: "1") else { throw Failure(505, "HTTP/\(version[5] - 0x30) is not supported: use HTTP/1.1") }
                minor = version[7] == UInt8(ascii: "0") ? 0 : 1
            } else {
                throw Failure(400, "a request line without an HTTP/1.x version")
            }

            let method: Method
            if Self.equals(bytes, methodBytes, "GET") { method = .get }
            else if Self.equals(bytes, methodBytes, "HEAD") { method = .head }
            else if Self.equals(bytes, methodBytes, "OPTIONS") { method = .options }
            else { method = .other(string(methodBytes)) }

            // An absolute-form target (RFC 9112 §3.2.2): its authority replaces Host, its path is the target.
            var target = string(targetBytes)
            var host: String?
            if !target.hasPrefix("/"), target != "*" {
                guard let (authority, path) = Self.splitAbsolute(target) else {
                    throw Failure(400, "a request target that is neither a path nor an absolute http URL")
                }
                host = authority
                target = path
            }
            return RequestHead(method: method, target: target, minorVersion: minor, keepAlive: false, hasBody: false, host: host)
        }

        func string(_ range: Range<Int>) -> String {
            String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
        }

        /// Calls `body` with each comma-separated token of a list value, trimmed.
        func forEachToken(_ range: Range<Int>, _ body: (Range<Int>) -> Void) {
            var start = range.lowerBound
            while start <= range.upperBound {
                var end = start
                while end < range.upperBound, bytes[end] != 0x2C { end += 1 }
                var a = start, b = end
                while a < b, bytes[a] == 0x20 || bytes[a] == 0x09 { a += 1 }
                while b > a, bytes[b - 1] == 0x20 || bytes[b - 1] == 0x09 { b -= 1 }
                if a < b { body(a..<b) }
                start = end + 1
            }
        }

        /// A repeated field is one comma-separated list (RFC 9110 §5.3).
        static func append(_ value: String, to field: inout String?) {
            field = field.map { $0 + ", " + value } ?? value
        }

        enum Field { case host, acceptEncoding, ifNoneMatch, authorization, origin, accessControlRequestMethod, connection, contentLength, transferEncoding }

        static let fields: [(String, Field)] = [
            ("host", .host), ("accept-encoding", .acceptEncoding), ("if-none-match", .ifNoneMatch),
            ("authorization", .authorization), ("origin", .origin),
            ("access-control-request-method", .accessControlRequestMethod), ("connection", .connection),
            ("content-length", .contentLength), ("transfer-encoding", .transferEncoding),
        ]

        static func field(_ bytes: UnsafeRawBufferPointer, _ name: Range<Int>) -> Field? {
            for (lowercase, field) in fields where lowercase.utf8.count == name.count {
                if equalsLowercase(bytes, name, lowercase) { return field }
            }
            return nil
        }

        static func equals(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ text: StaticString) -> Bool {
            guard range.count == text.utf8CodeUnitCount else { return false }
            return text.withUTF8Buffer { text in zip(range, text).allSatisfy { bytes[$0] == $1 } }
        }

        /// Whether the bytes equal `lowercase` ignoring ASCII case.
        static func equalsLowercase(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ lowercase: String) -> Bool {
            guard range.count == lowercase.utf8.count else { return false }
            return zip(range, lowercase.utf8).allSatisfy { index, lower in
                let byte = bytes[index]
                return (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) == lower
            }
        }

        /// A decimal of at most 18 digits.
        static func decimal(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Int? {
            guard !range.isEmpty, range.count <= 18 else { return nil }
            var value = 0
            for index in range {
                let byte = bytes[index]
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }

        /// `tchar` of RFC 9110 §5.6.2.
        static func isTokenByte(_ byte: UInt8) -> Bool {
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
            case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
                 UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): true
            default: false
            }
        }

        /// `http://authority/path` (or https) into its authority and path (`/` when it has none).
        static func splitAbsolute(_ target: String) -> (String, String)? {
            let lower = target.lowercased()
            let scheme = lower.hasPrefix("http://") ? 7 : lower.hasPrefix("https://") ? 8 : 0
            guard scheme > 0 else { return nil }
            let rest = target.utf8.dropFirst(scheme)
            let slash = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }) ?? rest.endIndex
            let authority = String(decoding: rest[..<slash], as: UTF8.self)
            guard !authority.isEmpty else { return nil }
            var path = String(decoding: rest[slash...], as: UTF8.self)
            if !path.hasPrefix("/") { path = "/" + path }
            return (authority, path)
        }
    }

    struct Failure: Error {
        let status: Int
        let reason: String
        init(_ status: Int, _ reason: String) {
            self.status = status
            self.reason = reason
        }
    }
}
