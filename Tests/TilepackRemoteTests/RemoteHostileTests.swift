import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackRemote
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

/// Issue 29's remote classes on a loopback server: a bundle header believed before its checksum
/// (14), a PMTiles object replaced underneath a server that sends no ETag (17); issue 47 (2): one
/// replaced underneath a server that sends neither ETag nor Last-Modified. Serialized: the tests
/// set ``HTTPByteSource/notes``, which is one for the process.
@Suite(.serialized) struct RemoteHostileTests {
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
        let first = try randomPMTiles(in: dir, zoom: 4, side: 16, noise: 400, seed: 17)
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

    /// A PMTiles of 256 tiles (some 100 KB, past the first request's 16 KiB), and another of the
    /// same size: its last tile's bytes and its header's centre longitude changed.
    static func twoVersions(in dir: TemporaryDirectory) throws -> (first: Data, second: Data) {
        let first = try randomPMTiles(in: dir, zoom: 4, side: 16, noise: 400, seed: 47, metadata: TileMetadata(["name": "v", "format": "png"]))
        var second = first
        second[second.count - 1] ^= 0xFF  // another last tile
        second[119] ^= 0x01  // the header's centre longitude, 1e-7 degrees off
        return (first, second)
    }

    /// Serves `first` to the first request and `second` to every later one, with no ETag and no
    /// Last-Modified.
    static func swappingServer(first: Data, second: Data) throws -> LoopbackHTTPServer {
        let served = Locked(0)
        return try Self.rangeServer(size: first.count) { range in
            (served.withLock { n in
                defer { n += 1 }
                return n
            } == 0 ? first : second).subdata(in: range)
        }
    }

    @Test func anUnpinnedObjectReplacedDuringTheReadIsRefusedNotWrittenAsAMix() throws {
        let dir = try TemporaryDirectory("remote-unpinned")
        let (first, second) = try Self.twoVersions(in: dir)
        #expect(first.count == second.count && first.count > 16384)

        let server = try Self.swappingServer(first: first, second: second)
        defer { server.stop() }
        let url = "\(server.baseURL)/v.pmtiles"
        let out = dir.file("out.mbtiles")
        #expect {
            _ = try ArchiveConverter.run(source: url, destination: out, options: ConvertOptions())
        } throws: { error in
            guard let error = error as? OperationError else { return false }
            return error.path == url && "\(error)".contains("changed during the read") && "\(error)".contains("nothing was written")
        }
        #expect(!FileManager.default.fileExists(atPath: out))

        // extract reads the whole archive too (a region of it: the same check).
        let extracting = try Self.swappingServer(first: first, second: second)
        defer { extracting.stop() }
        let extracted = dir.file("part.pmtiles")
        #expect {
            _ = try TileExtractor.run(source: "\(extracting.baseURL)/v.pmtiles", destination: extracted, options: ExtractOptions())
        } throws: { error in
            (error as? OperationError)?.path == "\(extracting.baseURL)/v.pmtiles" && "\(error)".contains("changed during the read")
        }
        #expect(!FileManager.default.fileExists(atPath: extracted))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)

        // verify says the archive it read was a mix, not that it is sound.
        let verifying = try Self.swappingServer(first: first, second: second)
        defer { verifying.stop() }
        let report = ArchiveVerifier.run(path: "\(verifying.baseURL)/v.pmtiles")
        #expect(!report.usable)
        #expect(report.findings.contains { $0.message.contains("changed during the read") })
    }

    @Test func anUnpinnedObjectIsNotedOnceAndAnUnchangedOneConverts() throws {
        let dir = try TemporaryDirectory("remote-unpinned")
        let (first, _) = try Self.twoVersions(in: dir)
        let server = try Self.rangeServer(size: first.count) { first.subdata(in: $0) }
        defer { server.stop() }
        let notes = Locked<[String]>([])
        HTTPByteSource.notes.withLock { $0 = { note in notes.withLock { $0.append(note) } } }
        defer { HTTPByteSource.notes.withLock { $0 = nil } }
        let url = "\(server.baseURL)/v.pmtiles"
        let report = try ArchiveConverter.run(source: url, destination: dir.file("a.mbtiles"), options: ConvertOptions())
        #expect(report.tiles == 256)
        _ = try ArchiveConverter.run(source: url, destination: dir.file("b.pmtiles"), options: ConvertOptions())
        let told = notes.withLock { $0 }.filter { $0.contains(url) }
        #expect(told.count == 1)
        #expect(told.first?.contains("cannot detect a replacement during the read: the server sends no ETag or Last-Modified") == true)
        // What was written is the object's tiles, unchanged.
        let written = try MBTilesArchive(path: dir.file("a.mbtiles"))
        let original = try RemoteArchive.open(url)
        var differing = 0
        try original.forEachTile { tile, bytes in
            if try written.tileData(at: tile) != Data(bytes) { differing += 1 }
        }
        #expect(differing == 0)
    }
}
