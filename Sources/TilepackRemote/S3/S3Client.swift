import Foundation
import TilepackCore
import TilepackHTTP

/// What S3 (or the way to it) answered when a request failed: the bucket and key, S3's error
/// code (`AccessDenied`, `NoSuchKey`, `SignatureDoesNotMatch`, ...) and message, and for a
/// signature refused, its likely cause.
public struct S3Error: Error, Sendable, Hashable, CustomStringConvertible {
    public var bucket: String?
    public var key: String?
    /// The HTTP status (`nil`: no answer).
    public var status: Int?
    /// S3's `<Code>`, or `NoCredentials`, `Transport`.
    public var code: String
    public var message: String
    /// The likely cause, for the codes that have one.
    public var hint: String?

    public init(bucket: String? = nil, key: String? = nil, status: Int? = nil, code: String, message: String, hint: String? = nil) {
        self.bucket = bucket
        self.key = key
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
    }

    public var description: String { url.map { "\($0): \(reason)" } ?? reason }

    /// `s3://BUCKET/KEY` (or `s3://BUCKET`), the place ``description`` starts with.
    package var url: String? { bucket.map { bucket in key.map { "s3://\(bucket)/\($0)" } ?? "s3://\(bucket)" } }

    /// What S3 said, without the `s3://` URL that ``description`` starts with: for an error
    /// whose place is already named (a `TileArchiveError`'s path is the URL).
    package var reason: String {
        let status = self.status.map { " (HTTP \($0))" } ?? ""
        let names = bucket.map { b in " [bucket \(b)\(key.map { ", key \($0)" } ?? "")]" } ?? ""
        return "\(code)\(status): \(message)\(names)\(hint.map { "; \($0)" } ?? "")"
    }

    /// The error of a non-2xx answer from S3, its XML body read for `Code` and `Message`. The
    /// answer to a `HEAD` has no body: its code is guessed from the status, and the hint then
    /// names every likely cause the status has.
    static func answer(
        _ response: HTTPResponse, location: S3Location, region: String, now: Date = Date(), method: String = "GET"
    ) -> S3Error {
        let xml = S3XML(response.body)
        let stated = xml.first("Code")
        let code = stated ?? (response.status == 404 ? "NoSuchKey" : response.status == 403 ? "AccessDenied" : "HTTP \(response.status)")
        let message =
            xml.first("Message")
            ?? (response.body.isEmpty
                ? (method == "HEAD" ? "S3 answers a HEAD without a body, so it does not say which refusal" : "no error body")
                : String(decoding: response.body.prefix(200), as: UTF8.self))
        var hint: String?
        switch code {
        case "AccessDenied" where stated == nil:
            // No body: a signature S3 refused (a wrong secret) answers 403 as a refused permission does.
            hint =
                "likely causes: a wrong access key or secret key (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE), or credentials without permission to read the object (s3:GetObject)"
        case "AccessDenied":
            hint =
                "likely causes: credentials without permission to read the object (s3:GetObject; s3:ListBucket to tell a missing key), or the key and secret of another user than meant (AWS_PROFILE)"
        case "SignatureDoesNotMatch":
            var causes: [String] = []
            if let skew = clockSkew(response, now: now), abs(skew) > 300 {
                causes.append("this machine's clock is \(Int(abs(skew))) s \(skew > 0 ? "behind" : "ahead of") the server's")
            }
            if let bucketRegion = response.header("x-amz-bucket-region"), bucketRegion != region {
                causes.append("the bucket is in \(bucketRegion), the request was signed for \(region) (set AWS_REGION)")
            }
            causes.append(
                "likely causes: a wrong secret key, the wrong region (signed for \(region); AWS_REGION), a clock off by minutes, or a proxy that changed the request"
            )
            hint = causes.joined(separator: "; ")
        case "RequestTimeTooSkewed":
            let skew = clockSkew(response, now: now).map { "by \(Int(abs($0))) s " } ?? ""
            hint = "this machine's clock is off \(skew)from the server's: set it (NTP) and try again"
        case "AuthorizationHeaderMalformed", "IllegalLocationConstraintException", "PermanentRedirect":
            let region = xml.first("Region") ?? response.header("x-amz-bucket-region")
            hint = region.map { "the bucket is in \($0): set AWS_REGION=\($0)" } ?? "check AWS_REGION and AWS_ENDPOINT_URL"
        case "InvalidAccessKeyId":
            hint = "the access key is not known to this endpoint (AWS_ENDPOINT_URL, AWS_PROFILE)"
        default: break
        }
        return S3Error(bucket: location.bucket, key: location.key, status: response.status, code: code, message: message, hint: hint)
    }

    /// Seconds the server's `Date` is ahead of this machine's clock.
    static func clockSkew(_ response: HTTPResponse, now: Date) -> Double? {
        guard let text = response.header("date") else { return nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text).map { $0.timeIntervalSince(now) }
    }
}

/// The few elements tilepack reads from S3's XML answers (they are flat and simple): the text
/// of `<Name>...</Name>`, entities decoded. No XML library: Foundation's would load libxml2.
struct S3XML {
    let text: String
    init(_ data: Data) { text = String(decoding: data, as: UTF8.self) }
    init(text: String) { self.text = text }

    /// The text of the first `<name>` element.
    func first(_ name: String) -> String? { all(name).first }

    /// The texts of every `<name>` element, in order.
    func all(_ name: String) -> [String] { blocks(name).map { Self.unescape($0.text) } }

    /// The inner XML of every `<name>` block (for lists of records).
    func blocks(_ name: String) -> [S3XML] {
        var found: [S3XML] = []
        var rest = text[...]
        while let open = rest.range(of: "<\(name)>") {
            guard let close = rest[open.upperBound...].range(of: "</\(name)>") else { break }
            found.append(S3XML(text: String(rest[open.upperBound..<close.lowerBound])))
            rest = rest[close.upperBound...]
        }
        return found
    }

    static func unescape(_ text: String) -> String {
        guard text.contains("&") else { return text }
        return text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&#34;", with: "\"").replacingOccurrences(of: "&amp;", with: "&")
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}

/// S3's REST API, the part tilepack uses: signed requests (``SigV4Signer``) over an
/// ``HTTPClient`` (so over the program's transport: URLSession in an app, libcurl in the command),
/// objects read by range, listed (ListObjectsV2) and written by multipart upload.
public final class S3Client: Sendable {
    public let configuration: S3Configuration
    public let http: HTTPClient
    public let retry: RetryPolicy

    public init(configuration: S3Configuration, http: HTTPClient = .shared, retry: RetryPolicy = RetryPolicy()) {
        self.configuration = configuration
        self.http = http
        self.retry = retry
    }

    /// The configuration of this process's environment (``S3Configuration/environment(_:client:)``),
    /// made once.
    public static let environment = S3Client(configuration: .environment())

    /// `request` signed with the provider's current credentials.
    func sign(_ request: HTTPRequest, location: S3Location) async throws(S3Error) -> HTTPRequest {
        var credentials: S3Credentials
        do {
            credentials = try await configuration.credentials.credentials()
        } catch {
            var error = error
            if error.bucket == nil { (error.bucket, error.key) = (location.bucket, location.key) }
            throw error
        }
        return SigV4Signer(credentials: credentials, region: configuration.region).sign(request)
    }

    /// One signed exchange, retried on transient faults and 5xx (with `Retry-After`), each try
    /// signed afresh. Any status comes back; ``check(_:_:location:)`` turns a failure into an error.
    /// It goes over `client` when given (an upload's parts have one of their own), else ``http``.
    func send(
        _ method: String, _ location: S3Location, query: String? = nil, headers: [String: String] = [:], body: Data? = nil,
        timeout: Duration = .seconds(60), maximumBodyBytes: Int = 16 << 20, over client: HTTPClient? = nil
    ) async throws(S3Error) -> HTTPResponse {
        let http = client ?? self.http
        var request = HTTPRequest(
            url: configuration.url(for: location, query: query), method: method, headers: headers, timeout: timeout,
            maximumBodyBytes: maximumBodyBytes, body: body)
        if body != nil {
            // No `100-continue` round trip, and a type the server stores (curl's default is a form's).
            request.headers["Expect"] = ""
            if request.headers["Content-Type"] == nil { request.headers["Content-Type"] = "application/octet-stream" }
        }
        var attempt = 1
        var jitter = RetryPolicy.Jitter()
        while true {
            let signed = try await sign(request, location: location)
            let outcome: Result<HTTPResponse, HTTPError>
            do { outcome = .success(try await http.send(signed)) } catch { outcome = .failure(error) }
            var retryAfter: Duration?
            switch outcome {
            case .success(let response):
                guard RetryPolicy.retryableStatuses.contains(response.status), attempt < retry.maximumAttempts else { return response }
                retryAfter = response.retryAfter()
            case .failure(let error):
                guard error.isTransient, attempt < retry.maximumAttempts else {
                    throw S3Error(bucket: location.bucket, key: location.key, code: "Transport", message: error.description)
                }
            }
            let delay = retry.delay(afterAttempt: attempt, retryAfter: retryAfter, using: &jitter)
            do { try await Task.sleep(for: delay) } catch {
                throw S3Error(bucket: location.bucket, key: location.key, code: "Cancelled", message: "cancelled")
            }
            attempt += 1
        }
    }

    /// Throws S3's error unless the status is one of `accepted`.
    func check(_ response: HTTPResponse, _ accepted: Set<Int> = [200], location: S3Location) throws(S3Error) {
        guard !accepted.contains(response.status) else { return }
        throw S3Error.answer(response, location: location, region: configuration.region)
    }

    // MARK: Objects

    /// The object's size and ETag, `nil` when there is none (a `HEAD`).
    public func head(_ location: S3Location) async throws(S3Error) -> (size: Int, etag: String?)? {
        try await headVersion(location).map { ($0.size, $0.etag) }
    }

    /// The object's size, ETag and Last-Modified, `nil` when there is none: a `HEAD`, whose
    /// answer has no body, so an error is known by its status alone.
    func headVersion(_ location: S3Location) async throws(S3Error) -> (size: Int, etag: String?, lastModified: String?)? {
        let response = try await send("HEAD", location)
        switch response.status {
        case 404: return nil
        case 200:
            guard let size = response.contentLength else {
                throw S3Error(
                    bucket: location.bucket, key: location.key, status: 200, code: "NoContentLength",
                    message: "the HEAD answer has no Content-Length")
            }
            return (size, response.etag, response.lastModified)
        default:
            throw S3Error.answer(response, location: location, region: configuration.region, method: "HEAD")
        }
    }

    /// The objects under `prefix` (ListObjectsV2, every page), keys and sizes in key order.
    public func list(bucket: String, prefix: String) async throws(S3Error) -> [(key: String, size: Int)] {
        var found: [(key: String, size: Int)] = []
        var token: String?
        let location = S3Location(bucket: bucket, key: "")
        repeat {
            var query = [("list-type", "2"), ("prefix", prefix)]
            if let token { query.append(("continuation-token", token)) }
            let response = try await send("GET", location, query: Self.query(query))
            try check(response, location: S3Location(bucket: bucket, key: prefix))
            let xml = S3XML(response.body)
            for item in xml.blocks("Contents") {
                guard let key = item.first("Key") else { continue }
                found.append((key, Int(item.first("Size") ?? "") ?? 0))
            }
            token = xml.first("IsTruncated") == "true" ? xml.first("NextContinuationToken") : nil
        } while token != nil
        return found.sorted { $0.key < $1.key }
    }

    /// Puts `data` at `location` in one request (a small object; archives go up by multipart
    /// upload) and returns its ETag.
    @discardableResult
    public func put(_ data: Data, at location: S3Location) async throws(S3Error) -> String? {
        let response = try await send("PUT", location, body: data, timeout: .seconds(300))
        try check(response, location: location)
        return response.etag
    }

    public func delete(_ location: S3Location) async throws(S3Error) {
        let response = try await send("DELETE", location)
        try check(response, [200, 204], location: location)
    }

    /// `name=value` pairs encoded and sorted as SigV4's canonical query wants them.
    static func query(_ pairs: [(String, String)]) -> String {
        // Spelled out with types: the one-expression chain took the type checker 7-17 s.
        let encoded: [(name: String, value: String)] = pairs.map { pair in
            (SigV4Signer.uriEncode(pair.0, keepSlash: false), SigV4Signer.uriEncode(pair.1, keepSlash: false))
        }
        let sorted = encoded.sorted { (a, b) -> Bool in a.name != b.name ? a.name < b.name : a.value < b.value }
        return sorted.map { pair -> String in pair.name + "=" + pair.value }.joined(separator: "&")
    }
}
