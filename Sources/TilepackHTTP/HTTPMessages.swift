import Foundation

/// One HTTP request: a URL, a method, headers, and the bounds it runs within.
public struct HTTPRequest: Sendable, Hashable {
    public var url: URL
    /// `GET` or `HEAD`; `PUT`, `POST` or `DELETE` (object-store writes, with ``body``).
    public var method: String
    /// Extra header fields (`Range`, `If-None-Match`, ...). `User-Agent` overrides the client's.
    public var headers: [String: String]
    /// How long the whole exchange may take, from the request to the last byte of the body;
    /// a slow or stalled server past it gives ``HTTPError/Fault/timedOut``.
    public var timeout: Duration
    /// The largest body accepted; a longer one (declared or received) gives ``HTTPError/Fault/tooLarge(limit:)``.
    public var maximumBodyBytes: Int
    /// The bytes sent with the request (a `PUT` or `POST`), `nil` for none.
    public var body: Data?
    /// Told of the response body's bytes as they arrive (`nil`: nobody).
    public var bodyObserver: HTTPBodyObserver?

    public init(
        url: URL, method: String = "GET", headers: [String: String] = [:],
        timeout: Duration = .seconds(30), maximumBodyBytes: Int = 16 << 20, body: Data? = nil
    ) {
        self.url = url
        self.method = method
        self.headers = headers
        self.timeout = timeout
        self.maximumBodyBytes = maximumBodyBytes
        self.body = body
    }

    /// Asks for the bytes `range` (`Range: bytes=first-last`) of the resource, as stored
    /// (`Accept-Encoding: identity`, see ``setRanges(_:)``).
    public mutating func setRange(_ range: Range<UInt64>) {
        precondition(!range.isEmpty, "an empty byte range cannot be requested")
        setRanges("\(range.lowerBound)-\(range.upperBound - 1)")
    }

    /// Asks for the byte ranges `specs` (`first-last`, `first-`, comma-separated) of the resource
    /// as stored: `Accept-Encoding: identity` goes with them, as the ranges of an encoded answer
    /// count the encoded bytes (RFC 9110 §14.1.2), not the resource's. An answer that is encoded
    /// all the same is refused by its reader (``HTTPResponse/encodedRangeFault``).
    public mutating func setRanges(_ specs: String) {
        headers["Range"] = "bytes=\(specs)"
        headers["Accept-Encoding"] = "identity"
    }

    /// Whether the request asks for the resource's bytes as stored (`Accept-Encoding: identity`):
    /// a transport then hands the body over as it arrives, not decoded.
    public var acceptsIdentityOnly: Bool {
        headers.contains {
            $0.key.lowercased() == "accept-encoding" && $0.value.trimmingCharacters(in: .whitespaces).lowercased() == "identity"
        }
    }
}

/// A response whose body arrived whole (its declared length checked).
public struct HTTPResponse: Sendable {
    /// The URL that answered (after redirects).
    public var url: URL
    public var status: Int
    /// The header fields as they arrived.
    public var fields: HTTPFields
    public var body: Data

    /// Header fields by lower-cased name (repeated fields joined with ", ").
    public var headers: [String: String] {
        get { fields.dictionary }
        set { fields = HTTPFields(newValue.map { ($0.key, $0.value) }) }
    }

    public init(url: URL, status: Int, headers: [String: String], body: Data) {
        self.init(url: url, status: status, fields: HTTPFields(headers.map { ($0.key, $0.value) }), body: body)
    }

    public init(url: URL, status: Int, fields: HTTPFields, body: Data) {
        self.url = url
        self.status = status
        self.fields = fields
        self.body = body
    }

    /// A header field's value, by case-insensitive name.
    public func header(_ name: String) -> String? { fields[name] }

    public var etag: String? { fields.value(lowercasedName: "etag") }
    public var lastModified: String? { fields.value(lowercasedName: "last-modified") }
    public var contentType: String? { fields.value(lowercasedName: "content-type") }
    /// The declared `Content-Length` (of a `HEAD` answer: the length a `GET` would send).
    public var contentLength: Int? { fields.value(lowercasedName: "content-length").flatMap { Int(HTTPIncomingResponse.trimmed($0)) } }

    /// The content coding of the body (`Content-Encoding`, lower-cased), `nil` for none or `identity`.
    public var contentEncoding: String? {
        guard let value = fields.value(lowercasedName: "content-encoding")?.trimmingCharacters(in: .whitespaces).lowercased(),
            !value.isEmpty, value != "identity"
        else { return nil }
        return value
    }

    /// Why an answer to a range request cannot be used as the resource's bytes, or `nil`: a 206
    /// with a `Content-Encoding` (gzip, br, ...) counts its ranges in the encoded bytes, which say
    /// nothing of where the stored bytes lie, whatever a transport then decodes; a 200 with one
    /// (the whole resource) holds encoded bytes, which a transport asked for the stored bytes
    /// (``HTTPRequest/acceptsIdentityOnly``) does not decode.
    public var encodedRangeFault: String? {
        guard let encoding = contentEncoding else { return nil }
        let need = "(asked with Accept-Encoding: identity): remote archives need ranges of the stored bytes"
        switch status {
        case 206:
            return
                "the server answered a range with Content-Encoding: \(encoding); the range then counts encoded bytes, not the object's \(need)"
        case 200:
            return
                "the server answered a range request with the whole object in Content-Encoding: \(encoding), not its stored bytes \(need)"
        default: return nil
        }
    }

    /// The delay a `Retry-After` field asks for (delta-seconds or an HTTP date), if any.
    public func retryAfter(now: Date = Date()) -> Duration? {
        guard let value = header("retry-after")?.trimmingCharacters(in: .whitespaces) else { return nil }
        if let seconds = Int(value) { return .seconds(max(0, seconds)) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        return .milliseconds(max(0, Int64(date.timeIntervalSince(now) * 1000)))
    }

    /// Throws ``HTTPError/Fault/status(_:)`` unless the status is one of `accepted`.
    public func requireStatus(_ accepted: Set<Int> = [200]) throws(HTTPError) {
        guard accepted.contains(status) else { throw HTTPError(url: url.absoluteString, fault: .status(status)) }
    }
}

/// Why an HTTP exchange failed, naming the URL.
public struct HTTPError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Fault: Sendable, Hashable {
        /// Only `http` and `https` URLs are fetched.
        case unsupportedScheme(String)
        /// No answer within the request's timeout.
        case timedOut(Duration)
        /// The host could not be reached (refused, unknown host, TLS failure).
        case cannotConnect(String)
        /// The connection broke during the exchange.
        case connectionLost(String)
        /// The body ended before its declared `Content-Length`.
        case truncated(expected: Int, received: Int)
        /// The body is longer than the request's limit.
        case tooLarge(limit: Int)
        /// A status the caller does not accept (see ``HTTPResponse/requireStatus(_:)``).
        case status(Int)
        /// The task was cancelled.
        case cancelled
        /// Any other failure of the transport.
        case transport(String)
    }

    public var url: String
    public var fault: Fault

    public init(url: String, fault: Fault) {
        self.url = url
        self.fault = fault
    }

    /// Whether trying again later may succeed: time-outs, broken or refused connections,
    /// truncated bodies, and the statuses ``RetryPolicy/retryableStatuses``.
    public var isTransient: Bool {
        switch fault {
        case .timedOut, .cannotConnect, .connectionLost, .truncated: true
        case .status(let code): RetryPolicy.retryableStatuses.contains(code)
        case .unsupportedScheme, .tooLarge, .cancelled, .transport: false
        }
    }

    public var description: String { "\(url): \(reason)" }

    /// What went wrong, without the URL.
    public var reason: String {
        switch fault {
        case .unsupportedScheme(let scheme): "only http and https URLs are fetched, not '\(scheme)'"
        case .timedOut(let limit): "no complete answer within \(limit)"
        case .cannotConnect(let reason): "cannot connect: \(reason)"
        case .connectionLost(let reason): "the connection was lost: \(reason)"
        case .truncated(let expected, let received): "the body ended after \(received) of its \(expected) bytes"
        case .tooLarge(let limit): "the body is larger than \(limit) bytes"
        case .status(let code): "HTTP status \(code)"
        case .cancelled: "cancelled"
        case .transport(let reason): reason
        }
    }
}

/// When and how often a request is tried again: exponential back-off with full jitter, and the
/// server's `Retry-After` honoured up to a limit.
public struct RetryPolicy: Sendable, Hashable {
    /// Statuses worth another try: request timeout, too many requests, and the transient 5xx.
    public static let retryableStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]

    /// Tries in all, the first included (1: no retry).
    public var maximumAttempts: Int
    /// The back-off before the second try; it doubles each time up to ``maximumDelay``.
    public var baseDelay: Duration
    public var maximumDelay: Duration
    /// A `Retry-After` longer than this is not waited for: the response is returned as it is.
    public var maximumRetryAfter: Duration

    public init(
        maximumAttempts: Int = 4, baseDelay: Duration = .milliseconds(250),
        maximumDelay: Duration = .seconds(8), maximumRetryAfter: Duration = .seconds(60)
    ) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.baseDelay = baseDelay
        self.maximumDelay = maximumDelay
        self.maximumRetryAfter = maximumRetryAfter
    }

    /// No retries.
    public static let none = RetryPolicy(maximumAttempts: 1)

    /// The system's random numbers for ``delay(afterAttempt:retryAfter:using:)``, behind a stored
    /// byte. `SystemRandomNumberGenerator` has no stored property, and Swift gives every value of
    /// a zero-sized type one shared address: two retries passing their own generator `inout` at
    /// once were reported by ThreadSanitizer as a race on that address.
    public struct Jitter: RandomNumberGenerator, Sendable {
        private var unused: UInt8 = 0

        public init() {}

        public mutating func next() -> UInt64 { UInt64.random(in: .min ... .max) }
    }

    /// The wait before try number `attempt + 1` (`attempt` counts from 1): a random duration in
    /// [0, min(maximumDelay, baseDelay * 2^(attempt-1))] ("full jitter"), or the server's
    /// `Retry-After` when it gives one.
    public func delay<G: RandomNumberGenerator>(afterAttempt attempt: Int, retryAfter: Duration?, using generator: inout G) -> Duration {
        if let retryAfter { return retryAfter }
        let cap = min(maximumDelay, baseDelay * (1 << min(max(attempt - 1, 0), 30)))
        let capNanoseconds = max(cap.components.seconds * 1_000_000_000 + cap.components.attoseconds / 1_000_000_000, 0)
        return .nanoseconds(Int64.random(in: 0...capNanoseconds, using: &generator))
    }
}

/// A message's header fields in arrival order, names lower-cased (HTTP compares them without
/// case). Found by a scan: a response has about ten fields, and hashing each into a dictionary
/// cost more, for every tile of a fetch, than the two or three lookups made of it.
public struct HTTPFields: Sendable, Hashable, Sequence {
    public struct Field: Sendable, Hashable {
        /// Lower-cased.
        public var name: String
        public var value: String
    }

    private var fields: [Field]

    /// `fields` in arrival order; names in any case, repeated names allowed.
    public init(_ fields: [(name: String, value: String)] = []) {
        self.fields = fields.map { Field(name: Self.lowercased($0.name), value: $0.value) }
    }

    /// Appends a field whose name is lower-cased already (a parser's path: no second pass).
    public mutating func append(lowercasedName name: String, value: String) {
        assert(Self.lowercased(name) == name, "\(name) is not lower-cased")
        fields.append(Field(name: name, value: value))
    }

    public mutating func reserveCapacity(_ count: Int) {
        fields.reserveCapacity(count)
    }

    /// The value of the field `name` (any case); repeated fields joined with ", ".
    public subscript(name: String) -> String? {
        value(lowercasedName: Self.lowercased(name))
    }

    /// `name` lower-cased; as it is (no new string) when it has no upper-case ASCII letter.
    private static func lowercased(_ name: String) -> String {
        name.utf8.contains(where: { (65...90).contains($0) }) ? name.lowercased() : name
    }

    /// The value of the field `key`, a lower-cased name.
    func value(lowercasedName key: String) -> String? {
        var found: String?
        for field in fields where field.name == key {
            found = found.map { "\($0), \(field.value)" } ?? field.value
        }
        return found
    }

    /// The fields by name, repeated fields joined with ", ".
    public var dictionary: [String: String] {
        var result: [String: String] = [:]
        for field in fields {
            if let previous = result.updateValue(field.value, forKey: field.name) { result[field.name] = "\(previous), \(field.value)" }
        }
        return result
    }

    public var count: Int { fields.count }

    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }
}
