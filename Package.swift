// swift-tools-version: 6.2
// tilepack: package map tiles into MBTiles, PMTiles and LZ4 bundles and serve them to a tile layer.
import PackageDescription

/// A system C library found through pkg-config, with the Debian package that provides it.
func systemLibrary(_ name: String, pkgConfig: String, apt: [String]) -> Target {
    .systemLibrary(name: name, path: "Sources/\(name)", pkgConfig: pkgConfig, providers: [.apt(apt)])
}

/// A system library no Apple SDK ships (liblz4, libdeflate, libpng, libturbojpeg, libwebp, pixman,
/// libcrypto): linked on Linux only. On Apple platforms the code that imports it takes the
/// framework or portable branch beside it (`#if canImport(...)`), so the `Tilepack` product stands
/// on the SDK alone: SQLite, zlib and frameworks (tools/check-lean-library.sh checks it).
func linuxOnly(_ name: String) -> Target.Dependency {
    .target(name: name, condition: .when(platforms: [.linux]))
}

let package = Package(
    name: "tilepack",
    // Xcode 26 (Swift 6.2: `nonisolated(nonsending)`); macOS 15 / iOS 18 for Synchronization's
    // `Atomic`, `String(validating:as:)` and task executors (README, "The library").
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        // What an app links: `import Tilepack` re-exports Core, Storage, Imaging, TileLayer, the
        // Adapter, Prefetch, Update and URLSession. It stands on the platform: HTTP through
        // URLSession, MD5 from CryptoKit or libcrypto.
        .library(name: "Tilepack", targets: ["Tilepack"]),
        // Archives at http(s):// URLs (PMTiles and bundles by range requests) for apps that read
        // remote archives: `RemoteArchive.open(url:)` gives the same `TileArchive` read API.
        .library(name: "TilepackRemote", targets: ["TilepackRemote", "TilepackURLSession"]),
        .executable(name: "tilepack", targets: ["tilepack"]),
        // For tilepack's own sibling package server/ (the server, `tilepack-serve`, on Hummingbird:
        // a package of its own so that an app resolves none of its packages), not for apps:
        // HTTP/1 syntax (`@_spi(HTTP1)`) and the tests' fixtures, temporary folders and loopback server.
        .library(name: "TilepackHTTP", targets: ["TilepackCore", "TilepackHTTP"]),
        .library(name: "TilepackTestSupport", targets: ["TilepackTestSupport"]),
        // Parts of the library alone, so that tools need not build what they do not use
        // (the tile layer's HTTP, storage's SQLite).
        .library(name: "TilepackImaging", targets: ["TilepackCore", "TilepackImaging"]),
        .library(name: "TilepackStorage", targets: ["TilepackCore", "TilepackStorage"]),
        // The budget planner, for tools/'s bench-plan (its public API: sizes from an index, the plan).
        .library(name: "TilepackPlan", targets: ["TilepackCore", "TilepackStorage", "TilepackPlan"]),
        // The bulk HTTP transport (libcurl's multi interface, Linux) for programs and tools; the
        // `Tilepack` library does not contain it (its HTTP is URLSession).
        .library(name: "TilepackCurl", targets: ["TilepackCore", "TilepackHTTP", "TilepackCurl"]),
    ],
    traits: [
        // The Apple platforms' portable code paths on Linux: tilepack's own LZ4 block codec instead
        // of liblz4, zlib's CRC-32 instead of libdeflate's, the Swift resampler instead of pixman
        // (only the framework calls, ImageIO and CryptoKit, stay Apple's). CI runs the storage and
        // imaging tests with it: `swift test --traits PortableCodecs`.
        .trait(
            name: "PortableCodecs",
            description: "Use the codecs Apple platforms use (portable Swift LZ4, zlib CRC-32, Swift resampler) on Linux too")
    ],
    dependencies: [
        // The command line, and nothing else: the library depends on no package (it stands on the
        // platform), and the server's packages are server/'s (tools/check-lean-library.sh).
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2")
    ],
    targets: [
        // Floor 1: the C libraries, each imported (internal import) by exactly one Swift module.
        systemLibrary("CTilepackSQLite", pkgConfig: "sqlite3", apt: ["libsqlite3-dev"]),
        systemLibrary("CTilepackPNG", pkgConfig: "libpng", apt: ["libpng-dev"]),
        systemLibrary("CTilepackTurboJPEG", pkgConfig: "libturbojpeg", apt: ["libturbojpeg0-dev"]),
        systemLibrary("CTilepackWebP", pkgConfig: "libwebp", apt: ["libwebp-dev"]),
        systemLibrary("CTilepackLZ4", pkgConfig: "liblz4", apt: ["liblz4-dev"]),
        // zlib: gzip and zlib streams, and CRC-32 on Apple platforms (the SDK's zlib; on Linux the
        // reference the libdeflate CRC is tested against). Imported by TilepackCompression alone.
        systemLibrary("CTilepackZlib", pkgConfig: "zlib", apt: ["zlib1g-dev"]),
        // CRC-32 with carry-less multiplication (PCLMUL/ARMv8 CRC): about 6x zlib's crc32 here;
        // whole zlib streams for PNG and whole gzip members inflated. Imported by TilepackCompression alone.
        systemLibrary("CTilepackDeflate", pkgConfig: "libdeflate", apt: ["libdeflate-dev"]),
        // MD5, SHA-256 and Ed25519 on Linux (OpenSSL's libcrypto); Apple platforms use CryptoKit.
        systemLibrary("CTilepackCrypto", pkgConfig: "libcrypto", apt: ["libssl-dev"]),
        // SIMD bilinear scaling for resampling tiles (retina sizes, overzoom, fallback).
        systemLibrary("CTilepackPixman", pkgConfig: "pixman-1", apt: ["libpixman-1-dev"]),
        // HTTP for bulk downloads on Linux (TilepackCurl): the libcurl that FoundationNetworking wraps, used directly.

        // Floor 1: the vocabulary, and the worker pool that import, verify and patch share. Foundation only.
        .target(name: "TilepackCore"),
        // Floor 1: compression, the one importer of zlib and libdeflate: gzip (PMTiles directories
        // and metadata, vector tiles), whole zlib streams for the PNG encoder (libdeflate, Linux),
        // and the CRC-32 routines of both libraries, which Checksum's CRC-32 calls.
        .target(name: "TilepackCompression", dependencies: ["CTilepackZlib", linuxOnly("CTilepackDeflate")]),
        // Floor 1, over Compression: CRC-32 (libdeflate on Linux, the SDK's zlib on Apple platforms)
        // and the digests (MD5, SHA-256, HMAC) and Ed25519 signatures (libcrypto on Linux, CryptoKit
        // on Apple platforms), below Storage and TileLayer.
        .target(
            name: "TilepackChecksum",
            dependencies: ["TilepackCompression", linuxOnly("CTilepackCrypto")]
        ),

        // Floor 2: archives (MBTiles, bundle, PMTiles: the one door to read one), their content
        // identity and tile hash index; and bitmaps (Imaging).
        .target(
            name: "TilepackStorage",
            dependencies: [
                "TilepackCore", "TilepackChecksum", "TilepackCompression", "CTilepackSQLite", linuxOnly("CTilepackLZ4"),
            ]
        ),
        .target(
            name: "TilepackImaging",
            dependencies: [
                "TilepackCore", "TilepackChecksum", "TilepackCompression", linuxOnly("CTilepackPNG"), linuxOnly("CTilepackTurboJPEG"),
                linuxOnly("CTilepackWebP"),
                linuxOnly("CTilepackPixman"),
            ]
        ),

        // Floor 2: the rules of an HTTP(S) exchange over the `HTTPTransport` protocol: deadlines,
        // bounded bodies, typed errors, retries.
        .target(name: "TilepackHTTP", dependencies: ["TilepackCore"]),
        // Floor 3: the library's transport, URLSession (FoundationNetworking on Linux).
        .target(name: "TilepackURLSession", dependencies: ["TilepackCore", "TilepackHTTP"]),

        // libcurl's headers (libcurl4-openssl-dev); libcurl itself is loaded when the first
        // CurlTransport is made, not linked (see include/tilepack_curl.h).
        .target(name: "CTilepackCurl"),

        // Floor 3, beside TilepackURLSession: a bulk transport for TilepackHTTP on libcurl's multi interface (one
        // event-loop thread, kept-alive connections, HTTP/2 multiplexing on https), Linux only. Not
        // in the `Tilepack` library: the command line's `fetch` and remote reads use it.
        .target(
            name: "TilepackCurl",
            dependencies: ["TilepackCore", "TilepackHTTP", .target(name: "CTilepackCurl", condition: .when(platforms: [.linux]))]
        ),

        // Floor 3: the tile layer core (NMAMapTileLayer / MKTileOverlay semantics, headless map view).
        .target(name: "TileLayer", dependencies: ["TilepackCore", "TilepackChecksum", "TilepackImaging", "TilepackHTTP"]),

        // Floor 3: updates: the patch formats, diff, patch (in place or rewritten), the tile hash
        // index of an archive, the one check that an archive is a patch's base, and the background
        // request an app patches (and syncs) with.
        .target(name: "TilepackUpdate", dependencies: ["TilepackCore", "TilepackChecksum", "TilepackCompression", "TilepackStorage"]),

        // Floor 3: archives over HTTP(S) range requests, behind Storage's byte-source protocol; sync over the update module.
        .target(
            name: "TilepackRemote", dependencies: ["TilepackCore", "TilepackChecksum", "TilepackStorage", "TilepackHTTP", "TilepackUpdate"]),

        // Floor 4: what the command-line tool does, as a library.
        .target(
            name: "TilepackOperations",
            dependencies: [
                "TilepackCore", "TilepackChecksum", "TilepackCompression", "TilepackStorage", "TilepackImaging", "TilepackHTTP", "TilepackRemote",
                "TilepackUpdate", "TilepackPlan",
            ]
        ),

        // Floor 4: the bitmap data source serving any archive (MBTiles, bundle) to a tile layer.
        .target(
            name: "TilepackAdapter",
            dependencies: ["TilepackCore", "TilepackStorage", "TilepackImaging", "TileLayer"]
        ),

        // Floor 3: offline prefetch (HERE's NMAMapDataPrefetcher): a box or a route corridor from a tile server into its
        // own persistent MBTiles store; estimate, progress, cancel, resume, eviction, purge.
        .target(
            name: "TilepackPrefetch",
            dependencies: ["TilepackCore", "TilepackStorage", "TilepackImaging", "TilepackHTTP", "TilepackPlan"]
        ),

        // Floor 3: the budget planner: which tiles of an area fit a byte budget, from Core's covers
        // and the archives' size information (Storage's `TileSizeReading`), and the output's size.
        // Below Prefetch and Operations, which both plan (`fetch --budget`, `extract --budget`).
        .target(name: "TilepackPlan", dependencies: ["TilepackCore", "TilepackStorage"]),

        // Floor 4, beside Operations (whose archive locations it opens): `render`'s layer composition (archives and URL templates as tile layers in a
        // headless map view), under the command, which keeps its arguments and output.
        .target(
            name: "TilepackRender",
            dependencies: ["TilepackCore", "TilepackStorage", "TileLayer", "TilepackAdapter", "TilepackOperations", "TilepackPlan"]
        ),

        // Floor 5: the `Tilepack` product's module, one import for an app. Its privacy manifest declares the
        // file-timestamp APIs the library calls (stat, fstat: file versions, the disk cache).
        .target(
            name: "Tilepack",
            dependencies: [
                "TilepackCore", "TilepackStorage", "TilepackImaging", "TileLayer", "TilepackAdapter", "TilepackPrefetch",
                "TilepackPlan", "TilepackURLSession", "TilepackUpdate",
            ],
            resources: [.copy("PrivacyInfo.xcprivacy")]
        ),

        // Floor 5: the command-line tool, thin.
        .executableTarget(
            name: "tilepack",
            dependencies: [
                "TilepackCore", "TilepackStorage", "TilepackImaging", "TileLayer", "TilepackRender", "TilepackOperations",
                "TilepackUpdate", "TilepackPrefetch", "TilepackHTTP", "TilepackCurl", "TilepackRemote",
                // On Linux the command moves its bytes with TilepackCurl and does
                // not link URLSession (FoundationNetworking loads libcurl and ~30 libraries at start).
                .target(name: "TilepackURLSession", condition: .when(platforms: [.macOS])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // Tests.
        .target(
            name: "TilepackTestSupport", dependencies: ["TilepackCore", "TilepackHTTP", "TilepackURLSession", "TilepackCurl"],
            path: "Tests/TilepackTestSupport"),
        .testTarget(name: "TilepackCoreTests", dependencies: ["TilepackCore", "TilepackTestSupport"]),
        .testTarget(name: "TilepackStorageTests", dependencies: ["TilepackStorage", "TilepackTestSupport"]),
        .testTarget(name: "TilepackPlanTests", dependencies: ["TilepackPlan", "TilepackStorage", "TilepackTestSupport"]),
        .testTarget(
            name: "TilepackImagingTests",
            // Storage reads the shared fixture archives in place.
            dependencies: ["TilepackImaging", "TilepackStorage", "TilepackTestSupport"],
            resources: [.copy("Resources")]
        ),
        .testTarget(
            name: "TilepackHTTPTests", dependencies: ["TilepackHTTP", "TilepackURLSession", "TilepackCurl", "TilepackTestSupport"]),
        .testTarget(name: "TileLayerTests", dependencies: ["TileLayer", "TilepackImaging", "TilepackTestSupport"]),
        .testTarget(
            name: "TilepackUmbrellaTests", dependencies: ["Tilepack", "TilepackOperations", "TilepackRemote", "TilepackTestSupport"]),
        .testTarget(name: "TilepackUpdateTests", dependencies: ["TilepackUpdate", "TilepackOperations", "TilepackTestSupport"]),
        .testTarget(
            name: "TilepackAdapterTests",
            dependencies: ["TilepackAdapter", "TilepackStorage", "TilepackImaging", "TileLayer", "TilepackTestSupport"]
        ),
        .testTarget(
            name: "TilepackRemoteTests",
            dependencies: [
                "TilepackRemote", "TilepackHTTP", "TilepackStorage", "TilepackUpdate", "TilepackOperations", "TilepackPlan", "TilepackTestSupport",
            ]),
        .testTarget(name: "TilepackOperationsTests", dependencies: ["TilepackOperations", "TilepackUpdate", "TilepackPlan", "TilepackTestSupport"]),
        .testTarget(name: "TilepackRenderTests", dependencies: ["TilepackRender", "TilepackOperations", "TilepackPlan", "TilepackTestSupport"]),
        // The command's parsing, messages and exit statuses: `@testable import tilepack`, and the built binary.
        .testTarget(name: "TilepackCLITests", dependencies: ["tilepack", "TilepackOperations", "TilepackUpdate", "TilepackTestSupport"]),
        .testTarget(
            name: "TilepackPrefetchTests",
            dependencies: [
                "TilepackPrefetch", "TilepackStorage", "TilepackImaging", "TilepackHTTP", "TilepackOperations", "TilepackTestSupport",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
