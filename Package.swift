// swift-tools-version: 6.0
// tilepack: package map tiles into MBTiles and LZ4 bundles and serve them to a tile layer.
import PackageDescription

/// A system C library found through pkg-config, with the Debian package that provides it.
func systemLibrary(_ name: String, pkgConfig: String, apt: [String]) -> Target {
    .systemLibrary(name: name, path: "Sources/\(name)", pkgConfig: pkgConfig, providers: [.apt(apt)])
}

let package = Package(
    name: "tilepack",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "Tilepack", targets: ["TilepackCore", "TilepackStorage", "TilepackImaging", "TileLayer", "TilepackAdapter"]),
        .executable(name: "tilepack", targets: ["tilepack"]),
        // Parts of the library alone, so that tools need not build what they do not use
        // (the HTTP client of the tile layer, SQLite and crypto of storage).
        .library(name: "TilepackImaging", targets: ["TilepackCore", "TilepackImaging"]),
        .library(name: "TilepackStorage", targets: ["TilepackCore", "TilepackStorage"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        // TileLayer's http(s) tiles. Its swift-nio also gives the tests a loopback HTTP server.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
    ],
    targets: [
        // Floor 1: the C libraries, each imported (internal import) by exactly one Swift module.
        systemLibrary("CTilepackSQLite", pkgConfig: "sqlite3", apt: ["libsqlite3-dev"]),
        systemLibrary("CTilepackPNG", pkgConfig: "libpng", apt: ["libpng-dev"]),
        systemLibrary("CTilepackTurboJPEG", pkgConfig: "libturbojpeg", apt: ["libturbojpeg0-dev"]),
        systemLibrary("CTilepackWebP", pkgConfig: "libwebp", apt: ["libwebp-dev"]),
        systemLibrary("CTilepackLZ4", pkgConfig: "liblz4", apt: ["liblz4-dev"]),
        systemLibrary("CTilepackZlib", pkgConfig: "zlib", apt: ["zlib1g-dev"]),

        // Floor 1: the vocabulary. Foundation only.
        .target(name: "TilepackCore"),

        // Floor 2: archives (MBTiles, bundle) and bitmaps.
        .target(
            name: "TilepackStorage",
            dependencies: [
                "TilepackCore", "CTilepackSQLite", "CTilepackLZ4", "CTilepackZlib",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(
            name: "TilepackImaging",
            dependencies: ["TilepackCore", "CTilepackPNG", "CTilepackTurboJPEG", "CTilepackWebP"]
        ),

        // Floor 3: the tile layer core (NMAMapTileLayer / MKTileOverlay semantics, headless map view).
        .target(
            name: "TileLayer",
            dependencies: [
                "TilepackCore", "TilepackImaging",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),

        // Floor 3: what the command-line tool does, as a library.
        .target(
            name: "TilepackOperations",
            dependencies: ["TilepackCore", "TilepackStorage", "TilepackImaging", "CTilepackZlib"]
        ),

        // Floor 4: the bitmap data source serving any archive (MBTiles, bundle) to a tile layer.
        .target(
            name: "TilepackAdapter",
            dependencies: ["TilepackCore", "TilepackStorage", "TilepackImaging", "TileLayer"]
        ),

        // Floor 5: the command-line tool, thin.
        .executableTarget(
            name: "tilepack",
            dependencies: [
                "TilepackCore", "TilepackStorage", "TilepackImaging", "TileLayer", "TilepackAdapter", "TilepackOperations",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // Tests.
        .target(name: "TilepackTestSupport", dependencies: ["TilepackCore"], path: "Tests/TilepackTestSupport"),
        .testTarget(name: "TilepackCoreTests", dependencies: ["TilepackCore", "TilepackTestSupport"]),
        .testTarget(name: "TilepackStorageTests", dependencies: ["TilepackStorage", "TilepackTestSupport"]),
        .testTarget(
            name: "TilepackImagingTests",
            // Storage reads the shared fixture archives in place.
            dependencies: ["TilepackImaging", "TilepackStorage", "TilepackTestSupport"],
            resources: [.copy("Resources")]
        ),
        .testTarget(
            name: "TileLayerTests",
            dependencies: [
                "TileLayer", "TilepackImaging", "TilepackTestSupport",
                // A loopback HTTP server for the http(s) tile tests, on the NIO that AsyncHTTPClient already builds.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "TilepackAdapterTests",
            dependencies: ["TilepackAdapter", "TilepackStorage", "TilepackImaging", "TileLayer", "TilepackTestSupport"]
        ),
        .testTarget(name: "TilepackOperationsTests", dependencies: ["TilepackOperations", "TilepackTestSupport"]),
        // The command's parsing, messages and exit statuses: `@testable import tilepack`, and the built binary.
        .testTarget(name: "TilepackCLITests", dependencies: ["tilepack", "TilepackOperations", "TilepackTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
