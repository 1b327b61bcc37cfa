import ArgumentParser
import Foundation

/// A program of tilepack's that lives in a package of its own beside the main one (`server/`'s
/// `tilepack-serve`, `tiler/`'s `tilepack-tile`), so that `tilepack` builds without their
/// dependencies; the command of the same name runs it in place of itself (`execv`).
struct SiblingProgram {
    /// The program's name, e.g. `tilepack-serve`.
    var name: String
    /// The package folder beside the main package, e.g. `server`.
    var package: String
    /// The command that runs it, e.g. `tilepack serve`.
    var command: String
    /// What it needs besides Swift, for the message when it is missing.
    var needs: String = ""

    /// How to build it, from the package root.
    var buildCommand: String { "swift build --package-path \(package) --product \(name)" }

    /// The program beside the running executable; else, for a `tilepack` in a package's `.build`
    /// folder, in the same place of `<package>/.build` beside it (what `swift build --package-path
    /// <package>` makes); else the first on PATH.
    func locate() -> String? {
        var candidates: [String] = []
        if let executable = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            let folder = executable.deletingLastPathComponent()
            candidates.append(folder.appendingPathComponent(name).path)
            let parts = folder.pathComponents
            if let build = parts.lastIndex(of: ".build") {
                let root = NSString.path(withComponents: Array(parts[..<build]))
                let inside = parts[(build + 1)...].joined(separator: "/")
                candidates.append("\(root)/\(package)/.build/\(inside)/\(name)")
            }
        }
        for folder in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") where !folder.isEmpty {
            candidates.append("\(folder)/\(name)")
        }
        return candidates.first { access($0, X_OK) == 0 }
    }

    /// Runs the program with `arguments` in place of this process; returns only by throwing.
    func exec(_ arguments: [String]) throws -> Never {
        guard let program = locate() else {
            throw CommandFailure(
                name,
                """
                not found beside \(Bundle.main.executablePath ?? "tilepack"), nor in \(package)/.build, nor on PATH \
                (\(command) runs it). It is a package of its own\(needs): from tilepack's folder, build it with: \
                \(buildCommand) (add -c release for a release build), or run it with: swift run --package-path \(package) \(name) ...
                """)
        }
        let argv = [program] + arguments
        var pointers = argv.map { strdup($0) }
        pointers.append(nil)
        execv(program, pointers)
        let code = errno
        throw CommandFailure(program, "cannot run it (errno \(code)): \(String(cString: strerror(code)))")
    }
}
