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
        // Imaging decoders under libFuzzer (tools/fuzz-decode.sh builds it with -sanitize=fuzzer);
        // built normally, it runs a seeded random-mutation loop over the same entry point.
        .target(name: "CFuzzDriver"),
        .executableTarget(
            name: "fuzz-decode",
            dependencies: ["CFuzzDriver", .product(name: "TilepackImaging", package: "tilepack")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
