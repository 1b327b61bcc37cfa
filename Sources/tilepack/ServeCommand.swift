import ArgumentParser
import Foundation

/// `tilepack serve ...`: runs the `tilepack-serve` program with the same arguments. The server is
/// a program of its own so that `tilepack` builds without Hummingbird and SwiftNIO.
struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve archives over HTTP (runs tilepack-serve; `tilepack serve --help` shows its options).",
        discussion: "tilepack-serve is looked for beside this program, then on PATH. Build it with: swift build --product tilepack-serve"
    )

    @Argument(parsing: .captureForPassthrough, help: "The arguments of tilepack-serve: archives and options.")
    var arguments: [String] = []

    func run() throws {
        guard let program = Self.locateServer() else {
            throw ValidationError("""
                tilepack serve runs the tilepack-serve program, which was found neither beside \
                \(Bundle.main.executablePath ?? "tilepack") nor on PATH. Build it with: swift build --product tilepack-serve \
                (or swift build -c release --product tilepack-serve), or run it with: swift run tilepack-serve ARCHIVE...
                """)
        }
        let argv = [program] + arguments
        var pointers = argv.map { strdup($0) }
        pointers.append(nil)
        execv(program, pointers)
        let code = errno
        throw ValidationError("cannot run \(program) (errno \(code)): \(String(cString: strerror(code)))")
    }

    /// `tilepack-serve` beside the running executable, else the first on PATH.
    static func locateServer() -> String? {
        var candidates: [String] = []
        if let executable = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            candidates.append(executable.deletingLastPathComponent().appendingPathComponent("tilepack-serve").path)
        }
        for folder in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") where !folder.isEmpty {
            candidates.append("\(folder)/tilepack-serve")
        }
        return candidates.first { access($0, X_OK) == 0 }
    }
}
