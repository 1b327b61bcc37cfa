import TilepackCurl
import TilepackURLSession
import TilepackHTTP
import TilepackSockets

/// The HTTP transports the network suites run over: the library's URLSession, libcurl's multi
/// interface (TilepackCurl, Linux), and tilepack's own HTTP/1.1 client (TilepackSockets, Linux),
/// one request per connection at a time and pipelining 4 (as `tilepack fetch` runs it).
public enum TestTransport: String, CaseIterable, Sendable, CustomStringConvertible {
    case urlSession
    case curl
    case sockets
    case socketsPipelined

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
        case .sockets, .socketsPipelined:
            #if os(Linux)
            return SocketTransport(maximumConnectionsPerHost: maximumConnectionsPerHost, requestsPerConnection: self == .sockets ? 1 : 4)
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
