import Foundation
import Testing

@testable import TilepackServer

/// Request paths parsed without the file system: the shapes, and the tricks that must not work.
@Suite struct RouteTests {
    @Test func shapes() {
        #expect(Route(target: "/") == .index)
        #expect(Route(target: "/?token=x") == .index)
        #expect(Route(target: "/_/health") == .health)
        #expect(Route(target: "/_/metrics") == .metrics)
        #expect(Route(target: "/_/leaflet/images/layers.png") == .leaflet("images/layers.png"))
        #expect(Route(target: "/world.json") == .tileJSON(name: "world"))
        #expect(Route(target: "/world/") == .preview(name: "world"))
        #expect(Route(target: "/world") == .previewWithoutSlash(name: "world"))
        #expect(Route(target: "/world/3/2/1.png?x=1") == .tile(name: "world", zoom: 3, x: 2, y: 1, fileExtension: "png"))
        #expect(Route(target: "/with%20spaces/0/0/0.pbf") == .tile(name: "with spaces", zoom: 0, x: 0, y: 0, fileExtension: "pbf"))
    }

    @Test func pathTricksAreNotRoutes() {
        for target in [
            "/../etc/passwd", "/world/../../etc/passwd", "//etc/passwd", "/%2e%2e/%2e%2e/etc/passwd",
            "/world/0/0/..%2F..%2Fetc%2Fpasswd", "/world/-1/0/0.png", "/world/0/0/0", "/world/+1/0/0.png",
            "/world/99999999999/0/0.png", "/world/%zz/0/0.png", "/_/", "/_/leaflet", "http://h/x", "*",
        ] {
            switch Route(target: target) {
            case .notFound, .previewWithoutSlash, .tileJSON, .preview: break
            case .tile(let name, _, _, _, _): Issue.record("\(target) parsed as a tile of '\(name)'")
            default: Issue.record("\(target) parsed as \(Route(target: target))")
            }
        }
        // An encoded slash stays inside its segment: the name is looked up whole, never as a path.
        #expect(Route(target: "/..%2F..%2Fetc%2Fpasswd/") == .preview(name: "../../etc/passwd"))
        #expect(Route(target: "/%2e%2e.json") == .tileJSON(name: ".."))
    }

    @Test func acceptEncoding() {
        #expect(HeaderRules.acceptsGzip("gzip, deflate, br"))
        #expect(HeaderRules.acceptsGzip("br;q=1.0, gzip;q=0.8"))
        #expect(HeaderRules.acceptsGzip("*"))
        #expect(HeaderRules.acceptsGzip("X-GZIP"))
        #expect(!HeaderRules.acceptsGzip(nil))
        #expect(!HeaderRules.acceptsGzip(""))
        #expect(!HeaderRules.acceptsGzip("identity"))
        #expect(!HeaderRules.acceptsGzip("gzip;q=0"))
        #expect(!HeaderRules.acceptsGzip("*, gzip;q=0"))
        #expect(!HeaderRules.acceptsGzip("br, deflate"))
    }

    @Test func ifNoneMatch() {
        #expect(HeaderRules.ifNoneMatch("\"a1\"", matches: "\"a1\""))
        #expect(HeaderRules.ifNoneMatch("\"x\", \"a1\"", matches: "\"a1\""))
        #expect(HeaderRules.ifNoneMatch("W/\"a1\"", matches: "\"a1\""))
        #expect(HeaderRules.ifNoneMatch("*", matches: "\"a1\""))
        #expect(!HeaderRules.ifNoneMatch("\"a1-i\"", matches: "\"a1\""))
        #expect(!HeaderRules.ifNoneMatch("a1", matches: "\"a1\""))
        #expect(!HeaderRules.ifNoneMatch(nil, matches: "\"a1\""))
    }

    @Test func hostsAndQueries() {
        #expect(HeaderRules.validHost("127.0.0.1:8080") == "127.0.0.1:8080")
        #expect(HeaderRules.validHost("[::1]:80") == "[::1]:80")
        #expect(HeaderRules.validHost("evil.com/\"><script>") == nil)
        #expect(HeaderRules.queryValue("/a?x=1&token=s%20t", "token") == "s t")
        #expect(HeaderRules.queryValue("/a?tokens=1", "token") == nil)
        #expect(HeaderRules.constantTimeEqual("secret", "secret"))
        #expect(!HeaderRules.constantTimeEqual("secret", "secreT"))
        #expect(!HeaderRules.constantTimeEqual("secret", "secret2"))
    }

    @Test func namesComeFromFileNames() {
        #expect(ArchiveCatalog.name(of: "/data/world.mbtiles") == "world")
        #expect(ArchiveCatalog.name(of: "a.b.tilepack") == "a.b")
        #expect(ArchiveCatalog.name(of: "../x/with spaces.mbtiles") == "with spaces")
        #expect(percentEncodedSegment("with spaces/é") == "with%20spaces%2F%C3%A9")
    }

    @Test func theTileFastPathAgreesWithTheGeneralParse() {
        let names = ["tiles", "a.b", "_", "", "%61", "x%2Fy", "é", "T"]
        let numbers = ["0", "7", "1023", "01", "", "-1", "12345678901", "4294967296", "1e3", " 1"]
        let lasts = ["3.png", "3.PNG", "3.", "3", ".png", "3.tar.gz", "3.png?token=a/b", "3.png?", "3%2e.png", "x.png"]
        var checked = 0
        for name in names {
            for zoom in numbers.prefix(6) {
                for x in numbers {
                    for last in lasts {
                        for target in ["/\(name)/\(zoom)/\(x)/\(last)", "/\(name)/\(zoom)/\(x)/\(last)/", "/\(name)/\(zoom)/\(last)"] {
                            #expect(Route(target: target) == Route(splitting: target), "\(target)")
                            checked += 1
                        }
                    }
                }
            }
        }
        #expect(checked == 8 * 6 * 10 * 10 * 3)
        #expect(Route(target: "/tiles/6/33/20.png") == .tile(name: "tiles", zoom: 6, x: 33, y: 20, fileExtension: "png"))
    }
}
