import Foundation

/// The exchanges a transport has in hand for each host: one running per connection, the rest
/// waiting in line, first come first served.
///
/// Why the line is a transport's own and not the platform client's: an exchange's deadline is
/// the whole exchange's (``HTTPRequest/timeout``), and a platform client counts it from the moment
/// it is handed the exchange, waiting included. libcurl counts `CURLOPT_TIMEOUT_MS` from when a
/// transfer joins its multi handle (its documentation of `CURLMOPT_MAX_HOST_CONNECTIONS` says so),
/// and the URLSession transport's timer starts when its task is resumed; so a request handed in
/// behind others timed out before a byte of it was sent. Here it is handed on only when a
/// connection is free, and its deadline starts then.
///
/// A host that multiplexes (HTTP/2 or 3: every exchange a stream of one connection) runs
/// ``streamsPerConnection`` exchanges per connection once a transport has seen it do so.
///
/// Not thread-safe: its owner serializes the calls (curl's loop thread, or a lock).
package struct HostLine<Item: AnyObject> {
    /// Exchanges run at once on one multiplexed connection: HTTP/2's usual
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` (nginx, and curl's own default, is 100; 128 and more elsewhere).
    package static var streamsPerConnection: Int { 100 }

    private let connections: Int
    private var hosts: [String: Host] = [:]

    private struct Host {
        /// The items holding a place, from their turn to ``HostLine/finished(_:host:)``.
        var running: [ObjectIdentifier: Item] = [:]
        var waiting: [Item] = []
        /// Where the line starts in `waiting` (items before it have been handed on).
        var head = 0
        var multiplexes = false
    }

    /// - Parameter connections: the transport's connections per host (at least 1).
    package init(connections: Int) {
        self.connections = max(1, connections)
    }

    /// The host an exchange goes to: see ``Foundation/URL/connectionHost``.
    package static func host(of url: URL) -> String { url.connectionHost }

    /// Whether `item` runs now (it then holds one of its host's places until
    /// ``finished(_:host:)``); otherwise it waits at the end of the line.
    package mutating func admit(_ item: Item, host: String) -> Bool {
        // In place (`inout` through the subscript): the waiting array is not copied.
        Self.admit(item, connections, &hosts[host, default: Host()])
    }

    private static func admit(_ item: Item, _ connections: Int, _ entry: inout Host) -> Bool {
        if entry.running.count < limit(connections, entry), entry.head == entry.waiting.count {
            entry.running[ObjectIdentifier(item)] = item
            return true
        }
        entry.waiting.append(item)
        return false
    }

    /// Takes `item` out of the line (a cancelled exchange); whether it was waiting there.
    package mutating func remove(_ item: Item, host: String) -> Bool {
        guard let index = hosts[host].flatMap({ entry in entry.waiting[entry.head...].firstIndex { $0 === item } }) else {
            return false
        }
        hosts[host]?.waiting.remove(at: index)
        return true
    }

    /// `item` ended: if it held a place, the items that run now, oldest first (each holds a place
    /// until its own end); nothing otherwise (it never ran, or its end was already told), so a
    /// transport may tell every end, once or twice, and a place is given back once.
    package mutating func finished(_ item: Item, host: String) -> [Item] {
        guard hosts[host]?.running[ObjectIdentifier(item)] != nil else { return [] }
        let (next, idle) = Self.finished(item, connections, &hosts[host, default: Host()])
        // An idle host is forgotten, unless it multiplexes: that is worth remembering.
        if idle { hosts[host] = nil }
        return next
    }

    private static func finished(_ item: Item, _ connections: Int, _ entry: inout Host) -> (next: [Item], idle: Bool) {
        entry.running[ObjectIdentifier(item)] = nil
        let next = handOn(connections, &entry)
        return (next, entry.running.isEmpty && entry.head == entry.waiting.count && !entry.multiplexes)
    }

    /// `host` answered over HTTP/2 or 3: it takes ``streamsPerConnection`` items per connection
    /// from now on. Returns the items that run now.
    package mutating func multiplexes(host: String) -> [Item] {
        guard hosts[host]?.multiplexes == false else { return [] }
        hosts[host]?.multiplexes = true
        return Self.handOn(connections, &hosts[host, default: Host()])
    }

    /// Every item still waiting (each host's oldest first); the lines are left empty (the
    /// transport stops).
    package mutating func drain() -> [Item] {
        let waiting = hosts.values.flatMap { $0.waiting[$0.head...] }
        for host in hosts.keys {
            hosts[host]?.waiting = []
            hosts[host]?.head = 0
        }
        return waiting
    }

    /// Items waiting for `host`.
    package func waiting(for host: String) -> Int {
        hosts[host].map { $0.waiting.count - $0.head } ?? 0
    }

    private static func limit(_ connections: Int, _ entry: Host) -> Int {
        entry.multiplexes ? connections * streamsPerConnection : connections
    }

    private static func handOn(_ connections: Int, _ entry: inout Host) -> [Item] {
        var next: [Item] = []
        while entry.running.count < limit(connections, entry), entry.head < entry.waiting.count {
            let item = entry.waiting[entry.head]
            next.append(item)
            entry.running[ObjectIdentifier(item)] = item
            entry.head += 1
        }
        // The handed-on part is dropped once it is most of the array (amortized O(1) per item).
        if entry.head > 32 && entry.head * 2 > entry.waiting.count {
            entry.waiting.removeFirst(entry.head)
            entry.head = 0
        }
        return next
    }
}

extension URL {
    /// The host an exchange goes to, as connections are shared: scheme, host and port
    /// (`https://tile.example:443`). A line, and a pause a host asks for, are kept per value.
    package var connectionHost: String {
        let scheme = self.scheme?.lowercased() ?? ""
        let port = self.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host?.lowercased() ?? ""):\(port)"
    }
}
