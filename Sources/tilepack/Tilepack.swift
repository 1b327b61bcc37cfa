import ArgumentParser
import Foundation
import TilepackCore
import TilepackOperations
import TilepackStorage

@main
struct Tilepack: AsyncParsableCommand {
    static let version = TilepackVersion.current

    static let configuration = CommandConfiguration(
        commandName: "tilepack",
        abstract: "Package map tiles into archives (\(TileArchiveFormat.extensions("and"))), and check them.",
        discussion: """
            Exit status 2 in every command means an input is not an archive tilepack reads (another \
            format, a PMTiles file of another spec version, an empty file, a folder, SQLite without MBTiles tables).
            """,
        version: version,
        subcommands: [
            ImportCommand.self, ExportCommand.self, ConvertCommand.self, VerifyCommand.self, InfoCommand.self,
            RenderCommand.self, FetchCommand.self, ExtractCommand.self, PlanCommand.self, MergeCommand.self, ServeCommand.self, TileCommand.self,
            DiffCommand.self, PatchCommand.self, SyncCommand.self, IndexCommand.self, MetaCommand.self,
            UploadCommand.self, KeygenCommand.self, SignCommand.self,
        ]
    )

    /// Parses and runs like ArgumentParser's own `main`, after the steps every command shares:
    /// negative numbers after an option are joined to it (see ``CommandLineArguments``), a
    /// misspelled subcommand gets "did you mean", and "not an archive" exits with status 2.
    static func main() async {
        // The arguments as bytes: a path that is not UTF-8 keeps its bytes (PathBytes), where
        // CommandLine.arguments would turn two different such names into one.
        let arguments = (1..<Int(CommandLine.argc)).map { index in
            CommandLine.unsafeArgv[index].map { PathBytes.string(from: UnsafeRawBufferPointer(start: $0, count: strlen($0))) } ?? ""
        }
        FetchTransport.bootstrap()
        ArchiveLocation.reportPinning { printError("note: \($0)") }
        await launch(arguments)
    }

    /// Parses (a usage error prints the usage line, as ArgumentParser does), then runs: what
    /// `run()` throws is a refusal, "Error: PLACE: reason" and exit 1 (2 for "not an archive"),
    /// never under a usage line, a `ValidationError` too (``CommandLineArguments/refusal(for:)``);
    /// ArgumentParser's own (help, `CleanExit`, `ExitCode`) go to its exit as they are.
    static func launch(_ arguments: [String]) async {
        var command: any ParsableCommand
        do {
            command = try await asyncParseAsRoot(try CommandLineArguments.prepare(arguments, for: self))
        } catch {
            exit(withError: error)
        }
        do {
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            guard let refusal = CommandLineArguments.refusal(for: error) else { exit(withError: error) }
            printError("Error: \(refusal.message)")
            exit(withError: ExitCode(refusal.status))
        }
    }
}
