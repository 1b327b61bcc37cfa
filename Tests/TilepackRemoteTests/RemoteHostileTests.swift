import Foundation
import Testing
import TilepackCore
import TilepackRemote
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

/// Issue 29's remote classes on a loopback server: a bundle header believed before its checksum
/// (14), a PMTiles object replaced underneath a server that sends no ETag (17).
@Suite struct RemoteHostileTests {
    static let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path

    /// Answers range requests from `bytes(range)` for an object of `size` bytes; a range of more
    /// than 1 MiB is refused (closed), so a reader that asks for one fails rather than downloads.
    static func rangeServer(
        size: Int, headers: @escaping @Sendable () -> [String: String] = { [:] },
        bytes: @escaping @Sendable (Range<Int>) -> Data
    ) throws -> LoopbackHTTPServer {
        try LoopbackHTTPServer { request in
            guard let range = request.header("range"), range.hasPrefix("bytes=") else { return .status(400) }
            let parts = range.dropFirst(6).split(separator: "-").compactMap { Int($0) }
            guard parts.count == 2 else { return .status(400) }
            let last = min(parts[1], size - 1)
            guard last - parts[0] < 1 << 20 else { return .close }
            var fields = headers()
            fields["Content-Range"] = "bytes \(parts[0])-\(last)/\(size)"
            return .respond(status: 206, headers: fields, body: bytes(parts[0]..<(last + 1)))
        }
    }

    @Test func aBundleHeaderWithABadChecksumIsNotBelieved() throws {
        // The sample's header, its counts raised to 2^31 tiles and payloads (an index of 77 GB,
        // placed where those counts put it) and a server that says the object is that large; the
        // header's checksum is the old one.
        var header = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.sample)).prefix(128))
        let metadataLength = Int(header.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 32, as: UInt64.self) })
        func aligned(_ value: Int) -> Int { (value + 7) & ~7 }
        let tiles = 1 << 31
        let indexOffset = aligned(128 + metadataLength)
        let records = aligned(indexOffset + BundleFormat.zoomTableLength + 12 * tiles)
        let dataOffset = aligned(records + BundleFormat.payloadRecordLength * tiles)
        let size = dataOffset + 4096
        func put(_ value: UInt64, at offset: Int) {
            withUnsafeBytes(of: value.littleEndian) { for i in 0..<8 { header[offset + i] = $0[i] } }
        }
        put(UInt64(size), at: 24)
        put(UInt64(dataOffset), at: 56)
        put(UInt64(tiles), at: 72)
        put(UInt64(tiles), at: 80)
        let head = header
        let server = try Self.rangeServer(size: size) { range in
            Data(range.map { $0 < head.count ? head[$0] : 0 })
        }
        defer { server.stop() }
        let url = try #require(URL(string: "\(server.baseURL)/hostile.tilepack"))
        #expect { _ = try RemoteArchive.open(url: url) } throws: { error in
            guard let error = error as? TileArchiveError, case .checksumMismatch(let region, _, _) = error.fault else { return false }
            return error.path == url.absoluteString && region.contains("header")
        }
        #expect(server.requestCount == 1)
    }

    @Test func aPMTilesObjectWithoutETagIsPinnedByLastModifiedAndSize() throws {
        let dir = try TemporaryDirectory("remote-pin")
        let path = dir.file("v.pmtiles")
        let writer = try PMTilesWriter(destination: path)
        var random = SplitMix64(seed: 17)
        for x in 0..<16 {
            for y in 0..<16 {
                try writer.addTile(
                    at: TileCoordinate(uncheckedZoom: 4, x: x, y: y),
                    bytes: HostilePMTiles.pngBytes + (0..<400).map { _ in UInt8(truncatingIfNeeded: random.next()) })
            }
        }
        try writer.finish()
        let first = try Data(contentsOf: URL(fileURLWithPath: path))
        var changed = first
        changed[changed.count - 1] ^= 0xFF  // the same size, another last tile
        let second = changed
        let version = Locked(1)
        let server = try Self.rangeServer(
            size: first.count,
            headers: {
                version.withLock { $0 } == 1
                    ? ["Last-Modified": "Wed, 25 Nov 2026 10:00:00 GMT"] : ["Last-Modified": "Thu, 26 Nov 2026 12:00:00 GMT"]
            }
        ) { range in
            (version.withLock { $0 } == 1 ? first : second).subdata(in: range)
        }
        defer { server.stop() }
        let notes = Locked<[String]>([])
        HTTPByteSource.notes.withLock { $0 = { note in notes.withLock { $0.append(note) } } }
        defer { HTTPByteSource.notes.withLock { $0 = nil } }
        let url = try #require(URL(string: "\(server.baseURL)/v.pmtiles"))
        let source = try HTTPByteSource(url: url)
        #expect(source.etag == nil && source.lastModified == "Wed, 25 Nov 2026 10:00:00 GMT")
        #expect(source.pin.contains("Last-Modified"))
        #expect(notes.withLock { $0 }.contains { $0.contains(url.absoluteString) && $0.contains("Last-Modified") })
        let archive = try PMTilesArchive(source: source)
        _ = try archive.tileData(at: TileCoordinate(uncheckedZoom: 4, x: 0, y: 0))
        // Replaced by a file of the same size: the next read is refused, naming the URL.
        version.withLock { $0 = 2 }
        #expect {
            try archive.forEachTile { _, _ in }
        } throws: { error in
            guard let error = error as? TileArchiveError, case .corrupt(let why) = error.fault else { return false }
            return error.path == url.absoluteString && why.contains("changed while it was read") && why.contains("Last-Modified")
        }
        #expect(server.requests.dropFirst().allSatisfy { $0.header("if-unmodified-since") == "Wed, 25 Nov 2026 10:00:00 GMT" })
    }
}
