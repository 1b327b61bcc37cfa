import Foundation

/// Told of a response body's bytes as they arrive, before the exchange ends (``HTTPRequest/bodyObserver``):
/// a reader that keeps what arrived (a sync's staging file) loses only the bytes in flight when
/// the exchange breaks or the process is killed. Called on the transport's thread, with the
/// response's status and fields, the piece's offset in the body (0 again when a retry starts the
/// body over) and its bytes. Equal only to itself.
public final class HTTPBodyObserver: Sendable, Hashable {
    let receive: @Sendable (_ status: Int?, _ fields: HTTPFields, _ offset: Int, _ bytes: UnsafeRawBufferPointer) -> Void

    public init(_ receive: @escaping @Sendable (_ status: Int?, _ fields: HTTPFields, _ offset: Int, _ bytes: UnsafeRawBufferPointer) -> Void) {
        self.receive = receive
    }

    public static func == (a: HTTPBodyObserver, b: HTTPBodyObserver) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

extension HTTPFields {
    /// The value of the field named `name` (lower-cased), repeated fields joined with ", ".
    public func value(named name: String) -> String? { value(lowercasedName: name) }
}
