import Foundation
import TilepackCore

/// A transport that ``HTTPTransportSystem`` can make with no argument but a connection limit:
/// the platform's transport (`URLSessionTransport`, module TilepackURLSession) conforms.
public protocol PlatformHTTPTransport: HTTPTransport {
    init(maximumConnectionsPerHost: Int)
}

/// Where ``HTTPClient/shared`` and the clients made without a transport get theirs.
///
/// An app gets URLSession: `URLSessionTransport` of module TilepackURLSession, which the
/// `Tilepack` and `TilepackRemote` products link. This module finds it by name when the first
/// such client is made, the way Foundation finds FoundationNetworking, and so does not link it:
/// on Linux FoundationNetworking brings libcurl and some thirty libraries (GnuTLS, Kerberos,
/// LDAP, ...) that the loader maps and relocates at every start of a program that links it,
/// whether it makes a request or not (7 ms of every start of the `tilepack` command).
///
/// A program that moves its bytes itself chooses its transport once, at start, with
/// ``bootstrap(_:)`` (as swift-log's `LoggingSystem.bootstrap` chooses a log handler); on Linux
/// the command line does, with libcurl's multi interface (`CurlTransport`, module TilepackCurl).
/// With neither, every exchange of such a client fails with an error that says so.
///
/// Why a name and not a dependency: this module cannot depend on TilepackURLSession (the
/// transport depends on it), and a program that links it only to find it would pay those 7 ms at
/// every start, or every app would have to bootstrap its transport before its first request.
/// The name is checked: `HTTPTransportSystemTests` finds the type by it.
public enum HTTPTransportSystem {
    /// Makes a transport with at most `maximumConnectionsPerHost` parallel connections to one host.
    public typealias Factory = @Sendable (_ maximumConnectionsPerHost: Int) -> any HTTPTransport

    /// The name `URLSessionTransport` is found by (module-qualified).
    static let platformTransportName = "TilepackURLSession.URLSessionTransport"

    private static let chosen = Locked<Factory?>(nil)

    /// Makes `factory` the maker of the transports of clients made without one from now on
    /// (``HTTPClient/shared`` included, if it has not been used yet).
    public static func bootstrap(_ factory: @escaping Factory) {
        chosen.withLock { $0 = factory }
    }

    /// A transport for a client made without one: the bootstrapped factory's, else the platform's
    /// (URLSession, when TilepackURLSession is linked), else one that fails every exchange.
    public static func makeTransport(maximumConnectionsPerHost: Int) -> any HTTPTransport {
        makeTransport(
            maximumConnectionsPerHost: maximumConnectionsPerHost, chosen: chosen.withLock { $0 },
            platformTransportName: platformTransportName)
    }

    static func makeTransport(maximumConnectionsPerHost: Int, chosen: Factory?, platformTransportName: String) -> any HTTPTransport {
        if let chosen { return chosen(maximumConnectionsPerHost) }
        if let platform = _typeByName(platformTransportName) as? any PlatformHTTPTransport.Type {
            return platform.init(maximumConnectionsPerHost: maximumConnectionsPerHost)
        }
        return MissingTransport()
    }
}

/// The transport of a program that linked none and chose none: it says so for every exchange.
struct MissingTransport: HTTPTransport {
    static let reason =
        "no HTTP transport: link TilepackURLSession (the Tilepack and TilepackRemote products do), "
        + "choose one with HTTPTransportSystem.bootstrap, or give the client a transport"

    nonisolated(nonsending) func exchange(_ request: HTTPRequest, _ response: HTTPIncomingResponse) async -> HTTPIncomingResponse {
        var response = response
        response.end(.transport(Self.reason))
        return response
    }
}
