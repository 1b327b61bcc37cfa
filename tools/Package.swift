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
        // Issue 6's import/verify benchmark (run it with tools/bench-import.sh) and its C floors:
        // one thread opening and reading every file of a tree once, and a plain libpng decode loop.
        .executableTarget(name: "bench-import", dependencies: [
            "BenchSupport", "TileSynth",
            .product(name: "Tilepack", package: "tilepack"),
        ]),
        .executableTarget(name: "floor-read"),
        .executableTarget(name: "png-decode-loop", linkerSettings: [.linkedLibrary("png")]),
    ],
    swiftLanguageModes: [.v6]
)
