// swift-tools-version: 6.0
// tilepack's tools: benchmarks (release builds), fuzz targets and the sample generator.
// A separate package so that benchmark-only code and dependencies stay out of the library.
// Run a benchmark with: swift run -c release --package-path tools <name>
import PackageDescription

let package = Package(
    name: "tilepack-tools",
    platforms: [.macOS(.v15)],
    products: [
        // For the server package's fuzz target (server/, fuzz-request-head): the libFuzzer driver
        // and the benchmarks' random numbers.
        .library(name: "CFuzzDriver", targets: ["CFuzzDriver"]),
        .library(name: "BenchSupport", targets: ["BenchSupport"]),
    ],
    dependencies: [
        .package(name: "tilepack", path: "..")
    ],
    targets: [
        // Timing, medians, peak RSS and the ratio table every benchmark prints.
        .target(name: "BenchSupport", dependencies: ["CFuzzDriver"]),

        // MBTiles: the library against a plain C sqlite3_step floor (reads, 2 threads, bulk writes).
        .target(name: "MBTilesFloor", linkerSettings: [.linkedLibrary("sqlite3")]),
        .executableTarget(
            name: "bench-mbtiles",
            dependencies: ["BenchSupport", "MBTilesFloor", .product(name: "TilepackStorage", package: "tilepack")]
        ),
        // Issue 46's planning goals: planning a region of a 1,000,000-tile MBTiles against a bare
        // `SELECT length(tile_data)` over the same tiles (MBTilesFloor), and the size prediction at scale.
        .executableTarget(
            name: "bench-plan",
            dependencies: [
                "BenchSupport", "MBTilesFloor", .product(name: "TilepackPlan", package: "tilepack"),
                .product(name: "TilepackStorage", package: "tilepack"),
            ]
        ),
        // Imaging: decode throughput through tilepack vs plain C loops over libpng, TurboJPEG, libwebp.
        .target(
            name: "CImagingFloor",
            cSettings: [.unsafeFlags(["-O2"])],
            linkerSettings: [.linkedLibrary("png16"), .linkedLibrary("turbojpeg"), .linkedLibrary("webp")]
        ),
        .executableTarget(
            name: "bench-imaging",
            dependencies: ["BenchSupport", "CImagingFloor", .product(name: "TilepackImaging", package: "tilepack")]
        ),
        // Starts libFuzzer's loop from a program with its own main when built with -sanitize=fuzzer
        // and -DTILEPACK_FUZZING (tools/fuzz-*.sh); returns -1 otherwise. Shared by the fuzz targets.
        .target(name: "CFuzzDriver"),
        // Imaging decoders under libFuzzer; built normally, a seeded random-mutation loop over the same entry point.
        .executableTarget(
            name: "fuzz-decode",
            dependencies: ["BenchSupport", "CFuzzDriver", .product(name: "TilepackImaging", package: "tilepack")]
        ),
        // The portable LZ4 block codec (Apple platforms') against liblz4, differentially (tools/fuzz-lz4.sh).
        .executableTarget(
            name: "fuzz-lz4",
            dependencies: ["BenchSupport", "CFuzzDriver", .product(name: "TilepackStorage", package: "tilepack")]
        ),
        // The portable LZ4 codec against liblz4 on raw RGBA tiles: compress, decompress, size.
        .executableTarget(
            name: "bench-lz4",
            dependencies: [
                "BenchSupport", .product(name: "TilepackImaging", package: "tilepack"),
                .product(name: "TilepackStorage", package: "tilepack"),
            ]
        ),
        // The .tilepack bundle against MBTiles: open, memory, random reads, size.
        .executableTarget(
            name: "bench-bundle",
            dependencies: ["BenchSupport", .product(name: "TilepackStorage", package: "tilepack")]
        ),
        // PMTiles: local reads by pread (FileByteSource) against the same file memory-mapped.
        .executableTarget(
            name: "bench-pmtiles-read",
            dependencies: ["BenchSupport", .product(name: "TilepackStorage", package: "tilepack")]
        ),
        // Fuzz target for the bundle reader: libFuzzer when built with -sanitize=fuzzer
        // (tools/fuzz-bundle.sh), otherwise a seeded random-mutation harness.
        .executableTarget(
            name: "fuzz-bundle",
            dependencies: ["BenchSupport", "CFuzzDriver", .product(name: "TilepackStorage", package: "tilepack")]
        ),
        // Synthetic map-like tiles for the sample tree, tests and benchmarks.
        .target(name: "TileSynth", dependencies: ["BenchSupport", .product(name: "TilepackImaging", package: "tilepack")]),
        .executableTarget(name: "make-samples", dependencies: ["TileSynth"]),
        // Two versions of a 50,000-tile set for tools/bench-update.sh (diff, patch vs xdelta3, bsdiff, zstd).
        .executableTarget(
            name: "make-versions", dependencies: ["TileSynth", .product(name: "TilepackStorage", package: "tilepack")]),
        // The import/verify benchmark of issues 6 and 19 (run it with tools/bench-import.sh) and its C
        // floors: one thread opening and reading every file of a tree once, optionally writing the
        // bytes to one file (then fsync) or decoding each tile (libpng, TurboJPEG); on two threads,
        // the least an import into a bundle (read, LZ4, write) or MBTiles (read, SQLite) must do.
        .executableTarget(
            name: "bench-import",
            dependencies: [
                "BenchSupport", "TileSynth", "CImagingFloor",
                .product(name: "Tilepack", package: "tilepack"),
            ]),
        .executableTarget(
            name: "floor-read",
            linkerSettings: [.linkedLibrary("png"), .linkedLibrary("turbojpeg"), .linkedLibrary("sqlite3"), .linkedLibrary("lz4")]),
        // tilepack fetch's floors (tools/bench-fetch.sh): the same GETs through TilepackHTTP alone,
        // over libcurl or URLSessions; and the least a download needs, in C on libcurl's multi interface.
        .executableTarget(
            name: "bench-fetch-floor",
            dependencies: [
                .product(name: "Tilepack", package: "tilepack"), .product(name: "TilepackCurl", package: "tilepack"),
            ]),
        .executableTarget(name: "curl-fetch-floor", cSettings: [.unsafeFlags(["-O2"])], linkerSettings: [.linkedLibrary("curl")]),
        // `tilepack sign`'s floor (tools/bench-sign.sh): every tile read as sign reads it, SHA-256 over
        // each with libcrypto, nothing else.
        .target(name: "CSHA256Floor", linkerSettings: [.linkedLibrary("crypto")]),
        .executableTarget(
            name: "floor-sign", dependencies: ["CSHA256Floor", .product(name: "TilepackStorage", package: "tilepack")]),
        // The adapter's headline: bitmaps per second delivered into request buffers.
        .executableTarget(
            name: "bench-adapter",
            dependencies: [
                "BenchSupport", "CImagingFloor",
                .product(name: "Tilepack", package: "tilepack"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
