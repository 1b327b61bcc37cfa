import Foundation

/// The request-header rules of the server, as pure functions.
enum HeaderRules {
    /// Whether `Accept-Encoding` allows gzip: `gzip` or `x-gzip` with a non-zero q, or `*` with a
    /// non-zero q when gzip is not named. No header, or an empty one, allows only identity.
    static func acceptsGzip(_ header: String?) -> Bool {
        guard let header else { return false }
        var star: Bool?
        for item in header.split(separator: ",") {
            let parts = item.split(separator: ";")
            guard let coding = parts.first?.trimmingCharacters(in: .whitespaces).lowercased() else { continue }
            var quality = 1.0
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
                if pair.count == 2, pair[0] == "q" { quality = Double(pair[1]) ?? 0 }
            }
            if coding == "gzip" || coding == "x-gzip" { return quality > 0 }
            if coding == "*" { star = quality > 0 }
        }
        return star ?? false
    }

    /// Whether `If-None-Match` matches `etag` (a quoted strong tag): `*`, or any listed tag equal
    /// to it by the weak comparison RFC 9110 prescribes for this header (a `W/` prefix is ignored).
    static func ifNoneMatch(_ header: String?, matches etag: String) -> Bool {
        guard let header else { return false }
        var rest = Substring(header)
        while true {
            rest = rest.drop(while: { $0 == " " || $0 == "\t" || $0 == "," })
            if rest.isEmpty { return false }
            if rest.hasPrefix("*") { return true }
            if rest.hasPrefix("W/") { rest = rest.dropFirst(2) }
            guard rest.first == "\"", let close = rest.dropFirst().firstIndex(of: "\"") else { return false }
            if rest[...close] == etag { return true }
            rest = rest[rest.index(after: close)...]
        }
    }

    /// Compares two secrets in time that does not depend on where they differ.
    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var difference = UInt8(truncatingIfNeeded: x.count ^ y.count)
        for i in 0..<max(x.count, y.count) {
            difference |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)
        }
        return difference == 0 && x.count == y.count
    }

    /// The request's Host when it is a plain host name or address with an optional port, else `nil`
    /// (nothing else is echoed into TileJSON and pages).
    static func validHost(_ host: String?) -> String? {
        guard let host, !host.isEmpty, host.utf8.count <= 255 else { return nil }
        let allowed = host.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ":")
                || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]")
        }
        return allowed ? host : nil
    }

    /// The value of the query parameter `name` (`%`-decoded), if present.
    static func queryValue(_ target: String, _ name: String) -> String? {
        guard let question = target.firstIndex(of: "?") else { return nil }
        for pair in target[target.index(after: question)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if let key = parts.first.flatMap({ Route.percentDecoded($0) }), key == name {
                let value = parts.count > 1 ? parts[1] : ""
                return Route.percentDecoded(Substring(value.replacingOccurrences(of: "+", with: " "))).map(String.init)
            }
        }
        return nil
    }
}
