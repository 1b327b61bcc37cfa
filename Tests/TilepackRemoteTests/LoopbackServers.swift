import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

/// The bytes of a PMTiles archive of `side` x `side` tiles at `zoom`, each a PNG signature and
/// `noise` random bytes (seeded): large enough, at zoom 4, to lie past a remote reader's first
/// request.
func randomPMTiles(in dir: TemporaryDirectory, zoom: Int, side: Int, noise: Int, seed: UInt64, metadata: TileMetadata? = nil) throws -> Data {
    let path = dir.file("random-\(seed).pmtiles")
    let writer = try metadata.map { try PMTilesWriter(destination: path, metadata: $0) } ?? PMTilesWriter(destination: path)
    var random = SplitMix64(seed: seed)
    for x in 0..<side {
        for y in 0..<side {
            try writer.addTile(
                at: TileCoordinate(uncheckedZoom: zoom, x: x, y: y),
                bytes: HostilePMTiles.pngBytes + (0..<noise).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        }
    }
    try writer.finish()
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try Data(contentsOf: URL(fileURLWithPath: path))
}

/// A free TCP port on 127.0.0.1 (bound, read, released).
func freePort() throws -> Int { try TestSupport.freeLoopbackPort() }

/// moto's S3-compatible server on a free loopback port.
final class MotoServer: @unchecked Sendable {
    let port: Int
    private let process: Process
    var baseURL: String { "http://127.0.0.1:\(port)" }

    init() throws {
        port = try freePort()
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["moto_server", "-H", "127.0.0.1", "-p", String(port)]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        guard waitForPort(port, seconds: 30) else {
            stop()
            throw POSIXError(.ETIMEDOUT)
        }
    }

    /// Creates `bucket` and puts `file` at `key`, readable by anyone (plain unsigned requests;
    /// moto accepts them).
    func put(file: String, bucket: String, key: String) throws {
        // -T: a plain PUT of the file (a form content type would have the server parse the body away).
        for arguments in [
            ["-X", "PUT", "\(baseURL)/\(bucket)"], ["-H", "x-amz-acl: public-read", "-T", file, "\(baseURL)/\(bucket)/\(key)"],
        ] {
            let curl = Process()
            curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
            curl.arguments = ["-sf", "-o", "/dev/null", "--max-time", "20"] + arguments
            try curl.run()
            curl.waitUntilExit()
            guard curl.terminationStatus == 0 else { throw POSIXError(.EIO) }
        }
    }

    /// SIGKILL to the process this value started (nginx in the foreground may inherit a blocked
    /// SIGTERM from the test runner's thread).
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}
