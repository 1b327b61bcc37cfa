import ArgumentParser
import TilepackCore

@main
struct Tilepack: AsyncParsableCommand {
    static let version = TilepackVersion.current

    static let configuration = CommandConfiguration(
        commandName: "tilepack",
        abstract: "Package map tiles into MBTiles and LZ4 bundles, and check them.",
        version: version,
        subcommands: [
            ImportCommand.self, ExportCommand.self, ConvertCommand.self, VerifyCommand.self, InfoCommand.self,
            RenderCommand.self, ExtractCommand.self, MergeCommand.self,
        ]
    )
}
