import Foundation
import TilepackHTTP

/// An object (or a prefix, or a glob) in an S3 bucket: `s3://BUCKET/KEY`.
public struct S3Location: Sendable, Hashable, CustomStringConvertible {
    public var bucket: String
    public var key: String

    public init(bucket: String, key: String) {
        self.bucket = bucket
        self.key = key
    }

    /// `s3://BUCKET/KEY`, or `nil` when `text` is not an `s3://` URL with a bucket name.
    public init?(_ text: String) {
        guard text.lowercased().hasPrefix("s3://") else { return nil }
        let rest = text.dropFirst(5)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let bucket = String(rest[..<slash])
        guard !bucket.isEmpty, !bucket.contains(where: { $0 == "?" || $0 == "#" || $0 == " " }) else { return nil }
        self.bucket = bucket
        key = slash == rest.endIndex ? "" : String(rest[rest.index(after: slash)...])
    }

    /// Whether `text` starts with `s3://`.
    public static func isS3(_ text: String) -> Bool { text.lowercased().hasPrefix("s3://") }

    public var description: String { "s3://\(bucket)/\(key)" }

    /// A key ending in `/` (or empty) names every object under it.
    public var isPrefix: Bool { key.isEmpty || key.hasSuffix("/") }

    /// The key's wildcard part, when it has one (`*`, `?` or `[...]` in its last segment).
    public var isGlob: Bool {
        let last = key.split(separator: "/", omittingEmptySubsequences: false).last ?? ""
        return last.contains { $0 == "*" || $0 == "?" || $0 == "[" }
    }

    /// The key's file name (its last segment).
    public var fileName: String { String(key.split(separator: "/").last ?? Substring(bucket)) }
}

/// How a bucket is addressed: in the host name (`BUCKET.s3.REGION.amazonaws.com`, what AWS
/// asks for) or in the path (`ENDPOINT/BUCKET/KEY`, what most S3-compatible stores expect).
public enum S3Addressing: String, Sendable, Hashable {
    case virtualHosted = "virtual"
    case path
    /// Virtual-hosted for a DNS-safe bucket name on an endpoint named by a host name; path-style
    /// for an endpoint at an IP address or `localhost`, and for bucket names a host name cannot
    /// carry (capitals, underscores; dots on https, which the certificate would not cover).
    case auto
}

/// Where the S3 requests go: the endpoint, the region signed for, the addressing, the credentials.
public struct S3Configuration: Sendable {
    public var region: String
    /// `nil`: AWS's own (`https://s3.REGION.amazonaws.com`).
    public var endpoint: URL?
    public var addressing: S3Addressing
    public var credentials: any S3CredentialsProvider

    public init(
        region: String = "us-east-1", endpoint: URL? = nil, addressing: S3Addressing = .auto, credentials: any S3CredentialsProvider
    ) {
        self.region = region
        self.endpoint = endpoint
        self.addressing = addressing
        self.credentials = credentials
    }

    /// The configuration the AWS tools would use in this environment: region from `AWS_REGION`,
    /// `AWS_DEFAULT_REGION` or the profile's `region` (else `us-east-1`), endpoint from
    /// `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL` (else AWS), addressing from
    /// `AWS_S3_ADDRESSING_STYLE` (`virtual`, `path` or `auto`, the default), credentials from
    /// ``S3CredentialChain``.
    public static func environment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment, client: HTTPClient = .shared
    ) -> S3Configuration {
        let profile = AWSSharedConfig(environment: environment)
        let region =
            environment["AWS_REGION"].nonEmpty ?? environment["AWS_DEFAULT_REGION"].nonEmpty ?? profile.value("region") ?? "us-east-1"
        let endpoint = (environment["AWS_ENDPOINT_URL_S3"].nonEmpty ?? environment["AWS_ENDPOINT_URL"].nonEmpty).flatMap(URL.init(string:))
        let addressing = environment["AWS_S3_ADDRESSING_STYLE"].flatMap { S3Addressing(rawValue: $0.lowercased()) } ?? .auto
        return S3Configuration(
            region: region, endpoint: endpoint, addressing: addressing,
            credentials: S3CredentialChain(environment: environment, region: region, client: client))
    }

    /// The https URL of `location` (an object, or the bucket when `key` is empty), with `query`
    /// (already encoded, in canonical order) appended.
    public func url(for location: S3Location, query: String? = nil) -> URL {
        let base = endpoint ?? URL(string: "https://s3.\(region).amazonaws.com")!
        var components = URLComponents(url: base, resolvingAgainstBaseURL: false) ?? URLComponents()
        let host = components.host ?? ""
        let basePath =
            components.percentEncodedPath.hasSuffix("/") ? String(components.percentEncodedPath.dropLast()) : components.percentEncodedPath
        let encodedKey = SigV4Signer.uriEncode(location.key, keepSlash: true)
        if usesVirtualHost(bucket: location.bucket, host: host, https: components.scheme?.lowercased() == "https") {
            components.host = "\(location.bucket).\(host)"
            components.percentEncodedPath = "\(basePath)/\(encodedKey)"
        } else {
            components.percentEncodedPath = "\(basePath)/\(SigV4Signer.uriEncode(location.bucket, keepSlash: false))/\(encodedKey)"
        }
        components.percentEncodedQuery = query
        return components.url!
    }

    func usesVirtualHost(bucket: String, host: String, https: Bool) -> Bool {
        switch addressing {
        case .virtualHosted: return true
        case .path: return false
        case .auto:
            let numeric = host.allSatisfy { $0.isNumber || $0 == "." } || host.contains(":") || host == "localhost"
            let dnsSafe =
                bucket.count >= 3 && bucket.count <= 63
                && bucket.allSatisfy { ($0.isASCII && ($0.isLowercase || $0.isNumber)) || $0 == "-" || (!https && $0 == ".") }
            return !numeric && dnsSafe
        }
    }
}

extension Optional where Wrapped == String {
    /// The string unless it is `nil` or empty.
    var nonEmpty: String? {
        guard let self, !self.isEmpty else { return nil }
        return self
    }
}
