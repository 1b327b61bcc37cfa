import Foundation

/// What moves the bytes of one HTTP exchange for ``HTTPClient``: URLSession by default
/// (`URLSessionTransport`, module TilepackURLSession; see ``HTTPTransportSystem``), or a bulk
/// transport a program brings (libcurl's multi interface, module `TilepackCurl`, which the command
/// line uses on Linux).
///
/// A transport only sends and receives; every rule of the exchange lives in TilepackHTTP and is
/// the same whatever the transport: the client sets the `User-Agent`, checks the scheme, follows
/// redirects, retries; ``HTTPIncomingResponse`` bounds the body as it arrives, checks the
/// declared length and names the URL in every error.
///
/// The contract, which the tests of both transports check:
/// - send `request` as it is (method, URL, headers; the client has set `User-Agent`), and do not
///   follow redirects (a 3xx is a response like any other);
/// - hand the response head to ``HTTPIncomingResponse/receiveHead(status:headers:)`` before any
///   body, the body to ``HTTPIncomingResponse/receiveBody(_:)`` as it arrives, and stop the
///   transfer as soon as either returns `false`;
/// - end the exchange exactly once with ``HTTPIncomingResponse/end(_:)``: `nil` when the transfer
///   completed, else the fault (``HTTPError/Fault/timedOut(_:)`` when the whole exchange took
///   longer than `request.timeout`, ``HTTPError/Fault/cancelled`` when the calling task was
///   cancelled, which must end the exchange promptly);
/// - return the response it was given, ended.
public protocol HTTPTransport: Sendable {
    nonisolated(nonsending) func exchange(_ request: HTTPRequest, _ response: HTTPIncomingResponse) async -> HTTPIncomingResponse
}

/// A response as a transport receives it, with the rules every transport shares: a body bounded
/// as it arrives (a lying or huge body never fills memory), a declared `Content-Length` checked
/// against what arrived (a body cut short is an error, not data), errors naming the URL.
public struct HTTPIncomingResponse: Sendable {
    public let request: HTTPRequest
    /// The status, once the head arrived.
    public private(set) var status: Int?
    /// The header fields, once the head arrived.
    public private(set) var fields = HTTPFields()
    /// Header fields by lower-cased name (repeated fields joined with ", ").
    public var headers: [String: String] { fields.dictionary }
    public private(set) var body = Data()
    /// Whether ``end(_:)`` was called.
    public private(set) var isEnded = false
    private var fault: HTTPError.Fault?
    /// The `Content-Length` the head declared.
    private var declaredLength: Int?

    public init(request: HTTPRequest) {
        self.request = request
    }

    /// The response head. Returns `false` (the transport stops) when the declared length is over
    /// the request's limit, or when the exchange has already ended.
    @discardableResult
    public mutating func receiveHead(status: Int, headers: [String: String]) -> Bool {
        receiveHead(status: status, fields: headers.map { ($0.key, $0.value) })
    }

    /// The response head as a list of fields in arrival order (names in any case, repeated
    /// names allowed). Returns `false` as ``receiveHead(status:headers:)``.
    @discardableResult
    public mutating func receiveHead(status: Int, fields: [(name: String, value: String)]) -> Bool {
        receiveHead(status: status, fields: HTTPFields(fields))
    }

    /// The response head as parsed fields. Returns `false` as ``receiveHead(status:headers:)``.
    @discardableResult
    public mutating func receiveHead(status: Int, fields: HTTPFields) -> Bool {
        guard !isEnded, fault == nil else { return false }
        self.status = status
        self.fields = fields
        declaredLength = fields.value(lowercasedName: "content-length").flatMap { Int(Self.trimmed($0)) }
        if let declared = declaredLength, declared > request.maximumBodyBytes, request.method != "HEAD" {
            fault = .tooLarge(limit: request.maximumBodyBytes)
            return false
        }
        return true
    }

    /// A piece of the body. Returns `false` (the transport stops) when the body grows past the
    /// request's limit, or when the exchange has already ended.
    @discardableResult
    public mutating func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !isEnded, fault == nil else { return false }
        guard body.count + bytes.count <= request.maximumBodyBytes else {
            fault = .tooLarge(limit: request.maximumBodyBytes)
            body = Data()
            return false
        }
        if body.isEmpty, let declared = declaredLength, declared > 0, declared <= request.maximumBodyBytes {
            body.reserveCapacity(declared)
        }
        body.append(contentsOf: bytes)
        request.bodyObserver?.receive(status, fields, body.count - bytes.count, bytes)
        return true
    }

    @discardableResult
    public mutating func receiveBody(_ data: Data) -> Bool {
        data.withUnsafeBytes { receiveBody($0) }
    }

    /// Ends the exchange: `nil` when the transfer completed, else how it failed. The first fault
    /// stands (a body refused as too large stays too large, whatever the transport says after);
    /// later calls change nothing.
    public mutating func end(_ fault: HTTPError.Fault?) {
        guard !isEnded else { return }
        isEnded = true
        if self.fault == nil { self.fault = fault }
    }

    /// `text` without the spaces and tabs around it (no Foundation: this runs for every response).
    static func trimmed(_ text: String) -> Substring {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !blank($0) }), let last = text.lastIndex(where: { !blank($0) }) else { return "" }
        return text[first...last]
    }

    /// The response, or the error naming the URL: a transfer that broke after a head declaring
    /// its length is a body cut short, whatever words the transport uses for it; a completed body
    /// shorter or longer than declared (without a content encoding, whose decoded length differs)
    /// is one too.
    public func result() -> Result<HTTPResponse, HTTPError> {
        // The URL's text only for an error (this runs for every response).
        var url: String { request.url.absoluteString }
        guard isEnded else { return .failure(HTTPError(url: url, fault: .transport("the transport did not end the exchange"))) }
        let bodyless = request.method == "HEAD" || status == 304 || status == 204
        if let fault {
            switch fault {
            case .cancelled, .timedOut, .tooLarge:
                return .failure(HTTPError(url: url, fault: fault))
            default:
                if status != nil, !bodyless, let declared = declaredLength, declared > body.count {
                    return .failure(HTTPError(url: url, fault: .truncated(expected: declared, received: body.count)))
                }
                return .failure(HTTPError(url: url, fault: fault))
            }
        }
        guard let status else { return .failure(HTTPError(url: url, fault: .transport("no response"))) }
        let encoding = fields.value(lowercasedName: "content-encoding")?.lowercased() ?? "identity"
        if encoding == "identity", !bodyless, let declared = declaredLength, declared != body.count {
            return .failure(HTTPError(url: url, fault: .truncated(expected: declared, received: body.count)))
        }
        return .success(HTTPResponse(url: request.url, status: status, fields: fields, body: body))
    }
}
