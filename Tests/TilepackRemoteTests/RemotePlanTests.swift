import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackPlan
import TilepackTestSupport

@_spi(TilepackInternal) @testable import TilepackStorage

/// Issue 46: a plan from a remote archive reads its index alone. A PMTiles archive: the header and
/// root, then only the leaf directories whose tiles meet the area, and no tile; a bundle: its
/// first request (header, metadata, index), no tile. The plan is the local file's.
@Suite(.serialized) struct RemotePlanTests {
    /// Zooms 0-8 of the world, 87,381 tiles, a third of them repeats: leaf directories.
    static func world(in dir: TemporaryDirectory) throws -> String {
        let path = dir.file("world.pmtiles")
        let writer = try PMTilesWriter(destination: path, metadata: TileMetadata(["name": "world", "format": "png"]))
        var random = SplitMix64(seed: 46)
        var earlier: [[UInt8]] = []
        for zoom in 0...8 {
            for x in 0..<(1 << zoom) {
                for y in 0..<(1 << zoom) {
                    // A third repeat an earlier tile: offsets jump back, so the directories need leaves.
                    let bytes =
                        !earlier.isEmpty && random.next() % 3 == 0
                        ? earlier[Int(random.next() % UInt64(earlier.count))]
                        : HostilePMTiles.pngBytes + withUnsafeBytes(of: random.next()) { Array($0) }
                    earlier.append(bytes)
                    try writer.addTile(at: TileCoordinate(uncheckedZoom: zoom, x: x, y: y), bytes: bytes)
                }
            }
        }
        try writer.finish()
        return path
    }

    static let box = GeoBoundingBox(west: 16, south: 48, east: 17.5, north: 48.6)

    /// The bytes each request asked for (its `Range` header), and none for a request without one.
    static func ranges(_ server: LoopbackHTTPServer) -> [Range<Int>] {
        server.requests.compactMap { request in
            guard let field = request.header("range"), field.hasPrefix("bytes=") else { return nil }
            let ends = field.dropFirst(6).split(separator: "-").compactMap { Int($0) }
            return ends.count == 2 ? ends[0]..<(ends[1] + 1) : nil
        }
    }

    @Test func aRemotePMTilesPlanReadsOnlyTheLeavesWhoseTilesMeetTheArea() throws {
        let dir = try TemporaryDirectory("plan")
        let path = try Self.world(in: dir)
        let local = try PMTilesArchive(path: path)
        let leaves = (0..<local.root.count).map { local.root[$0] }.filter { $0.runLength == 0 }
        try #require(leaves.count >= 16, "\(leaves.count) leaves")
        // The leaves that hold a tile of the area, found from the tiles' ids.
        var wanted = Set<Int>()
        for zoom in 0...8 {
            for range in try Self.box.tileRanges(atZoom: zoom) {
                for tile in range {
                    let id = PMTilesFormat.tileID(of: tile)
                    wanted.insert(try #require(leaves.lastIndex { $0.tileID <= id }))
                }
            }
        }
        #expect(wanted.count * 4 < leaves.count, "the area meets \(wanted.count) of \(leaves.count) leaves")

        let server = try LoopbackHTTPServer(files: dir.url)
        defer { server.stop() }
        let request = PlanRequest(area: .boundingBox(Self.box), budget: 200_000, format: .pmtiles)
        let remote = try ArchivePlanning.plan(source: "\(server.baseURL)/world.pmtiles", request: request)
        let leafStart = Int(local.header.leafOffset), dataStart = Int(local.header.tileDataOffset)
        // The leaves each request's bytes overlap; the first request (the header, the root and
        // whatever else lies in its 16 KiB) costs nothing more for the leaves it holds.
        var fetched: [Set<Int>] = []
        for range in Self.ranges(server) {
            #expect(range.upperBound <= dataStart, "a request for tile data: \(range)")
            fetched.append(
                Set(leaves.indices.filter { i in
                    let start = leafStart + Int(leaves[i].offset)
                    return (start..<(start + Int(leaves[i].length))).overlaps(range)
                }))
        }
        let first = fetched.first ?? [], asked = fetched.dropFirst().reduce(Set<Int>()) { $0.union($1) }
        #expect(asked.subtracting(first) == wanted.subtracting(first), "asked for leaves \(asked.sorted()), the area's \(wanted.sorted())")
        // The header and root, perhaps the metadata, and each leaf once.
        #expect(server.requestCount <= 2 + wanted.count, "\(server.requestCount) requests")

        let plan = try ArchivePlanning.plan(source: path, request: request)
        #expect(remote.tiles == plan.tiles && remote.tileBytes == plan.tileBytes && remote.predictedSize == plan.predictedSize)
        #expect(plan.completeZoom == 8, "\(plan.tiles) tiles to zoom \(plan.completeZoom ?? -1)")
    }

    @Test func aRemoteBundlePlanReadsTheIndexAndNoTile() throws {
        let dir = try TemporaryDirectory("plan")
        let pmtiles = try Self.world(in: dir)
        let path = dir.file("world.tilepack")
        _ = try ArchiveConverter.run(source: pmtiles, destination: path, options: ConvertOptions())
        let server = try LoopbackHTTPServer(files: dir.url)
        defer { server.stop() }
        let request = PlanRequest(area: .boundingBox(Self.box), budget: 200_000, format: .mbtiles)
        let remote = try ArchivePlanning.plan(source: "\(server.baseURL)/world.tilepack", request: request)
        let file = try Data(contentsOf: URL(fileURLWithPath: path))
        let dataStart = file.prefix(BundleFormat.headerLength).withUnsafeBytes { BundleArchive.residentLength(head: $0, size: file.count) }
        #expect(dataStart > BundleFormat.headerLength)
        #expect(Self.ranges(server).allSatisfy { $0.upperBound <= dataStart }, "\(Self.ranges(server))")
        #expect(server.requestCount <= 2, "\(server.requestCount) requests")
        let plan = try ArchivePlanning.plan(source: path, request: request)
        #expect(remote.tiles == plan.tiles && remote.tileBytes == plan.tileBytes && remote.predictedSize == plan.predictedSize)
    }
}
