import TilepackCurl
import TilepackHTTP
import TilepackURLSession

/// The HTTP transports the network suites run over: the library's URLSession and libcurl's multi
/// interface (TilepackCurl, Linux; `tilepack fetch`'s).
public enum TestTransport: String, CaseIterable, Sendable, CustomStringConvertible {
    case urlSession
    case curl

    /// Every transport built on this platform.
    public static var available: [TestTransport] {
        #if os(Linux)
        allCases
        #else
        [.urlSession]
        #endif
    }

    /// A new transport of this kind.
    public func make(maximumConnectionsPerHost: Int = 6) -> any HTTPTransport {
        switch self {
        case .urlSession:
            return URLSessionTransport(maximumConnectionsPerHost: maximumConnectionsPerHost)
        case .curl:
            #if os(Linux)
            return CurlTransport(maximumConnectionsPerHost: maximumConnectionsPerHost)
            #else
            return URLSessionTransport(maximumConnectionsPerHost: maximumConnectionsPerHost)
            #endif
        }
    }

    /// A client over a new transport of this kind.
    public func client(userAgent: String = HTTPClient.defaultUserAgent) -> HTTPClient {
        HTTPClient(transport: make(), userAgent: userAgent)
    }

    public var description: String { rawValue }
}
