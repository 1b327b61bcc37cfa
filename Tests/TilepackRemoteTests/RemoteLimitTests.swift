import Foundation
import Testing
import TilepackCore
import TilepackRemote
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

/// Issue 47, item 4: a remote archive whose header declares a section too large to read is
/// refused with what was too large, its declared size and the limit: a bundle's index (and the
/// index keys sync reads), a PMTiles root directory, PMTiles metadata.
@Suite struct RemoteLimitTests {
    static let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path

    /// The sample's header with its counts raised to `tiles` tiles and payloads, every length and
    /// offset laid out for them and its checksum made again (a header that is believed), and the
    /// sample's metadata behind it; the object's size and the index's length.
    static func hugeBundleHead(tiles: Int) throws -> (head: [UInt8], size: Int, indexLength: Int) {
        let file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: sample)))
        var header = Array(file.prefix(128))
        func get(_ offset: Int) -> Int { Int(header.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }) }
        func put(_ value: Int, at offset: Int) {
            withUnsafeBytes(of: UInt64(value).littleEndian) { for i in 0..<8 { header[offset + i] = $0[i] } }
        }
        func aligned(_ value: Int) -> Int { (value + 7) & ~7 }
        let metadataLength = get(32)
        let indexOffset = aligned(128 + metadataLength)
        let refs = indexOffset + BundleFormat.zoomTableLength + 8 * tiles
        let records = aligned(refs + 4 * tiles)
        let indexEnd = records + BundleFormat.payloadRecordLength * tiles
        let dataOffset = aligned(indexEnd)
        let size = dataOffset + 4096
        put(size, at: 24)
        put(indexOffset, at: 40)
        put(indexEnd - indexOffset, at: 48)
        put(dataOffset, at: 56)
        put(4096, at: 64)
        put(tiles, at: 72)
        put(tiles, at: 80)
        let crc = header.withUnsafeBytes { BundleFormat.crc32(UnsafeRawBufferPointer(rebasing: $0[0..<124])) }
        withUnsafeBytes(of: crc.littleEndian) { for i in 0..<4 { header[124 + i] = $0[i] } }
        return (header + file[128..<(128 + metadataLength)], size, dataOffset - indexOffset)
    }

    /// A server of an object of `size` bytes that begins with `head` (zeros after it); a range of
    /// more than 1 MiB is refused (closed), so a reader that asks for one fails rather than downloads.
    static func server(head: [UInt8], size: Int) throws -> LoopbackHTTPServer {
        try RemoteHostileTests.rangeServer(size: size) { range in Data(range.map { $0 < head.count ? head[$0] : 0 }) }
    }

    @Test func aRemoteBundleWithAnIndexPastTheLimitSaysSoAndWhatTheLimitIs() throws {
        // 2^31 tiles: an index of 77 GB.
        let (head, size, indexLength) = try Self.hugeBundleHead(tiles: 1 << 31)
        let server = try Self.server(head: head, size: size)
        defer { server.stop() }
        let url = try #require(URL(string: "\(server.baseURL)/huge.tilepack"))
        let limit = BundleArchive.maximumHeldIndexLength
        #expect(limit == 1 << 30)
        #expect {
            _ = try RemoteArchive.open(url: url)
        } throws: { error in
            let text = "\(error)"
            return (error as? TileArchiveError)?.path == url.absoluteString && text.contains("the bundle's index")
                && text.contains("\(indexLength) bytes") && text.contains("over the limit of \(limit) bytes")
        }
        #expect(server.requestCount == 1, "refused from the first request, before the index is asked for")
        // Sync reads the index keys alone (8 bytes a tile): the same limit, named for them.
        let source = try HTTPByteSource(url: url)
        #expect {
            _ = try SparseBundleArchive(source: source)
        } throws: { error in
            let text = "\(error)"
            return text.contains(url.absoluteString) && text.contains("the bundle's index keys")
                && text.contains("\(BundleFormat.zoomTableLength + 8 * (1 << 31)) bytes")
                && text.contains("over the limit of \(limit) bytes")
        }
    }

    @Test func infoNamesTheIndexItRefuses() async throws {
        guard let binary = TestSupport.tilepackBinary else { return }
        let (head, size, indexLength) = try Self.hugeBundleHead(tiles: 1 << 31)
        let server = try Self.server(head: head, size: size)
        defer { server.stop() }
        let url = "\(server.baseURL)/huge.tilepack"
        let result = try await TestSupport.run(binary, ["info", url], timeout: 60)
        #expect(result.status == 1)
        #expect(
            result.stderr.contains(url) && result.stderr.contains("the bundle's index is declared as \(indexLength) bytes")
                && result.stderr.contains("over the limit of \(1 << 30) bytes"), "\(result.stderr)")
    }

    /// A PMTiles header declaring a root directory or metadata of `rootLength` / `metadataLength`
    /// bytes, every section inside an object of the size returned.
    static func pmtilesHead(rootLength: UInt64, metadataLength: UInt64) -> (head: [UInt8], size: Int) {
        var header = Array("PMTiles".utf8) + [3]
        func put64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { header += $0 } }
        let rootOffset: UInt64 = 127
        let metadataOffset = rootOffset + rootLength
        let leafOffset = metadataOffset + metadataLength
        for value in [rootOffset, rootLength, metadataOffset, metadataLength, leafOffset, 0, leafOffset, 12, 0, 0, 0] { put64(value) }
        header += [0, 1, 1, 2, 0, 0]
        func put32(_ value: Int32) { withUnsafeBytes(of: value.littleEndian) { header += $0 } }
        for value: Int32 in [-1_800_000_000, -850_000_000, 1_800_000_000, 850_000_000] { put32(value) }
        header.append(0)
        put32(0)
        put32(0)
        precondition(header.count == 127)
        return (header, Int(leafOffset) + 12)
    }

    @Test func aRemotePMTilesRootOrMetadataPastTheLimitIsNamedWithItsLimit() throws {
        let cases: [(UInt64, UInt64, String)] = [
            (
                UInt64(PMTilesFormat.maximumDirectoryLength) + 1, 2,
                "root directory of \(PMTilesFormat.maximumDirectoryLength + 1) bytes, over the limit of \(PMTilesFormat.maximumDirectoryLength) bytes"
            ),
            (
                100, UInt64(PMTilesFormat.maximumMetadataLength) + 1,
                "metadata of \(PMTilesFormat.maximumMetadataLength + 1) bytes, over the limit of \(PMTilesFormat.maximumMetadataLength) bytes"
            ),
        ]
        for (rootLength, metadataLength, words) in cases {
            let (head, size) = Self.pmtilesHead(rootLength: rootLength, metadataLength: metadataLength)
            let server = try Self.server(head: head, size: size)
            defer { server.stop() }
            let url = try #require(URL(string: "\(server.baseURL)/huge.pmtiles"))
            #expect {
                _ = try RemoteArchive.open(url: url)
            } throws: { error in
                (error as? TileArchiveError)?.path == url.absoluteString && "\(error)".contains(words)
            }
        }
    }
}
