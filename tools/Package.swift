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
        // Synthetic map-like tiles for the sample tree, tests and benchmarks.
        .target(name: "TileSynth", dependencies: [
            .product(name: "Tilepack", package: "tilepack"),
        ]),
        .executableTarget(name: "make-samples", dependencies: ["TileSynth"]),
    ],
    swiftLanguageModes: [.v6]
)
