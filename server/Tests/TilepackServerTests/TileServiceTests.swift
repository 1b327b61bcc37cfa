import Foundation
import HTTPTypes
import NIOCore
import Testing
import TilepackCore
import TilepackRequestHead
import TilepackStorage
import TilepackTestSupport

@testable import TilepackServer

/// The HTTP contract in-process: ``TileService`` answers request heads without a socket.
@Suite struct TileServiceTests {
    static func request(_ path: String, _ fields: [HTTPField.Name: String] = [:], method: RequestHead.Method = .get) -> RequestHead {
        var head = RequestHead(method: method, target: path, minorVersion: 1, keepAlive: true, hasBody: false, host: "localhost:1")
        head.acceptEncoding = fields[.acceptEncoding]
        head.ifNoneMatch = fields[.ifNoneMatch]
        head.authorization = fields[.authorization]
        head.origin = fields[.origin]
        head.accessControlRequestMethod = fields[.accessControlRequestMethod]
        return head
    }

    @Test func routesAndHeaders() throws {
        let service = try TileService(options: TileServerOptions(archivePaths: [ServerFixtures.sampleBundle]))
        let tile = service.respond(to: Self.request("/sample/1/0/1.png"))
        #expect(tile.status == .ok)
        #expect(tile.headers[.contentType] == "image/png")
        #expect(tile.headers[.eTag]?.hasPrefix("\"b") == true)
        #expect(tile.headers[.vary] == nil, "raster tiles do not vary by encoding")
        let stored = try BundleArchive(path: ServerFixtures.sampleBundle).tileData(at: try TileCoordinate(zoom: 1, x: 0, y: 1))
        #expect(tile.body.map { Data($0.readableBytesView) } == stored)
        let etag = try #require(tile.headers[.eTag])
        #expect(service.respond(to: Self.request("/sample/1/0/1.png", [.ifNoneMatch: etag])).status == .notModified)
        #expect(service.respond(to: Self.request("/sample/1/0/1.png", method: .other("DELETE"))).status == .methodNotAllowed)
        let options = service.respond(to: Self.request("/sample/1/0/1.png", method: .options))
        #expect(options.status == .noContent)
        #expect(options.headers[.allow] == "GET, HEAD, OPTIONS")
        #expect(service.respond(to: Self.request("/sample/1/0/1.webp")).status == .notFound)
        #expect(service.respond(to: Self.request("/sample/1/2/0.png")).status == .notFound)
        let tileJSON = service.respond(to: Self.request("/sample.json"))
        #expect(tileJSON.headers[.cacheControl] == "no-cache")
        #expect(tileJSON.body.map { String(buffer: $0) }?.contains("\"http://localhost:1/sample/{z}/{x}/{y}.png\"") == true)
    }

    @Test func payloadETagsAreHexOfCRCAndLength() {
        var generator = SystemRandomNumberGenerator()
        let crcs: [UInt32] = [0, 1, 0xF, 0x10, 0xFFFF_FFFF] + (0..<200).map { _ in UInt32.random(in: .min ... .max, using: &generator) }
        for (index, crc) in crcs.enumerated() {
            let length = [0, 1, 255, 256, Int(Int32.max)][index % 5] + index
            let expected = "\"b\(String(crc, radix: 16))-\(String(length, radix: 16))\""
            #expect(TileService.payloadETag(crc32: crc, length: length, inflated: false) == expected)
            #expect(TileService.payloadETag(crc32: crc, length: length, inflated: true) == expected.dropLast() + "-i\"")
        }
    }

    @Test func latencyHistogramCountsEachObservationInItsBucket() {
        let histogram = LatencyHistogram(name: "t", help: "h")
        for nanoseconds: Int64 in [0, 100_000, 100_001, 2_000_000, 10_000_000_000, 10_000_000_001, -5] {
            histogram.record(nanoseconds: nanoseconds)
        }
        let lines = String(decoding: histogram.render(), as: UTF8.self).split(separator: "\n")
        #expect(lines.contains("t_bucket{le=\"0.0001\"} 3"), "0, 100 us and a negative time (as 0)")
        #expect(lines.contains("t_bucket{le=\"0.00025\"} 4"))
        #expect(lines.contains("t_bucket{le=\"0.0025\"} 5"))
        #expect(lines.contains("t_bucket{le=\"10.0\"} 6"))
        #expect(lines.contains("t_bucket{le=\"+Inf\"} 7"))
        #expect(lines.contains("t_count 7"))
        #expect(lines.contains("t_sum 20.002200002"))
        #expect(lines.contains("# TYPE t histogram"))
    }

    @Test func startErrorsNameTheFile() throws {
        let directory = try TemporaryDirectory()
        let copy = directory.file("sample.mbtiles")
        try FileManager.default.copyItem(atPath: ServerFixtures.sampleBundle, toPath: directory.file("sample.tilepack"))
        try Data().write(to: URL(fileURLWithPath: copy))
        #expect(throws: TileServerError.self) { try TileService(options: TileServerOptions(archivePaths: [])) }
        do {
            _ = try TileService(options: TileServerOptions(archivePaths: [directory.file("sample.tilepack"), ServerFixtures.sampleBundle]))
            Issue.record("two archives named 'sample' were accepted")
        } catch {
            #expect(error.message.contains("would both be served as 'sample'"))
        }
        do {
            _ = try TileService(options: TileServerOptions(archivePaths: [copy]))
            Issue.record("an empty file was accepted")
        } catch {
            #expect(error.message.contains(copy) && error.message.contains("empty"), "\(error.message)")
        }
    }
}
