// bench-adapter: bitmaps per second the adapter delivers into tile request buffers (256 x 256 RGBA)
// from MBTiles/PNG, bundle/PNG and bundle/raw LZ4, next to the floors measured in the same run:
// a plain C libpng decode loop over the same PNGs, and memcpy of 256 KiB.
//
//   swift run -c release --package-path tools bench-adapter [--rounds N] [--fixture path.mbtiles]
//
// The tiles are the 2621 real TileMill PNG tiles of node-mbtiles/plain_3.mbtiles (shared fixtures),
// copied into archives written by tilepack's own writers in a temporary folder.
import BenchSupport
import CImagingFloor
import Foundation
import TileLayer
import TilepackAdapter
import TilepackCore
import TilepackImaging
import TilepackStorage

let tileSize = 256
let tileBytes = tileSize * tileSize * 4

/// A page-aligned 256 KiB request buffer per thread, written by every read.
final class Buffers: @unchecked Sendable {
    let buffers: [UnsafeMutableRawBufferPointer]
    init(_ count: Int) {
        buffers = (0..<count).map { _ in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: tileBytes, alignment: 4096)
            buffer.initializeMemory(as: UInt8.self, repeating: 0)
            return buffer
        }
    }
}

// The PNG bytes for the C floor, held the way SQLite or a memory map holds them: in memory.
final class PNGSet: @unchecked Sendable {
    let pointers: [UnsafePointer<UInt8>?]
    let lengths: [Int]
    init(_ pngs: [[UInt8]]) {
        pointers = pngs.map { png in
            let copy = UnsafeMutablePointer<UInt8>.allocate(capacity: png.count)
            copy.initialize(from: png, count: png.count)
            return UnsafePointer(copy)
        }
        lengths = pngs.map(\.count)
    }
}

// memcpy from a 64 MiB pool of distinct 256 KiB source tiles: beyond the CPU caches, as the
// tiles of a mapped bundle are.
final class SourcePool: @unchecked Sendable {
    let sources: [UnsafeMutablePointer<UInt8>?]
    init(count: Int) {
        sources = (0..<count).map { i in
            let source = UnsafeMutablePointer<UInt8>.allocate(capacity: tileBytes)
            source.initialize(repeating: UInt8(truncatingIfNeeded: i), count: tileBytes)
            return source
        }
    }
}

@main
enum BenchAdapter {
    static func main() throws {

        // MARK: Arguments

        var rounds = 5
        var fixture: String = {
            if let env = ProcessInfo.processInfo.environment["TILEPACK_FIXTURES"] { return env + "/node-mbtiles/plain_3.mbtiles" }
            // tools/Sources/bench-adapter/BenchAdapter.swift -> the project root -> Tests/Fixtures
            var url = URL(fileURLWithPath: #filePath)
            for _ in 0..<4 { url.deleteLastPathComponent() }
            return url.appendingPathComponent("Tests/Fixtures/node-mbtiles/plain_3.mbtiles").path
        }()
        var arguments = CommandLine.arguments.dropFirst()
        while let argument = arguments.popFirst() {
            switch argument {
            case "--rounds": rounds = arguments.popFirst().flatMap(Int.init) ?? rounds
            case "--fixture": fixture = arguments.popFirst() ?? fixture
            default:
                FileHandle.standardError.write(Data("usage: bench-adapter [--rounds N] [--fixture path.mbtiles]\n".utf8))
                exit(2)
            }
        }

        // MARK: The corpus and the archives

        let source = try MBTilesArchive(path: fixture)
        var corpus: [(tile: TileCoordinate, png: [UInt8])] = []
        try source.forEachTile { tile, bytes in
            if let info = try? ImageDecoder.imageInfo(bytes), info.format == .png, info.width == tileSize, info.height == tileSize {
                corpus.append((tile, [UInt8](bytes)))
            }
        }
        guard !corpus.isEmpty else { fatalError("no 256 px PNG tiles in \(fixture)") }

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bench-adapter-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let mbtilesPath = folder.appendingPathComponent("png.mbtiles").path
        let bundlePNGPath = folder.appendingPathComponent("png.tilepack").path
        let bundleRawPath = folder.appendingPathComponent("raw.tilepack").path

        do {
            let mbtiles = try MBTilesWriter(creating: mbtilesPath, metadata: TileMetadata(["name": "bench", "format": "png"]))
            let png = try BundleWriter(
                destination: bundlePNGPath, content: .encoded(.png), metadata: TileMetadata(["name": "bench", "format": "png"]))
            let raw = try BundleWriter(
                destination: bundleRawPath,
                content: .rawBitmap(RawBitmapLayout(pixelFormat: .rgba8888, width: tileSize, height: tileSize)),
                metadata: TileMetadata(["name": "bench"]))
            for (tile, bytes) in corpus {
                try mbtiles.write(bytes, at: tile)
                try png.addTile(at: tile, data: Data(bytes))
                let bitmap = try ImageDecoder.decode(Data(bytes), pixelFormat: .rgba8888)
                try raw.addTile(at: tile, data: Data(bitmap.pixels))
            }
            _ = try mbtiles.finish()
            _ = try png.finish()
            let summary = try raw.finish()
            let fileSize = (try? FileManager.default.attributesOfItem(atPath: bundleRawPath)[.size] as? Int) ?? 0
            print(
                "corpus: \(corpus.count) PNG tiles of \(fixture.split(separator: "/").suffix(2).joined(separator: "/")) "
                    + "(\(corpus.reduce(0) { $0 + $1.png.count } / corpus.count) bytes on average); raw bundle: "
                    + "\(summary.payloadCount) payloads, \(summary.lz4PayloadCount) LZ4, \(fileSize >> 20) MiB")
        }

        // MARK: Measuring

        /// One round of `work(thread, count)` on `threads` threads at once, each doing `perThread`
        /// bitmaps: how many bitmaps a round delivers and a closure that runs a round and returns its seconds.
        func round(threads: Int, perThread: Int, _ work: @escaping @Sendable (Int, Int) -> Void) -> (bitmaps: Int, run: () -> Double) {
            (
                threads * perThread,
                {
                    let start = now()
                    if threads == 1 {
                        work(0, perThread)
                    } else {
                        let group = DispatchGroup()
                        for thread in 0..<threads {
                            group.enter()
                            Thread.detachNewThread {
                                work(thread, perThread)
                                group.leave()
                            }
                        }
                        group.wait()
                    }
                    return now() - start
                }
            )
        }

        /// Runs the rounds interleaved (every figure and its floors back to back in each round, so that
        /// a change of load on a shared machine hits all of them) and returns bitmaps/s of the median round.
        func interleaved(_ jobs: [(bitmaps: Int, run: () -> Double)]) -> [Double] {
            var times = Array(repeating: [Double](), count: jobs.count)
            for _ in 0..<max(1, rounds) {
                for (index, job) in jobs.enumerated() { times[index].append(job.run()) }
            }
            var rates: [Double] = []
            for index in 0..<jobs.count {
                let sorted = times[index].sorted()
                rates.append(Double(jobs[index].bitmaps) / sorted[sorted.count / 2])
            }
            return rates
        }

        let tiles = corpus.map(\.tile)
        let perThread = tiles.count  // every thread walks the whole corpus (thread t starts at an offset)
        let buffers = Buffers(2)

        func adapterRate(_ path: String, threads: Int, checksums: Bool = true) throws -> (bitmaps: Int, run: () -> Double) {
            // No decoded-tile cache: every read decodes. Bundles verify payload CRCs unless told not to.
            let archive: any TileArchive =
                checksums
                ? try openTileArchive(path: path)
                : try BundleArchive(path: path, options: BundleArchive.Options(verifiesPayloadChecksums: false))
            let reader = ArchiveTileReader(archive: archive)
            // Warm the file cache and the reader.
            for tile in tiles { _ = try reader.read(tile, tileSize: tileSize, pixelFormat: .rgba8888, into: buffers.buffers[0]) }
            return round(threads: threads, perThread: perThread) { thread, count in
                let buffer = buffers.buffers[thread]
                var index = thread * tiles.count / 2
                for _ in 0..<count {
                    do {
                        let outcome = try reader.read(tiles[index], tileSize: tileSize, pixelFormat: .rgba8888, into: buffer)
                        precondition(outcome == .delivered)
                    } catch {
                        fatalError("\(error)")
                    }
                    index = (index + 1) % tiles.count
                }
            }
        }

        let pngSet = PNGSet(corpus.map(\.png))

        func libpngRate(threads: Int) -> (bitmaps: Int, run: () -> Double) {
            round(threads: threads, perThread: perThread) { thread, count in
                let done = pngSet.pointers.withUnsafeBufferPointer { pointers in
                    pngSet.lengths.withUnsafeBufferPointer { lengths in
                        tilepack_floor_png_decode(
                            pointers.baseAddress, lengths.baseAddress, pointers.count,
                            thread * pointers.count / 2, 1, count,
                            buffers.buffers[thread].baseAddress?.assumingMemoryBound(to: UInt8.self), tileBytes)
                    }
                }
                precondition(done == count, "libpng failed")
            }
        }

        let pool = SourcePool(count: 256)

        func memcpyRate(threads: Int) -> (bitmaps: Int, run: () -> Double) {
            round(threads: threads, perThread: perThread * 4) { thread, count in
                _ = pool.sources.withUnsafeBufferPointer { sources in
                    tilepack_floor_memcpy(
                        sources.baseAddress, sources.count, thread * 128, 1, count,
                        buffers.buffers[thread].baseAddress?.assumingMemoryBound(to: UInt8.self), tileBytes)
                }
            }
        }

        // MARK: The report

        print(
            "rounds: \(rounds) (median, interleaved), \(perThread) bitmaps per thread per round, 256x256 RGBA, cores: \(ProcessInfo.processInfo.activeProcessorCount)"
        )
        for threads in [1, 2] {
            let rates = interleaved([
                libpngRate(threads: threads), memcpyRate(threads: threads),
                try adapterRate(mbtilesPath, threads: threads), try adapterRate(bundlePNGPath, threads: threads),
                try adapterRate(bundleRawPath, threads: threads), try adapterRate(bundleRawPath, threads: threads, checksums: false),
            ])
            let (libpng, copy, mbtiles, bundlePNG, raw, rawNoCRC) = (rates[0], rates[1], rates[2], rates[3], rates[4], rates[5])
            let unit = "bitmaps/s"
            report(
                "bench-adapter, \(threads) thread\(threads == 1 ? "" : "s")",
                [
                    Comparison(
                        "MBTiles/PNG", value: mbtiles, unit: unit, vs: "plain C libpng decode loop", referenceValue: libpng,
                        goal: (0.9, true)),
                    Comparison(
                        "bundle/PNG", value: bundlePNG, unit: unit, vs: "plain C libpng decode loop", referenceValue: libpng,
                        goal: (0.9, true)),
                    Comparison("bundle/raw LZ4", value: raw, unit: unit, vs: "MBTiles/PNG", referenceValue: mbtiles, goal: (10, true)),
                    Comparison("bundle/raw LZ4", value: raw, unit: unit, vs: "memcpy of 256 KiB", referenceValue: copy, goal: (0.25, true)),
                    Comparison(
                        "bundle/raw LZ4, payload CRC not verified", value: rawNoCRC, unit: unit, vs: "memcpy of 256 KiB",
                        referenceValue: copy),
                ])
        }
        // Issue 14: the layer's own path, a TileRequest per tile completed with the reader's pixels.
        // Completion hands the request's buffer to the bitmap (no copy); the comparison repeats the
        // copy that completion made before (the buffer into a new [UInt8]), in the same rounds.
        final class Sink: @unchecked Sendable {
            var bitmaps = 0
            var bytes = 0
        }
        func requestRate(_ path: String, copyAtCompletion: Bool) throws -> (bitmaps: Int, run: () -> Double) {
            let reader = ArchiveTileReader(archive: try openTileArchive(path: path))
            let sink = Sink()
            return round(threads: 1, perThread: perThread) { _, count in
                var index = 0
                for _ in 0..<count {
                    let tile = tiles[index]
                    let request = TileRequest(tile: tile) { bitmap in
                        sink.bitmaps += 1
                        sink.bytes &+= Int(bitmap?.pixels[5] ?? 0)
                    }
                    do {
                        let outcome = try reader.read(tile, tileSize: tileSize, pixelFormat: .rgba8888, into: request.bytes)
                        precondition(outcome == .delivered)
                    } catch {
                        fatalError("\(error)")
                    }
                    if copyAtCompletion {
                        let pixels = [UInt8](UnsafeRawBufferPointer(request.bytes))
                        sink.bytes &+= Int(pixels[7])
                    }
                    request.complete()
                    index = (index + 1) % tiles.count
                }
            }
        }
        let requestRates = interleaved([
            try requestRate(bundleRawPath, copyAtCompletion: false), try requestRate(bundleRawPath, copyAtCompletion: true),
            try requestRate(bundlePNGPath, copyAtCompletion: false), try requestRate(bundlePNGPath, copyAtCompletion: true),
            memcpyRate(threads: 1),
        ])
        report(
            "bench-adapter, tile requests completed (the layer's path), 1 thread",
            [
                Comparison(
                    "bundle/raw LZ4 -> TileRequest, zero-copy completion", value: requestRates[0], unit: "bitmaps/s",
                    vs: "the same with the copy at completion (before issue 14)", referenceValue: requestRates[1], goal: (1, true)),
                Comparison(
                    "bundle/PNG -> TileRequest, zero-copy completion", value: requestRates[2], unit: "bitmaps/s",
                    vs: "the same with the copy at completion (before issue 14)", referenceValue: requestRates[3], goal: (1, true)),
                Comparison(
                    "bundle/raw LZ4 -> TileRequest, zero-copy completion", value: requestRates[0], unit: "bitmaps/s",
                    vs: "memcpy of 256 KiB", referenceValue: requestRates[4]),
            ])
        print("peak RSS: \(peakResidentBytes() >> 20) MiB")
    }
}
