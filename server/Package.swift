// swift-tools-version: 6.1
// tilepack's server: archives over HTTP on Hummingbird (tiles, TileJSON, preview page, health,
// metrics) and its program `tilepack-serve`, which `tilepack serve` runs.
// A package of its own beside the main one (as tools/ is), so that an app depending on the
// `Tilepack` library resolves none of the server's packages (tools/check-lean-library.sh).
// Build with: swift build --package-path server --product tilepack-serve
import PackageDescription

let package = Package(
    name: "tilepack-server",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tilepack-serve", targets: ["tilepack-serve"])
    ],
    dependencies: [
        .package(name: "tilepack", path: ".."),
        // The fuzz driver shared with tools/'s fuzz targets (no package of its own).
        .package(path: "../tools"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // Hummingbird without its swift-configuration trait (tools 6.1), which tilepack does not use.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: ["FullFoundation"]),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-atomics", from: "1.3.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        // The server's HTTP/1 request-head parser alone (no SwiftNIO), so that its fuzz target
        // (fuzz-request-head, tools/fuzz-request-head.sh) builds and instruments only it. HTTP/1
        // syntax is TilepackHTTP's, shared with the tests' loopback server (`@_spi(HTTP1)`).
        .target(name: "TilepackRequestHead", dependencies: [.product(name: "TilepackHTTP", package: "tilepack")]),

        // Floor 4: archives over HTTP on Hummingbird: tiles, TileJSON, preview page, health, metrics.
        .target(
            name: "TilepackServer",
            dependencies: [
                "TilepackRequestHead",
                .product(name: "TilepackStorage", package: "tilepack"),
                .product(name: "TilepackImaging", package: "tilepack"),
                .product(name: "TilepackHTTP", package: "tilepack"),
                // Remote archives (http(s)://, s3://) read by range requests.
                .product(name: "TilepackRemote", package: "tilepack"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),

        // Floor 5: the server program, thin (`tilepack serve` runs it).
        .executableTarget(
            name: "tilepack-serve",
            dependencies: [
                "TilepackServer", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // Remote archives' bytes through libcurl on Linux, as the command's.
                .product(name: "TilepackHTTP", package: "tilepack"),
                .product(name: "TilepackCurl", package: "tilepack", condition: .when(platforms: [.linux])),
            ]
        ),

        // Fuzz target for the request-head parser: libFuzzer when built with -sanitize=fuzzer
        // (tools/fuzz-request-head.sh), otherwise a seeded random-mutation harness.
        .executableTarget(
            name: "fuzz-request-head",
            dependencies: [
                "TilepackRequestHead",
                .product(name: "CFuzzDriver", package: "tools"), .product(name: "BenchSupport", package: "tools"),
            ]
        ),

        .testTarget(
            name: "TilepackServerTests",
            // Also runs the tilepack-serve program built beside the tests, and the main package's
            // `tilepack` (its .build; `swift build` there builds it).
            dependencies: [
                "TilepackServer", "TilepackRequestHead",
                .product(name: "TilepackStorage", package: "tilepack"),
                .product(name: "TilepackImaging", package: "tilepack"),
                .product(name: "TilepackTestSupport", package: "tilepack"),
                .product(name: "TilepackHTTP", package: "tilepack"),
                .product(name: "TilepackRemote", package: "tilepack"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
