// swift-tools-version: 6.1
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
        // What an app links: `import Tilepack` re-exports Core, Storage, Imaging, TileLayer, the
        // Adapter and Prefetch. It stands on the platform: HTTP through URLSession, MD5 from CryptoKit or libcrypto.
        .library(name: "Tilepack", targets: ["Tilepack"]),
        // Archives at http(s):// URLs (PMTiles and bundles by range requests) for apps that read
        // remote archives: `RemoteArchive.open(url:)` gives the same `TileArchive` read API.
        .library(name: "TilepackRemote", targets: ["TilepackRemote", "TilepackURLSession"]),
        .executable(name: "tilepack", targets: ["tilepack"]),
        // The server, a program of its own: `tilepack` (and README's first command) builds without
        // Hummingbird and SwiftNIO; `tilepack serve` runs this one.
        .executable(name: "tilepack-serve", targets: ["tilepack-serve"]),
        // Parts of the library alone, so that tools need not build what they do not use
        // (the tile layer's HTTP, storage's SQLite).
        .library(name: "TilepackImaging", targets: ["TilepackCore", "TilepackImaging"]),
        .library(name: "TilepackStorage", targets: ["TilepackCore", "TilepackStorage"]),
        // The bulk HTTP transport (libcurl's multi interface, Linux) for programs and tools; the
        // `Tilepack` library does not contain it (its HTTP is URLSession).
        .library(name: "TilepackCurl", targets: ["TilepackCore", "TilepackHTTP", "TilepackCurl"]),
        // tilepack's own HTTP/1.1 client for cleartext http (Linux), the command line's `fetch` transport.
        .library(name: "TilepackSockets", targets: ["TilepackCore", "TilepackHTTP", "TilepackSockets"]),
    ],
    dependencies: [
        // The command line. The library itself depends on no package: it stands on the platform.
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // The server (TilepackServer, tilepack-serve) only. Hummingbird without its
        // swift-configuration trait (tools 6.1), which tilepack does not use.
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
        // Floor 1: the C libraries, each imported (internal import) by exactly one Swift module.
        systemLibrary("CTilepackSQLite", pkgConfig: "sqlite3", apt: ["libsqlite3-dev"]),
        systemLibrary("CTilepackPNG", pkgConfig: "libpng", apt: ["libpng-dev"]),
        systemLibrary("CTilepackTurboJPEG", pkgConfig: "libturbojpeg", apt: ["libturbojpeg0-dev"]),
        systemLibrary("CTilepackWebP", pkgConfig: "libwebp", apt: ["libwebp-dev"]),
        systemLibrary("CTilepackLZ4", pkgConfig: "liblz4", apt: ["liblz4-dev"]),
        systemLibrary("CTilepackZlib", pkgConfig: "zlib", apt: ["zlib1g-dev"]),
        // CRC-32 with carry-less multiplication (PCLMUL/ARMv8 CRC): about 6x zlib's crc32 here.
        systemLibrary("CTilepackDeflate", pkgConfig: "libdeflate", apt: ["libdeflate-dev"]),
        // MD5 for agg_tiles_hash on Linux (OpenSSL's libcrypto); Apple platforms use CryptoKit.
        systemLibrary("CTilepackCrypto", pkgConfig: "libcrypto", apt: ["libssl-dev"]),
        // SIMD bilinear scaling for resampling tiles (retina sizes, overzoom, fallback).
        systemLibrary("CTilepackPixman", pkgConfig: "pixman-1", apt: ["libpixman-1-dev"]),
        // HTTP for bulk downloads on Linux (TilepackCurl): the libcurl that FoundationNetworking wraps, used directly.

        // Floor 1: the vocabulary. Foundation only.
        .target(name: "TilepackCore"),
        // Floor 1: CRC-32, the one implementation (libdeflate), below both Storage and TileLayer.
        .target(name: "TilepackChecksum", dependencies: ["CTilepackDeflate"]),

        // Floor 2: archives (MBTiles, bundle) and bitmaps.
        .target(
            name: "TilepackStorage",
            dependencies: [
                "TilepackCore", "TilepackChecksum", "CTilepackSQLite", "CTilepackLZ4", "CTilepackZlib",
                .target(name: "CTilepackCrypto", condition: .when(platforms: [.linux])),
            ]
        ),
        .target(
            name: "TilepackImaging",
            dependencies: ["TilepackCore", "CTilepackPNG", "CTilepackTurboJPEG", "CTilepackWebP", "CTilepackPixman"]
        ),

        // Floor 2: HTTP(S) through URLSession (FoundationNetworking on Linux): deadlines, bounded
        // bodies, typed errors, retries. The one place the library talks to the network.
        .target(name: "TilepackHTTP", dependencies: ["TilepackCore"]),
        .target(name: "TilepackURLSession", dependencies: ["TilepackCore", "TilepackHTTP"]),

        // libcurl's headers (libcurl4-openssl-dev); libcurl itself is loaded when the first
        // CurlTransport is made, not linked (see include/tilepack_curl.h).
        .target(name: "CTilepackCurl"),

        // Floor 2, beside TilepackHTTP: a bulk transport for it on libcurl's multi interface (one
        // event-loop thread, kept-alive connections), Linux only. Not in the `Tilepack` library:
        // the command line's `fetch` uses it.
        .target(
            name: "TilepackCurl",
            dependencies: ["TilepackCore", "TilepackHTTP", .target(name: "CTilepackCurl", condition: .when(platforms: [.linux]))]
        ),
        // tilepack's own HTTP/1.1 client over non-blocking sockets and epoll (Linux), for cleartext
        // http: a tile costs a fifth of what it costs through libcurl. Not in the `Tilepack` library.
        .target(name: "CTilepackSockets"),
        .target(name: "TilepackSockets", dependencies: ["TilepackCore", "TilepackHTTP", "CTilepackSockets"]),

        // Floor 3: the tile layer core (NMAMapTileLayer / MKTileOverlay semantics, headless map view).
        .target(name: "TileLayer", dependencies: ["TilepackCore", "TilepackChecksum", "TilepackImaging", "TilepackHTTP"]),

        // Floor 3: what the command-line tool does, as a library.
        // Floor 3: archives over HTTP(S) range requests, behind Storage's byte-source protocol.
        .target(name: "TilepackRemote", dependencies: ["TilepackCore", "TilepackStorage", "TilepackHTTP"]),

        .target(
            name: "TilepackOperations",
            dependencies: ["TilepackCore", "TilepackChecksum", "TilepackStorage", "TilepackImaging", "TilepackRemote"]
        ),

        // Floor 4: the bitmap data source serving any archive (MBTiles, bundle) to a tile layer.
        .target(
            name: "TilepackAdapter",
            dependencies: ["TilepackCore", "TilepackStorage", "TilepackImaging", "TileLayer"]
        ),

        // Floor 4: offline prefetch (seed 003): a box or a route corridor from a tile server into a
        // persistent MBTiles store; estimate, progress, cancel, resume, eviction, purge.
        .target(
            name: "TilepackPrefetch",
            dependencies: ["TilepackCore", "TilepackStorage", "TilepackImaging", "TileLayer", "TilepackHTTP"]
        ),

        // The `Tilepack` product's module: one import for an app.
        .target(
            name: "Tilepack",
            dependencies: [
                "TilepackCore", "TilepackStorage", "TilepackImaging", "TileLayer", "TilepackAdapter", "TilepackPrefetch",
                "TilepackURLSession",
            ]
        ),

        // Floor 4: archives over HTTP on Hummingbird: tiles, TileJSON, preview page, health, metrics.
        .target(
            name: "TilepackServer",
            dependencies: [
                "TilepackCore", "TilepackStorage", "TilepackImaging",
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
            dependencies: ["TilepackServer", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),

        // Floor 5: the command-line tool, thin.
        .executableTarget(
            name: "tilepack",
            dependencies: [
                "TilepackCore", "TilepackStorage", "TilepackImaging", "TileLayer", "TilepackAdapter", "TilepackOperations",
                "TilepackPrefetch", "TilepackHTTP", "TilepackCurl", "TilepackSockets",
                // On Linux the command moves its bytes with TilepackSockets and TilepackCurl and does
                // not link URLSession (FoundationNetworking loads libcurl and ~30 libraries at start).
                .target(name: "TilepackURLSession", condition: .when(platforms: [.macOS])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // Tests.
        .target(name: "TilepackTestSupport", dependencies: ["TilepackCore", "TilepackHTTP", "TilepackURLSession", "TilepackCurl", "TilepackSockets"], path: "Tests/TilepackTestSupport"),
        .testTarget(name: "TilepackCoreTests", dependencies: ["TilepackCore", "TilepackTestSupport"]),
        .testTarget(name: "TilepackStorageTests", dependencies: ["TilepackStorage", "TilepackTestSupport"]),
        .testTarget(
            name: "TilepackImagingTests",
            // Storage reads the shared fixture archives in place.
            dependencies: ["TilepackImaging", "TilepackStorage", "TilepackTestSupport"],
            resources: [.copy("Resources")]
        ),
        .testTarget(name: "TilepackHTTPTests", dependencies: ["TilepackHTTP", "TilepackURLSession", "TilepackCurl", "TilepackSockets", "TilepackTestSupport"]),
        .testTarget(name: "TileLayerTests", dependencies: ["TileLayer", "TilepackImaging", "TilepackTestSupport"]),
        .testTarget(name: "TilepackUmbrellaTests", dependencies: ["Tilepack", "TilepackTestSupport"]),
        .testTarget(
            name: "TilepackAdapterTests",
            dependencies: ["TilepackAdapter", "TilepackStorage", "TilepackImaging", "TileLayer", "TilepackTestSupport"]
        ),
        .testTarget(
            name: "TilepackServerTests",
            // Also runs the tilepack-serve and tilepack programs built beside the tests.
            dependencies: [
                "TilepackServer", "TilepackStorage", "TilepackImaging", "TilepackTestSupport",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "TilepackRemoteTests", dependencies: ["TilepackRemote", "TilepackHTTP", "TilepackStorage", "TilepackOperations", "TilepackTestSupport"]),
        .testTarget(name: "TilepackOperationsTests", dependencies: ["TilepackOperations", "TilepackTestSupport"]),
        // The command's parsing, messages and exit statuses: `@testable import tilepack`, and the built binary.
        .testTarget(name: "TilepackCLITests", dependencies: ["tilepack", "TilepackOperations", "TilepackTestSupport"]),
        .testTarget(
            name: "TilepackPrefetchTests",
            dependencies: ["TilepackPrefetch", "TilepackStorage", "TilepackImaging", "TilepackHTTP", "TilepackOperations", "TilepackTestSupport"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
