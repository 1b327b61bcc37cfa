import Foundation
import HTTPTypes
import NIOCore
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport
@testable import TilepackServer

/// The HTTP contract in-process: ``TileService`` answers request heads without a socket.
@Suite struct TileServiceTests {
    static func request(_ path: String, _ fields: [HTTPField.Name: String] = [:], method: HTTPRequest.Method = .get) -> HTTPRequest {
        var headers = HTTPFields()
        for (name, value) in fields { headers[name] = value }
        return HTTPRequest(method: method, scheme: nil, authority: "localhost:1", path: path, headerFields: headers)
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
        #expect(service.respond(to: Self.request("/sample/1/0/1.png", method: .delete)).status == .methodNotAllowed)
        let options = service.respond(to: Self.request("/sample/1/0/1.png", method: .options))
        #expect(options.status == .noContent)
        #expect(options.headers[.allow] == "GET, HEAD, OPTIONS")
        #expect(service.respond(to: Self.request("/sample/1/0/1.webp")).status == .notFound)
        #expect(service.respond(to: Self.request("/sample/1/2/0.png")).status == .notFound)
        let tileJSON = service.respond(to: Self.request("/sample.json"))
        #expect(tileJSON.headers[.cacheControl] == "no-cache")
        #expect(tileJSON.body.map { String(buffer: $0) }?.contains("\"http://localhost:1/sample/{z}/{x}/{y}.png\"") == true)
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
