import ArgumentParser
import Foundation

/// `tilepack serve ...`: runs the `tilepack-serve` program with the same arguments. The server is
/// a program of its own, in a package of its own (`server/`), so that `tilepack` builds without
/// Hummingbird and SwiftNIO and an app resolves none of their packages.
struct ServeCommand: ParsableCommand {
    static let program = SiblingProgram(name: "tilepack-serve", package: "server", command: "tilepack serve")

    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve archives over HTTP (runs tilepack-serve; `tilepack serve --help` shows its options).",
        discussion:
            "tilepack-serve is looked for beside this program, in the server package's build folder, then on PATH. Build it with: \(program.buildCommand)"
    )

    @Argument(parsing: .captureForPassthrough, help: "The arguments of tilepack-serve: archives and options.")
    var arguments: [String] = []

    func run() throws { try Self.program.exec(arguments) }
}

/// `tilepack tile INPUT OUTPUT ...`: runs the `tilepack-tile` program with the same arguments. The
/// tiler links GDAL, so it is a program of its own in a package of its own (`tiler/`): `tilepack`,
/// the library and README's first command never need GDAL.
struct TileCommand: ParsableCommand {
    static let program = SiblingProgram(
        name: "tilepack-tile", package: "tiler", command: "tilepack tile", needs: " that links GDAL (Debian: apt install libgdal-dev)")

    static let configuration = CommandConfiguration(
        commandName: "tile",
        abstract: "Cut a georeferenced raster into an archive (runs tilepack-tile; `tilepack tile --help` shows its options).",
        discussion: """
            tilepack-tile is looked for beside this program, in the tiler package's build folder, then on PATH. \
            Build it with: \(program.buildCommand)

            Example: tilepack tile samples/sample-utm.tif city.tilepack --format webp --quality 80
            """
    )

    @Argument(parsing: .captureForPassthrough, help: "The arguments of tilepack-tile: INPUT OUTPUT and options.")
    var arguments: [String] = []

    func run() throws { try Self.program.exec(arguments) }
}
