import Foundation
import Testing
import TilepackCore
import TilepackPlan
import TilepackStorage
import TilepackTestSupport

@testable import TilepackOperations

/// `extract --budget` carries out the plan: the planned tile bytes are the extract's tile bytes
/// exactly, the output's size is predicted within 1% or 64 KiB, and never exceeds the budget
/// (issue 46's first goal), in every output format and from every source format.
@Suite(.serialized) struct PlanExtractTests {
    /// Zooms 0-6 of the world, 5,461 tiles of 100 B - 6 kB (larger in the north-west), some ocean
    /// tiles sharing one payload.
    static func source(in dir: TemporaryDirectory) throws -> String {
        let path = dir.file("source.mbtiles")
        let writer = try MBTilesWriter(creating: path, metadata: TileMetadata(["name": "plan", "format": "png"]))
        let ocean = [UInt8]([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] + [UInt8](repeating: 7, count: 92))
        for zoom in 0...6 {
            let n = 1 << zoom
            for x in 0..<n {
                for y in 0..<n {
                    if zoom >= 3, (x + y) % 7 == 0 {
                        try writer.write(ocean, at: TileCoordinate(uncheckedZoom: zoom, x: x, y: y))
                        continue
                    }
                    let length = 100 + (n - x) * (n - y) * 6_000 / (n * n) + (x * 31 + y * 17) % 500
                    // Incompressible, as image tiles are (a bundle stores them as they are).
                    var state = UInt64(zoom << 40 | x << 20 | y) &+ 0x9E37_79B9_7F4A_7C15
                    let noise = (0..<length).map { _ -> UInt8 in
                        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                        return UInt8(truncatingIfNeeded: state >> 56)
                    }
                    let bytes = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] + noise
                    try writer.write(bytes, at: TileCoordinate(uncheckedZoom: zoom, x: x, y: y))
                }
            }
        }
        try writer.finish()
        return path
    }

    @Test(arguments: ["mbtiles", "tilepack", "pmtiles"])
    func theExtractWritesThePlannedBytesAndThePredictedSize(_ sourceExtension: String) throws {
        let dir = try TemporaryDirectory()
        var source = try Self.source(in: dir)
        if sourceExtension != "mbtiles" {
            let converted = dir.file("source.\(sourceExtension)")
            _ = try ArchiveConverter.run(source: source, destination: converted, options: ConvertOptions())
            source = converted
        }
        let box = GeoBoundingBox(west: -170, south: -80, east: 170, north: 80)
        for output in ["mbtiles", "tilepack", "pmtiles"] {
            for budget in [900_000, 4_000_000] {
                let format = try #require(PlanOutputFormat(path: "out.\(output)"))
                let plan = try ArchivePlanning.plan(
                    source: source, request: PlanRequest(area: .boundingBox(box), budget: budget, format: format))
                var options = ExtractOptions()
                options.bounds = box
                options.plan = plan
                options.writing.overwrite = true
                let destination = dir.file("out-\(budget).\(output)")
                let report = try TileExtractor.run(source: source, destination: destination, options: options)
                let size = Int(try #require(FileSystem.lstat(destination)).st_size)
                let what = "\(sourceExtension) -> \(output), budget \(budget): predicted \(plan.predictedSize), wrote \(size)"
                #expect(report.tiles == plan.tiles, "\(what)")
                #expect(report.bytes == plan.tileBytes, "\(what)")
                #expect(size <= budget, "\(what)")
                // A flat MBTiles does not say which tiles share bytes: a deduplicating output's
                // prediction is then an upper bound (Specs/plan.md §3).
                if sourceExtension == "mbtiles" && output != "mbtiles" {
                    #expect(size <= plan.predictedSize, "\(what)")
                } else {
                    #expect(abs(size - plan.predictedSize) <= max(plan.predictedSize / 100, 64 * 1024), "\(what)")
                }
                #expect(plan.completeZoom ?? -1 >= 3, "\(what)")
            }
        }
    }
}
