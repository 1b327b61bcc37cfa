import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@_spi(TilepackInternal) @testable import TilepackStorage

private func tile(_ z: Int, _ x: Int, _ y: Int) -> TileCoordinate { BundleFixtures.tile(z, x, y) }

/// A small flat MBTiles file with `count` tiles at zoom 8.
private func makeMBTiles(_ path: String, count: Int = 20, bytes: Int = 100, metadata: [String: String] = [:]) throws {
    var entries = ["name": "h", "format": "png"]
    for (k, v) in metadata { entries[k] = v }
    let writer = try MBTilesWriter(creating: path, metadata: TileMetadata(entries))
    for i in 0..<count { try writer.write(BundleFixtures.pngLike(bytes, seed: i), at: tile(8, i, 7)) }
    try writer.finish()
}

@Suite struct HardeningTests {
    // MARK: 11. FIFOs and other special files

    /// The time limits here only end a hang (a FIFO opened for reading waits for ever): they are
    /// far above what the work takes, since a test may wait minutes for a thread of the
    /// cooperative pool on a loaded machine before it runs at all.
    @Test(.timeLimit(.minutes(10))) func aFIFONamedLikeAnArchiveIsNamedNotOpened() throws {
        let dir = try TemporaryDirectory()
        let fifo = dir.file("pipe.mbtiles")
        #expect(mkfifo(fifo, 0o644) == 0)
        for open in [
            { _ = try TileArchiveFormat.detect(path: fifo) }, { _ = try MBTilesArchive(path: fifo) },
            { _ = try BundleArchive(path: fifo) }, { _ = try openTileArchive(path: fifo) },
            { _ = try MBTilesWriter(updating: fifo) },
        ] as [() throws -> Void] {
            do {
                try open()
                Issue.record("a FIFO opened as an archive")
            } catch let error as TileArchiveError {
                #expect(error.path == fifo)
                #expect("\(error.fault)".contains("a FIFO (named pipe)"), "\(error)")
            }
        }
    }

    // MARK: 15. A file shorter than the bundle's magic

    @Test func aBundleCutInsideItsMagicIsATruncatedBundle() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("cut.tilepack")
        try Data(BundleFormat.magic.prefix(5)).write(to: URL(fileURLWithPath: path))
        #expect(try TileArchiveFormat.detect(path: path) == .bundle)
        #expect(throws: TileArchiveError(path: path, fault: .truncated("the file is 5 bytes, shorter than the 128-byte header"))) {
            try openTileArchive(path: path)
        }
    }

    // MARK: 12. Endless queries

    /// A `tiles` view yielding rows without end: every query is stopped by the work bound, with
    /// an error that says so (before: verify's row scan never ended).
    @Test(.timeLimit(.minutes(10))) func anEndlessViewIsStoppedByTheWorkLimit() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("endless.mbtiles")
        try makeDatabase(
            path,
            """
            CREATE TABLE metadata (name TEXT, value TEXT);
            CREATE VIEW tiles AS WITH RECURSIVE r(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM r)
              SELECT 0 AS zoom_level, 0 AS tile_column, 0 AS tile_row, x'89504e470d0a1a0a' AS tile_data FROM r;
            """)
        let archive = try MBTilesArchive(path: path, options: MBTilesOpenOptions(workLimit: 20_000_000))
        #expect(archive.workLimit == 20_000_000)
        let started = Date()
        do {
            var rows = 0
            try archive.forEachRawRow { _ in rows += 1 }
            Issue.record("an endless view ended after \(rows) rows")
        } catch let error as TileArchiveError {
            #expect("\(error)".contains("work limit of 20000000 SQLite instructions"), "\(error)")
        }
        #expect(Date().timeIntervalSince(started) < 30)
        // The default bound is documented: 10^9 + 64 per byte of the file.
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(try MBTilesArchive(path: path).workLimit == 1_000_000_000 + 64 * size)
    }

    // MARK: 6. Triggers on append targets

    @Test func anArchiveWithTriggersIsNotAppendedTo() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("t.mbtiles")
        try makeMBTiles(path, count: 3)
        try makeDatabase(path, "CREATE TRIGGER eat AFTER INSERT ON tiles BEGIN DELETE FROM tiles WHERE rowid = NEW.rowid; END;")
        #expect(try MBTilesArchive(path: path).schema.triggers == ["eat"])
        do {
            _ = try MBTilesWriter(updating: path)
            Issue.record("appended to a file with triggers")
        } catch {
            #expect("\(error)".contains("triggers (eat)"), "\(error)")
        }
        #expect(try MBTilesArchive(path: path).tileCount() == 3)
    }

    // MARK: 7. Hot journals

    /// Makes `copy`: the state of `path` in the middle of an update that a kill interrupted (the
    /// file with pages already overwritten, and the hot journal beside it).
    private func interruptedUpdate(of path: String, to copy: String) throws {
        let connection = try SQLiteConnection(filename: path, archivePath: path, readOnly: false, uri: false)
        try connection.execute(
            "PRAGMA cache_size = 1; BEGIN IMMEDIATE; DELETE FROM tiles; "
                + "INSERT INTO tiles WITH RECURSIVE s(value) AS (SELECT 0 UNION ALL SELECT value + 1 FROM s WHERE value < 400) SELECT 9, value, 0, randomblob(3000) FROM s;"
        )
        #expect(FileManager.default.fileExists(atPath: path + "-journal"))
        for suffix in ["", "-journal"] {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix)
        }
        try connection.execute("ROLLBACK")
    }

    @Test func aHotJournalIsRolledBackWhenTheFileMayBeWritten() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("a.mbtiles")
        try makeMBTiles(path, count: 20, bytes: 2000)
        let hash = try MBTilesArchive(path: path).aggregateTilesHash()
        let copy = dir.file("killed.mbtiles")
        try interruptedUpdate(of: path, to: copy)
        let archive = try MBTilesArchive(path: copy)
        #expect(archive.recovery?.contains("rolled back") == true)
        #expect(try archive.tileCount() == 20)
        #expect(try archive.aggregateTilesHash() == hash)
        #expect(try archive.integrityCheck() == [])
        #expect(!FileManager.default.fileExists(atPath: copy + "-journal"))
    }

    /// A WAL with committed pages not yet in the file, left beside it (its writer was killed):
    /// checkpointed when the folder is writable, so the file reads with every committed tile.
    @Test func aLeftoverWALIsCheckpointed() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("w.mbtiles")
        try makeMBTiles(path, count: 5)
        let copy = dir.file("copy.mbtiles")
        try leftoverWAL(of: path, to: copy)
        let archive = try MBTilesArchive(path: copy)
        #expect(archive.recovery?.contains("write-ahead log") == true)
        #expect(try archive.tileCount() == 7)
    }

    /// Makes `copy`: `path` in WAL mode with two committed tiles still only in its `-wal`.
    private func leftoverWAL(of path: String, to copy: String) throws {
        let connection = try SQLiteConnection(filename: path, archivePath: path, readOnly: false, uri: false)
        try connection.execute(
            "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; "
                + "INSERT INTO tiles VALUES (9, 1, 1, x'89504e470d0a1a0a'), (9, 2, 1, x'89504e470d0a1a0a');")
        for suffix in ["", "-wal"] { try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix) }
        withExtendedLifetime(connection) {}
    }

    @Test(.enabled(if: TmpfsMount.canMount, "mounts a tmpfs: needs root with CAP_SYS_ADMIN"))
    func aLeftoverWALInAReadOnlyFolderIsExplained() throws {
        let mount = try #require(TmpfsMount())
        let dir = try TemporaryDirectory()
        let path = dir.file("w.mbtiles")
        try makeMBTiles(path, count: 5)
        let copy = mount.path + "/copy.mbtiles"
        try leftoverWAL(of: path, to: copy)
        #expect(mount.makeReadOnly())
        do {
            _ = try MBTilesArchive(path: copy)
            Issue.record("opened a file with a WAL on a read-only file system")
        } catch {
            let text = "\(error)"
            #expect(text.contains("write-ahead log") && text.contains("Read-only file system"), "\(text)")
        }
    }

    @Test(.enabled(if: TmpfsMount.canMount, "mounts a tmpfs: needs root with CAP_SYS_ADMIN"))
    func aHotJournalInAReadOnlyFolderIsExplained() throws {
        let mount = try #require(TmpfsMount())
        let dir = try TemporaryDirectory()
        let path = dir.file("a.mbtiles")
        try makeMBTiles(path, count: 20, bytes: 2000)
        let copy = mount.path + "/killed.mbtiles"
        try interruptedUpdate(of: path, to: copy)
        #expect(mount.makeReadOnly())
        do {
            _ = try MBTilesArchive(path: copy)
            Issue.record("opened a file with a hot journal on a read-only file system")
        } catch {
            let text = "\(error)"
            #expect(
                text.contains("rollback journal") && text.contains("Read-only file system") && text.contains("writable folder"), "\(text)")
        }
    }

    // MARK: 8. Litter after a kill

    @Test func staleTemporariesOfKilledWritersAreRemoved() throws {
        let dir = try TemporaryDirectory()
        let destination = dir.file("out.mbtiles")
        // What a killed writer leaves: its temporary file, with no process holding its lock.
        let stale = dir.file(".out.mbtiles.tmp-killed")
        try Data(repeating: 1, count: 4096).write(to: URL(fileURLWithPath: stale))
        try Data(repeating: 2, count: 512).write(to: URL(fileURLWithPath: stale + "-journal"))
        // A live writer's temporary file stays.
        let live = try AtomicFile(destination: destination, overwrite: false)
        let other = dir.file(".other.mbtiles.tmp-x")
        try Data().write(to: URL(fileURLWithPath: other))
        let next = try AtomicFile(destination: destination, overwrite: false)
        #expect(!FileManager.default.fileExists(atPath: stale))
        #expect(!FileManager.default.fileExists(atPath: stale + "-journal"))
        #expect(FileManager.default.fileExists(atPath: live.temporaryPath))
        #expect(FileManager.default.fileExists(atPath: next.temporaryPath))
        #expect(FileManager.default.fileExists(atPath: other))
        live.discard()
        next.discard()
    }

    /// A temporary file caught before `finish()` (as a kill leaves it) is not an archive.
    @Test func anUnfinishedMBTilesIsRefused() throws {
        let dir = try TemporaryDirectory()
        let writer = try MBTilesWriter(
            creating: dir.file("big.mbtiles"), metadata: TileMetadata(["name": "b"]),
            options: MBTilesWriterOptions(tilesPerTransaction: 5))
        for i in 0..<50 { try writer.write(BundleFixtures.pngLike(100, seed: i), at: tile(8, i, 1)) }
        let temporary = try #require(
            try FileManager.default.contentsOfDirectory(atPath: dir.path).first { $0.hasPrefix(".big.mbtiles.tmp-") })
        let copy = dir.file("copy.mbtiles")
        try FileManager.default.copyItem(atPath: dir.file(temporary), toPath: copy)
        writer.cancel()
        do {
            _ = try MBTilesArchive(path: copy)
            Issue.record("an unfinished temporary file opened as an archive")
        } catch {
            #expect("\(error)".contains("unfinished write"), "\(error)")
        }
    }

    // MARK: 19. Read-only file systems named

    @Test(.enabled(if: TmpfsMount.canMount, "mounts a tmpfs: needs root with CAP_SYS_ADMIN"))
    func aReadOnlyFileSystemIsNamed() throws {
        let mount = try #require(TmpfsMount())
        #expect(mount.makeReadOnly())
        for write in [
            { _ = try MBTilesWriter(creating: mount.path + "/x.mbtiles", metadata: TileMetadata(["name": "x"])) },
            { _ = try BundleWriter(destination: mount.path + "/x.tilepack", content: .encoded(.png)) },
        ] as [() throws -> Void] {
            do {
                try write()
                Issue.record("wrote on a read-only file system")
            } catch let error as TileArchiveError {
                #expect("\(error)".contains("Read-only file system"), "\(error)")
                #expect(!"\(error)".contains("No such file"), "\(error)")
            }
        }
    }

    // MARK: 4 and 14. Metadata limits

    @Test func metadataPastTheLimitsIsNeitherReadNorWritten() throws {
        let dir = try TemporaryDirectory()
        // A reader stops at the limit instead of holding a million rows.
        let many = dir.file("many.mbtiles")
        try makeMBTiles(many, count: 1)
        try makeDatabase(
            many,
            "INSERT INTO metadata WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < \(MetadataLimits.maximumEntries + 1)) SELECT 'k' || value, 'v' FROM s;"
        )
        #expect(
            throws: TileArchiveError(path: many, fault: .invalidMetadata("the metadata table has more than 65536 rows, tilepack's limit"))
        ) {
            try MBTilesArchive(path: many).readMetadata()
        }
        let big = String(repeating: "x", count: MetadataLimits.maximumBytes)
        // The bundle writer checks the metadata it is given after init too, before writing.
        let bundlePath = dir.file("big.tilepack")
        let bundle = try BundleWriter(destination: bundlePath, content: .encoded(.png), metadata: TileMetadata(["name": "b"]))
        try bundle.addTile(at: tile(0, 0, 0), data: BundleFixtures.pngLike(10, seed: 0))
        bundle.metadata["description"] = big
        #expect(throws: TileArchiveError.self) { try bundle.finish() }
        #expect(!FileManager.default.fileExists(atPath: bundlePath))
        // So does the MBTiles writer.
        let mbtilesPath = dir.file("big.mbtiles")
        let writer = try MBTilesWriter(creating: mbtilesPath, metadata: TileMetadata(["name": "b"]))
        try writer.write(BundleFixtures.pngLike(10, seed: 0), at: tile(0, 0, 0))
        writer.metadata["description"] = big
        do {
            try writer.finish()
            Issue.record("wrote metadata over the limit")
        } catch {
            #expect("\(error)".contains("over the limit of 16777216 bytes"), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: mbtilesPath))
    }

    // MARK: 15. Duplicates and map rows without images

    @Test func duplicateRowsAreCountedOnceAndListed() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("dup.mbtiles")
        try makeDatabase(
            path,
            """
            CREATE TABLE metadata (name TEXT, value TEXT);
            CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);
            INSERT INTO tiles WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 500) SELECT 3, 1, 2, x'89504e470d0a1a0a' FROM s;
            INSERT INTO tiles VALUES (3, 2, 2, x'89504e470d0a1a0a');
            """)
        let archive = try MBTilesArchive(path: path)
        #expect(try archive.zoomLevels() == [ZoomLevelSummary(zoom: 3, tileCount: 2)])
        var seen: [TileCoordinate] = []
        try archive.forEachTile { tile, _ in seen.append(tile) }
        #expect(seen.count == 2)
        #expect(try archive.contentSummary().tileCount == 2)
        let duplicates = try archive.duplicateTiles()
        #expect(duplicates.count == 1)
        #expect(duplicates.first?.rowCount == 500)
        #expect(duplicates.first?.description.contains("3/1/2 (TMS row) is stored in 500 rows") == true)
    }

    @Test func mapRowsWithoutImagesAreListed() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("orphan.mbtiles")
        try makeDatabase(
            path,
            """
            CREATE TABLE metadata (name TEXT, value TEXT);
            CREATE TABLE map (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_id TEXT);
            CREATE UNIQUE INDEX map_index ON map (zoom_level, tile_column, tile_row);
            CREATE TABLE images (tile_data BLOB, tile_id TEXT);
            CREATE VIEW tiles AS SELECT map.zoom_level AS zoom_level, map.tile_column AS tile_column, map.tile_row AS tile_row,
              images.tile_data AS tile_data FROM map JOIN images ON images.tile_id = map.tile_id;
            INSERT INTO images VALUES (x'89504e470d0a1a0a', 'a');
            INSERT INTO map VALUES (1, 0, 0, 'a'), (1, 1, 0, 'gone');
            """)
        let archive = try MBTilesArchive(path: path)
        let orphans = try archive.orphanedMapRows()
        #expect(orphans.count == 1)
        #expect(orphans.first?.description.contains("1/1/0 (TMS row) names tile_id 'gone'") == true)
    }

    // MARK: 9. Append extends the extent

    @Test func anUpdateExtendsTheExtentToOldAndNewTiles() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("e.mbtiles")
        let writer = try MBTilesWriter(creating: path, metadata: TileMetadata(["name": "e"]))
        try writer.write(BundleFixtures.pngLike(10, seed: 0), at: tile(4, 1, 1))  // north-west
        let before = try writer.finish().metadata
        let oldBounds = try #require(try before.bounds)
        let update = try MBTilesWriter(updating: path, options: MBTilesWriterOptions(derivation: .extend))
        try update.write(BundleFixtures.pngLike(10, seed: 1), at: tile(6, 50, 50))  // south-east, deeper
        let after = try update.finish().metadata
        let bounds = try #require(try after.bounds)
        #expect(bounds.west <= oldBounds.west && bounds.north >= oldBounds.north)
        let newTile = WebMercator.boundingBox(of: tile(6, 50, 50))
        #expect(bounds.east >= newTile.east - 1e-6 && bounds.south <= newTile.south + 1e-6)
        #expect(try after.minZoom == 4)
        #expect(try after.maxZoom == 6)
        let center = try #require(try after.center)
        #expect(center.coordinate.longitude > bounds.west && center.coordinate.longitude < bounds.east)
        #expect(center.coordinate.latitude > bounds.south && center.coordinate.latitude < bounds.north)
    }

    // MARK: 10. A bundle cut underneath its reader

    /// With positional reads a bundle that another process truncates while it is open gives a
    /// `truncated` error (mapped, the same read would kill the process with SIGBUS).
    @Test func aBundleCutWhileOpenIsAnErrorNotACrash() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("cut.tilepack")
        var tiles: [(TileCoordinate, Data)] = []
        for i in 0..<64 { tiles.append((tile(6, i, 3), BundleFixtures.noise(20_000, seed: UInt64(i)))) }
        try BundleFixtures.write(tiles, to: path)
        let archive = try BundleArchive(path: path, options: BundleArchive.Options(access: .positionalReads))
        #expect(try archive.tileData(at: tile(6, 63, 3)) == tiles[63].1)
        #expect(truncate(path, 64 << 10) == 0)
        #expect(throws: TileArchiveError.self) { try archive.forEachTile { _, _ in } }
        do {
            _ = try archive.verify()
            Issue.record("verified a cut file")
        } catch {
            #expect("\(error.fault)".contains("cut while being read"), "\(error)")
        }
        #expect(throws: TileArchiveError.self) { try archive.tileData(at: tile(6, 63, 3)) }
    }

    @Test func positionalReadsGiveTheSameTilesAsTheMap() throws {
        let dir = try TemporaryDirectory()
        let (path, tiles) = try BundleFixtures.smallBundle(in: dir)
        let mapped = try BundleArchive(path: path)
        let read = try BundleArchive(path: path, options: BundleArchive.Options(access: .positionalReads))
        #expect(try read.verify() == mapped.verify())
        for (tile, data) in tiles { #expect(try read.tileData(at: tile) == data) }
        #expect(try allTiles(read).map(\.1) == allTiles(mapped).map(\.1))
        var buffer = [UInt8](repeating: 0, count: read.maximumTileLength)
        let n = try buffer.withUnsafeMutableBytes { try read.readTile(at: tiles[0].0, into: $0) }
        #expect(n.map { Data(buffer[0..<$0]) } == tiles[0].1)
    }
}
