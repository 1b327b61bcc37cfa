import ArgumentParser
import Foundation

/// `tilepack serve ...`: runs the `tilepack-serve` program with the same arguments. The server is
/// a program of its own, in a package of its own (`server/`), so that `tilepack` builds without
/// Hummingbird and SwiftNIO and an app resolves none of their packages.
struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve archives over HTTP (runs tilepack-serve; `tilepack serve --help` shows its options).",
        discussion:
            "tilepack-serve is looked for beside this program, in the server package's build folder, then on PATH. Build it with: \(buildCommand)"
    )

    /// How to build the server, from the package root.
    static let buildCommand = "swift build --package-path server --product tilepack-serve"

    @Argument(parsing: .captureForPassthrough, help: "The arguments of tilepack-serve: archives and options.")
    var arguments: [String] = []

    func run() throws {
        guard let program = Self.locateServer() else {
            throw ValidationError(
                """
                tilepack serve runs the tilepack-serve program, which was found neither beside \
                \(Bundle.main.executablePath ?? "tilepack"), nor in server/.build, nor on PATH. It is a package of \
                its own: from tilepack's folder, build it with: \(Self.buildCommand) (add -c release for a \
                release build), or run it with: swift run --package-path server tilepack-serve ARCHIVE...
                """)
        }
        let argv = [program] + arguments
        var pointers = argv.map { strdup($0) }
        pointers.append(nil)
        execv(program, pointers)
        let code = errno
        throw ValidationError("cannot run \(program) (errno \(code)): \(String(cString: strerror(code)))")
    }

    /// `tilepack-serve` beside the running executable; else, for a `tilepack` in a package's
    /// `.build` folder, in the same place of `server/.build` beside it (what
    /// `swift build --package-path server` makes); else the first on PATH.
    static func locateServer() -> String? {
        var candidates: [String] = []
        if let executable = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            let folder = executable.deletingLastPathComponent()
            candidates.append(folder.appendingPathComponent("tilepack-serve").path)
            let parts = folder.pathComponents
            if let build = parts.lastIndex(of: ".build") {
                let root = NSString.path(withComponents: Array(parts[..<build]))
                let inside = parts[(build + 1)...].joined(separator: "/")
                candidates.append("\(root)/server/.build/\(inside)/tilepack-serve")
            }
        }
        for folder in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") where !folder.isEmpty {
            candidates.append("\(folder)/tilepack-serve")
        }
        return candidates.first { access($0, X_OK) == 0 }
    }
}
