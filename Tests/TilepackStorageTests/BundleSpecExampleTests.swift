import Foundation
import Testing
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

/// The worked example of Specs/bundle-format.md: the writer must produce exactly the bytes printed there.
@Suite struct BundleSpecExampleTests {
    static func writeExample(to path: String) throws {
        let writer = try BundleWriter(
            destination: path, content: .encoded(.json), metadata: TileMetadata(["name": "two", "format": "json"]))
        try writer.addTile(at: BundleFixtures.tile(1, 1, 0), data: Data("[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]".utf8))
        try writer.addTile(at: BundleFixtures.tile(1, 0, 0), data: Data("{\"a\":1}".utf8))
        try writer.finish()
    }

    /// The hex dump between the example markers of the spec.
    static func specBytes() throws -> [UInt8] {
        let spec = try String(contentsOf: TestSupport.packageRoot.appendingPathComponent("Specs/bundle-format.md"), encoding: .utf8)
        guard let begin = spec.range(of: "<!-- example-bytes:begin -->"), let end = spec.range(of: "<!-- example-bytes:end -->") else {
            return []
        }
        var bytes: [UInt8] = []
        for line in spec[begin.upperBound..<end.lowerBound].split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 1, fields[0].count == 4, Int(fields[0], radix: 16) == bytes.count else { continue }
            bytes += fields.dropFirst().compactMap { UInt8($0, radix: 16) }
        }
        return bytes
    }

    @Test func theSpecsExampleIsWhatTheWriterWrites() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("two.tilepack")
        try Self.writeExample(to: path)
        let written = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let printed = try Self.specBytes()
        #expect(printed.count == 509)
        #expect(written == printed, "update Specs/bundle-format.md section 10 if the format changed on purpose")

        // And a reader reads the printed bytes back.
        let archive = try BundleArchive(data: Data(printed), path: "spec example")
        #expect(try archive.tileData(at: BundleFixtures.tile(1, 0, 0)) == Data("{\"a\":1}".utf8))
        #expect(try archive.tileData(at: BundleFixtures.tile(1, 1, 0)) == Data("[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]".utf8))
        #expect(try archive.verify().lz4PayloadCount == 1)
        // The CRC-32 check value of the ISO-HDLC polynomial.
        #expect(Array("123456789".utf8).withUnsafeBytes { BundleFormat.crc32($0) } == 0xCBF4_3926)
    }
}
