import Foundation
import Testing
import TilepackTestSupport

/// `tilepack upload` refuses before anything is sent, as every command fails: "Error: PLACE:
/// fault", exit 1, without a usage line (the arguments were well formed; the file or the key is
/// what is wrong). No store is needed: the refusals come before the first request.
@Suite struct UploadCommandTests {
    /// Nothing here may reach a store: an endpoint that refuses connections.
    static let environment = [
        "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    ]

    @Test func aKeyNamingAnotherFormatIsRefusedNamingTheKeyAndBothFormats() async throws {
        let sample = TestSupport.packageRoot.appendingPathComponent("samples/sample.tilepack").path
        let key = "s3://tiles/world.pmtiles"
        let run = try await TestSupport.run(
            try #require(TestSupport.tilepackBinary, "the tilepack binary is built beside the tests"), ["upload", sample, key],
            environment: Self.environment)
        #expect(run.status == 1, "\(run)")
        #expect(
            run.stderr.hasPrefix("Error: \(key): the key names a PMTiles (.pmtiles), and \(sample) is a tilepack bundle"), "\(run.stderr)")
        #expect(!run.stderr.contains("Usage:"), "\(run.stderr)")
    }

    @Test func anMBTilesWithChangesInItsWriteAheadLogIsRefusedNamingTheFile() async throws {
        let dir = try TemporaryDirectory("upload-wal")
        let archive = dir.file("world.mbtiles")
        // Detection reads the magic only; the log is what is refused.
        try Data("SQLite format 3\0".utf8 + [UInt8](repeating: 0, count: 84)).write(to: URL(fileURLWithPath: archive))
        try Data(repeating: 7, count: 4096).write(to: URL(fileURLWithPath: archive + "-wal"))
        let run = try await TestSupport.run(
            try #require(TestSupport.tilepackBinary, "the tilepack binary is built beside the tests"),
            ["upload", archive, "s3://tiles/world.mbtiles"], environment: Self.environment)
        #expect(run.status == 1, "\(run)")
        #expect(
            run.stderr.hasPrefix("Error: \(archive): its write-ahead log (\(archive)-wal, 4096 bytes) holds changes the file has not"),
            "\(run.stderr)")
        #expect(!run.stderr.contains("Usage:"), "\(run.stderr)")
    }
}
