import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackOperations
import TilepackRemote
import TilepackStorage
import TilepackTestSupport
import TilepackUpdate

/// `tilepack index` and `tilepack sync` (Specs/updates.md §7-8): the index format, a sync from
/// nginx that fetches only what changed (several ranges a request, or one where nginx answers no
/// more), a full download without an index, a resumed sync that fetches no byte twice, and
/// servers that change the object, lie or break off, each leaving LOCAL as it was.
@Suite struct SyncTests {
    /// The boundary ``Publisher`` separates the parts of its multipart answers with.
    static let boundary = "sync-boundary-0001"

    /// A tile of version `v` (1 or 2): PNG-signed random bytes, the same in both versions except
    /// where v2 re-renders it.
    static func bytes(_ tile: TileCoordinate, version: Int) -> [UInt8] {
        let changed = version == 2 && (tile.x + tile.y) % 9 == 0
        var random = SplitMix64(seed: UInt64(tile.zoom) << 40 | UInt64(tile.x) << 20 | UInt64(tile.y) &+ (changed ? 7_777_777 : 0))
        let length = 800 + Int(random.next() % 1200)
        // A re-rendered tile holds what a multipart answer's boundary line looks like.
        let boundary = changed ? Array("\r\n--\(Self.boundary)\r\nContent-Range: bytes 0-1/2\r\n\r\n".utf8) : []
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + boundary
            + (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    /// The tiles of version `v`: zoom 5 whole and 1,976 tiles of zoom 6; v2 re-renders every tile
    /// whose x + y is a multiple of 9 (scattered through the file), deletes zoom 6's column 0 and
    /// adds 16 tiles at zoom 7.
    static func tiles(version: Int) -> [TileCoordinate] {
        var tiles: [TileCoordinate] = []
        for x in 0..<32 { for y in 0..<32 { tiles.append(TileCoordinate(uncheckedZoom: 5, x: x, y: y)) } }
        var count = 0
        for x in 0..<64 {
            for y in 0..<64 where count < 1976 {
                count += 1
                if version == 2 && x == 0 { continue }
                tiles.append(TileCoordinate(uncheckedZoom: 6, x: x, y: y))
            }
        }
        if version == 2 { for x in 0..<4 { for y in 0..<4 { tiles.append(TileCoordinate(uncheckedZoom: 7, x: x, y: y)) } } }
        return tiles
    }

    /// Version `v` as `name.tilepack` and `name.pmtiles` in `dir`.
    static func make(
        version: Int, name: String, in dir: TemporaryDirectory, edit: (TileCoordinate, inout [UInt8]) -> Void = { _, _ in }
    ) throws -> (bundle: String, pmtiles: String) {
        // Written raw, then converted as a publisher's tilepack would (which fills bounds and zooms).
        let raw = dir.file("raw-\(name).tilepack")
        let bundle = dir.file("\(name).tilepack")
        let writer = try BundleWriter(
            destination: raw, content: .encoded(.png),
            metadata: TileMetadata(["name": "sync test", "format": "png", "version": "\(version)"]))
        for tile in tiles(version: version) {
            var tileBytes = bytes(tile, version: version)
            edit(tile, &tileBytes)
            try tileBytes.withUnsafeBytes { try writer.addTile(at: tile, bytes: $0) }
        }
        _ = try writer.finish()
        _ = try ArchiveConverter.run(source: raw, destination: bundle, options: ConvertOptions())
        try FileManager.default.removeItem(atPath: raw)
        let pmtiles = dir.file("\(name).pmtiles")
        _ = try ArchiveConverter.run(source: bundle, destination: pmtiles, options: ConvertOptions())
        return (bundle, pmtiles)
    }

    static func identity(_ path: String) throws -> ContentIdentity { try ContentIdentity.compute(openTileArchive(path: path)) }
    static func fileBytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    /// The local v1 copies in `dir`, the published v2 (with indexes) in `dir/www`.
    struct Setup {
        let dir: TemporaryDirectory
        let www: TemporaryDirectory
        let v1: (bundle: String, pmtiles: String)
        let v2: (bundle: String, pmtiles: String)
        init(indexed: Bool = true) throws {
            dir = try TemporaryDirectory("sync")
            www = try TemporaryDirectory("sync-www")
            v1 = try SyncTests.make(version: 1, name: "v1", in: dir)
            v2 = try SyncTests.make(version: 2, name: "v2", in: www)
            if indexed {
                _ = try ArchiveIndexer.run(archive: v2.bundle)
                _ = try ArchiveIndexer.run(archive: v2.pmtiles)
            }
        }
    }

    // MARK: The index

    @Test func theIndexListsEveryTilesHashAndIsTheSameForEveryFormat() throws {
        let setup = try Setup()
        let bundle = try TileHashIndex.decode(Array(Self.fileBytes(setup.v2.bundle + ".tpindex")!), name: "b")
        let pmtiles = try TileHashIndex.decode(Array(Self.fileBytes(setup.v2.pmtiles + ".tpindex")!), name: "p")
        let tiles = Self.tiles(version: 2).sorted()
        #expect(bundle.hashes == pmtiles.hashes && bundle.identity.tiles == pmtiles.identity.tiles)
        let identity = try Self.identity(setup.v2.bundle)
        #expect(bundle.hashes.count == tiles.count && bundle.identity == identity)
        #expect(bundle.archiveLength == UInt64(Self.fileBytes(setup.v2.bundle)!.count))
        #expect(pmtiles.archiveLength == UInt64(Self.fileBytes(setup.v2.pmtiles)!.count))
        // The hash of a tile: the first 8 bytes of SHA-256 of its bytes, little-endian, as sha256sum says.
        let tile = tiles[1234]
        let file = setup.dir.file("tile.png")
        try Data(Self.bytes(tile, version: 2)).write(to: URL(fileURLWithPath: file))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        process.arguments = [file]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        process.waitUntilExit()
        let hex = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).prefix(16)
        let littleEndian = stride(from: 14, through: 0, by: -2).map { i in hex.dropFirst(i).prefix(2) }.joined()
        #expect(String(bundle.hashes[1234], radix: 16).leftPadded(16) == littleEndian)
        // The file: 64 header bytes (version 2: with its flags), 8 a tile, a CRC-32.
        #expect(Self.fileBytes(setup.v2.bundle + ".tpindex")!.count == 64 + 8 * tiles.count + 4)
    }

    /// A build asked for the index (`--index`: import, convert, extract and merge, through their
    /// shared output) writes the one `tilepack index` writes beside a bundle or PMTiles output; a
    /// build without it over an indexed archive removes the index that no longer describes it.
    @Test func aBuildWritesTheIndexOnRequestAndRemovesAStaleOne() throws {
        let setup = try Setup(indexed: false)
        func index(_ path: String) throws -> TileHashIndex? {
            try Self.fileBytes(path + ".tpindex").map { try TileHashIndex.decode(Array($0), name: path) }
        }
        func built(_ path: String) throws -> TileHashIndex {
            let archive = try openTileArchive(path: path)
            return try TileHashIndex.build(
                archive, archiveLength: UInt64(Self.fileBytes(path)!.count), canonical: TileHashIndex.isCanonical(archive))
        }
        for ext in ["tilepack", "pmtiles"] {
            let out = setup.dir.file("built.\(ext)")
            var convert = ConvertOptions()
            convert.writing.tileIndex = true
            _ = try ArchiveConverter.run(source: setup.v2.bundle, destination: out, options: convert)
            #expect(try index(out) == built(out))
            // Replaced by v1 without the index: v2's index goes with v2.
            convert.writing.tileIndex = false
            convert.writing.overwrite = true
            _ = try ArchiveConverter.run(source: setup.v1.bundle, destination: out, options: convert)
            #expect(try index(out) == nil)

            let extracted = setup.dir.file("extracted.\(ext)")
            var extract = ExtractOptions()
            extract.maxZoom = 5
            extract.writing.tileIndex = true
            _ = try TileExtractor.run(source: setup.v2.pmtiles, destination: extracted, options: extract)
            #expect(try index(extracted) == built(extracted) && built(extracted).hashes.count == 32 * 32)

            let merged = setup.dir.file("merged.\(ext)")
            var merge = MergeOptions()
            merge.onDuplicate = .first
            merge.writing.tileIndex = true
            _ = try ArchiveMerger.run(inputs: [extracted, setup.v1.pmtiles], destination: merged, options: merge)
            #expect(try index(merged) == built(merged))
        }
        // Nothing else beside them: no temporary file of the archive or the index.
        let left = try FileManager.default.contentsOfDirectory(atPath: setup.dir.url.path).filter { $0.hasPrefix(".") }
        #expect(left.isEmpty, "\(left)")
    }

    @Test func aDamagedIndexIsRefusedNamingItsFault() throws {
        let setup = try Setup()
        let good = Array(Self.fileBytes(setup.v2.bundle + ".tpindex")!)
        var flipped = good
        flipped[100] ^= 0x10
        #expect(throws: TileArchiveError.self) { try TileHashIndex.decode(flipped, name: "x.tpindex") }
        do { _ = try TileHashIndex.decode(flipped, name: "x.tpindex") } catch {
            #expect(error.description.contains("x.tpindex") && error.description.contains("CRC-32"), "\(error)")
        }
        do { _ = try TileHashIndex.decode(Array(good.dropLast(9)), name: "x.tpindex") } catch {
            #expect(error.description.contains("truncated"), "\(error)")
        }
        do { _ = try TileHashIndex.decode(Array("<html>Not here</html>".utf8), name: "x.tpindex") } catch {
            #expect(error.description.contains("not a tilepack tile index"), "\(error)")
        }
    }

    // MARK: Sync from nginx

    @Test(.needs(.nginx), arguments: ["tilepack", "pmtiles"])
    func syncFetchesOnlyTheChangedTilesInFewMultiRangeRequests(_ ext: String) throws {
        let setup = try Setup()
        let server = try NginxServer(root: setup.www.url)
        defer { server.stop() }
        let local = ext == "tilepack" ? setup.v1.bundle : setup.v1.pmtiles
        let published = ext == "tilepack" ? setup.v2.bundle : setup.v2.pmtiles
        let report = try ArchiveSync.run(local: local, url: "\(server.baseURL)/v2.\(ext)")
        #expect(try Self.identity(local) == Self.identity(published))
        let identity = try Self.identity(published)
        #expect(report.identity == identity.description)
        #expect(!FileManager.default.fileExists(atPath: local + ".tpsync"))
        // The re-rendered tiles and the added ones, each fetched once; the rest kept.
        let v1 = Set(Self.tiles(version: 1))
        let changed = Self.tiles(version: 2).filter { !v1.contains($0) || Self.bytes($0, version: 1) != Self.bytes($0, version: 2) }
        #expect(report.tilesFetched == changed.count && report.tilesReused == Self.tiles(version: 2).count - changed.count)
        #expect(report.multipleRanges == true)
        // Requests: the header, the index, one per 64 changed tiles at most (and a leaf directory).
        #expect(report.requests <= 3 + changed.count / 64, "\(report.requests) requests for \(changed.count) tiles")
        #expect(server.requestCount == report.requests)
        let changedBytes = changed.reduce(0) { $0 + Self.bytes($1, version: 2).count }
        // Bytes: at most 1.15x the changed tiles and the index, besides the first request's 16 KiB and
        // the directories (a bundle's index: 36 bytes a tile; PMTiles' leaves, compressed).
        let directories = ext == "tilepack" ? 36 * (Self.tiles(version: 2).count + 1) : 8192
        #expect(
            Double(report.bytesReceived) <= 1.15 * Double(changedBytes + report.indexBytes) + Double(16384 + directories),
            "\(report.bytesReceived) bytes received for \(changedBytes) bytes of tiles and \(report.indexBytes) of index")
        // A second sync finds nothing to fetch.
        let again = try ArchiveSync.run(local: local, url: "\(server.baseURL)/v2.\(ext)")
        #expect(again.tilesFetched == 0)
    }

    /// A bundle's index is 36 bytes a tile; a sync reads its keys (8 bytes a tile) and the
    /// payload numbers and records of the changed tiles alone (Specs/updates.md §8.1).
    @Test(.needs(.nginx), arguments: [false, true])
    func aBundleSyncReadsOnlyTheIndexEntriesOfTheChangedTiles(_ oneRange: Bool) throws {
        let dir = try TemporaryDirectory("sync-entries")
        let www = try TemporaryDirectory("sync-entries-www")
        let v1 = try Self.make(version: 1, name: "v1", in: dir)
        // 64 neighbouring tiles of zoom 6 re-rendered (one column), the rest as v1.
        let edited = { (tile: TileCoordinate) in tile.zoom == 6 && tile.x == 10 }
        let v2 = try Self.make(version: 1, name: "v2", in: www) { tile, bytes in if edited(tile) { bytes[bytes.count - 1] ^= 0xFF } }
        _ = try ArchiveIndexer.run(archive: v2.bundle)
        let server = try NginxServer(root: www.url)
        defer { server.stop() }
        let report = try ArchiveSync.run(local: v1.bundle, url: "\(server.baseURL)/\(oneRange ? "onerange/" : "")v2.tilepack")
        #expect(try Self.identity(v1.bundle) == Self.identity(v2.bundle))
        let count = Self.tiles(version: 1).count
        #expect(report.tilesFetched == 64 && report.tiles == count)
        #expect(report.multipleRanges == !oneRange)
        // Besides the tiles and the hash index: the first request's 16 KiB, the zoom table and the
        // keys, and a few KiB for the 64 tiles' entries and the answers' part headers. The whole
        // index would be 36 bytes a tile.
        let overhead = report.bytesReceived - report.fetchedTileBytes - report.indexBytes
        #expect(overhead <= 16384 + 248 + 8 * count + 4096, "\(overhead) bytes besides the tiles and the index, for \(count) tiles")
        // One range a request: the tiles' payloads lie apart (in Hilbert order), one request each at most.
        #expect(report.requests <= (oneRange ? 6 + 64 : 6), "\(report.requests) requests")
        #expect(server.requestCount == report.requests)
    }

    @Test(.needs(.nginx)) func aServerAnsweringOneRangeARequestIsAskedOneAtATime() throws {
        let setup = try Setup()
        let server = try NginxServer(root: setup.www.url)
        defer { server.stop() }
        let report = try ArchiveSync.run(local: setup.v1.pmtiles, url: "\(server.baseURL)/onerange/v2.pmtiles")
        #expect(report.multipleRanges == false)
        #expect(try Self.identity(setup.v1.pmtiles) == Self.identity(setup.v2.pmtiles))
        // Learnt from the index's answer (200, not multipart): no multipart request was refused,
        // so the bytes are at most 1.5x the tiles and the index besides the head and directories.
        let v1 = Set(Self.tiles(version: 1))
        let changed = Self.tiles(version: 2).filter { !v1.contains($0) || Self.bytes($0, version: 1) != Self.bytes($0, version: 2) }
        let changedBytes = changed.reduce(0) { $0 + Self.bytes($1, version: 2).count }
        #expect(
            Double(report.bytesReceived) <= 1.5 * Double(changedBytes + report.indexBytes) + Double(16384 + 8192),
            "\(report.bytesReceived) bytes received for \(changedBytes) bytes of tiles and \(report.indexBytes) of index")
        #expect(server.requestCount == report.requests)
    }

    @Test(.needs(.nginx)) func withoutAnIndexTheArchiveIsDownloadedWholeAndSaysSo() throws {
        let setup = try Setup(indexed: false)
        let server = try NginxServer(root: setup.www.url)
        defer { server.stop() }
        let fresh = setup.dir.file("fresh.pmtiles")
        let report = try ArchiveSync.run(local: fresh, url: "\(server.baseURL)/v2.tilepack")
        #expect(report.mode == "full" && report.fullReason?.contains("no tile index") == true)
        #expect(try Self.identity(fresh).tiles == Self.identity(setup.v2.bundle).tiles)
        // The whole object once: the first request's bytes are not fetched again.
        #expect(report.bytesReceived == Self.fileBytes(setup.v2.bundle)!.count)
    }

    // MARK: Interruptions and hostile servers

    /// A file server with an ETag, single ranges only (several ranges get the whole file, 200),
    /// whose replies `fault` may change; it records the ranges it answered in full.
    final class Publisher: @unchecked Sendable {
        let files: Locked<[String: Data]>
        let etag = Locked("\"v2\"")
        let served = Locked<[Range<Int>]>([])
        /// Whether several ranges get a multipart answer (else the whole file, as `max_ranges 1`).
        let multipart = Locked(false)
        let fault: Locked<(@Sendable (LoopbackHTTPServer.Request, Range<Int>?, Data) -> LoopbackHTTPServer.Reply?)?> = Locked(nil)
        var server: LoopbackHTTPServer!

        init(files: [String: Data]) throws {
            self.files = Locked(files)
            server = try LoopbackHTTPServer { [unowned self] request in self.answer(request) }
        }

        func url(_ name: String) -> String { "\(server.baseURL)/\(name)" }

        func answer(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Reply {
            guard let data = files.withLock({ $0[String(request.path.dropFirst())] }) else { return .status(404, "not found") }
            let tag = etag.withLock { $0 }
            if let match = request.header("if-match"), match != tag { return .status(412, "changed") }
            var range: Range<Int>?
            if let field = request.header("range"), field.hasPrefix("bytes="), !field.contains(",") {
                let bounds = field.dropFirst(6).split(separator: "-").compactMap { Int($0) }
                if bounds.count == 2 { range = bounds[0]..<min(bounds[1] + 1, data.count) }
            }
            if let fault = fault.withLock({ $0 }), let reply = fault(request, range, data) { return reply }
            if multipart.withLock({ $0 }), let field = request.header("range"), field.contains(",") {
                // Several ranges: a multipart/byteranges answer, as nginx sends.
                var body = Data()
                for spec in field.dropFirst(6).split(separator: ",") {
                    let bounds = spec.split(separator: "-", omittingEmptySubsequences: false).map { Int($0) }
                    guard bounds.count == 2, let first = bounds[0] else { return .status(416) }
                    let part = first..<min((bounds[1] ?? data.count - 1) + 1, data.count)
                    served.withLock { $0.append(part) }
                    body.append(
                        Data(
                            "\r\n--\(SyncTests.boundary)\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes \(part.lowerBound)-\(part.upperBound - 1)/\(data.count)\r\n\r\n"
                                .utf8))
                    body.append(data.subdata(in: part))
                }
                body.append(Data("\r\n--\(SyncTests.boundary)--\r\n".utf8))
                return .respond(
                    status: 206, headers: ["ETag": tag, "Content-Type": "multipart/byteranges; boundary=\(SyncTests.boundary)"], body: body)
            }
            guard let range else { return .respond(status: 200, headers: ["ETag": tag], body: data) }
            served.withLock { $0.append(range) }
            return .respond(
                status: 206, headers: ["ETag": tag, "Content-Range": "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(data.count)"],
                body: data.subdata(in: range))
        }
    }

    static func noRetry() -> HTTPByteSource.Options {
        var options = HTTPByteSource.Options()
        options.retry = .none
        options.timeout = .seconds(10)
        return options
    }

    /// v1 locally, a publisher of v2's PMTiles and its index, and v1's bytes as they were.
    static func published() throws -> (Setup, Publisher, Data?) {
        let setup = try Setup()
        return (setup, try publisher(setup), fileBytes(setup.v1.pmtiles))
    }

    /// A publisher of v2's PMTiles and its index.
    static func publisher(_ setup: Setup) throws -> Publisher {
        try Publisher(files: [
            "v2.pmtiles": fileBytes(setup.v2.pmtiles)!, "v2.pmtiles.tpindex": fileBytes(setup.v2.pmtiles + ".tpindex")!,
        ])
    }

    /// LOCAL's format is its extension's, checked before any request; a remote bundle of raw
    /// pixels syncs into a bundle as it is (raw), and is refused for MBTiles or PMTiles, which
    /// cannot hold raw pixels, before any tile is fetched.
    @Test func aLocalOfNoArchiveExtensionOrOfAFormatThatCannotHoldTheTilesIsRefusedBeforeFetching() throws {
        let dir = try TemporaryDirectory("sync-raw")
        let layout = RawBitmapLayout(pixelFormat: .rgba8888, width: 16, height: 16)
        let raw = dir.file("raw.tilepack")
        let writer = try BundleWriter(destination: raw, content: .rawBitmap(layout), metadata: TileMetadata(["name": "raw"]))
        for x in 0..<4 {
            let pixels = [UInt8](repeating: UInt8(60 * x), count: layout.byteCount!)
            try pixels.withUnsafeBytes { try writer.addTile(at: TileCoordinate(uncheckedZoom: 2, x: x, y: 1), bytes: $0) }
        }
        _ = try writer.finish()
        let publisher = try Publisher(files: ["raw.tilepack": Self.fileBytes(raw)!])
        defer { publisher.server.stop() }
        let requests = Locked(0)
        publisher.fault.withLock {
            $0 = { _, _, _ in
                requests.withLock { $0 += 1 }
                return nil
            }
        }
        let url = publisher.url("raw.tilepack")
        do {
            _ = try ArchiveSync.run(local: dir.file("copy.zip"), url: url, options: Self.noRetry())
            Issue.record("synced into a .zip")
        } catch {
            #expect(error.path == dir.file("copy.zip") && error.description.contains(".tilepack"), "\(error)")
        }
        #expect(requests.withLock { $0 } == 0)
        for ext in ["mbtiles", "pmtiles"] {
            let local = dir.file("copy.\(ext)")
            do {
                _ = try ArchiveSync.run(local: local, url: url, options: Self.noRetry())
                Issue.record("raw pixels synced into \(ext)")
            } catch {
                #expect(error.path == local && error.description.contains("raw") && error.description.contains(url), "\(error)")
            }
            #expect(!FileManager.default.fileExists(atPath: local) && !FileManager.default.fileExists(atPath: local + ".tpsync"))
        }
        // No index: downloaded whole, into a bundle of the same raw pixels.
        let local = dir.file("copy.tilepack")
        let report = try ArchiveSync.run(local: local, url: url, options: Self.noRetry())
        #expect(report.mode == "full" && report.tiles == 4, "\(report)")
        let synced = try openTileArchive(path: local)
        #expect(synced.content == .rawBitmap(layout))
        #expect(try ContentIdentity.compute(synced).tiles == Self.identity(raw).tiles)
    }

    @Test func aMultipartAnswerWhoseTilesHoldItsBoundaryIsReadByItsContentRanges() throws {
        let setup = try Setup()
        let publisher = try Self.publisher(setup)
        defer { publisher.server.stop() }
        publisher.multipart.withLock { $0 = true }
        let report = try ArchiveSync.run(local: setup.v1.pmtiles, url: publisher.url("v2.pmtiles"), options: Self.noRetry())
        #expect(report.multipleRanges == true)
        #expect(try Self.identity(setup.v1.pmtiles) == Self.identity(setup.v2.pmtiles))
        // Few requests: the header, the index, the directories and the tiles' few batches.
        #expect(report.requests <= 6, "\(report.requests)")
    }

    @Test func anInterruptedSyncResumesWithoutFetchingAByteTwice() throws {
        let (setup, publisher, before) = try Self.published()
        defer { publisher.server.stop() }
        // The connection drops after five tile ranges.
        let answered = Locked(0)
        publisher.fault.withLock {
            $0 = { request, range, _ in
                guard let range, range.lowerBound > 0 else { return nil }
                return answered.withLock { n in
                    n += 1
                    return n > 5 ? .close : nil
                }
            }
        }
        #expect(throws: OperationError.self) {
            try ArchiveSync.run(local: setup.v1.pmtiles, url: publisher.url("v2.pmtiles"), options: Self.noRetry())
        }
        #expect(Self.fileBytes(setup.v1.pmtiles) == before)
        #expect(FileManager.default.fileExists(atPath: setup.v1.pmtiles + ".tpsync"))
        let first = publisher.served.withLock { $0 }.filter { $0.lowerBound > 0 }
        #expect(first.count == 5)
        publisher.served.withLock { $0 = [] }
        publisher.fault.withLock { $0 = nil }
        let report = try ArchiveSync.run(local: setup.v1.pmtiles, url: publisher.url("v2.pmtiles"), options: Self.noRetry())
        #expect(report.resumedBytes > 0)
        #expect(try Self.identity(setup.v1.pmtiles) == Self.identity(setup.v2.pmtiles))
        let second = publisher.served.withLock { $0 }.filter { $0.lowerBound > 0 }
        let twice = second.filter { range in first.contains { $0.overlaps(range) } }
        #expect(twice.isEmpty, "fetched again: \(twice)")
        #expect(!FileManager.default.fileExists(atPath: setup.v1.pmtiles + ".tpsync"))
    }

    @Test func aBackgroundSyncReportsProgressAndCancelsLeavingLOCALResumable() throws {
        let (setup, publisher, before) = try Self.published()
        defer { publisher.server.stop() }
        // Slow tile ranges (one range a request: the publisher answers no more), so there is time to cancel.
        publisher.fault.withLock {
            $0 = { _, range, data in
                guard let range, range.lowerBound > 16384 else { return nil }
                return .delayed(
                    .milliseconds(40),
                    .respond(
                        status: 206,
                        headers: ["ETag": "\"v2\"", "Content-Range": "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(data.count)"],
                        body: data.subdata(in: range)))
            }
        }
        let seen = Locked<[Double]>([])
        let first = SyncRequest.start(local: setup.v1.pmtiles, url: publisher.url("v2.pmtiles"), options: Self.noRetry()) { request in
            seen.withLock { $0.append(request.progress) }
        }
        let deadline = Date().addingTimeInterval(60)
        while first.progress < 0.2, first.status == .inProgress, Date() < deadline { usleep(10_000) }
        first.cancel()
        #expect(first.wait() == .cancelled, "\(String(describing: first.error))")
        #expect(first.error?.description.contains("cancelled") == true)
        #expect(Self.fileBytes(setup.v1.pmtiles) == before)
        #expect(FileManager.default.fileExists(atPath: setup.v1.pmtiles + ".tpsync"))
        // Again, to the end: it resumes, progress never goes back and ends at 1.
        publisher.fault.withLock { $0 = nil }
        seen.withLock { $0 = [] }
        let second = SyncRequest.start(local: setup.v1.pmtiles, url: publisher.url("v2.pmtiles"), options: Self.noRetry()) { request in
            seen.withLock { $0.append(request.progress) }
        }
        #expect(second.wait() == .success, "\(String(describing: second.error))")
        #expect(second.id != first.id && second.progress == 1 && (second.report?.resumedBytes ?? 0) > 0)
        let values = seen.withLock { $0 }
        #expect(values.count > 2 && zip(values, values.dropFirst()).allSatisfy { $0 <= $1 } && values.last == 1, "\(values)")
        #expect(try Self.identity(setup.v1.pmtiles) == Self.identity(setup.v2.pmtiles))
    }

    @Test func aPublisherReplacingTheObjectMidSyncIsNamed() throws {
        let (setup, publisher, before) = try Self.published()
        defer { publisher.server.stop() }
        // Replaced after the index was read: the tile requests' If-Match fails.
        publisher.fault.withLock {
            $0 = { [publisher] request, range, _ in
                if request.path.hasSuffix(".tpindex") { publisher.etag.withLock { $0 = "\"v3\"" } }
                return nil
            }
        }
        do {
            _ = try ArchiveSync.run(local: setup.v1.pmtiles, url: publisher.url("v2.pmtiles"), options: Self.noRetry())
            Issue.record("a replaced object was synced")
        } catch {
            #expect(error.description.contains(publisher.url("v2.pmtiles")) && error.description.contains("changed"), "\(error)")
        }
        #expect(Self.fileBytes(setup.v1.pmtiles) == before)
    }

    @Test func hostileServersGetTypedErrorsAndLOCALStaysAsItWas() throws {
        let (setup, publisher, before) = try Self.published()
        defer { publisher.server.stop() }
        let url = publisher.url("v2.pmtiles")
        let pmtilesLength = Self.fileBytes(setup.v2.pmtiles)!.count
        typealias Fault = @Sendable (LoopbackHTTPServer.Request, Range<Int>?, Data) -> LoopbackHTTPServer.Reply?
        let cases: [(String, Fault, String)] = [
            (
                "a 200 error page for the index",
                { request, _, _ in
                    request.path.hasSuffix(".tpindex") ? .respond(status: 200, headers: [:], body: Data("<html>Welcome</html>".utf8)) : nil
                }, "not a tilepack tile index"
            ),
            (
                "a lie: a tile's bytes changed in flight",
                { _, range, data in
                    guard let range, range.lowerBound > 16384 else { return nil }
                    var body = data.subdata(in: range)
                    body[body.count / 2] ^= 0xFF
                    return .respond(
                        status: 206,
                        headers: ["ETag": "\"v2\"", "Content-Range": "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(data.count)"],
                        body: body)
                }, "not what the index says"
            ),
            (
                "a truncated body",
                { _, range, data in
                    guard let range, range.lowerBound > 16384 else { return nil }
                    return .truncated(
                        status: 206,
                        headers: ["ETag": "\"v2\"", "Content-Range": "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(data.count)"],
                        body: data.subdata(in: range), sent: range.count / 2)
                }, url
            ),
            (
                "an index of another version",
                { request, _, _ in
                    guard request.path.hasSuffix(".tpindex") else { return nil }
                    var index = try! TileHashIndex.decode(Array(SyncTests.fileBytes(setup.v2.pmtiles + ".tpindex")!), name: "")
                    index.archiveLength = UInt64(pmtilesLength + 10)
                    return .respond(status: 200, headers: [:], body: Data(index.encoded()))
                }, "is not the index of"
            ),
        ]
        for (what, fault, expected) in cases {
            publisher.fault.withLock { $0 = fault }
            do {
                _ = try ArchiveSync.run(local: setup.v1.pmtiles, url: url, options: Self.noRetry())
                Issue.record("\(what): synced")
            } catch {
                #expect(error.description.contains(expected), "\(what): \(error)")
            }
            #expect(Self.fileBytes(setup.v1.pmtiles) == before, "\(what)")
            try? FileManager.default.removeItem(atPath: setup.v1.pmtiles + ".tpsync")
        }
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

/// `sync` from `s3://BUCKET/KEY` (moto's S3 on loopback, authentication enforced): the object
/// and its index read by signed requests, only the changed tiles fetched; without an index, a
/// full download said so; credentials that are refused, an error naming the object.
@Suite(.needs(.motoServer))
struct S3SyncTests {
    /// The tiles v2 adds or re-renders.
    static let changed: [TileCoordinate] = {
        let v1 = Set(SyncTests.tiles(version: 1))
        return SyncTests.tiles(version: 2).filter { !v1.contains($0) || SyncTests.bytes($0, version: 1) != SyncTests.bytes($0, version: 2) }
    }()

    /// Puts v2 (bundle and PMTiles, each with its index) under a new prefix of the bucket `tiles`; the prefix.
    static func publish(_ setup: SyncTests.Setup, with s3: S3Client) async throws -> String {
        let prefix = "sync/\(UUID().uuidString)"
        for name in ["v2.tilepack", "v2.tilepack.tpindex", "v2.pmtiles", "v2.pmtiles.tpindex"] {
            _ = try await s3.put(
                Data(contentsOf: setup.www.url.appendingPathComponent(name)), at: S3Location(bucket: "tiles", key: "\(prefix)/\(name)"))
        }
        return prefix
    }

    /// An app's own credentials provider (not the environment's chain): counts the requests it
    /// signs, and holds each for `delay` (a slow store, for a cancel mid-sync).
    final class AppCredentials: S3CredentialsProvider {
        let value: S3Credentials
        let delay: Duration
        let calls = Locked(0)
        init(_ keys: MotoS3.Keys, delay: Duration = .zero) {
            value = S3Credentials(accessKeyId: keys.accessKeyId, secretAccessKey: keys.secretAccessKey)
            self.delay = delay
        }
        func credentials() async throws(S3Error) -> S3Credentials {
            calls.withLock { $0 += 1 }
            if delay > .zero { try? await Task.sleep(for: delay) }
            return value
        }
    }

    /// The app's client: moto's endpoint, the app's credentials.
    static func appClient(_ moto: MotoS3, _ credentials: AppCredentials) -> S3Client {
        S3Client(
            configuration: S3Configuration(endpoint: URL(string: moto.endpoint), credentials: credentials),
            retry: RetryPolicy(maximumAttempts: 2))
    }

    /// Issue 30, item 6: an app syncs through TilepackRemote's library API from S3 with its own
    /// credentials provider, into a local copy of another format (MBTiles), in the background.
    @Test func aSyncRequestFromS3SignsWithTheAppsCredentialsAndBringsItsCopyToTheNewVersion() async throws {
        let moto = try await MotoS3.shared()
        let setup = try SyncTests.Setup()
        let credentials = AppCredentials(moto.keys)
        let s3 = Self.appClient(moto, credentials)
        let prefix = try await Self.publish(setup, with: s3)
        let uploads = credentials.calls.withLock { $0 }
        // The app's copy of v1 is an MBTiles file.
        let local = setup.dir.file("app.mbtiles")
        _ = try ArchiveConverter.run(source: setup.v1.bundle, destination: local, options: ConvertOptions())
        let seen = Locked<[Double]>([])
        let request = SyncRequest.start(local: local, url: "s3://tiles/\(prefix)/v2.tilepack", s3: s3) { request in
            seen.withLock { $0.append(request.progress) }
        }
        #expect(await request.finished() == .success, "\(String(describing: request.error))")
        let report = try #require(request.report)
        #expect(report.mode == "index" && report.tilesFetched == Self.changed.count, "\(report)")
        #expect(report.tilesReused == SyncTests.tiles(version: 2).count - Self.changed.count, "\(report)")
        // Every request of the sync was signed with the app's credentials.
        #expect(credentials.calls.withLock { $0 } - uploads >= report.requests, "\(report.requests) requests")
        let values = seen.withLock { $0 }
        #expect(values.count > 2 && zip(values, values.dropFirst()).allSatisfy { $0 <= $1 } && values.last == 1, "\(values)")
        #expect(request.progress == 1 && request.status == .success && request.error == nil)
        // Still an MBTiles file, with v2's tiles.
        let synced = try openTileArchive(path: local)
        #expect(synced is MBTilesArchive)
        let identity = try ContentIdentity.compute(synced), published = try SyncTests.identity(setup.v2.bundle)
        #expect(identity.tileCount == published.tileCount && identity.tiles == published.tiles)
        #expect(!FileManager.default.fileExists(atPath: local + ".tpsync"))
    }

    /// A cancel while the tiles come in (each request held 25 ms by the app's credentials):
    /// cancelled, the local archive as it was byte for byte, what was fetched kept to resume from.
    @Test func cancellingASyncRequestMidSyncLeavesTheLocalArchiveAsItWas() async throws {
        let moto = try await MotoS3.shared()
        let setup = try SyncTests.Setup()
        let credentials = AppCredentials(moto.keys, delay: .milliseconds(25))
        let s3 = Self.appClient(moto, credentials)
        let prefix = try await Self.publish(setup, with: s3)
        let local = setup.v1.pmtiles
        let before = try #require(SyncTests.fileBytes(local))
        let request = SyncRequest.start(local: local, url: "s3://tiles/\(prefix)/v2.pmtiles", s3: s3)
        let deadline = Date().addingTimeInterval(TestSupport.settleSeconds)
        while request.progress < 0.2, request.status == .inProgress, Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(request.status == .inProgress && request.progress >= 0.2, "not cancelled mid-sync: \(request.progress)")
        request.cancel()
        #expect(await request.finished() == .cancelled, "\(String(describing: request.error))")
        #expect(request.status == .cancelled && request.isCancelled && request.report == nil && request.progress < 1)
        let message = request.error?.description ?? ""
        #expect(message.contains("the sync was cancelled") && message.contains(local), "\(message)")
        #expect(SyncTests.fileBytes(local) == before)
        let left = try FileManager.default.contentsOfDirectory(atPath: setup.dir.url.path).filter {
            $0.hasPrefix("v1.") || $0.hasPrefix(".v1.")
        }
        #expect(left.sorted() == ["v1.pmtiles", "v1.pmtiles.tpsync", "v1.tilepack"], "\(left)")
    }

    @Test func syncFromAnS3ObjectFetchesOnlyTheChangedTilesBySignedRequests() async throws {
        let moto = try await MotoS3.shared()
        func client(_ id: String, _ secret: String) -> S3Client {
            S3Client(
                configuration: S3Configuration(
                    endpoint: URL(string: moto.endpoint),
                    credentials: StaticS3Credentials(S3Credentials(accessKeyId: id, secretAccessKey: secret))),
                retry: RetryPolicy(maximumAttempts: 2))
        }
        let s3 = client(moto.keys.accessKeyId, moto.keys.secretAccessKey)
        let setup = try SyncTests.Setup()
        let prefix = try await Self.publish(setup, with: s3)
        let changed = Self.changed
        for ext in ["tilepack", "pmtiles"] {
            let local = ext == "tilepack" ? setup.v1.bundle : setup.v1.pmtiles
            let published = ext == "tilepack" ? setup.v2.bundle : setup.v2.pmtiles
            let url = "s3://tiles/\(prefix)/v2.\(ext)"
            let report = try await onThread { try ArchiveSync.run(local: local, url: url, s3: s3) }
            #expect(report.mode == "index" && report.tilesFetched == changed.count, "\(report)")
            #expect(try SyncTests.identity(local) == SyncTests.identity(published))
            // The changed tiles are about an eighth of the bytes: far from a download of the whole.
            let size = SyncTests.fileBytes(published)!.count
            #expect(report.bytesReceived < size / 2, "\(report.bytesReceived) bytes received of an archive of \(size)")
        }
        // No index beside the bundle: downloaded whole, said so, naming the index's key.
        let fresh = setup.dir.file("fresh.tilepack")
        _ = try await s3.put(
            Data(contentsOf: URL(fileURLWithPath: setup.v2.bundle)), at: S3Location(bucket: "tiles", key: "\(prefix)/bare.tilepack"))
        let full = try await onThread { try ArchiveSync.run(local: fresh, url: "s3://tiles/\(prefix)/bare.tilepack", s3: s3) }
        #expect(full.mode == "full" && full.fullReason?.contains("s3://tiles/\(prefix)/bare.tilepack.tpindex") == true, "\(full)")
        #expect(try SyncTests.identity(fresh) == SyncTests.identity(setup.v2.bundle))
        // Credentials S3 refuses: an error naming the object, LOCAL as it was.
        let before = SyncTests.fileBytes(setup.v1.bundle)
        let denied = client(moto.keys.deniedAccessKeyId, moto.keys.deniedSecretAccessKey)
        let message = try await onThread { () -> String in
            do {
                _ = try ArchiveSync.run(local: setup.v1.bundle, url: "s3://tiles/\(prefix)/v2.tilepack", s3: denied)
                return "no error"
            } catch { return "\(error)" }
        }
        #expect(message.contains("s3://tiles/\(prefix)/v2.tilepack") && message.contains("AccessDenied"), "\(message)")
        #expect(SyncTests.fileBytes(setup.v1.bundle) == before)
    }
}
