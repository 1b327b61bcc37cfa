import Foundation
import TilepackChecksum
import TilepackHTTP

/// AWS Signature Version 4 for S3 (the `Authorization` header form), over TilepackChecksum's
/// SHA-256 and HMAC-SHA-256: no SDK. The canonical request and string to sign are the ones
/// botocore's `S3SigV4Auth` builds for the same request (the tests compare them string for
/// string): every header of the request but the hop-by-hop ones and `User-Agent` is signed, the
/// path is signed as sent (S3 does not normalise it), the query sorted by its encoded names, the
/// payload's SHA-256 sent in `X-Amz-Content-SHA256`.
package struct SigV4Signer: Sendable {
    package var credentials: S3Credentials
    package var region: String
    package var service = "s3"

    /// Headers never signed (botocore's `SIGNED_HEADERS_BLACKLIST`): a proxy or the transport may change them.
    static let unsigned: Set<String> = [
        "connection", "expect", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
        "transfer-encoding", "upgrade", "user-agent", "x-amzn-trace-id", "authorization",
    ]

    /// The SHA-256 of an empty payload.
    package static let emptyPayloadHash = Digest.hex(Digest.hash(.sha256, [UInt8]()))

    package init(credentials: S3Credentials, region: String) {
        self.credentials = credentials
        self.region = region
    }

    /// What a signature is computed over, kept for tests and for `SignatureDoesNotMatch` reports.
    package struct Signature: Sendable {
        package var canonicalRequest: String
        package var stringToSign: String
        package var signature: String
        package var authorization: String
    }

    /// `request` with `Host`, `X-Amz-Date`, `X-Amz-Content-SHA256`, the session token (when the
    /// credentials have one) and `Authorization` set, signed at `date`.
    package func sign(_ request: HTTPRequest, date: Date = Date()) -> HTTPRequest {
        var signed = request
        // Hashed where the body lies (a Data as a sequence would be copied into an array first:
        // a part of a multipart upload is megabytes).
        let payloadHash =
            request.body.map { body in body.withUnsafeBytes { Digest.hex(Digest.hash(.sha256, $0)) } } ?? Self.emptyPayloadHash
        signed.headers = prepare(request, date: date, payloadHash: payloadHash)
        signed.headers["Authorization"] = signature(method: signed.method, url: signed.url, headers: signed.headers).authorization
        return signed
    }

    /// The request's headers with the signing fields added (not yet `Authorization`).
    func prepare(_ request: HTTPRequest, date: Date, payloadHash: String) -> [String: String] {
        var headers = request.headers.filter {
            let name = $0.key.lowercased()
            return name != "authorization" && name != "x-amz-date" && name != "x-amz-security-token" && name != "x-amz-content-sha256"
                && name != "host"
        }
        headers["Host"] = Self.host(of: request.url)
        headers["X-Amz-Date"] = Self.timestamp(date)
        headers["X-Amz-Content-SHA256"] = payloadHash
        if let token = credentials.sessionToken { headers["X-Amz-Security-Token"] = token }
        return headers
    }

    /// The canonical request, string to sign and signature of a request whose headers already
    /// hold `X-Amz-Date` and `X-Amz-Content-SHA256`.
    package func signature(method: String, url: URL, headers: [String: String]) -> Signature {
        var signedFields: [String: [String]] = [:]
        for (name, value) in headers {
            let lower = name.lowercased()
            guard !Self.unsigned.contains(lower) else { continue }
            signedFields[lower, default: []].append(value.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " "))
        }
        let names = signedFields.keys.sorted()
        let canonicalHeaders = names.map { "\($0):\(signedFields[$0]!.joined(separator: ","))\n" }.joined()
        let signedHeaders = names.joined(separator: ";")
        let timestamp = signedFields["x-amz-date"]?.first ?? ""
        let payloadHash = signedFields["x-amz-content-sha256"]?.first ?? Self.emptyPayloadHash
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        let path = components?.percentEncodedPath ?? "/"
        let canonicalRequest = [
            method.uppercased(), path.isEmpty ? "/" : path, Self.canonicalQuery(components?.percentEncodedQuery), canonicalHeaders,
            signedHeaders, payloadHash,
        ].joined(separator: "\n")
        let day = String(timestamp.prefix(8))
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = [
            "AWS4-HMAC-SHA256", timestamp, scope, Digest.hex(Digest.hash(.sha256, Array(canonicalRequest.utf8))),
        ].joined(separator: "\n")
        var key = Digest.hmacSHA256(key: Array("AWS4\(credentials.secretAccessKey)".utf8), message: Array(day.utf8))
        for part in [region, service, "aws4_request"] { key = Digest.hmacSHA256(key: key, message: Array(part.utf8)) }
        let signature = Digest.hex(Digest.hmacSHA256(key: key, message: Array(stringToSign.utf8)))
        let authorization =
            "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyId)/\(scope), SignedHeaders=\(signedHeaders), Signature=\(signature)"
        return Signature(canonicalRequest: canonicalRequest, stringToSign: stringToSign, signature: signature, authorization: authorization)
    }

    /// The query's `name=value` pairs as sent, sorted (names, then values), joined with `&`;
    /// a name without `=` gets an empty value.
    static func canonicalQuery(_ query: String?) -> String {
        guard let query, !query.isEmpty else { return "" }
        let pairs = query.split(separator: "&", omittingEmptySubsequences: false).map { pair -> (String, String) in
            guard let equals = pair.firstIndex(of: "=") else { return (String(pair), "") }
            return (String(pair[..<equals]), String(pair[pair.index(after: equals)...]))
        }
        return pairs.sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    /// `host` or `host:port` (the port only when the URL names one).
    static func host(of url: URL) -> String {
        let host = url.host ?? ""
        return url.port.map { "\(host):\($0)" } ?? host
    }

    /// `YYYYMMDDTHHMMSSZ` in UTC.
    package static func timestamp(_ date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return
            "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
    }

    /// `text` percent-encoded as SigV4 asks: everything but `A-Z a-z 0-9 - _ . ~` (and `/` when
    /// `keepSlash`), as `%XX` with capitals.
    package static func uriEncode(_ text: String, keepSlash: Bool) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where keepSlash:
                out.append("/")
            default:
                let digits = Array("0123456789ABCDEF")
                out.append("%")
                out.append(digits[Int(byte >> 4)])
                out.append(digits[Int(byte & 15)])
            }
        }
        return out
    }
}
