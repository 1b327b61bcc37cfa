// swift-tools-version: 6.1
// tilepack's raster tiler: a georeferenced raster (GeoTIFF, COG, JPEG 2000, a VRT mosaic: what
// the system GDAL reads) cut straight into an archive, and its program `tilepack-tile`, which
// `tilepack tile` runs. A package of its own beside the main one (as server/ is), so that
// README's first command, the main package's tests, the `Tilepack` library an app links and
// tilepack's other commands never need GDAL.
// Build with: swift build --package-path tiler --product tilepack-tile
import PackageDescription

let package = Package(
    name: "tilepack-tiler",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tilepack-tile", targets: ["tilepack-tile"])
    ],
    dependencies: [
        .package(name: "tilepack", path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // Floor 1: GDAL (Debian's libgdal-dev), imported by TilepackTiler alone.
        .systemLibrary(name: "CTilepackGDAL", pkgConfig: "gdal", providers: [.apt(["libgdal-dev"])]),

        // Floor 4: reprojection, the pyramid, encoding, writing (see Specs/tile.md).
        .target(
            name: "TilepackTiler",
            dependencies: [
                "CTilepackGDAL",
                .product(name: "TilepackStorage", package: "tilepack"),
                .product(name: "TilepackImaging", package: "tilepack"),
            ]
        ),

        // Floor 5: the program, thin (`tilepack tile` runs it).
        .executableTarget(
            name: "tilepack-tile",
            dependencies: ["TilepackTiler", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),

        .testTarget(
            name: "TilepackTilerTests",
            dependencies: [
                "TilepackTiler",
                .product(name: "TilepackStorage", package: "tilepack"),
                .product(name: "TilepackImaging", package: "tilepack"),
                .product(name: "TilepackTestSupport", package: "tilepack"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
