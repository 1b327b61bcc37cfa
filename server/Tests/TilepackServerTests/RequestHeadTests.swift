import Testing
@_spi(HTTP1) import TilepackHTTP
import TilepackRequestHead
import TilepackTestSupport

@testable import TilepackServer

/// The request-head grammar the server reads (RFC 9112), byte by byte.
@Suite struct RequestHeadTests {
    static func parse(_ text: String) -> RequestHead.Parse {
        Array(text.utf8).withUnsafeBytes { RequestHead.parse($0) }
    }

    static func head(_ text: String) throws -> RequestHead {
        guard case .complete(let head, let length) = parse(text) else {
            throw Failure(description: "not a complete head: \(parse(text))")
        }
        #expect(length == text.utf8.count, "the head takes all of \(text.debugDescription)")
        return head
    }

    struct Failure: Error, CustomStringConvertible { var description: String }

    static func status(_ text: String) -> Int? {
        if case .invalid(let status, _) = parse(text) { return status }
        return nil
    }

    @Test func aTileRequestAndTheFieldsTheServerConsults() throws {
        let head = try Self.head(
            "GET /tiles/6/33/20.png?token=a%20b HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: wrk\r\n"
                + "accept-encoding: gzip\r\nIF-NONE-MATCH:\t\"b1-2\" \r\nAuthorization: Bearer t\r\n"
                + "Origin: https://a.example\r\nAccess-Control-Request-Method: GET\r\n\r\n")
        #expect(head.method == .get)
        #expect(head.target == "/tiles/6/33/20.png?token=a%20b")
        #expect(head.minorVersion == 1)
        #expect(head.keepAlive && !head.hasBody)
        #expect(head.host == "127.0.0.1:8080")
        #expect(head.acceptEncoding == "gzip")
        #expect(head.ifNoneMatch == "\"b1-2\"", "the value is trimmed of spaces and tabs")
        #expect(head.authorization == "Bearer t")
        #expect(head.origin == "https://a.example")
        #expect(head.accessControlRequestMethod == "GET")
    }

    @Test func methodsVersionsAndKeepAlive() throws {
        #expect(try Self.head("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n").method == .head)
        #expect(try Self.head("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n").method == .options)
        #expect(try Self.head("DELETE / HTTP/1.1\r\nHost: x\r\n\r\n").method == .other("DELETE"))
        #expect(try Self.head("get / HTTP/1.1\r\nHost: x\r\n\r\n").method == .other("get"), "methods are case-sensitive")
        #expect(try !Self.head("GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Close\r\n\r\n").keepAlive)
        let old = try Self.head("GET / HTTP/1.0\r\n\r\n")
        #expect(old.minorVersion == 0 && !old.keepAlive && old.host == nil, "HTTP/1.0 needs no Host and closes by default")
        #expect(try Self.head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keepAlive)
        #expect(try Self.head("GET / HTTP/1.9\r\nHost: x\r\n\r\n").minorVersion == 1, "a later 1.x is answered as 1.1")
        #expect(Self.status("GET / HTTP/2.0\r\nHost: x\r\n\r\n") == 505)
        #expect(Self.status("GET / HTTP/1.1 \r\nHost: x\r\n\r\n") == 400)
        #expect(Self.status("GET /\r\n\r\n") == 400, "HTTP/0.9 is not served")
    }

    @Test func lineEndingsAndEmptyLines() throws {
        let bare = try Self.head("GET /a HTTP/1.1\nHost: x\n\n")
        #expect(bare.target == "/a" && bare.host == "x", "a bare LF ends a line (RFC 9112 2.2)")
        #expect(try Self.head("\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n").target == "/a", "empty lines before a request are skipped")
        #expect(Self.status("GET /a HTTP/1.1\rHost: x\r\n\r\n") == 400, "a CR without LF")
        #expect(Self.status("\r\n\r\n\r\n\r\n\r\n\r\n") == 400)
    }

    @Test func malformedFieldsAre400() {
        #expect(Self.status("GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n") == 400, "obsolete line folding")
        #expect(Self.status("GET / HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n") == 400)
        #expect(Self.status("GET / HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n") == 400)
        #expect(Self.status("GET / HTTP/1.1\r\nHost : x\r\n\r\n") == 400, "no space before the colon (RFC 9112 5.1)")
        #expect(Self.status("GET / HTTP/1.1\r\nHost: x\r\n: empty name\r\n\r\n") == 400)
        #expect(Self.status("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\u{0}b\r\n\r\n") == 400, "NUL in a value")
        #expect(Self.status("GET /a b HTTP/1.1\r\nHost: x\r\n\r\n") == 400, "a space in the target")
        #expect(Self.status("GET /\u{7F} HTTP/1.1\r\nHost: x\r\n\r\n") == 400)
        #expect(Self.status("GET /é HTTP/1.1\r\nHost: x\r\n\r\n") == 400, "raw non-ASCII in the target")
        #expect(Self.status("G(T / HTTP/1.1\r\nHost: x\r\n\r\n") == 400, "a method that is not a token")
    }

    @Test func hostIsRequiredOnceInHTTP11() throws {
        #expect(Self.status("GET / HTTP/1.1\r\n\r\n") == 400)
        #expect(Self.status("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n") == 400)
        let absolute = try Self.head("GET http://tiles.example:8080/t/1/0/0.png?x=1 HTTP/1.1\r\nHost: other\r\n\r\n")
        #expect(absolute.target == "/t/1/0/0.png?x=1")
        #expect(absolute.host == "tiles.example:8080", "an absolute-form target's authority replaces Host")
        #expect(try Self.head("GET http://a.example HTTP/1.1\r\nHost: a.example\r\n\r\n").target == "/")
        #expect(Self.status("GET ftp://a/b HTTP/1.1\r\nHost: x\r\n\r\n") == 400)
    }

    @Test func bodiesAreNoticedAndTheirFramingChecked() throws {
        #expect(try Self.head("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n").hasBody)
        #expect(try !Self.head("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").hasBody)
        #expect(try Self.head("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n").hasBody)
        #expect(try Self.head("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n").hasBody)
        #expect(Self.status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n") == 400)
        #expect(Self.status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n") == 400)
        #expect(Self.status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n") == 400)
    }

    @Test func incompleteHeadsWaitAndHugeOnesAre431() {
        let full = "GET /a HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n"
        for cut in 0..<full.utf8.count {
            let part = String(decoding: Array(full.utf8)[..<cut], as: UTF8.self)
            #expect(Self.parse(part) == .incomplete, "cut at \(cut)")
        }
        let huge = "GET /a HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "a", count: RequestHead.maximumSize) + "\r\n\r\n"
        #expect(Self.status(huge) == 431)
        #expect(Self.status(String(huge.dropLast(4))) == 431, "a head still growing past the limit")
    }

    @Test func aHeadCanHaveEndedOnlyAtAnEmptyLineInTheNewBytes() {
        func ended(_ text: String, after: Int = 0) -> Bool {
            Array(text.utf8).withUnsafeBytes { HTTP1Syntax.endOfHead($0, after: after) != nil }
        }
        #expect(ended("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
        #expect(ended("GET / HTTP/1.0\n\n"))
        #expect(!ended("GET / HTTP/1.1\r\nHost: x\r\n"))
        #expect(!ended("GET / HTTP/1.1\r\nHost: x\r\n\r"))
        // The empty line is found when its first LF was among the bytes looked at before.
        let text = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        for searched in 0...text.utf8.count { #expect(ended(text, after: searched) == (searched <= text.utf8.count - 1)) }
    }

    @Test func pipelinedHeadsAreTakenOneAtATime() throws {
        let text = "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n"
        guard case .complete(let first, let length) = Self.parse(text) else { throw Failure(description: "no first head") }
        #expect(first.target == "/a")
        let rest = String(decoding: Array(text.utf8)[length...], as: UTF8.self)
        #expect(try Self.head(rest).target == "/b")
    }

    /// Random damage to real heads (flipped, dropped, duplicated and inserted bytes, cuts): the
    /// parser never traps, never claims more bytes than it was given, and what it takes as a head
    /// parses again the same from those bytes alone.
    @Test func damagedHeadsNeverTrapOrOverrun() {
        let heads = [
            "GET /tiles/6/33/20.png HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept-Encoding: gzip, deflate\r\n\r\n",
            "HEAD /a.json?token=x HTTP/1.0\r\nConnection: keep-alive\r\nIf-None-Match: W/\"b1-2\", \"b3\"\r\n\r\n",
            "OPTIONS * HTTP/1.1\r\nHost: x\r\nOrigin: https://a\r\nAccess-Control-Request-Method: GET\r\n\r\n",
            "POST http://h:1/x HTTP/1.1\nHost: h\nContent-Length: 3\nTransfer-Encoding: chunked\n\nabc",
        ].map { Array($0.utf8) }
        var random = SplitMix64(seed: 0x7115_9ACC)
        for round in 0..<20_000 {
            var bytes = heads[round % heads.count]
            TestSupport.damage(&bytes, random: &random, times: 1 + Int(random.next() % 4), cutting: true)
            let parse = bytes.withUnsafeBytes { RequestHead.parse($0) }
            if case .complete(let head, let length) = parse {
                #expect(length > 0 && length <= bytes.count)
                #expect(bytes.withUnsafeBytes { HTTP1Syntax.endOfHead($0, after: 0) != nil }, "a head the server would not try to parse")
                let again = Array(bytes[..<length]).withUnsafeBytes { RequestHead.parse($0) }
                #expect(again == .complete(head, length: length), "\(bytes)")
            }
        }
    }

}
