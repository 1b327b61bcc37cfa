import Foundation
import Testing
import TilepackCore
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport

/// Tiles and byte surgery for the bundle tests.
enum BundleFixtures {
    static func tile(_ z: Int, _ x: Int, _ y: Int) -> TileCoordinate {
        guard let tile = TileCoordinate(validatingZoom: z, x: x, y: y) else { fatalError("bad test tile \(z)/\(x)/\(y)") }
        return tile
    }

    /// Deterministic pseudo-random bytes (xorshift), incompressible.
    static func noise(_ count: Int, seed: UInt64) -> Data {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        var bytes = [UInt8](repeating: 0, count: count)
        for i in 0..<count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            bytes[i] = UInt8(truncatingIfNeeded: state)
        }
        return Data(bytes)
    }

    /// A PNG-signed tile: the signature then `count` compressible bytes that depend on `seed`.
    static func pngLike(_ count: Int, seed: Int) -> Data {
        var data = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        for i in 0..<count { data.append(UInt8(truncatingIfNeeded: (i / 16 + seed) % 7)) }
        return data
    }

    /// Writes a bundle of `tiles` and returns its path.
    @discardableResult
    static func write(
        _ tiles: [(TileCoordinate, Data)], to path: String, content: TileContent = .encoded(.png),
        metadata: TileMetadata = TileMetadata(["name": "test", "format": "png"]),
        options: BundleWriter.Options = .init()
    ) throws -> BundleWriter.Summary {
        let writer = try BundleWriter(destination: path, content: content, metadata: metadata, options: options)
        for (tile, data) in tiles { try writer.addTile(at: tile, data: data) }
        return try writer.finish()
    }

    /// A small bundle with stored, LZ4 and shared payloads over three zoom levels.
    static func smallBundle(in dir: TemporaryDirectory, name: String = "small.tilepack") throws -> (
        path: String, tiles: [(TileCoordinate, Data)]
    ) {
        let tiles: [(TileCoordinate, Data)] = [
            (tile(0, 0, 0), pngLike(200, seed: 0)),
            (tile(1, 0, 0), noise(40, seed: 1)),
            (tile(1, 1, 0), pngLike(200, seed: 2)),
            (tile(1, 1, 1), pngLike(200, seed: 2)),
            (tile(2, 3, 1), Data()),
            (tile(2, 0, 3), noise(13, seed: 3)),
        ]
        let path = dir.file(name)
        try write(tiles, to: path)
        return (path, tiles)
    }
}

/// A bundle's bytes, with the layout read from its header, for crafting hostile files whose
/// checksums are all correct again afterwards (``reseal()``).
struct BundleSurgery {
    var bytes: [UInt8]

    init(path: String) throws {
        bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// The little-endian value at `offset`, or 0 when the bytes are not there (damaged layouts).
    func u32(_ offset: Int) -> UInt32 {
        guard offset >= 0, offset <= bytes.count - 4 else { return 0 }
        return (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * UInt32($1)) }
    }
    func u64(_ offset: Int) -> UInt64 {
        guard offset >= 0, offset <= bytes.count - 8 else { return 0 }
        return (0..<8).reduce(0) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
    }
    mutating func put32(_ value: UInt32, at offset: Int) {
        guard offset >= 0, offset <= bytes.count - 4 else { return }
        for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(i))) }
    }
    mutating func put64(_ value: UInt64, at offset: Int) {
        guard offset >= 0, offset <= bytes.count - 8 else { return }
        for i in 0..<8 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(i))) }
    }

    var metadataLength: Int { Int(clamping: u64(32)) }
    var indexOffset: Int { Int(clamping: u64(40)) }
    var indexLength: Int { Int(clamping: u64(48)) }
    var dataOffset: Int { Int(clamping: u64(56)) }
    var tileCount: Int { Int(clamping: u64(72)) }
    var payloadCount: Int { Int(clamping: u64(80)) }
    var keysOffset: Int { indexOffset + 248 }
    var refsOffset: Int { keysOffset + 8 * tileCount }
    var recordsOffset: Int { (refsOffset + 4 * tileCount + 7) & ~7 }
    func record(_ n: Int) -> Int { recordsOffset + 24 * n }

    func crc(_ range: Range<Int>) -> UInt32 {
        guard range.lowerBound >= 0, range.upperBound <= bytes.count else { return 0 }
        return bytes[range].withUnsafeBytes { BundleFormat.crc32($0) }
    }

    /// Recomputes payload, metadata, index and header checksums (in that order).
    mutating func reseal(payloads: Bool = true) {
        let sane =
            tileCount < bytes.count && payloadCount < bytes.count && metadataLength < bytes.count
            && indexOffset < bytes.count && indexLength < bytes.count && dataOffset < bytes.count
        if payloads, sane {
            for n in 0..<payloadCount {
                let r = record(n)
                guard u64(r) < UInt64(bytes.count) else { continue }
                let start = dataOffset + Int(u64(r))
                let length = Int(u32(r + 8))
                if start <= bytes.count - length { put32(crc(start..<(start + length)), at: r + 16) }
            }
        }
        if metadataLength < bytes.count { put32(crc(128..<(128 + metadataLength)), at: 88) }
        if sane, indexOffset + indexLength <= bytes.count {
            put32(crc(indexOffset..<(indexOffset + indexLength)), at: 92)
        }
        put32(crc(0..<124), at: 124)
    }

    func write(to path: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Opens the bytes and verifies them; returns the error, or nil when both succeed.
    /// - Parameter alsoFromFile: also write the bytes to a file and read it with positional
    ///   reads, which must give the same verdict (off for the thousands of cases of a bit-flip sweep).
    func openAndVerify(path: String = "crafted.tilepack", alsoFromFile: Bool = true) -> TileArchiveError? {
        let inMemory = Self.openAndVerify { try BundleArchive(data: Data(bytes), path: path) }
        // The same bytes in a file read with pread: the same verdict, the same fault.
        if alsoFromFile, let dir = try? TemporaryDirectory("tilepack-surgery") {
            let file = dir.file("crafted.tilepack")
            if (try? Data(bytes).write(to: URL(fileURLWithPath: file))) != nil {
                let read = Self.openAndVerify { try BundleArchive(path: file, options: BundleArchive.Options(access: .positionalReads)) }
                #expect(
                    read?.fault == inMemory?.fault,
                    "positional reads: \(String(describing: read)), in memory: \(String(describing: inMemory))")
            }
        }
        return inMemory
    }

    private static func openAndVerify(_ open: () throws -> BundleArchive) -> TileArchiveError? {
        do {
            let archive = try open()
            _ = try archive.verify()
            // Reading every tile must agree with verify.
            try archive.forEachTile { _, _ in }
            return nil
        } catch let error as TileArchiveError {
            return error
        } catch {
            fatalError("untyped error \(error)")
        }
    }
}
