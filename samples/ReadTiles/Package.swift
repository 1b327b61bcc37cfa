// swift-tools-version: 6.0
// A tiny app that reads bundled map tiles with tilepack: open an archive, attach it to a tile
// layer in a headless map view, render a PNG. It depends on tilepack the way an app does: on
// the `Tilepack` library product (here by path, from this repository).
//
//   cd samples/ReadTiles && swift run read-tiles [archive] [output.png]
import PackageDescription

let package = Package(
    name: "ReadTiles",
    platforms: [.macOS(.v15), .iOS(.v18)],
    dependencies: [
        .package(name: "tilepack", path: "../..")
    ],
    targets: [
        .executableTarget(
            name: "read-tiles",
            dependencies: [
                .product(name: "Tilepack", package: "tilepack")
            ])
    ],
    swiftLanguageModes: [.v6]
)
