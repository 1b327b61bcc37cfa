import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@_spi(TilepackInternal) @testable import TilepackStorage

/// An iOS app's address space may hold no map of a multi-GB bundle: a bundle whose map fails is
/// read with `pread` instead, whole and correct.
@Suite struct BundleMapFallbackTests {
    typealias F = BundleFixtures

    @Test func aBundleWhoseMapFailsIsReadPositionally() throws {
        let dir = try TemporaryDirectory()
        let (path, tiles) = try F.smallBundle(in: dir)
        var maps = 0
        let archive = try BundleArchive(path: path, options: BundleArchive.Options()) { _ in
            maps += 1
            return nil  // what mmap's ENOMEM gives
        }
        #expect(maps == 1)
        for (tile, data) in tiles { #expect(try archive.tileData(at: tile) == data) }
        #expect(try archive.verify().tileCount == tiles.count)
        // Read on demand, not mapped: a file cut underneath gives an error naming it, not SIGBUS.
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: UInt64(BundleFormat.headerLength))
        try handle.close()
        #expect(throws: TileArchiveError.self) {
            for (tile, _) in tiles { _ = try archive.tileData(at: tile) }
        }
    }

    @Test func aFileThatCannotBeOpenedIsStillAnError() throws {
        let dir = try TemporaryDirectory()
        #expect(throws: TileArchiveError.self) { try BundleArchive(path: dir.file("absent.tilepack")) }
    }
}
