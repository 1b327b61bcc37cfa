import Foundation
import TilepackCore
import TilepackHTTP

/// An access key, with the session token and expiry of temporary credentials.
public struct S3Credentials: Sendable, Hashable {
    public var accessKeyId: String
    public var secretAccessKey: String
    public var sessionToken: String?
    /// When temporary credentials stop working (`nil`: never).
    public var expiration: Date?

    public init(accessKeyId: String, secretAccessKey: String, sessionToken: String? = nil, expiration: Date? = nil) {
        self.accessKeyId = accessKeyId
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.expiration = expiration
    }
}

/// Where S3 requests get their credentials. An app supplies its own (it has no environment or
/// `~/.aws` files: a token from its backend, say); ``S3CredentialChain`` is what the command uses.
/// Called before each request; a provider caches what it fetched.
public protocol S3CredentialsProvider: Sendable {
    func credentials() async throws(S3Error) -> S3Credentials
}

/// The same credentials every time.
public struct StaticS3Credentials: S3CredentialsProvider {
    public let value: S3Credentials
    public init(_ value: S3Credentials) { self.value = value }
    public func credentials() async throws(S3Error) -> S3Credentials { value }
}

/// The credential chain of the AWS tools, in their order, the first source that has credentials
/// winning:
/// 1. the environment: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`;
/// 2. web identity: `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN` (`AWS_ROLE_SESSION_NAME`),
///    exchanged at STS (`AssumeRoleWithWebIdentity`; endpoint `AWS_ENDPOINT_URL_STS`, else
///    `https://sts.REGION.amazonaws.com`): Kubernetes service accounts;
/// 3. the profile `AWS_PROFILE` (else `default`) in `~/.aws/credentials` (`AWS_SHARED_CREDENTIALS_FILE`)
///    and `~/.aws/config` (`AWS_CONFIG_FILE`);
/// 4. container credentials: `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` (on `http://169.254.170.2`)
///    or `AWS_CONTAINER_CREDENTIALS_FULL_URI`, with `AWS_CONTAINER_AUTHORIZATION_TOKEN` (or
///    `_TOKEN_FILE`): ECS, AWS Batch;
/// 5. the EC2 instance metadata service, v2 (a session token first), at
///    `AWS_EC2_METADATA_SERVICE_ENDPOINT` (else `http://169.254.169.254`), unless
///    `AWS_EC2_METADATA_DISABLED=true`; one second per request, no retry.
///
/// Temporary credentials are kept until five minutes before they expire.
public final class S3CredentialChain: S3CredentialsProvider {
    let environment: [String: String]
    let region: String
    let client: HTTPClient
    private let cached = Locked<(credentials: S3Credentials, source: String)?>(nil)

    public init(
        environment: [String: String] = ProcessInfo.processInfo.environment, region: String = "us-east-1", client: HTTPClient = .shared
    ) {
        self.environment = environment
        self.region = region
        self.client = client
    }

    /// Where the last credentials came from (`environment`, `web identity`, `profile NAME`,
    /// `container`, `instance metadata`).
    public var source: String? { cached.withLock { $0?.source } }

    public func credentials() async throws(S3Error) -> S3Credentials {
        if let hit = cached.withLock({ $0 }), hit.credentials.expiration.map({ $0.timeIntervalSinceNow > 300 }) ?? true {
            return hit.credentials
        }
        let found = try await resolve()
        cached.withLock { $0 = found }
        return found.credentials
    }

    func resolve() async throws(S3Error) -> (credentials: S3Credentials, source: String) {
        if let id = environment["AWS_ACCESS_KEY_ID"].nonEmpty, let secret = environment["AWS_SECRET_ACCESS_KEY"].nonEmpty {
            return (
                S3Credentials(accessKeyId: id, secretAccessKey: secret, sessionToken: environment["AWS_SESSION_TOKEN"].nonEmpty),
                "environment"
            )
        }
        if let tokenFile = environment["AWS_WEB_IDENTITY_TOKEN_FILE"].nonEmpty, let role = environment["AWS_ROLE_ARN"].nonEmpty {
            return (try await webIdentity(tokenFile: tokenFile, role: role), "web identity")
        }
        let config = AWSSharedConfig(environment: environment)
        if let id = config.value("aws_access_key_id"), let secret = config.value("aws_secret_access_key") {
            return (
                S3Credentials(accessKeyId: id, secretAccessKey: secret, sessionToken: config.value("aws_session_token")),
                "profile \(config.profile)"
            )
        }
        if let relative = environment["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"].nonEmpty {
            return (try await container(url: "http://169.254.170.2\(relative)"), "container")
        }
        if let full = environment["AWS_CONTAINER_CREDENTIALS_FULL_URI"].nonEmpty {
            return (try await container(url: full), "container")
        }
        if environment["AWS_EC2_METADATA_DISABLED"]?.lowercased() != "true" {
            let endpoint = environment["AWS_EC2_METADATA_SERVICE_ENDPOINT"].nonEmpty ?? "http://169.254.169.254"
            if let found = try await instanceMetadata(endpoint: endpoint) { return (found, "instance metadata") }
        }
        throw S3Error(
            code: "NoCredentials",
            message:
                "no credentials found: not in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_WEB_IDENTITY_TOKEN_FILE+AWS_ROLE_ARN, profile \(config.profile) of \(config.credentialsPath) or \(config.configPath), container credentials or the instance metadata service"
        )
    }

    // MARK: The sources that ask a service

    func webIdentity(tokenFile: String, role: String) async throws(S3Error) -> S3Credentials {
        guard let token = try? String(contentsOfFile: tokenFile, encoding: .utf8) else {
            throw S3Error(
                code: "NoCredentials", message: "cannot read the web identity token file \(tokenFile) (AWS_WEB_IDENTITY_TOKEN_FILE)")
        }
        let endpoint =
            environment["AWS_ENDPOINT_URL_STS"].nonEmpty ?? environment["AWS_ENDPOINT_URL"].nonEmpty
            ?? "https://sts.\(region).amazonaws.com"
        let session = environment["AWS_ROLE_SESSION_NAME"].nonEmpty ?? "tilepack-\(Int(Date().timeIntervalSince1970))"
        let query = [
            ("Action", "AssumeRoleWithWebIdentity"), ("RoleArn", role), ("RoleSessionName", session), ("Version", "2011-06-15"),
            ("WebIdentityToken", token.trimmingCharacters(in: .whitespacesAndNewlines)),
        ].map { "\($0.0)=\(SigV4Signer.uriEncode($0.1, keepSlash: false))" }.joined(separator: "&")
        guard let url = URL(string: endpoint.hasSuffix("/") ? "\(endpoint)?\(query)" : "\(endpoint)/?\(query)") else {
            throw S3Error(code: "NoCredentials", message: "the STS endpoint \(endpoint) is not a URL")
        }
        let response = try await exchange(
            HTTPRequest(url: url, timeout: .seconds(10), maximumBodyBytes: 1 << 20), what: "STS AssumeRoleWithWebIdentity")
        let xml = S3XML(response.body)
        guard response.status == 200, let id = xml.first("AccessKeyId"), let secret = xml.first("SecretAccessKey") else {
            throw S3Error(
                status: response.status, code: xml.first("Code") ?? "HTTP \(response.status)",
                message:
                    "STS AssumeRoleWithWebIdentity for \(role) at \(endpoint) failed: \(xml.first("Message") ?? "no credentials in the answer")"
            )
        }
        return S3Credentials(
            accessKeyId: id, secretAccessKey: secret, sessionToken: xml.first("SessionToken"),
            expiration: xml.first("Expiration").flatMap(Self.parseDate))
    }

    func container(url text: String) async throws(S3Error) -> S3Credentials {
        guard let url = URL(string: text) else {
            throw S3Error(code: "NoCredentials", message: "the container credentials URI \(text) is not a URL")
        }
        var request = HTTPRequest(url: url, timeout: .seconds(2), maximumBodyBytes: 1 << 20)
        if let token = environment["AWS_CONTAINER_AUTHORIZATION_TOKEN"].nonEmpty {
            request.headers["Authorization"] = token
        } else if let file = environment["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"].nonEmpty,
            let token = try? String(contentsOfFile: file, encoding: .utf8)
        {
            request.headers["Authorization"] = token.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let response = try await exchange(request, what: "container credentials")
        return try Self.parseJSONCredentials(response, from: text)
    }

    func instanceMetadata(endpoint: String) async throws(S3Error) -> S3Credentials? {
        let base = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        guard let tokenURL = URL(string: "\(base)/latest/api/token"),
            let listURL = URL(string: "\(base)/latest/meta-data/iam/security-credentials/")
        else { return nil }
        var tokenRequest = HTTPRequest(
            url: tokenURL, method: "PUT", headers: ["X-aws-ec2-metadata-token-ttl-seconds": "21600"], timeout: .seconds(1),
            maximumBodyBytes: 4096, body: Data())
        tokenRequest.headers["Content-Type"] = "text/plain"
        // No instance metadata service here (not on EC2): the chain ends without credentials.
        guard let tokenResponse = try? await client.send(tokenRequest), tokenResponse.status == 200 else { return nil }
        let token = String(decoding: tokenResponse.body, as: UTF8.self)
        let headers = ["X-aws-ec2-metadata-token": token]
        let list = try await exchange(
            HTTPRequest(url: listURL, headers: headers, timeout: .seconds(1), maximumBodyBytes: 4096), what: "instance metadata")
        guard list.status == 200, let role = String(decoding: list.body, as: UTF8.self).split(separator: "\n").first.map(String.init),
            let roleURL = URL(string: "\(base)/latest/meta-data/iam/security-credentials/\(SigV4Signer.uriEncode(role, keepSlash: false))")
        else { return nil }
        let response = try await exchange(
            HTTPRequest(url: roleURL, headers: headers, timeout: .seconds(1), maximumBodyBytes: 1 << 20), what: "instance metadata")
        return try Self.parseJSONCredentials(response, from: roleURL.absoluteString)
    }

    private func exchange(_ request: HTTPRequest, what: String) async throws(S3Error) -> HTTPResponse {
        do {
            return try await client.send(request)
        } catch {
            throw S3Error(code: "NoCredentials", message: "\(what): \(error.description)")
        }
    }

    /// `{"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}`, as ECS and EC2 answer.
    static func parseJSONCredentials(_ response: HTTPResponse, from source: String) throws(S3Error) -> S3Credentials {
        struct Answer: Decodable {
            var accessKeyId: String
            var secretAccessKey: String
            var token: String?
            var expiration: String?
            enum CodingKeys: String, CodingKey {
                case accessKeyId = "AccessKeyId"
                case secretAccessKey = "SecretAccessKey"
                case token = "Token"
                case expiration = "Expiration"
            }
        }
        guard response.status == 200, let answer = try? JSONDecoder().decode(Answer.self, from: response.body) else {
            throw S3Error(
                status: response.status, code: "NoCredentials",
                message:
                    "\(source) answered \(response.status) without credentials (\(String(decoding: response.body.prefix(200), as: UTF8.self)))"
            )
        }
        return S3Credentials(
            accessKeyId: answer.accessKeyId, secretAccessKey: answer.secretAccessKey, sessionToken: answer.token,
            expiration: answer.expiration.flatMap(parseDate))
    }

    /// ISO 8601 with or without fractional seconds.
    static func parseDate(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}

/// The AWS tools' shared files, `~/.aws/credentials` (sections `[NAME]`) and `~/.aws/config`
/// (sections `[profile NAME]`, and `[default]`), for one profile; the credentials file wins.
struct AWSSharedConfig {
    let profile: String
    let credentialsPath: String
    let configPath: String
    private var values: [String: String] = [:]

    init(environment: [String: String]) {
        profile = environment["AWS_PROFILE"].nonEmpty ?? environment["AWS_DEFAULT_PROFILE"].nonEmpty ?? "default"
        let home = environment["HOME"].nonEmpty ?? NSHomeDirectory()
        credentialsPath = environment["AWS_SHARED_CREDENTIALS_FILE"].nonEmpty ?? "\(home)/.aws/credentials"
        configPath = environment["AWS_CONFIG_FILE"].nonEmpty ?? "\(home)/.aws/config"
        let configSection = profile == "default" ? "default" : "profile \(profile)"
        for (key, value) in Self.section(configSection, of: configPath) { values[key] = value }
        for (key, value) in Self.section(profile, of: credentialsPath) { values[key] = value }
    }

    func value(_ key: String) -> String? { values[key].nonEmpty }

    /// The `key = value` lines of `[name]` in the INI file at `path` (none when it is unreadable).
    static func section(_ name: String, of path: String) -> [String: String] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [:] }
        var current: String?
        var found: [String: String] = [:]
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                current = line.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
                continue
            }
            // Indented lines belong to a nested block (`s3 =` settings), not to the profile.
            guard current == name, raw.first.map({ !$0.isWhitespace }) ?? false, let equals = line.firstIndex(of: "=") else { continue }
            found[line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()] = line[line.index(after: equals)...]
                .trimmingCharacters(in: .whitespaces)
        }
        return found
    }
}
