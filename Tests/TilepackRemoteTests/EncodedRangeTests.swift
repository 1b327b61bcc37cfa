import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackRemote
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport
@_spi(TilepackInternal) import TilepackCompression

/// Issue 47, item 3: a server that answers a range with `Content-Encoding: gzip` (a CDN that
/// compresses on the fly) counts the range in encoded bytes, whatever a transport then decodes.
/// Every range reader asks for `Accept-Encoding: identity` and refuses such an answer by name:
/// remote PMTiles, remote bundle, sync's range fetches and index, the S3 byte source, and
/// `tilepack info URL`.
@Suite struct EncodedRangeTests {
    static let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
    static let boundary = "encoded-range-0001"

    /// The words every refusal carries.
    static func namesTheFault(_ error: any Error, _ name: String) -> Bool {
        let text = "\(error)"
        guard let error = error as? TileArchiveError, error.path == name else { return false }
        return text.contains("answered a range with Content-Encoding: gzip") && text.contains("counts encoded bytes")
    }

    /// The ranges a `Range` field asks for, or `nil` when it asks for none it can have.
    static func ranges(_ field: String?, size: Int) -> [Range<Int>]? {
        guard let field, field.hasPrefix("bytes=") else { return nil }
        var ranges: [Range<Int>] = []
        for spec in field.dropFirst(6).split(separator: ",") {
            let bounds = spec.split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count == 2, let first = Int(bounds[0]), first < size else { return nil }
            let last = bounds[1].isEmpty ? size - 1 : min(Int(bounds[1]) ?? -1, size - 1)
            guard last >= first else { return nil }
            ranges.append(first..<(last + 1))
        }
        return ranges.isEmpty ? nil : ranges
    }

    /// The answer to `request` for the object `file`: a range, or several (multipart/byteranges),
    /// with the body gzip-compressed and `Content-Encoding: gzip` (as a compressing proxy does)
    /// when `gzip`, else as stored.
    static func reply(_ request: LoopbackHTTPServer.Request, file: Data, gzip: Bool = true) -> LoopbackHTTPServer.Reply {
        guard let ranges = ranges(request.header("range"), size: file.count) else {
            return .respond(status: 200, headers: ["ETag": "\"v1\""], body: file)
        }
        var headers = ["ETag": "\"v1\""]
        if gzip { headers["Content-Encoding"] = "gzip" }
        func encoded(_ data: Data) -> Data { gzip ? Data(Gzip.compress([UInt8](data))) : data }
        if ranges.count == 1 {
            let range = ranges[0]
            headers["Content-Range"] = "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(file.count)"
            return .respond(status: 206, headers: headers, body: encoded(file.subdata(in: range)))
        }
        var body = Data()
        for range in ranges {
            body += Data("\r\n--\(boundary)\r\nContent-Range: bytes \(range.lowerBound)-\(range.upperBound - 1)/\(file.count)\r\n\r\n".utf8)
            body += file.subdata(in: range)
        }
        body += Data("\r\n--\(boundary)--\r\n".utf8)
        headers["Content-Type"] = "multipart/byteranges; boundary=\(boundary)"
        return .respond(status: 206, headers: headers, body: encoded(body))
    }

    static func gzipServer(_ file: Data) throws -> LoopbackHTTPServer {
        try LoopbackHTTPServer { reply($0, file: file) }
    }

    /// A small PMTiles archive (16 tiles at zoom 2, random bytes) and its bytes.
    static func pmtiles(in dir: TemporaryDirectory) throws -> Data {
        try randomPMTiles(in: dir, zoom: 2, side: 4, noise: 300, seed: 47)
    }

    /// Small enough that the root directory is not in the first request (so a range is asked for
    /// after opening too).
    static var smallFirstRequest: HTTPByteSource.Options {
        var options = HTTPByteSource.Options()
        options.initialLength = 128
        options.retry = .none
        return options
    }

    @Test(arguments: TestTransport.available)
    func remotePMTilesAndBundleRefuseAnEncodedRange(_ transport: TestTransport) throws {
        let dir = try TemporaryDirectory("encoded-range")
        for file in [try Self.pmtiles(in: dir), try Data(contentsOf: URL(fileURLWithPath: Self.sample))] {
            let server = try Self.gzipServer(file)
            defer { server.stop() }
            let url = try #require(URL(string: "\(server.baseURL)/archive"))
            #expect {
                let archive = try RemoteArchive.open(url: url, client: transport.client(), options: Self.smallFirstRequest)
                try archive.forEachTile { _, _ in }
            } throws: { Self.namesTheFault($0, url.absoluteString) }
            #expect(server.requestCount >= 1)
            #expect(server.requests.allSatisfy { $0.header("accept-encoding") == "identity" }, "\(server.requests.map(\.headers))")
        }
    }

    @Test(arguments: TestTransport.available)
    func syncsRangeFetchesAndIndexRefuseAnEncodedRange(_ transport: TestTransport) throws {
        let file = try Data(contentsOf: URL(fileURLWithPath: Self.sample))
        let server = try Self.gzipServer(file)
        defer { server.stop() }
        let url = try #require(URL(string: "\(server.baseURL)/sample.tilepack"))
        // The index, asked for as `bytes=0-7,8-` (a multipart answer).
        #expect {
            _ = try RemoteTileIndex.fetch(url: url, limit: 1 << 20, client: transport.client(), options: Self.smallFirstRequest)
        } throws: { Self.namesTheFault($0, url.absoluteString) }
        // Several ranges in one request (sync's tile fetches), and one range a request: the
        // object opened plainly (its first request), every later range answered gzip.
        var options = Self.smallFirstRequest
        options.initialLength = 8
        let opened = Locked(false)
        let relay = try LoopbackHTTPServer { request in
            Self.reply(
                request, file: file,
                gzip: opened.withLock { was in
                    defer { was = true }
                    return was
                })
        }
        defer { relay.stop() }
        let relayURL = try #require(URL(string: "\(relay.baseURL)/sample.tilepack"))
        for multiple in [true, false] {
            opened.withLock { $0 = false }
            let source = try HTTPByteSource(url: relayURL, client: transport.client(), options: options)
            source.assumeMultipleRanges(multiple)
            #expect {
                try source.fetch(ranges: [100..<200, 300..<400, 500..<600]) { _, _ in }
            } throws: { Self.namesTheFault($0, relayURL.absoluteString) }
        }
        #expect(relay.requests.count >= 4)
        #expect(relay.requests.allSatisfy { $0.header("accept-encoding") == "identity" }, "\(relay.requests.map(\.headers))")
        #expect(server.requests.allSatisfy { $0.header("accept-encoding") == "identity" }, "\(server.requests.map(\.headers))")
    }

    @Test(arguments: TestTransport.available)
    func aWholeObjectAnsweredEncodedIsRefusedToo(_ transport: TestTransport) throws {
        // A server that ignores Range and sends the whole object gzip-compressed (200).
        let file = try Data(contentsOf: URL(fileURLWithPath: Self.sample))
        let server = try LoopbackHTTPServer { _ in
            .respond(status: 200, headers: ["Content-Encoding": "gzip"], body: Data(Gzip.compress([UInt8](file))))
        }
        defer { server.stop() }
        let url = try #require(URL(string: "\(server.baseURL)/sample.tilepack"))
        var options = Self.smallFirstRequest
        options.initialLength = 1 << 20
        #expect {
            _ = try RemoteArchive.open(url: url, client: transport.client(), options: options)
        } throws: { error in
            (error as? TileArchiveError)?.path == url.absoluteString
                && "\(error)".contains("answered a range request with the whole object in Content-Encoding: gzip")
        }
    }

    @Test(arguments: TestTransport.available)
    func theS3ByteSourceRefusesAnEncodedRange(_ transport: TestTransport) throws {
        let file = try Data(contentsOf: URL(fileURLWithPath: Self.sample))
        let server = try Self.gzipServer(file)
        defer { server.stop() }
        let keys = S3Credentials(accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret")
        let client = S3Client(
            configuration: S3Configuration(
                endpoint: URL(string: server.baseURL), addressing: .path, credentials: StaticS3Credentials(keys)),
            http: transport.client(), retry: .none)
        let location = S3Location(bucket: "tiles", key: "sample.tilepack")
        #expect {
            _ = try RemoteArchive.open(s3: location, client: client, options: Self.smallFirstRequest)
        } throws: { Self.namesTheFault($0, location.description) }
        #expect(server.requests.allSatisfy { $0.header("accept-encoding") == "identity" })
    }

    @Test func infoRefusesAnEncodedRange() async throws {
        guard let binary = TestSupport.tilepackBinary else { return }
        let server = try Self.gzipServer(try Data(contentsOf: URL(fileURLWithPath: Self.sample)))
        defer { server.stop() }
        let url = "\(server.baseURL)/sample.tilepack"
        let result = try await TestSupport.run(binary, ["info", url], timeout: 60)
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains(url) && result.stderr.contains("answered a range with Content-Encoding: gzip"), "\(result.stderr)")
    }
}
