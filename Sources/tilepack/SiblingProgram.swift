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

    /// How to build it for real work, from the package root: a release build, which ``locate(from:)`` prefers.
    var buildCommand: String { "swift build -c release --package-path \(package) --product \(name)" }

    /// The program beside the running executable; else, for a `tilepack` in a package's `.build`
    /// folder, the release build in `<package>/.build` beside it (`swift build -c release
    /// --package-path <package>`), or the build of the running one's configuration there when that
    /// one is newer (a developer's fresh debug build); else the first on PATH.
    ///
    /// A release build is preferred because the programs do the heavy work (the tiler warps and
    /// encodes every tile; a debug tiler is several times slower), while a debug `tilepack` only
    /// parses the arguments and hands over.
    func locate(from running: URL? = Bundle.main.executableURL) -> String? {
        var candidates: [String] = []
        if let executable = running?.resolvingSymlinksInPath() {
            let folder = executable.deletingLastPathComponent()
            candidates.append(folder.appendingPathComponent(name).path)
            let parts = folder.pathComponents
            if let build = parts.lastIndex(of: ".build") {
                let root = NSString.path(withComponents: Array(parts[..<build]))
                let inside = parts[(build + 1)...].joined(separator: "/")
                let sameBuild = "\(root)/\(package)/.build/\(inside)/\(name)"
                let release = "\(root)/\(package)/.build/release/\(name)"
                candidates += Self.modified(sameBuild) > Self.modified(release) ? [sameBuild, release] : [release, sameBuild]
            }
        }
        for folder in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") where !folder.isEmpty {
            candidates.append("\(folder)/\(name)")
        }
        return candidates.first { access($0, X_OK) == 0 }
    }

    /// When the file at `path` was last modified (the distant past when there is none).
    private static func modified(_ path: String) -> Date {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date) ?? .distantPast
    }

    /// Runs the program with `arguments` in place of this process; returns only by throwing.
    func exec(_ arguments: [String]) throws -> Never {
        guard let program = locate() else {
            throw CommandFailure(
                name,
                """
                not found beside \(Bundle.main.executablePath ?? "tilepack"), nor in \(package)/.build, nor on PATH \
                (\(command) runs it). It is a package of its own\(needs): from tilepack's folder, build it with: \
                \(buildCommand) (a release build: the program does the heavy work), or run it with: swift run \
                --package-path \(package) \(name) ...
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
