// swift-tools-version: 6.0
// tilepack's tools: benchmarks (release builds), fuzz targets and the sample generator.
// A separate package so that benchmark-only code and dependencies stay out of the library.
// Run a benchmark with: swift run -c release --package-path tools <name>
import PackageDescription

let package = Package(
    name: "tilepack-tools",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "tilepack", path: ".."),
    ],
    targets: [
        // Timing, medians, peak RSS and the ratio table every benchmark prints.
        .target(name: "BenchSupport"),

        // MBTiles: the library against a plain C sqlite3_step floor (reads, 2 threads, bulk writes).
        .target(name: "MBTilesFloor", linkerSettings: [.linkedLibrary("sqlite3")]),
        .executableTarget(
            name: "bench-mbtiles",
            dependencies: ["BenchSupport", "MBTilesFloor", .product(name: "Tilepack", package: "tilepack")]
        ),
        // The .tilepack bundle against MBTiles: open, memory, random reads, size.
        .executableTarget(
            name: "bench-bundle",
            dependencies: ["BenchSupport", .product(name: "Tilepack", package: "tilepack")]
        ),
        // Fuzz target for the bundle reader: libFuzzer when built with -sanitize=fuzzer
        // (tools/fuzz-bundle.sh), otherwise a seeded random-mutation harness.
        .executableTarget(
            name: "fuzz-bundle",
            dependencies: ["CFuzzerDriver", .product(name: "Tilepack", package: "tilepack")]
        ),
        // The declaration of libFuzzer's LLVMFuzzerRunDriver for fuzz targets.
        .target(name: "CFuzzerDriver"),
        // Floors measured in the same run as tilepack's figures: a plain C libpng decode loop, memcpy.
        .target(name: "CBenchFloors", linkerSettings: [.linkedLibrary("png16")]),
        // The adapter's headline: bitmaps per second delivered into request buffers.
        .executableTarget(name: "bench-adapter", dependencies: [
            "BenchSupport", "CBenchFloors",
            .product(name: "Tilepack", package: "tilepack"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
