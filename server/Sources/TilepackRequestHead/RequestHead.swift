@_spi(HTTP1) import TilepackHTTP

/// One HTTP/1.x request head (RFC 9112 §2-3, §5, §6.3), read from the bytes a connection
/// received: the request line, and of the header section only what the server consults. The
/// rest of the section is checked for well-formedness and skipped without being copied.
///
/// tilepack parses heads itself rather than through SwiftNIO's llhttp-based decoder: answering
/// a tile takes a few microseconds, and the decoder's per-request objects (a head with every
/// field as strings, message parts boxed through the pipeline) were a fifth of the server's own
/// CPU time per tile (`tools/bench-serve.sh`, perf). The server takes no request bodies, so the
/// grammar it needs is the head alone; a request that has a body is answered and its connection
/// closed, which leaves no body framing to get wrong (no request smuggling). The syntax itself
/// (tokens, lines, lengths, list values) is `TilepackHTTP.HTTP1Syntax`, shared with the tests.
package struct RequestHead: Sendable, Equatable {
    package enum Method: Sendable, Equatable {
        case get, head, options
        case other(String)

        package var name: String {
            switch self {
            case .get: "GET"
            case .head: "HEAD"
            case .options: "OPTIONS"
            case .other(let name): name
            }
        }
    }

    package var method: Method
    /// The request target as sent (origin form `/path?query`; an absolute-form target's path).
    package var target: String
    /// 0 for HTTP/1.0, 1 for HTTP/1.1 (and later 1.x).
    package var minorVersion: Int
    /// Whether the connection may stay open after the answer (RFC 9112 §9.3).
    package var keepAlive: Bool
    /// Whether a body follows the head (`Content-Length` above 0, or a `Transfer-Encoding`).
    package var hasBody: Bool
    /// `Host`, or the authority of an absolute-form target.
    package var host: String?
    package var acceptEncoding: String?
    package var ifNoneMatch: String?
    package var authorization: String?
    package var origin: String?
    package var accessControlRequestMethod: String?

    /// The most bytes a head may take, request line included: nginx's default total (four 8 KiB
    /// buffers). Browsers send 1-2 KiB, more with many cookies for the host.
    package static let maximumSize = 32 * 1024

    package init(method: Method, target: String, minorVersion: Int, keepAlive: Bool, hasBody: Bool, host: String? = nil) {
        self.method = method
        self.target = target
        self.minorVersion = minorVersion
        self.keepAlive = keepAlive
        self.hasBody = hasBody
        self.host = host
    }

    package enum Parse: Sendable, Equatable {
        /// A whole head, and the bytes it took (empty lines before it included).
        case complete(RequestHead, length: Int)
        /// The head has not ended yet.
        case incomplete
        /// Not a request this server can read: answer `status` and close.
        case invalid(status: Int, reason: String)
    }

    /// Parses the head at the start of `bytes`.
    package static func parse(_ bytes: UnsafeRawBufferPointer) -> Parse {
        var parser = Parser(bytes: bytes)
        return parser.run()
    }

    private struct Parser {
        let bytes: UnsafeRawBufferPointer
        var position = 0

        /// The next line, without its terminator; `nil` when it has not ended yet.
        mutating func line() throws(Failure) -> Range<Int>? {
            do throws(HTTP1Syntax.MalformedLine) {
                guard let found = try HTTP1Syntax.line(bytes, from: position) else { return nil }
                position = found.next
                return found.line
            } catch {
                throw Failure(400, error.reason)
            }
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
                let name = line.lowerBound..<colon
                guard HTTP1Syntax.isToken(bytes, name) else { throw Failure(400, "a header name that is not a token") }
                let value = HTTP1Syntax.trimmed(bytes, (colon + 1)..<line.upperBound)
                for index in value {
                    let byte = bytes[index]
                    guard byte >= 0x20 || byte == 0x09, byte != 0x7F else { throw Failure(400, "a control character in a header value") }
                }
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
                    let options = HTTP1Syntax.connectionOptions(bytes, value)
                    connectionClose = connectionClose || options.close
                    connectionKeepAlive = connectionKeepAlive || options.keepAlive
                case .contentLength:
                    guard let length = HTTP1Syntax.decimal(bytes, value) else {
                        throw Failure(400, "a Content-Length that is not a number")
                    }
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
            head.keepAlive = HTTP1Syntax.persists(minorVersion: head.minorVersion, close: connectionClose, keepAlive: connectionKeepAlive)
            return head
        }

        /// `method SP request-target SP HTTP-version` (RFC 9112 §3).
        func parseRequestLine(_ line: Range<Int>) throws(Failure) -> RequestHead {
            guard let firstSpace = line.first(where: { bytes[$0] == 0x20 }),
                let lastSpace = line.last(where: { bytes[$0] == 0x20 }), lastSpace > firstSpace + 1
            else {
                throw Failure(400, "a request line that is not 'method target version'")
            }
            let methodBytes = line.lowerBound..<firstSpace, targetBytes = (firstSpace + 1)..<lastSpace
            let versionBytes = (lastSpace + 1)..<line.upperBound
            guard HTTP1Syntax.isToken(bytes, methodBytes) else {
                throw Failure(400, "a method that is not a token")
            }
            // The target is visible ASCII; spaces, controls and raw non-ASCII bytes are not (RFC 3986).
            guard targetBytes.allSatisfy({ bytes[$0] > 0x20 && bytes[$0] < 0x7F }) else {
                throw Failure(400, "a request target with a space, control or non-ASCII byte")
            }
            let minor: Int
            let version = versionBytes.map { bytes[$0] }
            if version.count == 8, version.starts(with: Array("HTTP/".utf8)), version[6] == UInt8(ascii: "."),
                version[5] >= 0x30, version[5] <= 0x39, version[7] >= 0x30, version[7] <= 0x39
            {
                guard version[5] == UInt8(ascii: "1") else {
                    throw Failure(505, "HTTP/\(version[5] - 0x30) is not supported: use HTTP/1.1")
                }
                minor = version[7] == UInt8(ascii: "0") ? 0 : 1
            } else {
                throw Failure(400, "a request line without an HTTP/1.x version")
            }

            let method: Method
            if HTTP1Syntax.equals(bytes, methodBytes, "GET") {
                method = .get
            } else if HTTP1Syntax.equals(bytes, methodBytes, "HEAD") {
                method = .head
            } else if HTTP1Syntax.equals(bytes, methodBytes, "OPTIONS") {
                method = .options
            } else {
                method = .other(string(methodBytes))
            }

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

        /// A repeated field is one comma-separated list (RFC 9110 §5.3).
        static func append(_ value: String, to field: inout String?) {
            field = field.map { $0 + ", " + value } ?? value
        }

        enum Field {
            case host, acceptEncoding, ifNoneMatch, authorization, origin, accessControlRequestMethod, connection, contentLength,
                transferEncoding
        }

        static let fields: [(String, Field)] = [
            ("host", .host), ("accept-encoding", .acceptEncoding), ("if-none-match", .ifNoneMatch),
            ("authorization", .authorization), ("origin", .origin),
            ("access-control-request-method", .accessControlRequestMethod), ("connection", .connection),
            ("content-length", .contentLength), ("transfer-encoding", .transferEncoding),
        ]

        static func field(_ bytes: UnsafeRawBufferPointer, _ name: Range<Int>) -> Field? {
            for (lowercase, field) in fields where lowercase.utf8.count == name.count {
                if HTTP1Syntax.equalsIgnoringCase(bytes, name, lowercase) { return field }
            }
            return nil
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
